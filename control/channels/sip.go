package channels

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// Router answers the inbound calls of a SIP server with the runtime: the runtime decides
// (TakeInbound) and its refusals become SIP answers: 404 for an unknown number, 480 when no
// agent answers it (or only an outbound one, or its project is frozen), 403 for a frozen or
// spent organization, 503 with Retry-After over the call limit.
func Router(rt *runtime.Runtime, maxCalls int) sip.Router {
	return sip.RouterFunc(func(ctx context.Context, in sip.InboundCall) (sip.Plan, error) {
		p, err := rt.TakeInbound(ctx, runtime.InboundCall{To: in.To, From: in.From}, maxCalls)
		var rf *runtime.Refusal
		if errors.As(err, &rf) {
			return sip.Plan{}, refusal(rf)
		}
		if err != nil {
			return sip.Plan{}, err
		}
		allow, err := orgAllow(p.TransferAllow)
		if err != nil {
			return sip.Plan{}, err
		}
		return sip.Plan{
			ID:           p.ID,
			Transfer:     sip.TransferOptions{Allow: allow},
			Conversation: func(ctx context.Context, _ *sip.Call) (*session.Conversation, error) { return p.Conversation(ctx) },
			OnEvent: func(ev sip.Event) {
				switch ev.Kind {
				case sip.EventRinging:
					p.OnEvent(runtime.CallEvent{Kind: runtime.CallRinging})
				case sip.EventInProgress:
					p.OnEvent(runtime.CallEvent{Kind: runtime.CallInProgress})
				case sip.EventHangup: // issue 22 item 4: how the leg ended, before the conversation ends
					p.OnEvent(runtime.CallEvent{Kind: runtime.CallHangup, EndReason: ev.EndReason, Outcome: callOutcome(ev.End)})
				case sip.EventEnded:
					p.OnEvent(runtime.CallEvent{Kind: runtime.CallEnded, EndReason: ev.EndReason, Outcome: callOutcome(ev.End)})
				}
			},
			Tap: p.Tap,
		}, nil
	})
}

// callOutcome is what the conversation records of how its leg ended.
func callOutcome(d sip.EndDetail) store.CallOutcome {
	return store.CallOutcome{SIPStatus: d.SIPStatus, Q850Cause: d.Q850, Detail: d.Text}
}

// orgAllow parses an organization's transfer allow-list (issue 22 item 7; the store keeps it
// canonical, so an error means a damaged row).
func orgAllow(list []string) ([]netip.Prefix, error) {
	if len(list) == 0 {
		return nil, nil
	}
	allow, err := sip.ParsePrefixes(list)
	if err != nil {
		return nil, fmt.Errorf("channels: the organization's transfer allow-list: %w", err)
	}
	return allow, nil
}

// refusal is the SIP answer of a runtime refusal.
func refusal(r *runtime.Refusal) error {
	switch r.Reason {
	case runtime.RefuseUnknownNumber:
		return sip.RefuseUnknownNumber(r.Number)
	case runtime.RefuseAgentOutboundOnly:
		return sip.RefuseAgentOutboundOnly()
	case runtime.RefuseProjectFrozen:
		return sip.RefuseProjectFrozen()
	case runtime.RefuseOrgFrozen:
		return sip.RefuseOrgFrozen()
	case runtime.RefuseNoCredit:
		return sip.RefuseOrgNoCredit()
	case runtime.RefuseOverLimit:
		return sip.RefuseOverLimit(max(r.RetryAfter, time.Second))
	}
	return sip.RefuseNoAgent()
}

// TrunkLookup finds a SIP trunk by name; "" names the default trunk.
type TrunkLookup func(name string) (sip.Trunk, error)

// SIPDialer is the runtime's Dialer on a media node: it places calls through the node's SIP
// server and the named trunk. The server starts the conversation once the callee answers,
// hangs up when the conversation ends, and carries its transfers (REFER).
type SIPDialer struct {
	Server *sip.Server
	Trunks TrunkLookup
}

var _ runtime.Dialer = (*SIPDialer)(nil)

// HasTrunk implements Dialer.
func (d *SIPDialer) HasTrunk(name string) bool {
	if d.Server == nil || d.Trunks == nil {
		return false
	}
	_, err := d.Trunks(name)
	return err == nil
}

// Dial implements Dialer: a *sip.DialError becomes a *DialFailure with its end reason, and
// unreachable when the trunk never answered.
func (d *SIPDialer) Dial(ctx context.Context, r runtime.DialRequest) error {
	if d.Server == nil {
		return fmt.Errorf("%w: the SIP server is not up", runtime.ErrNoTrunk)
	}
	trunk, err := d.Trunks(r.Trunk)
	if err != nil {
		return fmt.Errorf("%w: %v", runtime.ErrNoTrunk, err)
	}
	var amd sip.AMDOptions
	if r.AMD != nil { // issue 15: a campaign's voicemail handling
		amd = sip.AMDOptions{Enabled: true, OnMachine: sip.AMDHangup}
		if r.AMD.LeaveMessage {
			amd.OnMachine, amd.Message = sip.AMDLeaveMessage, r.AMD.Message
		}
	}
	allow, err := orgAllow(r.TransferAllow)
	if err != nil {
		return err
	}
	_, err = d.Server.Dial(ctx, sip.DialRequest{
		ID: r.ID, From: r.From, To: r.To, Trunk: trunk, Tap: r.Tap, RingTimeout: r.RingTimeout, AMD: amd,
		Transfer: sip.TransferOptions{Allow: allow},
		// The conversation's id rides on the INVITE, so a carrier's (or a test peer's) log names
		// the attempt each call belongs to.
		Headers:      map[string]string{"X-Parley-Conversation-Id": r.ID},
		Conversation: func(ctx context.Context, c *sip.Call) (*session.Conversation, error) { return r.Conversation(ctx, c) },
		OnEvent: func(ev sip.Event) {
			if ev.Kind == sip.EventRinging && r.OnRinging != nil {
				r.OnRinging()
			}
			if ev.Kind == sip.EventHangup && r.OnHangup != nil { // issue 22 item 4
				r.OnHangup(callOutcome(ev.End))
			}
			if ev.Kind == sip.EventRedirect && r.OnRedirect != nil { // issue 21
				x := ev.Redirect
				r.OnRedirect(runtime.Redirect{Status: x.Status, From: x.From, To: x.To, State: x.State, Reason: x.Reason})
			}
		},
	})
	var de *sip.DialError
	if errors.As(err, &de) {
		return &runtime.DialFailure{Reason: de.Outcome.EndReason(), Unreachable: de.Detail == sip.DetailUpstreamUnreachable, Detail: de.Error(),
			Outcome: store.CallOutcome{SIPStatus: de.Status, Q850Cause: de.Q850, Detail: de.Summary()}}
	}
	return err
}
