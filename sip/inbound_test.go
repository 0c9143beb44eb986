package sip_test

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestInboundCall: 100, 180, 200 with an SDP answer; the agent's first message (the fake TTS
// tone) reaches the caller; the caller's audio reaches the recognizer; the caller's BYE ends
// the conversation as caller_hung_up.
func TestInboundCall(t *testing.T) {
	for _, tp := range []string{"udp", "tcp"} {
		t.Run(tp, func(t *testing.T) {
			t.Parallel()
			eng := newEngine(t, engineOptions{})
			rt := newRouter()
			rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
			srv := newServer(t, sip.Options{Router: rt})
			ph := siptest.NewPhone(t, siptest.PhoneOptions{Transport: tp})
			ctx := ctxTimeout(t, 30*time.Second)
			c, err := ph.Call(ctx, target(srv, sip.Transport(tp), "+14155550100"), siptest.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status() != 200 {
				t.Fatalf("status %d", c.Status())
			}
			c.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
			waitFor(t, 10*time.Second, "the agent's tone at the caller", func() bool {
				return toneLevel(c.Heard(), 440) > -30
			})
			waitFor(t, 10*time.Second, "the caller's speech at the recognizer", func() bool { return eng.utterances() > 0 })
			calls := srv.ActiveCalls()
			if len(calls) != 1 {
				t.Fatalf("%d active calls", len(calls))
			}
			conv := calls[0].Conversation()
			waitFor(t, 15*time.Second, "a caller turn in the transcript", func() bool {
				for _, l := range conv.Transcript() {
					if l.Role == session.RoleUser {
						return true
					}
				}
				return false
			})
			if err := c.Bye(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the ended event", func() bool {
				ev, ok := rt.lastEnded()
				return ok && ev.EndReason == session.EndCallerHungUp
			})
			kinds := rt.kinds()
			if want := []sip.EventKind{sip.EventRinging, sip.EventInProgress, sip.EventHangup, sip.EventEnded}; !slices.Equal(kinds, want) {
				t.Errorf("events %v, want %v", kinds, want)
			}
			ev, _ := rt.lastEnded()
			if ev.Stats.PacketsReceived == 0 || ev.Stats.PacketsSent == 0 || ev.Stats.Codec != "PCMU" {
				t.Errorf("stats %+v", ev.Stats)
			}
			if sdp := c.RemoteSDP(); !strings.Contains(sdp, "a=rtpmap:0 PCMU/8000") || !strings.Contains(sdp, "telephone-event/8000") {
				t.Errorf("answer SDP:\n%s", sdp)
			}
			waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
		})
	}
}

