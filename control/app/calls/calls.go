// Package calls holds the rules of starting conversations: phone calls placed now or later
// (scheduled calls, dialled by the workers), browser calls, simulated inbound test calls, and
// the start rules every start shares, chats included (published agent, direction, channel,
// number to call from, do-not-call, call window, credit, concurrent-call and daily limits,
// frozen project). HTTP, the workers and the admin CLI call the same functions.
//
// It must never import net/http or the runtime: calls are placed through the small interfaces
// of media.go.
package calls

import (
	"context"
	"log/slog"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// Service starts calls.
type Service struct {
	Store *store.Store
	Rules Rules
	Media Media
	// MaxCalls is how many voice calls (phone and browser) an organization may have going at
	// once (0: no limit); WebCallsPerDay how many browser calls it may start a day (0: no limit).
	MaxCalls       int
	WebCallsPerDay int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log takes what the workers cannot answer to anyone (nil: discarded).
	Log *slog.Logger
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// CallCreate is the body of a call to place now.
type CallCreate struct {
	AgentID string `json:"agent_id" jsonschema:"format=uuid"`
	StartOptions
	ToNumber      string      `json:"to_number" doc:"A phone number in E.164 form: a plus sign and 7 to 15 digits." jsonschema:"pattern=^\\+[1-9][0-9]{6\\,14}$"`
	CallWindow    *CallWindow `json:"call_window,omitempty" jsonschema:"nullable"`
	FromNumber    *string     `json:"from_number,omitempty" doc:"One of the agent's numbers; never with phone_number_id." jsonschema:"nullable"`
	PhoneNumberID *string     `json:"phone_number_id,omitempty" jsonschema:"format=uuid,nullable"`
}

// SchemaDoc describes the body in the document.
func (CallCreate) SchemaDoc() string { return "A call to place now." }

// Call places an outbound phone call now and returns its conversation, pending until the phone
// is answered. The answer of an idempotent request is kept once the call is placed, not with
// the conversation's row: a call that cannot be placed keeps no answer.
func (s *Service) Call(ctx context.Context, act app.Actor, body CallCreate) (conversations.Conversation, error) {
	mode := act.Mode()
	st, err := s.Rules.CheckCall(ctx, s.Store.Queries, act, mode, body, s.now(), true)
	if err != nil {
		return conversations.Conversation{}, err
	}
	conv := NewConversation(act, mode, st, store.ChannelPhone, "outbound", store.ConvPending)
	conv.ToNumber = body.ToNumber
	audit := map[string]any{"agent_id": conv.AgentID, "channel": conv.Channel, "direction": conv.Direction, "to_number": conv.ToNumber}
	return s.startCall(ctx, act, conv, Placement{ConversationID: conv.ID, Trunk: st.From.Trunk}, "call.created", audit)
}

// startCall stores a voice conversation, takes a call slot and has a media node run it. When it
// cannot be placed the conversation ends as failed and the slot is given back.
func (s *Service) startCall(ctx context.Context, act app.Actor, conv store.Conversation, p Placement, action string, data map[string]any) (conversations.Conversation, error) {
	if err := s.Media.AcquireCallSlot(ctx, conv.OrgID, conv.ID, s.MaxCalls); err != nil {
		return conversations.Conversation{}, err
	}
	created, err := StoreConversation(ctx, s.Store, act, conv, action, data)
	if err != nil {
		s.Media.ReleaseCallSlot(context.WithoutCancel(ctx), conv.OrgID, conv.ID)
		return conversations.Conversation{}, err
	}
	conv = created
	if err := s.Media.Place(ctx, conv.Mode, p); err != nil {
		s.Media.Abandon(ctx, conv.OrgID, conv.ID)
		return conversations.Conversation{}, err
	}
	return conversations.View(conv), nil
}

// StoreConversation records a started conversation and its audit event in one transaction,
// without the transport's commit hook (the caller keeps its answer once the conversation has
// really started).
func StoreConversation(ctx context.Context, st *store.Store, act app.Actor, conv store.Conversation, action string, data map[string]any) (store.Conversation, error) {
	return app.Change(app.WithCommitHook(ctx, nil), st, act, func(tx *store.Tx, au *app.Audit) (store.Conversation, error) {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return store.Conversation{}, err
		}
		if created.Status == store.ConvInProgress { // issue 14: a chat starts in progress
			if _, err := events.Emit(ctx, tx, events.Of(events.ConversationStarted, created), events.ConversationOf(created)); err != nil {
				return store.Conversation{}, err
			}
		}
		return created, au.Record(action, "conversation", string(created.ID), created.ProjectID, data)
	})
}

// TestInboundCallCreate is the body of a simulated inbound call.
type TestInboundCallCreate struct {
	AgentID *string `json:"agent_id,omitempty" doc:"The inbound agent; or name the number called instead." jsonschema:"format=uuid"`
	StartOptions
	ToNumber   *string  `json:"to_number,omitempty" doc:"A number of the project, answered by its agent." jsonschema:"pattern=^\\+[1-9][0-9]{6\\,14}$"`
	FromNumber *string  `json:"from_number,omitempty" doc:"The caller's number; +15005550006 when omitted." jsonschema:"pattern=^\\+[1-9][0-9]{6\\,14}$"`
	Lines      []string `json:"lines" doc:"What the caller says, one line per turn; the caller hangs up after the agent answers the last." jsonschema:"minItems=1,maxItems=50,minLength=1,maxLength=2000"`
}

// SchemaDoc describes the body in the document.
func (TestInboundCallCreate) SchemaDoc() string {
	return "A simulated inbound call: agent_id or to_number (one of them) and the caller's lines."
}

// DefaultTestCaller is the caller's number of a test inbound call that names none.
const DefaultTestCaller = "+15005550006"

// TestInbound simulates an inbound phone call to an inbound agent, with no carrier. It is
// always a test-mode conversation, whatever the key, and costs nothing.
func (s *Service) TestInbound(ctx context.Context, act app.Actor, body TestInboundCallCreate) (conversations.Conversation, error) {
	q := s.Store.Queries
	var number *store.PhoneNumber
	agentID := ""
	switch {
	case (body.AgentID == nil) == (body.ToNumber == nil):
		return conversations.Conversation{}, app.Invalid(jsoncheck.Problem{Pointer: "", Code: "required", Detail: "Name the agent (agent_id) or the number called (to_number), one of them."})
	case body.ToNumber != nil:
		n, err := q.Numbers().ByNumber(ctx, act.Scope, *body.ToNumber)
		if err != nil {
			return conversations.Conversation{}, app.NotFound(err, fault.CodePhoneNumberNotFound, "phone number", *body.ToNumber)
		}
		if n.AgentID == "" {
			return conversations.Conversation{}, fault.E(fault.CodeAgentNotFound, "Number %s has no agent to answer it.", n.Number)
		}
		number, agentID = &n, string(n.AgentID)
	default:
		agentID = *body.AgentID
	}
	st, err := s.Rules.Check(ctx, q, act, store.ModeTest, agentID, body.StartOptions, Need{Direction: "inbound", Channel: agentdef.ChannelPhone})
	if err != nil {
		return conversations.Conversation{}, err
	}
	conv := NewConversation(act, store.ModeTest, st, store.ChannelPhone, "inbound", store.ConvPending)
	conv.FromNumber = DefaultTestCaller
	if body.FromNumber != nil {
		conv.FromNumber = *body.FromNumber
	}
	if number == nil {
		if nums, err := q.AgentPhoneNumbers(ctx, st.Agent.ID); err == nil && len(nums) > 0 {
			number = &nums[0]
		}
	}
	if number != nil {
		conv.ToNumber, conv.PhoneNumberID = number.Number, number.ID
	}
	audit := map[string]any{"agent_id": conv.AgentID, "channel": conv.Channel, "direction": conv.Direction, "to_number": conv.ToNumber}
	return s.startCall(ctx, act, conv, Placement{ConversationID: conv.ID, Lines: body.Lines}, "test_call.created", audit)
}
