package sip_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// detailRouter answers every call with the engine and keeps, per SIP Call-ID, the end detail
// of the call's EventHangup and whether it came before the conversation's end reached its sink.
type detailRouter struct {
	e *engine

	mu      sync.Mutex
	ringFor time.Duration
	hangups map[string]sip.EndDetail
	ended   map[string]sip.EndDetail
}

func (r *detailRouter) Inbound(ctx context.Context, in sip.InboundCall) (sip.Plan, error) {
	id := in.CallID
	r.mu.Lock()
	ringFor := r.ringFor
	r.mu.Unlock()
	return sip.Plan{RingFor: ringFor, Conversation: r.e.factory(), OnEvent: func(ev sip.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch ev.Kind {
		case sip.EventHangup:
			if _, ok := r.ended[id]; ok {
				panic("hangup after ended")
			}
			r.hangups[id] = ev.End
		case sip.EventEnded:
			r.ended[id] = ev.End
		}
	}}, nil
}

func (r *detailRouter) detail(id string) (hangup, ended sip.EndDetail, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hangup, ok1 := r.hangups[id]
	ended, ok2 := r.ended[id]
	return hangup, ended, ok1 && ok2
}

// TestInboundEndDetail (issue 22 item 4): every way an inbound call ends says how, before
// the conversation is ended (EventHangup) and on EventEnded: the caller's BYE and CANCEL with
// their RFC 3326 Reason (SIP status, Q.850 cause), a media timeout, no ACK, and the node
// shutting down.
func TestInboundEndDetail(t *testing.T) {
	t.Parallel()
	r := &detailRouter{e: newEngine(t, engineOptions{noGreeting: true}), hangups: map[string]sip.EndDetail{}, ended: map[string]sip.EndDetail{}}
	srv := newServer(t, sip.Options{Router: r, MediaTimeout: 700 * time.Millisecond, AckTimeout: 400 * time.Millisecond})
	rtp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rtp.Close()
	rtpAddr := rtp.LocalAddr().(*net.UDPAddr).AddrPort()
	answered := func(u *siptest.RawUA) {
		t.Helper()
		if !u.WaitStatus(200, 200, 5*time.Second) {
			t.Fatalf("not answered: %v", u)
		}
		u.Ack()
		waitFor(t, 5*time.Second, "the call in progress", func() bool {
			for _, c := range srv.ActiveCalls() {
				if c.State() == sip.CallInProgress {
					return true
				}
			}
			return false
		})
	}
	check := func(name string, u *siptest.RawUA, want sip.EndDetail) {
		t.Helper()
		var hangup, ended sip.EndDetail
		waitFor(t, 5*time.Second, name+": the call's end", func() bool {
			var ok bool
			hangup, ended, ok = r.detail(u.CallID())
			return ok
		})
		if hangup != want || ended != want {
			t.Errorf("%s: hangup %+v, ended %+v; want %+v", name, hangup, ended, want)
		}
	}

	u := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtpAddr)
	answered(u)
	u.ByeWith(`Reason: Q.850;cause=16;text="Normal call clearing"`)
	check("BYE", u, sip.EndDetail{Q850: 16, Text: "the caller hung up (BYE, Q.850 cause 16 normal call clearing)"})
	u.Close()

	u = siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtpAddr)
	answered(u)
	u.ByeWith(`Reason: SIP;cause=200;text="Call completed elsewhere", Q.850;cause=26`)
	check("BYE, SIP and Q.850 reasons", u, sip.EndDetail{SIPStatus: 200, Q850: 26, Text: "the caller hung up (BYE, SIP 200 Call completed elsewhere, Q.850 cause 26)"})
	u.Close()

	r.mu.Lock()
	r.ringFor = 3 * time.Second
	r.mu.Unlock()
	u = siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtpAddr)
	if !u.WaitStatus(180, 180, 5*time.Second) {
		t.Fatalf("not ringing: %v", u)
	}
	u.CancelWith(`Reason: Q.850;cause=31`)
	if !u.WaitStatus(487, 487, 5*time.Second) {
		t.Fatalf("CANCEL: %v", u)
	}
	check("CANCEL", u, sip.EndDetail{Q850: 31, Text: "the caller hung up (CANCEL before the answer, Q.850 cause 31 normal, unspecified)"})
	u.Close()
	r.mu.Lock()
	r.ringFor = 0
	r.mu.Unlock()

	// No RTP from the caller after the answer: the media timeout.
	u = siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtpAddr)
	answered(u)
	check("media timeout", u, sip.EndDetail{Text: "no audio from the caller (media timeout)"})
	u.Close()

	// A 200 never acknowledged.
	u = siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtpAddr)
	if !u.WaitStatus(200, 200, 5*time.Second) {
		t.Fatalf("not answered: %v", u)
	}
	check("no ACK", u, sip.EndDetail{Text: "the caller never acknowledged the answer (no ACK)"})
	u.Close()

	// The node shutting down with a call up.
	srv2 := newServer(t, sip.Options{Router: r})
	u = siptest.NewRawUA(t, srv2.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtpAddr)
	if !u.WaitStatus(200, 200, 5*time.Second) {
		t.Fatalf("not answered: %v", u)
	}
	u.Ack()
	waitFor(t, 5*time.Second, "the call in progress", func() bool {
		cs := srv2.ActiveCalls()
		return len(cs) == 1 && cs[0].State() == sip.CallInProgress
	})
	dctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	srv2.Drain(dctx) // the drain deadline passes with the call up: it is ended shutdown
	cancel()
	check("shutdown", u, sip.EndDetail{Text: "the node shut down"})
	u.Close()
}
