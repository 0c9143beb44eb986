package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
)

// InboundCall is a phone call arriving at one of the organizations' numbers, as the phone
// channel reports it.
type InboundCall struct {
	To, From string // E.164 when they are phone numbers
}

// RefusalReason says why the runtime does not take an inbound call.
type RefusalReason string

// Refusal reasons; the phone channel maps each to its protocol's answer (SIP: 404, 480, 403,
// 503 with Retry-After).
const (
	RefuseUnknownNumber     RefusalReason = "unknown_number"      // no organization has the number
	RefuseNoAgent           RefusalReason = "no_agent"            // no published agent answers it by phone
	RefuseAgentOutboundOnly RefusalReason = "agent_outbound_only" // its agent places calls, it does not answer them
	RefuseProjectFrozen     RefusalReason = "project_frozen"
	RefuseOrgFrozen         RefusalReason = "organization_frozen"
	RefuseNoCredit          RefusalReason = "no_credit" // nothing left to spend (balance less reservations)
	RefuseOverLimit         RefusalReason = "over_limit"
)

// Refusal is the runtime's refusal of an inbound call.
type Refusal struct {
	Reason     RefusalReason
	Number     string        // the number called
	RetryAfter time.Duration // over_limit: when to try again
}

func (r *Refusal) Error() string {
	return "runtime: inbound call to " + r.Number + " refused: " + string(r.Reason)
}

// CallEventKind names what the phone channel reports of a call it runs.
type CallEventKind int

// Call events.
const (
	CallRinging CallEventKind = iota + 1
	CallInProgress
	CallEnded
	// CallHangup says how the call's leg ended (Outcome), before its conversation is ended
	// (issue 22 item 4: the caller's BYE or CANCEL and its Reason, a media timeout, a
	// transport error, shutdown).
	CallHangup
)

// CallEvent is one status change of a call; EndReason is set on CallEnded, Outcome on
// CallHangup (and CallEnded).
type CallEvent struct {
	Kind      CallEventKind
	EndReason session.EndReason
	Outcome   store.CallOutcome
}

// InboundPlan is how the phone channel runs a call the runtime took.
type InboundPlan struct {
	ID string // the conversation's id
	// Conversation builds the conversation once the call is answered; the channel starts it
	// on the call and ends it when the call ends.
	Conversation func(ctx context.Context) (*session.Conversation, error)
	// OnEvent receives the call's status changes; it must not block.
	OnEvent func(CallEvent)
	// Tap receives the call's audio both ways (the recording); it runs on the media path.
	Tap func(fromCaller bool, f *media.Frame)
	// TransferAllow is the organization's transfer allow-list (issue 22 item 7): non-public
	// networks (CIDRs) the call's transfers may go to, on top of the node's and the trunk's.
	TransferAllow []string
}

// inboundRingingWait is how long an inbound call's ringing waits to be stored with its answer.
const inboundRingingWait = 250 * time.Millisecond

// TakeInbound decides whether the runtime takes an inbound call, and how: the agent assigned
// to the called number takes it, in a live conversation run on this node, when it is
// published, inbound and takes the phone channel, its project is not frozen, and its
// organization is not frozen, can still spend and has fewer than maxCalls calls going (0: no
// limit). A refusal is a *Refusal.
func (rt *Runtime) TakeInbound(ctx context.Context, in InboundCall, maxCalls int) (InboundPlan, error) {
	return rt.routeInbound(ctx, in, maxCalls)
}

