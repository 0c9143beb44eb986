package conversations

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// ConversationCommand is the ConversationCommand object: a steering command, pending until the
// node running the conversation reports it done or failed.
type ConversationCommand struct {
	Object         string          `json:"object" jsonschema:"enum=conversation_command"`
	ID             string          `json:"id" jsonschema:"format=uuid"`
	ConversationID string          `json:"conversation_id" jsonschema:"format=uuid"`
	Kind           string          `json:"kind" jsonschema:"enum=say,enum=note,enum=transfer,enum=end"`
	Status         string          `json:"status" jsonschema:"enum=pending,enum=done,enum=failed"`
	Reason         *string         `json:"reason" doc:"Why it failed." jsonschema:"nullable"`
	Params         json.RawMessage `json:"params" doc:"The command's parameters as sent." jsonschema:"type=object"`
	CreatedAt      app.Time        `json:"created_at"`
	CompletedAt    *app.Time       `json:"completed_at" jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (ConversationCommand) SchemaDoc() string {
	return "A steering command: pending until the node running the conversation reports it done or failed."
}

func viewCommand(c store.Command) ConversationCommand {
	return ConversationCommand{Object: "conversation_command", ID: string(c.ID), ConversationID: string(c.ConversationID), Kind: c.Kind,
		Status: c.Status, Reason: nullable(c.Reason), Params: OrEmpty(c.Params), CreatedAt: app.T(c.CreatedAt), CompletedAt: app.TP(c.CompletedAt)}
}

// NoteCreate is the body of addConversationNote.
type NoteCreate struct {
	Text           string `json:"text" jsonschema:"minLength=1,maxLength=2000"`
	VisibleToAgent bool   `json:"visible_to_agent,omitempty" doc:"Whether the agent reads it (as guidance from a supervisor)." jsonschema:"default=false"`
}

// SayCreate is the body of sayInConversation.
type SayCreate struct {
	Text      string `json:"text" jsonschema:"minLength=1,maxLength=2000"`
	Interrupt bool   `json:"interrupt,omitempty" doc:"Cut what the agent is saying and say this at once." jsonschema:"default=false"`
}

// TransferCreate is the body of transferConversation.
type TransferCreate struct {
	Destination string `json:"destination" doc:"A number in E.164 form, or a sip: or sips: URI." jsonschema:"minLength=1,maxLength=255"`
	Mode        string `json:"mode,omitempty" jsonschema:"enum=cold,enum=warm,default=cold"`
	Summary     string `json:"summary,omitempty" doc:"Warm transfers: what the agent tells the human before bridging." jsonschema:"maxLength=2000"`
}

// Note adds a note to the actor's live conversation with id.
func (s *Service) Note(ctx context.Context, act app.Actor, id string, n NoteCreate) (ConversationCommand, error) {
	return s.steer(ctx, act, id, store.CommandNote, runtime.CommandParams{Text: n.Text, VisibleToAgent: n.VisibleToAgent})
}

// Say makes the agent of the actor's live conversation with id say a text.
func (s *Service) Say(ctx context.Context, act app.Actor, id string, b SayCreate) (ConversationCommand, error) {
	return s.steer(ctx, act, id, store.CommandSay, runtime.CommandParams{Text: b.Text, Interrupt: b.Interrupt})
}

// Transfer transfers the actor's live call with id to a number or SIP address.
func (s *Service) Transfer(ctx context.Context, act app.Actor, id string, t TransferCreate) (ConversationCommand, error) {
	return s.steer(ctx, act, id, store.CommandTransfer, runtime.CommandParams{Destination: t.Destination, Mode: t.Mode, Summary: t.Summary})
}

// End ends the actor's live call or chat with id: a call still dialling is cancelled, a call
// in progress hung up, a chat closed.
func (s *Service) End(ctx context.Context, act app.Actor, id string) (ConversationCommand, error) {
	return s.steer(ctx, act, id, store.CommandEnd, runtime.CommandParams{})
}

// sipURI is a SIP or SIPS URI a call can be transferred to (RFC 3261 §19.1).
var sipURI = regexp.MustCompile(`^sips?:[^\s@]+@[^\s@]+$|^sips?:[^\s@]+$`)

// steer records a command for a live conversation (and its audit event) and hands it to the
// node that runs it; the answer is the command, which GetCommand follows to done or failed.
func (s *Service) steer(ctx context.Context, act app.Actor, id, kind string, p runtime.CommandParams) (ConversationCommand, error) {
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return ConversationCommand{}, err
	}
	if err := app.WritableProject(ctx, s.Store.Queries, act, conv.ProjectID); err != nil {
		return ConversationCommand{}, err
	}
	switch {
	case conv.Ended():
		return ConversationCommand{}, fault.E(fault.CodeConversationEnded, "The conversation has ended (%s).", conv.EndReason)
	case kind == store.CommandTransfer && textual(conv):
		return ConversationCommand{}, fault.E(fault.CodeNotTransferable, "A %s conversation cannot be transferred: there is no call to hand over.", conv.Channel)
	case kind != store.CommandEnd && conv.Status != store.ConvInProgress:
		return ConversationCommand{}, fault.E(fault.CodeConversationNotLive, "The call is %s; it can be steered once it is answered.", conv.Status)
	}
	if kind == store.CommandSay && conv.Channel == store.ChannelWhatsApp && s.MessagingSay != nil { // issue 19
		if err := s.MessagingSay(ctx, conv, p.Text); err != nil {
			return ConversationCommand{}, err
		}
	}
	if kind == store.CommandTransfer {
		if !store.ValidE164(p.Destination) && !sipURI.MatchString(p.Destination) {
			const detail = "destination must be a phone number in E.164 form (+14155550100) or a SIP URI (sip:desk@pbx.example.com)."
			e := fault.E(fault.CodeValidationFailed, detail)
			e.Errors = []fault.FieldError{{Pointer: "/destination", Code: "invalid_format", Detail: detail}}
			return ConversationCommand{}, e
		}
		if p.Mode == "" {
			p.Mode = string(session.TransferCold)
		}
		if s.TransferCheck != nil && conv.Mode == store.ModeLive {
			if err := s.TransferCheck(ctx, conv, p.Destination); err != nil {
				return ConversationCommand{}, err
			}
		}
	}
	if s.Runtime == nil {
		return ConversationCommand{}, fault.E(fault.CodeConversationNotLive, "This node cannot reach the conversation.")
	}
	params, err := json.Marshal(p)
	if err != nil {
		return ConversationCommand{}, err
	}
	cmd, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (store.Command, error) {
		cmd, err := tx.Conversations().AddCommand(ctx, act.Scope, conv.ID, kind, params)
		if err != nil {
			return store.Command{}, app.NotFound(err, fault.CodeConversationNotFound, "conversation", id)
		}
		return cmd, au.Record("conversation."+kind, "conversation", string(conv.ID), conv.ProjectID, map[string]any{"command_id": cmd.ID})
	})
	if err != nil {
		return ConversationCommand{}, err
	}
	sctx := context.WithoutCancel(ctx)
	err = s.Runtime.Command(ctx, cmd)
	switch {
	case err == nil:
	case errors.Is(err, runtime.ErrNotLive) && kind == store.CommandEnd:
		// No node runs it any more: end it in the store.
		if err := s.Runtime.End(sctx, conv.ID, session.EndAPI, false); err != nil {
			return ConversationCommand{}, err
		}
		if _, err := s.Store.FinishCommand(sctx, cmd.ID, store.CommandDone, "", s.now()); err != nil {
			return ConversationCommand{}, err
		}
	default:
		_, _ = s.Store.FinishCommand(sctx, cmd.ID, store.CommandFailed, "the node running the conversation did not take the command", s.now())
		if cur, gerr := s.Store.Conversations().Get(sctx, act.Scope, conv.ID); gerr == nil && cur.Ended() {
			return ConversationCommand{}, fault.E(fault.CodeConversationEnded, "The conversation has ended (%s).", cur.EndReason)
		}
		return ConversationCommand{}, RuntimeFault(err, conv.Channel == store.ChannelPhone)
	}
	if cur, err := s.Store.Conversations().Command(ctx, act.Scope, conv.ID, cmd.ID); err == nil {
		cmd = cur
	}
	return viewCommand(cmd), nil
}

// Command returns the command cmdID of the actor's conversation with id (404
// command_not_found when the conversation has no such command).
func (s *Service) Command(ctx context.Context, act app.Actor, id, cmdID string) (ConversationCommand, error) {
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return ConversationCommand{}, err
	}
	cmd, err := s.Store.Conversations().Command(ctx, act.Scope, conv.ID, canonical[store.CommandID](cmdID))
	if errors.Is(err, store.ErrNotFound) {
		return ConversationCommand{}, fault.E(fault.CodeCommandNotFound, "Conversation %s has no command %s.", conv.ID, app.QuoteID(cmdID))
	}
	if err != nil {
		return ConversationCommand{}, err
	}
	return viewCommand(cmd), nil
}

// Listener is the Listener object: what a page needs to listen to (or take over) a call.
type Listener struct {
	Object         string   `json:"object" jsonschema:"enum=listener"`
	ConversationID string   `json:"conversation_id" jsonschema:"format=uuid"`
	Mode           string   `json:"mode" jsonschema:"enum=listen,enum=takeover"`
	URL            string   `json:"url" jsonschema:"format=uri"`
	Token          string   `json:"token"`
	ExpiresAt      app.Time `json:"expires_at"`
}

// SchemaDoc describes the object in the document.
func (Listener) SchemaDoc() string {
	return "A single-use token (15 minutes) with which a page listens to, or takes over, a live voice call."
}

// ListenCreate is the body of listenConversation (it may be empty).
type ListenCreate struct {
	Mode string `json:"mode,omitempty" jsonschema:"enum=listen,enum=takeover,default=listen"`
}

// Listen issues a token with which a page listens to (mode listen) or takes over (takeover)
// the actor's live voice call with id. A chat or a test call has no audio (409 no_audio).
func (s *Service) Listen(ctx context.Context, act app.Actor, id string, b ListenCreate) (Listener, error) {
	if b.Mode == "" {
		b.Mode = "listen"
	}
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return Listener{}, err
	}
	switch {
	case textual(conv) || conv.Mode == store.ModeTest:
		return Listener{}, fault.E(fault.CodeNoAudio, "This conversation has no audio to listen to (a %s %s conversation).", conv.Mode, conv.Channel)
	case conv.Ended():
		return Listener{}, fault.E(fault.CodeConversationEnded, "The conversation has ended (%s).", conv.EndReason)
	case conv.Status != store.ConvInProgress:
		return Listener{}, fault.E(fault.CodeConversationNotLive, "The call is %s; listen once it is answered.", conv.Status)
	case s.Runtime == nil:
		return Listener{}, RuntimeFault(runtime.ErrNoMedia, false)
	}
	li, err := s.Runtime.Listen(ctx, conv.ID, b.Mode)
	if err != nil {
		return Listener{}, RuntimeFault(err, false)
	}
	return Listener{Object: "listener", ConversationID: string(conv.ID), Mode: li.Mode, URL: li.URL, Token: li.Token, ExpiresAt: app.T(li.ExpiresAt)}, nil
}

// RuntimeFault is the classified error of a runtime error (starting, steering or listening to
// a conversation); phone says the conversation is a phone call.
func RuntimeFault(err error, phone bool) error {
	var fe *fault.Error
	switch {
	case err == nil, errors.As(err, &fe), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, runtime.ErrNoMedia), errors.Is(err, runtime.ErrNoTrunk):
		if phone {
			return &fault.Error{Status: 501, Code: fault.CodePhoneUnavailable, Detail: "This deployment places no phone calls: no node runs the media role with a SIP trunk.", Cause: err}
		}
		return &fault.Error{Status: 501, Code: fault.CodeVoiceUnavailable, Detail: "This deployment runs no voice: no node runs the media role with browser calls.", Cause: err}
	case errors.Is(err, runtime.ErrUnreachable):
		return &fault.Error{Status: 502, Code: fault.CodeUpstreamUnreachable, Detail: "The call could not be placed: the service that carries it could not be reached. Retry shortly.", Cause: err, RetryAfter: 2 * time.Second}
	case errors.Is(err, runtime.ErrProvider):
		return &fault.Error{Status: 502, Code: fault.CodeProviderUnavailable, Detail: "The agent's language or speech provider is not available. Retry shortly.", Cause: err, RetryAfter: 2 * time.Second}
	case errors.Is(err, runtime.ErrTooMany):
		e := fault.E(fault.CodeTooManyCalls, "The organization has as many calls going as it may; retry when one has ended.")
		e.RetryAfter = 5 * time.Second
		return e
	case errors.Is(err, runtime.ErrBusy):
		return fault.E(fault.CodeAgentBusy, "The agent is still answering the last message; send the next one once the answer has come.")
	case errors.Is(err, runtime.ErrEnded):
		return fault.E(fault.CodeConversationEnded, "The conversation has ended.")
	case errors.Is(err, runtime.ErrLengthReached):
		return fault.E(fault.CodeChatLengthReached, "The chat has reached its length; start another chat.")
	case errors.Is(err, runtime.ErrNotLive), errors.Is(err, runtime.ErrNotAnswered):
		return fault.E(fault.CodeConversationNotLive, "The conversation is not live: the call is not answered yet, or it has just ended.")
	case errors.Is(err, runtime.ErrUnsupported):
		return fault.E(fault.CodeNoAudio, "The conversation has no audio to listen to.")
	}
	return err
}
