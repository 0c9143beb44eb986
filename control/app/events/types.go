package events

import (
	"encoding/json"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// The types of the conversations and of webhooks themselves. Other contexts register theirs
// from their own packages (scheduled calls in app/calls, campaigns in theirs).
const (
	ConversationStarted    = "conversation.started"
	ConversationEnded      = "conversation.ended"
	ConversationAnalyzed   = "conversation.analyzed"
	ConversationTranscript = "conversation.transcript"
	ConversationDeleted    = "conversation.deleted"
	FormAbandoned          = "form.abandoned"
	WebhookTest            = store.WebhookTestEvent
)

func init() {
	Register(ConversationStarted, "A conversation started: a call was answered, a browser call joined, a chat opened.", ConversationData{})
	Register(ConversationEnded, "A conversation ended; end_reason says why.", ConversationData{})
	Register(ConversationAnalyzed, "A conversation's post-call analysis is done: data carries analysis and collected.", ConversationData{})
	Register(ConversationTranscript, "Final transcript lines as they happen, in batches of about one second, then the whole transcript once the conversation ends (final true). Not in the default set.", TranscriptData{}, OptIn())
	Register(FormAbandoned, "A form-filling conversation ended before every required collected field was filled; data carries what was collected. Not in the default set.", FormAbandonedData{}, OptIn())
	Register(ConversationDeleted, "A conversation was deleted with DELETE /v1/conversations/{conversation_id}; data is the conversation as it was.", ConversationData{})
	Register(WebhookTest, "Sent by POST /v1/webhooks/{receiver_id}/test to that receiver only.", WebhookTestData{}, Direct())
	// Written by the store itself (Store.RecordRegistrationState), which cannot register it.
	Register(TrunkRegistrationEvent, "A node's SIP registration of a trunk changed state or registrar; sent to every project with numbers on the trunk (live mode).", TrunkRegistrationData{})
}

// TrunkRegistrationEvent is the type of the event the store writes when a node's SIP
// registration of a trunk changes.
const TrunkRegistrationEvent = "trunk.registration"

// TrunkRegistrationData is the data of trunk.registration.
type TrunkRegistrationData struct {
	Trunk     string    `json:"trunk" doc:"The trunk's name."`
	TrunkID   string    `json:"trunk_id" jsonschema:"format=uuid"`
	Node      string    `json:"node" doc:"The node whose binding changed."`
	State     string    `json:"state" jsonschema:"enum=registering,enum=registered,enum=failed,enum=unregistered"`
	Registrar string    `json:"registrar" doc:"The registrar the node registers with (sip:host[:port])."`
	Error     string    `json:"error,omitempty" doc:"Why the registration failed, when it did."`
	ExpiresAt *app.Time `json:"expires_at,omitempty" doc:"When the binding expires, while registered."`
}

// SchemaDoc describes the object in the document.
func (TrunkRegistrationData) SchemaDoc() string {
	return "A node's SIP registration of a trunk, as it now is."
}

// ConversationData is the data of the conversation.* events: the conversation as it was when
// the event happened. A receiver with include_values false gets it without variables,
// metadata, from_number and to_number.
type ConversationData struct {
	Object          string          `json:"object" jsonschema:"enum=conversation"`
	ID              string          `json:"id" jsonschema:"format=uuid"`
	ProjectID       string          `json:"project_id" jsonschema:"format=uuid"`
	AgentID         string          `json:"agent_id" jsonschema:"format=uuid"`
	AgentVersion    *int            `json:"agent_version" jsonschema:"minimum=1,nullable"`
	Channel         string          `json:"channel" jsonschema:"enum=phone,enum=voice,enum=chat,enum=whatsapp"`
	Direction       string          `json:"direction" jsonschema:"enum=inbound,enum=outbound"`
	Mode            string          `json:"mode" jsonschema:"enum=live,enum=test"`
	Status          string          `json:"status" jsonschema:"enum=pending,enum=ringing,enum=in_progress,enum=ended"`
	EndReason       *string         `json:"end_reason" doc:"Why it ended (an open set); null until it has." jsonschema:"nullable"`
	ExternalID      *string         `json:"external_id" jsonschema:"nullable"`
	Language        string          `json:"language"`
	FromNumber      *string         `json:"from_number,omitempty" doc:"Left out for receivers with include_values false." jsonschema:"nullable"`
	ToNumber        *string         `json:"to_number,omitempty" doc:"Left out for receivers with include_values false." jsonschema:"nullable"`
	PhoneNumberID   *string         `json:"phone_number_id" jsonschema:"format=uuid,nullable"`
	Metadata        json.RawMessage `json:"metadata,omitempty" doc:"Your own data (an object); left out for receivers with include_values false." jsonschema:"type=object"`
	Variables       json.RawMessage `json:"variables,omitempty" doc:"The values the conversation started with (an object); left out for receivers with include_values false." jsonschema:"type=object"`
	CreatedAt       app.Time        `json:"created_at"`
	StartedAt       *app.Time       `json:"started_at" jsonschema:"nullable"`
	EndedAt         *app.Time       `json:"ended_at" jsonschema:"nullable"`
	DurationSeconds *float64        `json:"duration_seconds" jsonschema:"nullable"`
	Analysis        json.RawMessage `json:"analysis" doc:"The post-call analysis (an object fitting the agent's analysis_schema), null until done." jsonschema:"type=object,nullable"`
	Collected       json.RawMessage `json:"collected" doc:"What the agent collected (an object fitting its collected_schema), null until worked out." jsonschema:"type=object,nullable"`
}

// SchemaDoc describes the object in the document.
func (ConversationData) SchemaDoc() string {
	return "The conversation an event is about, as it was when the event happened."
}

// ConversationOf is the data of a conversation event about c.
func ConversationOf(c store.Conversation) ConversationData {
	d := ConversationData{Object: "conversation", ID: string(c.ID), ProjectID: string(c.ProjectID), AgentID: string(c.AgentID),
		Channel: c.Channel, Direction: c.Direction, Mode: string(c.Mode), Status: c.Status, EndReason: nullable(c.EndReason),
		ExternalID: nullable(c.ExternalID), Language: c.Language, FromNumber: nullable(c.FromNumber), ToNumber: nullable(c.ToNumber),
		PhoneNumberID: nullable(string(c.PhoneNumberID)), Metadata: orEmpty(c.Metadata), Variables: orEmpty(c.Variables),
		CreatedAt: app.T(c.CreatedAt), StartedAt: app.TP(c.StartedAt), EndedAt: app.TP(c.EndedAt), Analysis: orNull(c.Analysis), Collected: orNull(c.Collected)}
	if c.AgentVersion > 0 {
		n := c.AgentVersion
		d.AgentVersion = &n
	}
	if c.StartedAt != nil && c.EndedAt != nil {
		s := c.EndedAt.Sub(*c.StartedAt).Seconds()
		d.DurationSeconds = &s
	}
	return d
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`null`)
	}
	return raw
}

