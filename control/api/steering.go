package api

import (
	"context"

	"github.com/parley-voice/parley/control/app/conversations"
)

// steerIn is the input of a steering command: the conversation and the command's body.
type steerIn[B any] struct {
	ID   string `path:"conversation_id" format:"uuid" doc:"The conversation."`
	Body B      `body:"required"`
}

func (a *API) addConversationNote(ctx context.Context, c *call, in *steerIn[conversations.NoteCreate]) (*conversations.ConversationCommand, error) {
	v, err := a.Conversations.Note(ctx, c.actor(ctx), in.ID, in.Body)
	return &v, err
}

func (a *API) sayInConversation(ctx context.Context, c *call, in *steerIn[conversations.SayCreate]) (*conversations.ConversationCommand, error) {
	v, err := a.Conversations.Say(ctx, c.actor(ctx), in.ID, in.Body)
	return &v, err
}

func (a *API) transferConversation(ctx context.Context, c *call, in *steerIn[conversations.TransferCreate]) (*conversations.ConversationCommand, error) {
	v, err := a.Conversations.Transfer(ctx, c.actor(ctx), in.ID, in.Body)
	return &v, err
}

func (a *API) endConversation(ctx context.Context, c *call, in *conversationIn) (*conversations.ConversationCommand, error) {
	v, err := a.Conversations.End(ctx, c.actor(ctx), in.ID)
	return &v, err
}

type getConversationCommandIn struct {
	ID        string `path:"conversation_id" format:"uuid" doc:"The conversation."`
	CommandID string `path:"command_id" format:"uuid" doc:"The command."`
}

func (a *API) getConversationCommand(ctx context.Context, c *call, in *getConversationCommandIn) (*conversations.ConversationCommand, error) {
	v, err := a.Conversations.Command(ctx, c.actor(ctx), in.ID, in.CommandID)
	return &v, err
}

type listenConversationIn struct {
	ID   string                     `path:"conversation_id" format:"uuid" doc:"The conversation."`
	Body conversations.ListenCreate `body:"optional"`
}

func (a *API) listenConversation(ctx context.Context, c *call, in *listenConversationIn) (*conversations.Listener, error) {
	v, err := a.Conversations.Listen(ctx, c.actor(ctx), in.ID, in.Body)
	return &v, err
}
