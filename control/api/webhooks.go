package api

import (
	"context"
	"crypto/rand"
	"reflect"

	"github.com/parley-voice/parley/control/app/analysis"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/internal/netguard"
)

// issue 14: events, webhook receivers and post-call analysis.

type listEventsIn struct {
	listQuery
	Types          []string `query:"type" doc:"Only events of these types (repeatable: type=conversation.ended&type=conversation.analyzed); an unknown type is 422 unknown_event_type."`
	ConversationID string   `query:"conversation_id" format:"uuid" doc:"Only the events about this conversation."`
	CreatedAfter   string   `query:"created_after" format:"date-time" doc:"Only events made at or after this moment."`
	CreatedBefore  string   `query:"created_before" format:"date-time" doc:"Only events made before this moment."`
}

func (a *API) listEvents(ctx context.Context, c *call, in *listEventsIn) (*list[events.Event], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	f := events.Filter{Types: in.Types, ConversationID: in.ConversationID}
	if t := optTime(in.CreatedAfter); t != nil {
		f.CreatedAfter = *t
	}
	if t := optTime(in.CreatedBefore); t != nil {
		f.CreatedBefore = *t
	}
	es, err := a.Events.List(ctx, c.actor(ctx), f, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, es, func(e events.Event) string { return e.ID }), nil
}

type listWebhookReceiversIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid" doc:"Only this project's receivers; 404 when the key reaches no such project."`
}

func (a *API) listWebhookReceivers(ctx context.Context, c *call, in *listWebhookReceiversIn) (*list[webhooks.WebhookReceiver], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	rs, err := a.Webhooks.List(ctx, c.actor(ctx), in.ProjectID, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, rs, func(r webhooks.WebhookReceiver) string { return r.ID }), nil
}

type createWebhookReceiverIn struct {
	Body webhooks.WebhookReceiverCreate `body:"required"`
}

func (a *API) createWebhookReceiver(ctx context.Context, c *call, in *createWebhookReceiverIn) (*webhooks.WebhookReceiverWithSecret, error) {
	r, err := a.Webhooks.Create(ctx, c.actor(ctx), in.Body)
	return &r, err
}

type receiverIn struct {
	ID string `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
}

func (a *API) getWebhookReceiver(ctx context.Context, c *call, in *receiverIn) (*webhooks.WebhookReceiver, error) {
	r, err := a.Webhooks.Get(ctx, c.actor(ctx), in.ID)
	return &r, err
}

type updateWebhookReceiverIn struct {
	ID   string                         `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
	Body webhooks.WebhookReceiverUpdate `body:"required"`
}

func (a *API) updateWebhookReceiver(ctx context.Context, c *call, in *updateWebhookReceiverIn) (*webhooks.WebhookReceiver, error) {
	r, err := a.Webhooks.Update(ctx, c.actor(ctx), in.ID, in.Body)
	return &r, err
}

func (a *API) deleteWebhookReceiver(ctx context.Context, c *call, in *receiverIn) (*webhooks.WebhookReceiverDeleted, error) {
	d, err := a.Webhooks.Delete(ctx, c.actor(ctx), in.ID)
	return &d, err
}

type listWebhookDeliveriesIn struct {
	listQuery
	ID     string `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
	Status string `query:"status" enum:"pending,delivered,failed" doc:"Only deliveries in this status."`
}

func (a *API) listWebhookDeliveries(ctx context.Context, c *call, in *listWebhookDeliveriesIn) (*list[webhooks.WebhookDelivery], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ds, err := a.Webhooks.Deliveries(ctx, c.actor(ctx), in.ID, in.Status, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ds, func(d webhooks.WebhookDelivery) string { return d.ID }), nil
}

type resendWebhookDeliveryIn struct {
	ID         string `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
	DeliveryID string `path:"delivery_id" format:"uuid" doc:"The delivery (its webhook-id)."`
}

func (a *API) resendWebhookDelivery(ctx context.Context, c *call, in *resendWebhookDeliveryIn) (*webhooks.WebhookDelivery, error) {
	d, err := a.Webhooks.Resend(ctx, c.actor(ctx), in.ID, in.DeliveryID)
	return &d, err
}

func (a *API) rotateWebhookSecret(ctx context.Context, c *call, in *receiverIn) (*webhooks.WebhookReceiverWithSecret, error) {
	r, err := a.Webhooks.Rotate(ctx, c.actor(ctx), in.ID)
	return &r, err
}

func (a *API) testWebhookReceiver(ctx context.Context, c *call, in *receiverIn) (*webhooks.WebhookDelivery, error) {
	d, err := a.Webhooks.Test(ctx, c.actor(ctx), in.ID)
	return &d, err
}