// TestInboundRefusals: every refusal carries its status, an RFC 3326 Reason header, and for 503
// a Retry-After.
func TestInboundRefusals(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	rt.refuse["+14155550101"] = sip.RefuseNoAgent()
	rt.refuse["+14155550102"] = sip.RefuseProjectFrozen()
	rt.refuse["+14155550103"] = sip.RefuseOrgNoCredit()
	rt.refuse["+14155550104"] = sip.RefuseOrgFrozen()
	rt.refuse["+14155550105"] = sip.RefuseOverLimit(7 * time.Second)
	srv := newServer(t, sip.Options{Router: rt, Codecs: []codec.Info{codec.PCMU}})
	cases := []struct {
		name       string
		number     string
		codecs     []codec.Info
		status     int
		reason     string
		retryAfter string
	}{
		{"unknown number", "+14155550199", nil, 404, "unknown number", ""},
		{"no published agent", "+14155550101", nil, 480, "no published agent", ""},
		{"project frozen", "+14155550102", nil, 480, "project frozen", ""},
		{"out of credit", "+14155550103", nil, 403, "out of credit", ""},
		{"organization frozen", "+14155550104", nil, 403, "organization frozen", ""},
		{"over the limit", "+14155550105", nil, 503, "concurrent-call limit", "7"},
		{"no common codec", "+14155550100", []codec.Info{codec.G722}, 488, "no common codec", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ph := siptest.NewPhone(t, siptest.PhoneOptions{})
			c, err := ph.Call(ctxTimeout(t, 10*time.Second), target(srv, sip.UDP, tc.number), siptest.CallOptions{Codecs: tc.codecs})
			if err == nil {
				t.Fatal("call was answered")
			}
			if c.Status() != tc.status {
				t.Fatalf("status %d, want %d", c.Status(), tc.status)
			}
			reason := c.Header("Reason")
			if !strings.Contains(reason, "SIP;cause="+itoa(tc.status)) || !strings.Contains(reason, tc.reason) {
				t.Errorf("Reason %q", reason)
			}
			if got := c.Header("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if tc.status == 488 && !strings.HasPrefix(c.Header("Warning"), "305 ") {
				t.Errorf("Warning %q", c.Header("Warning"))
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestInboundSourceNotAllowed: a source outside every trunk's networks gets 403.
func TestInboundSourceNotAllowed(t *testing.T) {
	t.Parallel()
	rt := newRouter()
	tr := loopbackTrunk("elsewhere")
	tr.AllowedSources = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	srv := newServer(t, sip.Options{Router: rt, Trunks: sip.NewStaticTrunks(tr)})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	c, err := ph.Call(ctxTimeout(t, 10*time.Second), target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err == nil || c.Status() != 403 || !strings.Contains(c.Header("Reason"), "source not allowed") {
		t.Fatalf("status %d, Reason %q, err %v", c.Status(), c.Header("Reason"), err)
	}
	if len(rt.calls) != 0 {
		t.Error("the router was asked about a call from a forbidden source")
	}
}

// TestInboundDigestAuth: a trunk with inbound authentication challenges with 401; the right
// credentials get the call answered, wrong ones 403.
func TestInboundDigestAuth(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	tr := loopbackTrunk("auth")
	tr.InboundAuth, tr.Username, tr.Password = true, "carrier", "s3cret"
	srv := newServer(t, sip.Options{Router: rt, Trunks: sip.NewStaticTrunks(tr)})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 20*time.Second)
	c, err := ph.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err == nil || c.Status() != 401 || !strings.Contains(c.Header("WWW-Authenticate"), `realm="parley"`) {
		t.Fatalf("without credentials: status %d %q", c.Status(), c.Header("WWW-Authenticate"))
	}
	c, err = ph.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{Username: "carrier", Password: "wrong"})
	if err == nil || c.Status() != 403 {
		t.Fatalf("wrong password: status %d", c.Status())
	}
	c, err = ph.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{Username: "carrier", Password: "s3cret"})
	if err != nil {
		t.Fatalf("right credentials: %v", err)
	}
	c.Bye(ctx)
}

// TestInboundLateOffer: an INVITE without SDP gets the offer in the 200 and the answer from
// the ACK; audio then flows both ways.
func TestInboundLateOffer(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	srv := newServer(t, sip.Options{Router: rt})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{Codecs: []codec.Info{codec.PCMA}})
	ctx := ctxTimeout(t, 20*time.Second)
	c, err := ph.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{LateOffer: true})
	if err != nil {
		t.Fatal(err)
	}
	offer := c.RemoteSDP()
	if !strings.Contains(offer, "RTP/AVP 0 8 9 111 110 101") {
		t.Errorf("Parley's offer in the 200:\n%s", offer)
	}
	waitFor(t, 10*time.Second, "the agent's tone", func() bool { return toneLevel(c.Heard(), 440) > -30 })
	if got := srv.ActiveCalls()[0].Negotiated().Audio.Name; got != "PCMA" {
		t.Errorf("codec %s after the ACK's answer", got)
	}
	c.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
	waitFor(t, 10*time.Second, "the caller at the recognizer", func() bool { return eng.utterances() > 0 })
	c.Bye(ctx)
}

// TestInboundCancel: CANCEL while ringing ends the INVITE with 487 and the call with
// caller_hung_up; the conversation was never started.
func TestInboundCancel(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory(), RingFor: 5 * time.Second})
	srv := newServer(t, sip.Options{Router: rt})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	c, err := ph.Call(ctxTimeout(t, 20*time.Second), target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{CancelAfter: 200 * time.Millisecond})
	if err == nil || c.Status() != 487 {
		t.Fatalf("status %d (%v), want 487", c.Status(), err)
	}
	waitFor(t, 5*time.Second, "the ended event", func() bool {
		ev, ok := rt.lastEnded()
		return ok && ev.EndReason == session.EndCallerHungUp
	})
	if kinds := rt.kinds(); slices.Contains(kinds, sip.EventInProgress) {
		t.Errorf("events %v", kinds)
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
}

// TestInboundCancelRace: CANCELs sent at every moment around the answer: each call ends either
// cancelled (487) or answered and then hung up; nothing leaks and the server keeps serving.
func TestInboundCancelRace(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory(), RingFor: 100 * time.Millisecond})
	srv := newServer(t, sip.Options{Router: rt})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 60*time.Second)
	answered, cancelled := 0, 0
	for i := 0; i < 12; i++ {
		delay := time.Duration(i*20) * time.Millisecond
		c, err := ph.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{CancelAfter: delay + time.Millisecond})
		switch {
		case err == nil:
			answered++
			c.Bye(ctx)
		case c.Status() == 487:
			cancelled++
		default:
			t.Fatalf("CANCEL after %v: status %d: %v", delay, c.Status(), err)
		}
	}
	t.Logf("answered %d, cancelled %d", answered, cancelled)
	waitFor(t, 10*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
	c, err := ph.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
	c.Bye(ctx)
}