// Of is the store.Event of a conversation event (without its data).
func Of(typ string, c store.Conversation) store.Event {
	return store.Event{OrgID: c.OrgID, ProjectID: c.ProjectID, Mode: c.Mode, Type: typ, ConversationID: c.ID, AgentID: c.AgentID}
}

// TranscriptData is the data of conversation.transcript.
type TranscriptData struct {
	Object         string                `json:"object" jsonschema:"enum=conversation_transcript"`
	ConversationID string                `json:"conversation_id" jsonschema:"format=uuid"`
	Final          bool                  `json:"final" doc:"false: the final lines of about the last second; true: the whole transcript, sent once the conversation has ended."`
	Lines          []EventTranscriptLine `json:"lines"`
}

// SchemaDoc describes the object in the document.
func (TranscriptData) SchemaDoc() string { return "Transcript lines of a conversation." }

// EventTranscriptLine is one line of TranscriptData.
type EventTranscriptLine struct {
	Seq         int64    `json:"seq" jsonschema:"minimum=1"`
	Role        string   `json:"role" jsonschema:"enum=user,enum=agent,enum=tool,enum=note,enum=system"`
	Text        string   `json:"text"`
	Start       app.Time `json:"start"`
	End         app.Time `json:"end"`
	Interrupted bool     `json:"interrupted"`
}

// SchemaDoc describes the object in the document.
func (EventTranscriptLine) SchemaDoc() string { return "One final transcript line." }

// LinesOf is the transcript form of stored lines.
func LinesOf(ls []store.ConversationLine) []EventTranscriptLine {
	out := make([]EventTranscriptLine, len(ls))
	for i, l := range ls {
		out[i] = EventTranscriptLine{Seq: l.Seq, Role: l.Role, Text: l.Text, Start: app.T(l.Start), End: app.T(l.End), Interrupted: l.Interrupted}
	}
	return out
}

// FormAbandonedData is the data of form.abandoned.
type FormAbandonedData struct {
	Object         string          `json:"object" jsonschema:"enum=form_abandoned"`
	ConversationID string          `json:"conversation_id" jsonschema:"format=uuid"`
	AgentID        string          `json:"agent_id" jsonschema:"format=uuid"`
	EndReason      *string         `json:"end_reason" jsonschema:"nullable"`
	Collected      json.RawMessage `json:"collected" doc:"What was collected before the conversation ended (an object fitting the agent's collected_schema)." jsonschema:"type=object"`
	Missing        []string        `json:"missing" doc:"The required collected fields left unfilled."`
}

// SchemaDoc describes the object in the document.
func (FormAbandonedData) SchemaDoc() string {
	return "A form-filling conversation that ended before every required field was collected."
}

// WebhookTestData is the data of webhook.test.
type WebhookTestData struct {
	Object     string `json:"object" jsonschema:"enum=webhook_test"`
	ReceiverID string `json:"receiver_id" jsonschema:"format=uuid"`
	Message    string `json:"message"`
}

// SchemaDoc describes the object in the document.
func (WebhookTestData) SchemaDoc() string { return "A test event, sent on request to one receiver." }

// Stripped is the keys of an event's data that a receiver with include_values false never
// gets: the values a conversation or call started with, the caller's metadata and both phone
// numbers.
var Stripped = []string{"variables", "metadata", "from_number", "to_number"}

// StripValues removes Stripped from data (an object) and from the objects directly inside it
// (a campaign event's contact, say), but not from analysis or collected, whose members are
// named by the agent.
func StripValues(data json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	strip(m)
	for k, v := range m {
		if k == "analysis" || k == "collected" {
			continue // the customer's own field names
		}
		if len(v) > 0 && v[0] == '{' {
			var inner map[string]json.RawMessage
			if json.Unmarshal(v, &inner) == nil && stripHas(inner) {
				strip(inner)
				b, err := json.Marshal(inner)
				if err != nil {
					return nil, err
				}
				m[k] = b
			}
		}
	}
	return json.Marshal(m)
}

func strip(m map[string]json.RawMessage) {
	for _, k := range Stripped {
		delete(m, k)
	}
}

func stripHas(m map[string]json.RawMessage) bool {
	for _, k := range Stripped {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
