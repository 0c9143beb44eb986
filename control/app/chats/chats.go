// Package chats holds the rules of text chats started through the API: starting one, sending
// its messages one at a time (with the pictures uploaded for them), and removing the pictures
// no message used. HTTP and the workers call the same functions.
//
// It must never import net/http or the runtime: the chat engine is reached through Engine,
// which the composition root adapts the runtime to.
package chats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// Engine runs chats (control/runtime, adapted). Its errors are already classified
// (provider_unavailable, agent_busy, conversation_ended, chat_length_reached, …).
type Engine interface {
	// Ready reports whether this deployment runs chats.
	Ready() error
	// StartChat starts the chat stored with id and returns its first lines (the agent's
	// greeting, when it has one).
	StartChat(ctx context.Context, id store.ConversationID) ([]conversations.TranscriptLine, error)
	// Send answers one message, calling onDelta (when set) with each piece of the reply as the
	// model writes it, on whichever node takes it (a chat is kept in the store between its
	// messages); ErrAttachmentRefused when the chat cannot take a picture sent.
	Send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, onDelta func(string)) (Turn, error)
}

// Turn is one message and its reply.
type Turn struct {
	User, Agent conversations.TranscriptLine
	Ended       bool
	EndReason   string
}

// ErrAttachmentRefused says a chat cannot take a picture sent with a message.
var ErrAttachmentRefused = errors.New("chats: the attachment cannot be sent in this chat")

