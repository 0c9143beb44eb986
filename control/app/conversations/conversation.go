package conversations

import (
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Conversation is the Conversation object of the interface: the answer of createCall and the
// items of listConversations.
type Conversation struct {
	Object          string          `json:"object" jsonschema:"enum=conversation"`
	ID              string          `json:"id" jsonschema:"format=uuid"`
	ProjectID       string          `json:"project_id" jsonschema:"format=uuid"`
	AgentID         string          `json:"agent_id" jsonschema:"format=uuid"`
	AgentVersion    *int            `json:"agent_version" doc:"The published version it runs with; null: the live definition." jsonschema:"nullable,minimum=1"`
	Channel         string          `json:"channel" doc:"phone: a SIP call; voice: a browser call; chat: a text chat; whatsapp: the messaging app." jsonschema:"enum=phone,enum=voice,enum=chat,enum=whatsapp"`
	Direction       string          `json:"direction" jsonschema:"enum=inbound,enum=outbound"`
	Mode            string          `json:"mode" doc:"The key mode it was made with." jsonschema:"enum=live,enum=test"`
	Status          string          `json:"status" doc:"Moves forward only: pending (created; a call not ringing yet) → ringing (a phone call ringing) → in_progress (answered; a chat from its start) → ended. A call that is never answered goes from pending or ringing to ended." jsonschema:"enum=pending,enum=ringing,enum=in_progress,enum=ended"`
	EndReason       *string         `json:"end_reason" doc:"Why it ended; null until it has. An open set: a client must tolerate values it does not know." jsonschema:"nullable,enum=completed,enum=caller_hung_up,enum=agent_ended,enum=no_answer,enum=busy,enum=invalid_number,enum=voicemail,enum=transferred,enum=media_timeout,enum=network_lost,enum=provider_error,enum=failed,enum=silence_timeout,enum=max_duration,enum=ended_by_api"`
	ExternalID      *string         `json:"external_id" jsonschema:"nullable"`
	Language        string          `json:"language"`
	FromNumber      *string         `json:"from_number" jsonschema:"nullable"`
	ToNumber        *string         `json:"to_number" jsonschema:"nullable"`
	PhoneNumberID   *string         `json:"phone_number_id" jsonschema:"nullable,format=uuid"`
	Metadata        json.RawMessage `json:"metadata" doc:"Your own data, returned on every read and event; the agent never sees it." jsonschema:"type=object"`
	Variables       json.RawMessage `json:"variables" doc:"The values of the agent's {{placeholders}}." jsonschema:"type=object"`
	CreatedAt       time.Time       `json:"created_at"`
	RingingAt       *time.Time      `json:"ringing_at" jsonschema:"nullable"`
	StartedAt       *time.Time      `json:"started_at" jsonschema:"nullable"`
	EndedAt         *time.Time      `json:"ended_at" jsonschema:"nullable"`
	DurationSeconds *float64        `json:"duration_seconds" doc:"From started_at to ended_at." jsonschema:"nullable"`
	Turns           []TurnMetrics   `json:"turns" doc:"Per-turn latency metrics of a voice conversation, written when it ends."`
	HasRecording    bool            `json:"has_recording"`
}

// SchemaDoc describes the object in the document.
func (Conversation) SchemaDoc() string { return "A conversation of an agent, by voice or text." }

// TurnMetrics is the TurnMetrics object: when each stage of a voice turn happened, and the
// latencies between them in milliseconds.
type TurnMetrics struct {
	Turn            int         `json:"turn" jsonschema:"minimum=1"`
	Endpointing     string      `json:"endpointing" doc:"How the end of the turn was decided: provider, vad, max_wait or text."`
	Interrupted     bool        `json:"interrupted"`
	SpeechEnd       *time.Time  `json:"speech_end" jsonschema:"nullable"`
	STTFinal        *time.Time  `json:"stt_final" jsonschema:"nullable"`
	EndOfTurn       *time.Time  `json:"end_of_turn" jsonschema:"nullable"`
	LLMRequestSent  *time.Time  `json:"llm_request_sent" jsonschema:"nullable"`
	LLMFirstToken   *time.Time  `json:"llm_first_token" jsonschema:"nullable"`
	TTSFirstRequest *time.Time  `json:"tts_first_request" jsonschema:"nullable"`
	TTSFirstByte    *time.Time  `json:"tts_first_byte" jsonschema:"nullable"`
	FirstAudioOut   *time.Time  `json:"first_audio_out" jsonschema:"nullable"`
	LatencyMS       TurnLatency `json:"latency_ms"`
}

// SchemaDoc describes the object in the document.
func (TurnMetrics) SchemaDoc() string {
	return "The timestamps of one voice turn and the latencies between them."
}

// TurnLatency is the latencies of one voice turn, in milliseconds.
type TurnLatency struct {
	Endpointing   *float64 `json:"endpointing" doc:"speech end → end of turn" jsonschema:"nullable"`
	LLMFirstToken *float64 `json:"llm_first_token" doc:"request → first token" jsonschema:"nullable"`
	TTSFirstByte  *float64 `json:"tts_first_byte" doc:"first TTS request → first byte" jsonschema:"nullable"`
	Total         *float64 `json:"total" doc:"speech end → first audio out" jsonschema:"nullable"`
	ParleyShare   *float64 `json:"parley_share" doc:"Parley's own share: the total less the providers' time and the endpointing wait" jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (TurnLatency) SchemaDoc() string { return "The latencies of one voice turn, in milliseconds." }

// View is the interface's form of a stored conversation.
func View(c store.Conversation) Conversation {
	v := Conversation{Object: "conversation", ID: string(c.ID), ProjectID: string(c.ProjectID), AgentID: string(c.AgentID),
		Channel: c.Channel, Direction: c.Direction, Mode: string(c.Mode), Status: c.Status, EndReason: optional(c.EndReason),
		ExternalID: optional(c.ExternalID), Language: c.Language, FromNumber: optional(c.FromNumber), ToNumber: optional(c.ToNumber),
		PhoneNumberID: optional(string(c.PhoneNumberID)), Metadata: objectOrEmpty(c.Metadata), Variables: objectOrEmpty(c.Variables),
		CreatedAt: c.CreatedAt, RingingAt: c.RingingAt, StartedAt: c.StartedAt, EndedAt: c.EndedAt,
		Turns: viewTurns(c.Turns), HasRecording: c.Recording != ""}
	if c.AgentVersion > 0 {
		n := c.AgentVersion
		v.AgentVersion = &n
	}
	if c.StartedAt != nil && c.EndedAt != nil {
		d := c.EndedAt.Sub(*c.StartedAt).Seconds()
		v.DurationSeconds = &d
	}
	return v
}

// optional is s, or nil when s is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// objectOrEmpty is raw, or {} when it is empty.
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// viewTurns is the interface's form of the turn metrics the runtime stored.
func viewTurns(raw json.RawMessage) []TurnMetrics {
	var ms []session.TurnMetrics
	_ = json.Unmarshal(raw, &ms)
	out := make([]TurnMetrics, 0, len(ms))
	at := func(x time.Time) *time.Time {
		if x.IsZero() || x.Year() < 2000 {
			return nil
		}
		return &x
	}
	span := func(a, b time.Time) *float64 {
		if d := session.Span(a, b); d > 0 && a.Year() >= 2000 {
			f := float64(d.Microseconds()) / 1000
			return &f
		}
		return nil
	}
	for _, m := range ms {
		v := TurnMetrics{Turn: m.Turn, Endpointing: m.Endpointing, Interrupted: m.Interrupted,
			SpeechEnd: at(m.SpeechEnd), STTFinal: at(m.STTFinal), EndOfTurn: at(m.EndOfTurn), LLMRequestSent: at(m.LLMRequestSent),
			LLMFirstToken: at(m.LLMFirstToken), TTSFirstRequest: at(m.TTSFirstRequest), TTSFirstByte: at(m.TTSFirstByte),
			FirstAudioOut: at(m.FirstAudioOut),
			LatencyMS: TurnLatency{Endpointing: span(m.SpeechEnd, m.EndOfTurn), LLMFirstToken: span(m.LLMRequestSent, m.LLMFirstToken),
				TTSFirstByte: span(m.TTSFirstRequest, m.TTSFirstByte), Total: span(m.SpeechEnd, m.FirstAudioOut)}}
		if share := m.ParleyShare(); share > 0 {
			f := float64(share.Microseconds()) / 1000
			v.LatencyMS.ParleyShare = &f
		}
		out = append(out, v)
	}
	return out
}
