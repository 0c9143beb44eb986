package webhooks

import (
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/store"
)

// WebhookReceiver is the WebhookReceiver object of the interface.
type WebhookReceiver struct {
	Object                  string    `json:"object" jsonschema:"enum=webhook_receiver"`
	ID                      string    `json:"id" jsonschema:"format=uuid"`
	ProjectID               string    `json:"project_id" jsonschema:"format=uuid"`
	Mode                    string    `json:"mode" doc:"live for a receiver made with a live key; test for one made with a test key, which hears test events only." jsonschema:"enum=live,enum=test"`
	URL                     string    `json:"url" doc:"Where events are POSTed: a public https address." jsonschema:"format=uri"`
	Events                  []string  `json:"events" doc:"The event types it hears."`
	DefaultEvents           bool      `json:"default_events" doc:"true when events was left out: it hears the default set (every type but conversation.transcript and form.abandoned), new types included."`
	AgentIDs                []string  `json:"agent_ids" doc:"Only these agents' conversations; empty: every agent of the project."`
	IncludeValues           bool      `json:"include_values" doc:"Whether events carry the values a conversation started with (variables), the caller's metadata and both phone numbers."`
	Enabled                 bool      `json:"enabled" doc:"false once the receiver answered 410 Gone: it hears nothing until a PATCH with enabled true."`
	DisabledAt              *app.Time `json:"disabled_at" jsonschema:"nullable"`
	DisabledReason          *string   `json:"disabled_reason" jsonschema:"nullable"`
	PreviousSecretExpiresAt *app.Time `json:"previous_secret_expires_at" doc:"After rotate-secret, until when the previous secret signs too (each delivery then carries two v1 signatures); null when only one secret signs." jsonschema:"nullable"`
	CreatedAt               app.Time  `json:"created_at"`
	UpdatedAt               app.Time  `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (WebhookReceiver) SchemaDoc() string {
	return "A webhook receiver: an https address that hears a project's events, signed by Standard Webhooks v1."
}

// WebhookReceiverWithSecret is a WebhookReceiver with its signing secret: the answer of creation and of a
// rotation, the only answers that ever carry the secret.
type WebhookReceiverWithSecret struct {
	WebhookReceiver
	Secret string `json:"secret" doc:"The signing secret, shown in this answer only: whsec_ followed by the base64 of 32 random bytes. Verify each delivery with it (Standard Webhooks v1)." jsonschema:"pattern=^whsec_[A-Za-z0-9+/=]{32\\,}$"`
}

// SchemaDoc describes the object in the document.
func (WebhookReceiverWithSecret) SchemaDoc() string {
	return "A webhook receiver with its signing secret, which no other answer shows."
}

// WebhookReceiverCreate is the body of POST /v1/webhooks.
type WebhookReceiverCreate struct {
	ProjectID     string    `json:"project_id" jsonschema:"format=uuid"`
	URL           string    `json:"url" doc:"A public https address (a host that resolves to public addresses only)." jsonschema:"minLength=9,maxLength=2048"`
	Events        *[]string `json:"events,omitempty" doc:"The event types it hears; left out or null: every type except conversation.transcript and form.abandoned, and new types as they come." jsonschema:"nullable,maxItems=50,uniqueItems=true"`
	AgentIDs      []string  `json:"agent_ids,omitempty" doc:"Only these agents' conversations; empty or left out: every agent in the project." jsonschema:"maxItems=100,uniqueItems=true"`
	IncludeValues *bool     `json:"include_values,omitempty" doc:"Whether events carry the start values, the caller's metadata and both phone numbers (default true)."`
}

// SchemaDoc describes the object in the document.
func (WebhookReceiverCreate) SchemaDoc() string { return "A webhook receiver to create." }

// WebhookReceiverUpdate is the body of PATCH /v1/webhooks/{receiver_id}.
type WebhookReceiverUpdate struct {
	URL           *string             `json:"url,omitempty" doc:"A public https address." jsonschema:"minLength=9,maxLength=2048"`
	Events        app.Patch[[]string] `json:"events,omitzero" doc:"The event types it hears; null: back to the default set." jsonschema:"nullable,maxItems=50,uniqueItems=true"`
	AgentIDs      *[]string           `json:"agent_ids,omitempty" doc:"Only these agents' conversations; empty: every agent." jsonschema:"maxItems=100,uniqueItems=true"`
	IncludeValues *bool               `json:"include_values,omitempty"`
	Enabled       *bool               `json:"enabled,omitempty" doc:"true enables a receiver that answered 410 Gone again (false is refused: delete the receiver instead)." jsonschema:"enum=true"`
}

// SchemaDoc describes the object in the document.
func (WebhookReceiverUpdate) SchemaDoc() string {
	return "Changes to a webhook receiver; members left out stay as they are."
}

// SchemaExtras asks for at least one member.
func (WebhookReceiverUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// WebhookDelivery is the WebhookDelivery object: one event sent to one receiver, with its attempts.
type WebhookDelivery struct {
	Object        string           `json:"object" jsonschema:"enum=webhook_delivery"`
	ID            string           `json:"id" doc:"The webhook-id header of every attempt: the receiver's idempotency key." jsonschema:"format=uuid"`
	ReceiverID    string           `json:"receiver_id" jsonschema:"format=uuid"`
	EventID       string           `json:"event_id" jsonschema:"format=uuid"`
	EventType     string           `json:"event_type"`
	Status        string           `json:"status" doc:"pending while attempts remain, delivered once a 2xx answer came, failed after the last attempt (or a 410)." jsonschema:"enum=pending,enum=delivered,enum=failed"`
	AttemptCount  int              `json:"attempt_count" jsonschema:"minimum=0"`
	NextAttemptAt *app.Time        `json:"next_attempt_at" doc:"When the next attempt is due (pending only)." jsonschema:"nullable"`
	CreatedAt     app.Time         `json:"created_at"`
	DeliveredAt   *app.Time        `json:"delivered_at" jsonschema:"nullable"`
	Attempts      []WebhookAttempt `json:"attempts" doc:"Every attempt, oldest first."`
}

// SchemaDoc describes the object in the document.
func (WebhookDelivery) SchemaDoc() string {
	return "One event sent to one receiver, with how each attempt went."
}

// WebhookAttempt is one POST of a delivery.
type WebhookAttempt struct {
	Number       int      `json:"number" jsonschema:"minimum=1"`
	At           app.Time `json:"at"`
	StatusCode   *int     `json:"status_code" doc:"The answer's status; null when none came (a connection refused, a timeout)." jsonschema:"nullable"`
	DurationMS   int64    `json:"duration_ms" jsonschema:"minimum=0"`
	ResponseBody string   `json:"response_body" doc:"The first 2 KB of the answer's body."`
	Error        *string  `json:"error" doc:"Why the attempt failed, when it did." jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (WebhookAttempt) SchemaDoc() string { return "One attempt of a delivery." }

// ViewReceiver is the interface's form of a stored receiver.
func ViewReceiver(r store.Receiver, now time.Time) WebhookReceiver {
	v := WebhookReceiver{Object: "webhook_receiver", ID: string(r.ID), ProjectID: string(r.ProjectID), Mode: string(r.Mode), URL: r.URL,
		Events: r.Events, DefaultEvents: r.Events == nil, AgentIDs: make([]string, len(r.AgentIDs)), IncludeValues: r.IncludeValues,
		Enabled: r.DisabledAt == nil, DisabledAt: app.TP(r.DisabledAt), CreatedAt: app.T(r.CreatedAt), UpdatedAt: app.T(r.UpdatedAt)}
	if v.Events == nil {
		v.Events = events.DefaultNames()
	}
	for i, a := range r.AgentIDs {
		v.AgentIDs[i] = string(a)
	}
	if r.DisabledReason != "" {
		s := r.DisabledReason
		v.DisabledReason = &s
	}
	if r.PrevSecretUntil != nil && now.Before(*r.PrevSecretUntil) {
		v.PreviousSecretExpiresAt = app.TP(r.PrevSecretUntil)
	}
	return v
}

// ViewDelivery is the interface's form of a stored delivery.
func ViewDelivery(d store.Delivery) WebhookDelivery {
	v := WebhookDelivery{Object: "webhook_delivery", ID: string(d.ID), ReceiverID: string(d.ReceiverID), EventID: string(d.EventID),
		EventType: d.EventType, Status: d.Status, AttemptCount: d.Attempts, CreatedAt: app.T(d.CreatedAt), DeliveredAt: app.TP(d.DeliveredAt),
		Attempts: make([]WebhookAttempt, len(d.AttemptList))}
	if d.Status == store.DeliveryPending {
		v.NextAttemptAt = app.TP(d.NextAttemptAt)
	}
	for i, a := range d.AttemptList {
		x := WebhookAttempt{Number: a.N, At: app.T(a.At), DurationMS: a.DurationMS, ResponseBody: a.Body}
		if a.StatusCode != 0 {
			c := a.StatusCode
			x.StatusCode = &c
		}
		if a.Error != "" {
			e := a.Error
			x.Error = &e
		}
		v.Attempts[i] = x
	}
	return v
}
