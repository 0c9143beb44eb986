package api

import (
	"context"

	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/conversations"
)

type createCallIn struct {
	Body calls.CallCreate `body:"required"`
}

func (a *API) createCall(ctx context.Context, c *call, in *createCallIn) (*conversations.Conversation, error) {
	conv, err := a.Calls.Call(ctx, c.actor(ctx), in.Body)
	return &conv, err
}

type createTestInboundCallIn struct {
	Body calls.TestInboundCallCreate `body:"required"`
}

func (a *API) createTestInboundCall(ctx context.Context, c *call, in *createTestInboundCallIn) (*conversations.Conversation, error) {
	conv, err := a.Calls.TestInbound(ctx, c.actor(ctx), in.Body)
	return &conv, err
}

type createWebCallIn struct {
	Body calls.WebCallCreate `body:"required"`
}

func (a *API) createWebCall(ctx context.Context, c *call, in *createWebCallIn) (*calls.WebCall, error) {
	wc, err := a.Calls.WebCall(ctx, c.actor(ctx), in.Body)
	return &wc, err
}

// conversationPath is the Location of a started conversation.
func conversationPath(v any) string {
	switch x := v.(type) {
	case conversations.Conversation:
		return "/v1/conversations/" + x.ID
	case conversations.ConversationWithTranscript:
		return "/v1/conversations/" + x.ID
	case calls.WebCall:
		return "/v1/conversations/" + x.ConversationID
	}
	return ""
}
