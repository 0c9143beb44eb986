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
	"github.com/parley-voice/parley/sip"
)

// SIPRouter answers the inbound phone calls of a media node's SIP server: the agent assigned
// to the called number takes the call, in a live conversation run on this node, when it is
// published, inbound and takes the phone channel, its project is not frozen, and its
// organization is not frozen, has credit and has fewer than maxCalls calls going (0: no limit).
// Every refusal is a *sip.Refusal with its status (404 unknown number, 480 no agent or frozen
// project, 403 frozen or out of credit, 503 over the limit).
func (rt *Runtime) SIPRouter(maxCalls int) sip.Router {
	return sip.RouterFunc(func(ctx context.Context, in sip.InboundCall) (sip.Plan, error) {
		return rt.routeInbound(ctx, in, maxCalls)
	})
}

func (rt *Runtime) routeInbound(ctx context.Context, in sip.InboundCall, maxCalls int) (sip.Plan, error) {
	n, err := rt.store.FindPhoneNumber(ctx, in.To)
	if errors.Is(err, store.ErrNotFound) {
		return sip.Plan{}, sip.RefuseUnknownNumber(in.To)
	}
	if err != nil {
		return sip.Plan{}, err
	}
	if n.AgentID == "" {
		return sip.Plan{}, sip.RefuseNoAgent()
	}
	ag, err := rt.store.SystemAgents().Get(ctx, n.AgentID) // SIP routing: the number names the agent, in any organization
	if errors.Is(err, store.ErrNotFound) || err == nil && (ag.Status != store.AgentPublished || !slices.Contains(ag.Channels, store.ChannelPhone)) {
		return sip.Plan{}, sip.RefuseNoAgent()
	}
	if err != nil {
		return sip.Plan{}, err
	}
	if ag.Direction != "inbound" {
		return sip.Plan{}, sip.RefuseAgentOutboundOnly()
	}
	pr, err := rt.store.GetProject(ctx, ag.ProjectID)
	if err != nil {
		return sip.Plan{}, err
	}
	if pr.Frozen {
		return sip.Plan{}, sip.RefuseProjectFrozen()
	}
	org, err := rt.store.GetOrg(ctx, ag.OrgID)
	if err != nil {
		return sip.Plan{}, err
	}
	switch {
	case org.Frozen:
		return sip.Plan{}, sip.RefuseOrgFrozen()
	case org.CreditMicros <= 0:
		return sip.Plan{}, sip.RefuseOrgNoCredit()
	}
	def, err := LoadDefinition(ctx, rt.store.Queries, ag, 0)
	if err != nil {
		return sip.Plan{}, err
	}
	if ps := def.CheckVariables(map[string]any{}); len(ps) > 0 {
		// An agent whose prompts need values cannot answer a caller who brings none.
		rt.log.Warn("inbound call: the agent needs variables a caller cannot give", "agent", ag.ID, "problem", ps[0].Detail)
		return sip.Plan{}, sip.RefuseNoAgent()
	}
	c := store.Conversation{ID: store.NewConversationID(), OrgID: ag.OrgID, ProjectID: ag.ProjectID, AgentID: ag.ID,
		Channel: store.ChannelPhone, Direction: "inbound", Mode: store.ModeLive, Status: store.ConvPending, Language: def.Agent.Language,
		FromNumber: in.From, ToNumber: n.Number, PhoneNumberID: n.ID}
	if err := rt.AcquireCallSlot(ctx, org.ID, c.ID, maxCalls); errors.Is(err, ErrTooMany) {
		return sip.Plan{}, sip.RefuseOverLimit(5 * time.Second)
	} else if err != nil {
		return sip.Plan{}, err
	}
	if c, err = rt.store.CreateConversation(ctx, c); err != nil {
		rt.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, c.ID)
		return sip.Plan{}, err
	}
	l, err := rt.register(ctx, c)
	if err != nil {
		rt.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, c.ID)
		_ = rt.storeEnd(context.WithoutCancel(ctx), c, session.EndFailed, session.Cost{}, nil, "")
		return sip.Plan{}, fmt.Errorf("runtime: take the inbound call: %w", err)
	}
	var rec atomic.Pointer[media.Recorder]
	return sip.Plan{
		ID: string(c.ID),
		Conversation: func(ctx context.Context, call *sip.Call) (*session.Conversation, error) {
			var sink session.Sink = l.p
			if rt.o.WebCalls != nil {
				sink = rt.o.WebCalls.Sink(string(c.ID), l.p)
			}
			sess, err := rt.build(ctx, c, true, sink)
			if err != nil {
				return nil, err
			}
			l.setEngine(sess, false)
			if r := rt.startRecording(l, sess); r != nil {
				rec.Store(r)
			}
			return sess, nil
		},
		OnEvent: func(ev sip.Event) {
			switch ev.Kind {
			case sip.EventRinging:
				l.p.status(store.ConvRinging)
			case sip.EventInProgress:
				l.p.status(store.ConvInProgress)
				if sess := l.engine(); sess != nil && rt.o.WebCalls != nil {
					rt.listenable(l, sess)
				}
			case sip.EventEnded:
				if l.engine() == nil { // refused or cancelled before the conversation started
					reason := ev.EndReason
					if reason == "" {
						reason = session.EndFailed
					}
					l.p.end(reason, session.Cost{})
				}
			}
		},
		Tap: recordingTap(&rec),
	}, nil
}
