package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// TrunkLookup finds a SIP trunk by name; "" names the default trunk.
type TrunkLookup func(name string) (sip.Trunk, error)

// SIPDialer is the Dialer of a media node: it places calls through the node's SIP server and
// the named trunk. The server starts the conversation once the callee answers, hangs up when
// the conversation ends, and carries its transfers (REFER).
type SIPDialer struct {
	Server *sip.Server
	Trunks TrunkLookup
}

var _ Dialer = (*SIPDialer)(nil)

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
func (d *SIPDialer) Dial(ctx context.Context, r DialRequest) error {
	trunk, err := d.Trunks(r.Trunk)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoTrunk, err)
	}
	_, err = d.Server.Dial(ctx, sip.DialRequest{
		ID: r.ID, From: r.From, To: r.To, Trunk: trunk, Tap: r.Tap,
		Conversation: func(ctx context.Context, c *sip.Call) (*session.Conversation, error) { return r.Conversation(ctx, c) },
		OnEvent: func(ev sip.Event) {
			if ev.Kind == sip.EventRinging && r.OnRinging != nil {
				r.OnRinging()
			}
		},
	})
	var de *sip.DialError
	if errors.As(err, &de) {
		return &DialFailure{Reason: de.Outcome.EndReason(), Unreachable: de.Detail == sip.DetailUpstreamUnreachable, Detail: de.Error()}
	}
	return err
}
