package sip_test

import (
	"net"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestCancelRightBehindInvite is issue 22 item 6: a CANCEL sent right behind its INVITE (sipgo
// may look at it before the INVITE's transaction exists) matches the pending INVITE: it is
// answered 200, never 481, and the INVITE 487 (or, if the 200 won, the call goes on and ends
// normally). Every attempt reaches the router and is reported ended, cancelled ones as
// caller_hung_up, so the control plane keeps a record of each.
func TestCancelRightBehindInvite(t *testing.T) {
	e := newEngine(t, engineOptions{noGreeting: true})
	r := &lifeRouter{e: e, calls: map[string]*lifeCall{}}
	srv := newServer(t, sip.Options{Router: r, AckTimeout: 300 * time.Millisecond})
	rtp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rtp.Close()
	const n = 30
	cancelled, answered := 0, 0
	for i := 0; i < n; i++ {
		// Every third call rings for 30 ms, so the CANCEL that follows the INVITE at once
		// wins on a fast, quiet machine too; the others race the answer for real.
		r.mu.Lock()
		r.ringFor = 0
		if i%3 == 2 {
			r.ringFor = 30 * time.Millisecond
		}
		r.mu.Unlock()
		u := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
		u.Invite("+15550100", rtp.LocalAddr().(*net.UDPAddr).AddrPort())
		u.Cancel()
		if !u.WaitStatus(200, 699, 3*time.Second) && !u.WaitStatus(300, 699, 0) {
			t.Fatalf("attempt %d: no final answer: %v", i, u)
		}
		waitFor(t, 2*time.Second, "the CANCEL's answer", func() bool { return u.Final("CANCEL") != 0 })
		if st := u.Final("CANCEL"); st != 200 {
			t.Errorf("attempt %d: CANCEL answered %d (RFC 3261 §9.2: 200 when it matches the pending INVITE): %v", i, st, u)
		}
		sts := u.Statuses()
		final := sts[len(sts)-1]
		switch final {
		case 487:
			cancelled++
		case 200:
			answered++
			u.Ack()
			u.Bye()
		default:
			t.Errorf("attempt %d: INVITE answered %d: %v", i, final, u)
		}
		lc := r.call(u.CallID())
		deadline := time.Now().Add(3 * time.Second)
		for {
			r.mu.Lock()
			ends, slots := lc.ends, lc.slots
			r.mu.Unlock()
			if ends == 1 && slots == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d: not reported ended once (%d ends, %d slots held): %v", i, ends, slots, u)
			}
			time.Sleep(5 * time.Millisecond)
		}
		r.mu.Lock()
		reason := lc.reason
		r.mu.Unlock()
		if final == 487 && reason != session.EndCallerHungUp {
			t.Errorf("attempt %d: a cancelled call ended %q, want caller_hung_up", i, reason)
		}
		u.Close()
	}
	t.Logf("%d attempts: %d cancelled (487), %d answered before the CANCEL", n, cancelled, answered)
	if cancelled == 0 {
		t.Errorf("no CANCEL won over %d attempts", n)
	}
}