// Service serves chats and their attachments.
type Service struct {
	Store  *store.Store
	Rules  calls.Rules
	Engine Engine
	// DataDir holds the attachments' files (shared by every node of a deployment).
	DataDir string
	// Now is the clock (nil: time.Now); Log takes what the workers cannot answer to anyone.
	Now func() time.Time
	Log *slog.Logger
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// ChatCreate is the body of a chat to start.
type ChatCreate struct {
	AgentID string `json:"agent_id" jsonschema:"format=uuid"`
	calls.StartOptions
}

// SchemaDoc describes the body in the document.
func (ChatCreate) SchemaDoc() string { return "A chat to start." }

// Start starts a chat with a published agent that takes the chat channel, and returns the
// conversation (in progress) with its first lines. The answer of an idempotent request is kept
// once the chat has started, not with the conversation's row.
func (s *Service) Start(ctx context.Context, act app.Actor, body ChatCreate) (conversations.ConversationWithTranscript, error) {
	var out conversations.ConversationWithTranscript
	mode := act.Mode()
	st, err := s.Rules.Check(ctx, s.Store.Queries, act, mode, body.AgentID, body.StartOptions, calls.Need{Channel: agentdef.ChannelChat})
	if err != nil {
		return out, err
	}
	if err := s.Engine.Ready(); err != nil {
		return out, err
	}
	conv := calls.NewConversation(act, mode, st, store.ChannelChat, "inbound", store.ConvInProgress)
	conv.ViaAPI = true
	conv, err = calls.StoreConversation(ctx, s.Store, act, conv, "chat.created", map[string]any{"agent_id": conv.AgentID})
	if err != nil {
		return out, err
	}
	first, err := s.Engine.StartChat(ctx, conv.ID)
	if err != nil {
		return out, err
	}
	if first == nil {
		first = []conversations.TranscriptLine{}
	}
	out.Conversation, out.Transcript = conversations.View(conv), &first
	return out, nil
}

// MessageCreate is the body of a chat's next message.
type MessageCreate struct {
	Message       string   `json:"message" jsonschema:"minLength=1,maxLength=10000"`
	AttachmentIDs []string `json:"attachment_ids,omitempty" doc:"Pictures uploaded with POST /v1/attachments." jsonschema:"maxItems=10,format=uuid"`
	Stream        bool     `json:"stream,omitempty" doc:"Answer with server-sent events." jsonschema:"default=false"`
}

// ChatTurn is the ChatTurn object: a message and the agent's reply.
type ChatTurn struct {
	Object         string                       `json:"object" jsonschema:"enum=chat_turn"`
	ConversationID string                       `json:"conversation_id" jsonschema:"format=uuid"`
	User           conversations.TranscriptLine `json:"user"`
	Agent          conversations.TranscriptLine `json:"agent"`
	Ended          bool                         `json:"ended" doc:"The agent ended the chat with this reply."`
	EndReason      *string                      `json:"end_reason" doc:"Why the chat ended (see Conversation.end_reason); null while it goes on." jsonschema:"nullable,enum=completed,enum=caller_hung_up,enum=agent_ended,enum=no_answer,enum=busy,enum=invalid_number,enum=voicemail,enum=transferred,enum=media_timeout,enum=network_lost,enum=provider_error,enum=failed,enum=silence_timeout,enum=max_duration,enum=ended_by_api"`
}

// SchemaDoc describes the object in the document.
func (ChatTurn) SchemaDoc() string { return "A message of a chat and the agent's reply." }

// Send sends the next message of the actor's chat with id and returns the agent's reply;
// onDelta, when set, gets each piece of the reply as the model writes it.
func (s *Service) Send(ctx context.Context, act app.Actor, id string, body MessageCreate, onDelta func(string)) (ChatTurn, error) {
	q := s.Store.Queries
	conv, err := q.ConversationInScope(ctx, act.Scope, store.ConversationID(id))
	if err != nil {
		return ChatTurn{}, app.NotFound(err, fault.CodeConversationNotFound, "conversation", id)
	}
	switch {
	case conv.Channel != store.ChannelChat:
		return ChatTurn{}, fault.E(fault.CodeNotAChat, "Conversation %s is a %s conversation, not a chat.", conv.ID, conv.Channel)
	case !conv.ViaAPI:
		// A chat not started through the API is not the API's.
		return ChatTurn{}, app.NotFound(store.ErrNotFound, fault.CodeConversationNotFound, "conversation", id)
	case conv.Ended():
		if conv.EndReason == endProviderError {
			return ChatTurn{}, fault.E(fault.CodeConversationEnded, "The chat has ended: its agent's provider failed.")
		}
		return ChatTurn{}, fault.E(fault.CodeConversationEnded, "The chat has ended (%s); start another.", conv.EndReason)
	}
	if conv.Mode == store.ModeLive {
		if err := billing.CheckCanSpend(ctx, q, conv.OrgID, time.Now()); err != nil {
			return ChatTurn{}, err
		}
	}
	var ids []store.AttachmentID
	var ps []jsoncheck.Problem
	for i, raw := range body.AttachmentIDs {
		at, err := q.AttachmentInScope(ctx, act.Scope, store.AttachmentID(raw))
		switch {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
			ps = append(ps, jsoncheck.Problem{Pointer: fmt.Sprintf("/attachment_ids/%d", i), Code: "invalid_value", Detail: fmt.Sprintf("No attachment %s.", app.QuoteID(raw))})
		case err != nil:
			return ChatTurn{}, err
		case at.ConversationID != "" && at.ConversationID != conv.ID:
			ps = append(ps, jsoncheck.Problem{Pointer: fmt.Sprintf("/attachment_ids/%d", i), Code: "invalid_value", Detail: fmt.Sprintf("Attachment %s was sent in another conversation.", raw)})
		default:
			ids = append(ids, at.ID)
		}
	}
	if len(ps) > 0 {
		return ChatTurn{}, app.Invalid(ps...)
	}
	if err := s.Engine.Ready(); err != nil {
		return ChatTurn{}, err
	}
	turn, err := s.Engine.Send(ctx, conv.ID, body.Message, ids, onDelta)
	if errors.Is(err, ErrAttachmentRefused) {
		return ChatTurn{}, app.Invalid(jsoncheck.Problem{Pointer: "/attachment_ids", Code: "invalid_value", Detail: "An attachment cannot be sent in this chat."})
	}
	if err != nil {
		return ChatTurn{}, err
	}
	v := ChatTurn{Object: "chat_turn", ConversationID: string(conv.ID), User: turn.User, Agent: turn.Agent, Ended: turn.Ended}
	if turn.EndReason != "" {
		r := turn.EndReason
		v.EndReason = &r
	}
	return v, nil
}

// endProviderError is the end reason of a conversation whose provider failed
// (session.EndProviderError).
const endProviderError = "provider_error"