func (rt *Runtime) routeInbound(ctx context.Context, in InboundCall, maxCalls int) (InboundPlan, error) {
	// issue 20: the number, its agent (of the number's organization, not deleted), the
	// project, the organization and its credit held, in one statement.
	route, err := rt.store.InboundRoute(ctx, in.To, rt.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return InboundPlan{}, &Refusal{Reason: RefuseUnknownNumber, Number: in.To}
	case errors.Is(err, store.ErrNoAgent):
		return InboundPlan{}, &Refusal{Reason: RefuseNoAgent, Number: in.To}
	case err != nil:
		return InboundPlan{}, err
	}
	n, ag, org := route.Number, route.Agent, route.Org
	if ag.Status != store.AgentPublished || !slices.Contains(ag.Channels, store.ChannelPhone) {
		return InboundPlan{}, &Refusal{Reason: RefuseNoAgent, Number: in.To}
	}
	if ag.Direction != "inbound" {
		return InboundPlan{}, &Refusal{Reason: RefuseAgentOutboundOnly, Number: in.To}
	}
	if route.Project.Frozen {
		return InboundPlan{}, &Refusal{Reason: RefuseProjectFrozen, Number: in.To}
	}
	if org.Frozen {
		return InboundPlan{}, &Refusal{Reason: RefuseOrgFrozen, Number: in.To}
	}
	// What can still be spent: the balance less what calls in progress have reserved (as
	// billing.CheckCanSpend reckons it).
	if org.CreditMicros-route.ReservedMicros <= 0 {
		return InboundPlan{}, &Refusal{Reason: RefuseNoCredit, Number: in.To}
	}
	def, err := LoadDefinition(ctx, rt.store.Queries, ag, 0)
	if err != nil {
		return InboundPlan{}, err
	}
	if ps := def.CheckVariables(map[string]any{}); len(ps) > 0 {
		// An agent whose prompts need values cannot answer a caller who brings none.
		rt.log.Warn("inbound call: the agent needs variables a caller cannot give", "agent", ag.ID, "problem", ps[0].Detail)
		return InboundPlan{}, &Refusal{Reason: RefuseNoAgent, Number: in.To}
	}
	c := store.Conversation{ID: store.NewConversationID(), OrgID: ag.OrgID, ProjectID: ag.ProjectID, AgentID: ag.ID,
		Channel: store.ChannelPhone, Direction: "inbound", Mode: store.ModeLive, Status: store.ConvPending, Language: def.Agent.Language,
		FromNumber: in.From, ToNumber: n.Number, PhoneNumberID: n.ID,
		OwnerNode: rt.o.NodeID} // this node runs it (register takes its ownership on the bus)
	if err := rt.AcquireCallSlot(ctx, org.ID, c.ID, maxCalls); errors.Is(err, ErrTooMany) {
		return InboundPlan{}, &Refusal{Reason: RefuseOverLimit, Number: in.To, RetryAfter: 5 * time.Second}
	} else if err != nil {
		return InboundPlan{}, err
	}
	if c, err = rt.store.CreateConversation(ctx, c); err != nil {
		rt.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, c.ID)
		return InboundPlan{}, err
	}
	l, err := rt.register(ctx, c)
	if err != nil {
		rt.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, c.ID)
		_ = rt.storeEnd(context.WithoutCancel(ctx), c, session.EndFailed, session.Cost{}, nil, "", store.CallOutcome{})
		return InboundPlan{}, fmt.Errorf("runtime: take the inbound call: %w", err)
	}
	l.p.setDefinition(def)
	var rec atomic.Pointer[media.Recorder]
	return InboundPlan{
		ID: string(c.ID),
		Conversation: func(ctx context.Context) (*session.Conversation, error) {
			var sink session.Sink = l.p
			if rt.o.WebCalls != nil {
				sink = rt.o.WebCalls.Sink(string(c.ID), l.p)
			}
			sess, err := rt.buildFrom(ctx, c, def, true, sink) // the definition routed, not read again
			if err != nil {
				return nil, err
			}
			l.setEngine(sess, false)
			if r := rt.startRecording(l, sess); r != nil {
				rec.Store(r)
			}
			return sess, nil
		},
		OnEvent: func(ev CallEvent) {
			switch ev.Kind {
			case CallRinging: // the 180 sent; the answer normally follows at once
				l.p.statusSoon(store.ConvRinging, inboundRingingWait)
			case CallInProgress:
				l.p.status(store.ConvInProgress)
				if sess := l.engine(); sess != nil && rt.o.WebCalls != nil {
					rt.listenable(l, sess)
				}
			case CallHangup:
				l.p.outcome(ev.Outcome)
			case CallEnded:
				l.p.outcome(ev.Outcome)
				if l.engine() == nil { // refused or cancelled before the conversation started
					reason := ev.EndReason
					if reason == "" {
						reason = session.EndFailed
					}
					l.p.end(reason, session.Cost{})
				}
			}
		},
		Tap:           recordingTap(&rec),
		TransferAllow: org.TransferAllow,
	}, nil
}
