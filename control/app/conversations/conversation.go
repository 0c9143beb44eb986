// Package conversations holds the conversation resource of the interface: the Conversation
// object every start answers (calls, web calls, chats, test calls) and every read returns, and
// the rules of reading, steering and deleting conversations. It must never import net/http or
// the runtime: the domain layer speaks in store types and its own.
package conversations

import (
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// Conversation is the Conversation object of the interface.
type Conversation struct {
	Object          string          `json:"object" jsonschema:"enum=conversation"`
	ID              string          `json:"id" jsonschema:"format=uuid"`
	ProjectID       string          `json:"project_id" jsonschema:"format=uuid"`
	AgentID         string          `json:"agent_id" jsonschema:"format=uuid"`
	AgentVersion    *int            `json:"agent_version" jsonschema:"minimum=1,nullable"`
	Channel         string          `json:"channel" doc:"phone: a SIP call; voice: a browser call; chat: a text chat; whatsapp: the messaging app." jsonschema:"enum=phone,enum=voice,enum=chat,enum=whatsapp"`
	Direction       string          `json:"direction" jsonschema:"enum=inbound,enum=outbound"`
	Mode            string          `json:"mode" jsonschema:"enum=live,enum=test"`
	Status          string          `json:"status" doc:"Moves forward only: pending (created; a call not ringing yet) → ringing (a phone call ringing) → in_progress (answered; a chat from its start) → ended. A call that is never answered goes from pending or ringing to ended." jsonschema:"enum=pending,enum=ringing,enum=in_progress,enum=ended"`
	EndReason       *string         `json:"end_reason" doc:"Why a conversation ended; null until it has. An open set: a client must tolerate values it does not know." jsonschema:"nullable,enum=completed,enum=caller_hung_up,enum=agent_ended,enum=no_answer,enum=busy,enum=invalid_number,enum=voicemail,enum=transferred,enum=media_timeout,enum=network_lost,enum=provider_error,enum=failed,enum=silence_timeout,enum=max_duration,enum=ended_by_api,enum=credit_exhausted,enum=shutdown,enum=callee_hung_up"`
	EndDetail       *EndDetail      `json:"end_detail" doc:"How a call leg ended, as its signalling said (x-extension): set when a phone call failed or was refused before or without an answer; null otherwise." jsonschema:"nullable"`
	ExternalID      *string         `json:"external_id" jsonschema:"nullable"`
	Language        string          `json:"language"`
	FromNumber      *string         `json:"from_number" jsonschema:"nullable"`
	ToNumber        *string         `json:"to_number" jsonschema:"nullable"`
	PhoneNumberID   *string         `json:"phone_number_id" jsonschema:"format=uuid,nullable"`
	Metadata        json.RawMessage `json:"metadata" doc:"Your own data (an object), as sent when the conversation started." jsonschema:"type=object"`
	Variables       json.RawMessage `json:"variables" doc:"The values of the agent's {{placeholders}} (an object)." jsonschema:"type=object"`
	CreatedAt       app.Time        `json:"created_at"`
	RingingAt       *app.Time       `json:"ringing_at" jsonschema:"nullable"`
	StartedAt       *app.Time       `json:"started_at" jsonschema:"nullable"`
	EndedAt         *app.Time       `json:"ended_at" jsonschema:"nullable"`
	DurationSeconds *float64        `json:"duration_seconds" doc:"From started_at to ended_at." jsonschema:"nullable"`
	Turns           []TurnMetrics   `json:"turns" doc:"Per-turn latency metrics of a voice conversation, written when it ends."`
	HasRecording    bool            `json:"has_recording"`
	// issue 14: the post-call analysis.
	Analysis   json.RawMessage `json:"analysis" doc:"The post-call analysis (an object fitting the agent's analysis_schema); null until done, or when the agent's analysis is off." jsonschema:"type=object,nullable"`
	Collected  json.RawMessage `json:"collected" doc:"What the agent collected (an object fitting its collected_schema), worked out once the conversation ended; null until then, or when it collects nothing." jsonschema:"type=object,nullable"`
	AnalyzedAt *app.Time       `json:"analyzed_at" doc:"When analysis and collected were last worked out (POST …/analysis runs it again)." jsonschema:"nullable"`
}

// EndDetail is how a call leg ended, as the SIP signalling said it (issue 22).
type EndDetail struct {
	SIPStatus *int   `json:"sip_status" doc:"The final SIP status of the call's INVITE (486, 503, …); null when none came (no answer within the ring timeout, an unreachable trunk)." jsonschema:"nullable,minimum=100,maximum=699"`
	Q850Cause *int   `json:"q850_cause" doc:"The ITU-T Q.850 cause of the RFC 3326 Reason header the trunk sent, or the one Parley sent in its CANCEL (19, no answer); null when none." jsonschema:"nullable,minimum=1,maximum=127"`
	Text      string `json:"text" doc:"What happened, written for a person."`
}

// SchemaDoc describes the object in the document.
func (EndDetail) SchemaDoc() string {
	return "How a call leg ended, as its signalling said (an extension of the specification)."
}

// SchemaDoc describes the object in the document.
func (Conversation) SchemaDoc() string { return "A conversation of an agent, by voice or text." }

// ConversationWithTranscript is a Conversation with, when asked, its transcript and cost (a
// started chat answers it with the agent's first lines).
type ConversationWithTranscript struct {
	Conversation
	Transcript *[]TranscriptLine `json:"transcript,omitempty" doc:"The transcript, oldest line first (include=transcript; a started chat's first lines)."`
	Cost       *ConversationCost `json:"cost,omitempty" doc:"What the conversation cost (include=cost)."`
}

// SchemaDoc describes the object in the document.
func (ConversationWithTranscript) SchemaDoc() string {
	return "A conversation of an agent, with its transcript and cost when asked."
}

// TranscriptLine is one line of a conversation's transcript.
type TranscriptLine struct {
	Object      string          `json:"object" jsonschema:"enum=transcript_line"`
	Seq         int64           `json:"seq" doc:"Grows by one per line. A line is numbered when it is complete (a user line at the end of the caller's turn, an agent line once it was spoken), so seq orders lines by completion, not by start: a caller who speaks over the agent gets a line after the agent's. Sort by started_at for a timeline." jsonschema:"minimum=1"`
	Role        string          `json:"role" jsonschema:"enum=user,enum=agent,enum=tool,enum=note,enum=system"`
	Text        string          `json:"text"`
	Start       app.Time        `json:"started_at" doc:"When the line began: the caller's first word, the agent's first audio out."`
	End         app.Time        `json:"ended_at" doc:"When the line was complete (the caller's last word, the agent's last audio out)."`
	Interrupted bool            `json:"interrupted" doc:"An agent line cut by the caller: text is what was heard."`
	Meta        json.RawMessage `json:"meta" doc:"What else the line carries (an object): a tool's name and arguments, say." jsonschema:"type=object"`
}

// SchemaDoc describes the object in the document.
func (TranscriptLine) SchemaDoc() string { return "One transcript line." }

// ConversationCost is what a conversation cost, and what it used.
type ConversationCost struct {
	Object          string  `json:"object" jsonschema:"enum=conversation_cost"`
	Currency        string  `json:"currency" jsonschema:"enum=USD"`
	TotalMicros     int64   `json:"total_micros" doc:"What was charged, in millionths of a dollar."`
	Total           string  `json:"total" doc:"total_micros as a decimal number of dollars."`
	Charged         bool    `json:"charged" doc:"Whether it was charged to the credit (test conversations cost nothing)."`
	Final           bool    `json:"final" doc:"Whether the conversation has ended (the cost is final)."`
	STTSeconds      float64 `json:"stt_seconds"`
	LLMInputTokens  int     `json:"llm_input_tokens"`
	LLMOutputTokens int     `json:"llm_output_tokens"`
	TTSCharacters   int     `json:"tts_characters"`
	CallSeconds     float64 `json:"call_seconds"`
}

// TurnMetrics is the TurnMetrics object: when each stage of a voice turn happened, and the
// latencies between them in milliseconds.
type TurnMetrics struct {
	Turn            int         `json:"turn" jsonschema:"minimum=1"`
	Endpointing     string      `json:"endpointing" doc:"How the end of the turn was decided: provider, vad, max_wait or text."`
	Interrupted     bool        `json:"interrupted"`
	SpeechEnd       *app.Time   `json:"speech_end" jsonschema:"nullable"`
	STTFinal        *app.Time   `json:"stt_final" jsonschema:"nullable"`
	EndOfTurn       *app.Time   `json:"end_of_turn" jsonschema:"nullable"`
	LLMRequestSent  *app.Time   `json:"llm_request_sent" jsonschema:"nullable"`
	LLMFirstToken   *app.Time   `json:"llm_first_token" jsonschema:"nullable"`
	TTSFirstRequest *app.Time   `json:"tts_first_request" jsonschema:"nullable"`
	TTSFirstByte    *app.Time   `json:"tts_first_byte" jsonschema:"nullable"`
	FirstAudioOut   *app.Time   `json:"first_audio_out" jsonschema:"nullable"`
	LatencyMS       TurnLatency `json:"latency_ms"`
}

// SchemaDoc describes the object in the document.
func (TurnMetrics) SchemaDoc() string {
	return "The timestamps of one voice turn and the latencies between them."
}

// TurnLatency is the latencies of one turn, in milliseconds.
type TurnLatency struct {
	Endpointing   *float64 `json:"endpointing" doc:"speech end → end of turn" jsonschema:"nullable"`
	LLMFirstToken *float64 `json:"llm_first_token" doc:"request → first token" jsonschema:"nullable"`
	TTSFirstByte  *float64 `json:"tts_first_byte" doc:"first TTS request → first byte" jsonschema:"nullable"`
	Total         *float64 `json:"total" doc:"speech end → first audio out" jsonschema:"nullable"`
	ParleyShare   *float64 `json:"parley_share" doc:"Parley's own share: the total less the providers' time and the endpointing wait" jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (TurnLatency) SchemaDoc() string { return "The latencies of the turn, in milliseconds." }

// View is the interface's form of a stored conversation.
func View(c store.Conversation) Conversation {
	v := Conversation{Object: "conversation", ID: string(c.ID), ProjectID: string(c.ProjectID), AgentID: string(c.AgentID),
		Channel: c.Channel, Direction: c.Direction, Mode: string(c.Mode), Status: c.Status, EndReason: nullable(c.EndReason),
		ExternalID: nullable(c.ExternalID), Language: c.Language, FromNumber: nullable(c.FromNumber), ToNumber: nullable(c.ToNumber),
		PhoneNumberID: nullable(string(c.PhoneNumberID)), Metadata: OrEmpty(c.Metadata), Variables: OrEmpty(c.Variables),
		CreatedAt: app.T(c.CreatedAt), RingingAt: app.TP(c.RingingAt), StartedAt: app.TP(c.StartedAt), EndedAt: app.TP(c.EndedAt),
		Turns: viewTurns(c.Turns), HasRecording: c.Recording != "",
		Analysis: orNull(c.Analysis), Collected: orNull(c.Collected), AnalyzedAt: app.TP(c.AnalyzedAt)}
	if c.AgentVersion > 0 {
		n := c.AgentVersion
		v.AgentVersion = &n
	}
	if o := c.Outcome; !o.IsZero() {
		v.EndDetail = &EndDetail{SIPStatus: nonZero(o.SIPStatus), Q850Cause: nonZero(o.Q850Cause), Text: o.Detail}
	}
	if c.StartedAt != nil && c.EndedAt != nil {
		d := c.EndedAt.Sub(*c.StartedAt).Seconds()
		v.DurationSeconds = &d
	}
	return v
}

// OrEmpty is raw, or {} when it is empty.
func OrEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// storedTurn is a turn's metrics as the engine stores them (the JSON of session.TurnMetrics,
// read here without importing the engine).
type storedTurn struct {
	Turn            int       `json:"turn"`
	SpeechEnd       time.Time `json:"speech_end"`
	STTFinal        time.Time `json:"stt_final"`
	EndOfTurn       time.Time `json:"end_of_turn"`
	LLMRequestSent  time.Time `json:"llm_request_sent"`
	LLMFirstToken   time.Time `json:"llm_first_token"`
	LLMFirstChunk   time.Time `json:"llm_first_chunk"`
	TTSFirstRequest time.Time `json:"tts_first_request"`
	TTSFirstByte    time.Time `json:"tts_first_byte"`
	FirstAudioOut   time.Time `json:"first_audio_out"`
	Endpointing     string    `json:"endpointing"`
	Interrupted     bool      `json:"interrupted"`
}

// span is b-a, or 0 when either is unset (session.Span).
func span(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() {
		return 0
	}
	return b.Sub(a)
}

// parleyShare is Parley's own part of the turn's latency, as session.TurnMetrics.ParleyShare
// counts it: decision → LLM request, first sentence → first TTS request, first TTS byte →
// first frame out.
func (m storedTurn) parleyShare() time.Duration {
	if m.FirstAudioOut.IsZero() || m.EndOfTurn.IsZero() {
		return 0
	}
	chunk := m.LLMFirstChunk
	if chunk.IsZero() {
		chunk = m.LLMFirstToken
	}
	return span(m.EndOfTurn, m.LLMRequestSent) + span(chunk, m.TTSFirstRequest) + span(m.TTSFirstByte, m.FirstAudioOut)
}

func viewTurns(raw json.RawMessage) []TurnMetrics {
	var ms []storedTurn
	_ = json.Unmarshal(raw, &ms)
	out := make([]TurnMetrics, 0, len(ms))
	t := func(x time.Time) *app.Time {
		if x.IsZero() || x.Year() < 2000 {
			return nil
		}
		return app.TP(&x)
	}
	ms2 := func(a, b time.Time) *float64 {
		if d := span(a, b); d > 0 && a.Year() >= 2000 {
			f := float64(d.Microseconds()) / 1000
			return &f
		}
		return nil
	}
	for _, m := range ms {
		v := TurnMetrics{Turn: m.Turn, Endpointing: m.Endpointing, Interrupted: m.Interrupted,
			SpeechEnd: t(m.SpeechEnd), STTFinal: t(m.STTFinal), EndOfTurn: t(m.EndOfTurn), LLMRequestSent: t(m.LLMRequestSent),
			LLMFirstToken: t(m.LLMFirstToken), TTSFirstRequest: t(m.TTSFirstRequest), TTSFirstByte: t(m.TTSFirstByte),
			FirstAudioOut: t(m.FirstAudioOut),
			LatencyMS: TurnLatency{Endpointing: ms2(m.SpeechEnd, m.EndOfTurn), LLMFirstToken: ms2(m.LLMRequestSent, m.LLMFirstToken),
				TTSFirstByte: ms2(m.TTSFirstRequest, m.TTSFirstByte), Total: ms2(m.SpeechEnd, m.FirstAudioOut)}}
		if share := m.parleyShare(); share > 0 {
			f := float64(share.Microseconds()) / 1000
			v.LatencyMS.ParleyShare = &f
		}
		out = append(out, v)
	}
	return out
}

// nonZero returns nil for 0, else a pointer to n.
func nonZero(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// orNull is raw, or JSON null when it is empty.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
