package api

import (
	"context"

	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/app/webhooks"
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

func (a *API) listWebhookReceivers(ctx context.Context, c *call, in *listWebhookReceiversIn) (*list[webhooks.Receiver], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	rs, err := a.Webhooks.List(ctx, c.actor(ctx), in.ProjectID, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, rs, func(r webhooks.Receiver) string { return r.ID }), nil
}

type createWebhookReceiverIn struct {
	Body webhooks.ReceiverCreate `body:"required"`
}

func (a *API) createWebhookReceiver(ctx context.Context, c *call, in *createWebhookReceiverIn) (*webhooks.ReceiverWithSecret, error) {
	r, err := a.Webhooks.Create(ctx, c.actor(ctx), in.Body)
	return &r, err
}

type receiverIn struct {
	ID string `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
}

func (a *API) getWebhookReceiver(ctx context.Context, c *call, in *receiverIn) (*webhooks.Receiver, error) {
	r, err := a.Webhooks.Get(ctx, c.actor(ctx), in.ID)
	return &r, err
}

type updateWebhookReceiverIn struct {
	ID   string                  `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
	Body webhooks.ReceiverUpdate `body:"required"`
}

func (a *API) updateWebhookReceiver(ctx context.Context, c *call, in *updateWebhookReceiverIn) (*webhooks.Receiver, error) {
	r, err := a.Webhooks.Update(ctx, c.actor(ctx), in.ID, in.Body)
	return &r, err
}

func (a *API) deleteWebhookReceiver(ctx context.Context, c *call, in *receiverIn) (*webhooks.Deleted, error) {
	d, err := a.Webhooks.Delete(ctx, c.actor(ctx), in.ID)
	return &d, err
}

type listWebhookDeliveriesIn struct {
	listQuery
	ID     string `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
	Status string `query:"status" enum:"pending,delivered,failed" doc:"Only deliveries in this status."`
}

func (a *API) listWebhookDeliveries(ctx context.Context, c *call, in *listWebhookDeliveriesIn) (*list[webhooks.Delivery], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ds, err := a.Webhooks.Deliveries(ctx, c.actor(ctx), in.ID, in.Status, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ds, func(d webhooks.Delivery) string { return d.ID }), nil
}

type resendWebhookDeliveryIn struct {
	ID         string `path:"receiver_id" format:"uuid" doc:"The webhook receiver."`
	DeliveryID string `path:"delivery_id" format:"uuid" doc:"The delivery (its webhook-id)."`
}

func (a *API) resendWebhookDelivery(ctx context.Context, c *call, in *resendWebhookDeliveryIn) (*webhooks.Delivery, error) {
	d, err := a.Webhooks.Resend(ctx, c.actor(ctx), in.ID, in.DeliveryID)
	return &d, err
}

func (a *API) rotateWebhookSecret(ctx context.Context, c *call, in *receiverIn) (*webhooks.ReceiverWithSecret, error) {
	r, err := a.Webhooks.Rotate(ctx, c.actor(ctx), in.ID)
	return &r, err
}

func (a *API) testWebhookReceiver(ctx context.Context, c *call, in *receiverIn) (*webhooks.Delivery, error) {
	d, err := a.Webhooks.Test(ctx, c.actor(ctx), in.ID)
	return &d, err
}