// webhookServices makes the services of events, webhooks and analysis that were not given.
func (a *API) webhookServices() {
	if a.Events == nil {
		a.Events = &events.Service{Store: a.Store}
	}
	if a.Webhooks == nil {
		box := a.Box
		if box == nil {
			key := make([]byte, secrets.KeySize)
			_, _ = rand.Read(key)
			box, _ = secrets.NewBox(key)
		}
		guard := a.Outbound
		if guard == nil {
			guard = netguard.MustNew(netguard.Options{})
		}
		a.Webhooks = &webhooks.Service{Store: a.Store, Box: box, Guard: guard, Now: a.now, Log: a.Log}
	}
	if a.Analysis == nil {
		a.Analysis = &analysis.Service{Store: a.Store, Now: a.now, Log: a.Log}
		if a.Runtime != nil {
			a.Analysis.Engine = a.Runtime
		}
	}
}

func (a *API) analyzeConversation(ctx context.Context, c *call, in *conversationIn) (*conversations.Conversation, error) {
	v, err := a.Analysis.Request(ctx, c.actor(ctx), in.ID)
	return &v, err
}

// Tag descriptions of events and webhooks.
const (
	eventsTagDoc = "Everything that happens in a project is recorded once as an event (id, type, created_at, project, mode and data, the object it is about) and kept 30 days. " +
		"GET /v1/events lists them; webhook receivers hear them. The document's webhooks section lists every type with the body of its POST."
	webhooksTagDoc = "A receiver hears its project's events at a public https address. Deliveries follow Standard Webhooks v1 (https://www.standardwebhooks.com): each POST carries " +
		"webhook-id (the delivery's id, the same on every retry: your idempotency key), webhook-timestamp (Unix seconds, new on every attempt) and webhook-signature: " +
		"\"v1,\" + base64(HMAC-SHA256(key, \"<webhook-id>.<webhook-timestamp>.<body>\")), the key being the base64-decoded part of the secret after whsec_. After rotate-secret both secrets sign for 24 hours (two v1 entries separated by a space). " +
		"WebhookDelivery is at least once: expect duplicates and keep the webhook-id of what you handled. Only a 2xx answer within 15 s counts; redirects are not followed. " +
		"A failed attempt is retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (with jitter), then the delivery is failed; a 429 or 503 with Retry-After is retried after that long; a 410 Gone disables the receiver (PATCH enabled true turns it on again). " +
		"Verify the signature and reject a timestamp more than 5 minutes away from your clock; the standardwebhooks libraries (npm, PyPI, Go, …) do both."
)

// eventWebhooks is the document's webhooks section (OpenAPI 3.1): one entry per event type,
// the POST a receiver gets, whose body is the Event with that type and its data's schema. It
// registers the data types so that their schemas are reflected into the components.
func eventWebhooks() map[string]any {
	registerSchema(reflect.TypeFor[events.Event]())
	sigHeaders := []any{
		map[string]any{"name": "webhook-id", "in": "header", "required": true, "description": "The delivery's id, the same on every attempt: the receiver's idempotency key.", "schema": map[string]any{"type": "string", "format": "uuid"}},
		map[string]any{"name": "webhook-timestamp", "in": "header", "required": true, "description": "Unix seconds of this attempt.", "schema": map[string]any{"type": "string", "pattern": "^[0-9]+$"}},
		map[string]any{"name": "webhook-signature", "in": "header", "required": true, "description": "Space-separated v1,<base64 HMAC-SHA256> signatures (two during a rotation's overlap).", "schema": map[string]any{"type": "string"}},
	}
	out := map[string]any{}
	for _, t := range events.Types() {
		data := registerSchema(t.Data)
		body := map[string]any{"allOf": []any{
			map[string]any{"$ref": "#/components/schemas/Event"},
			map[string]any{"type": "object", "properties": map[string]any{
				"type": map[string]any{"const": t.Name},
				"data": map[string]any{"$ref": "#/components/schemas/" + data},
			}},
		}}
		desc := t.Summary
		if t.OptIn {
			desc += " Heard only by receivers that name it in events."
		}
		out[t.Name] = map[string]any{"post": map[string]any{
			"operationId": "event." + t.Name,
			"summary":     t.Name,
			"description": desc,
			"tags":        []any{"Webhooks"},
			"security":    []any{},
			"parameters":  sigHeaders,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": body}}},
			"responses": map[string]any{
				"2XX":     map[string]any{"description": "Delivered."},
				"410":     map[string]any{"description": "Gone: the receiver is disabled until a PATCH enables it."},
				"default": map[string]any{"description": "Not delivered: retried on the schedule (429 and 503 after Retry-After)."},
			},
		}}
	}
	return out
}
