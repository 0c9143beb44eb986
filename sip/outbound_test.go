package sip_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// events collects a call's events.
type events struct {
	mu  sync.Mutex
	evs []sip.Event
}

func (e *events) add(ev sip.Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }

func (e *events) kinds() []sip.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sip.EventKind
	for _, ev := range e.evs {
		out = append(out, ev.Kind)
	}
	return out
}

func (e *events) last(k sip.EventKind) (sip.Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.evs) - 1; i >= 0; i-- {
		if e.evs[i].Kind == k {
			return e.evs[i], true
		}
	}
	return sip.Event{}, false
}

// phoneTrunk is a trunk pointing at a test phone.
func phoneTrunk(ph *siptest.Phone, transport sip.Transport) sip.Trunk {
	tr := loopbackTrunk("phone")
	tr.URI = "sip:" + ph.Addr().String()
	tr.Transport = transport
	return tr
}

// TestDialAnswered: Parley's INVITE carries the default codec order and telephone-event, the
// callee hears the agent and the agent hears the callee; events go ringing, in progress, ended.
func TestDialAnswered(t *testing.T) {
	for _, tp := range []sip.Transport{sip.UDP, sip.TCP} {
		t.Run(string(tp), func(t *testing.T) {
			t.Parallel()
			eng := newEngine(t, engineOptions{})
			srv := newServer(t, sip.Options{})
			ph := siptest.NewPhone(t, siptest.PhoneOptions{Transport: string(tp), RingFor: 300 * time.Millisecond})
			ctx := ctxTimeout(t, 30*time.Second)
			var evs events
			call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, tp),
				Conversation: eng.factory(), OnEvent: evs.add})
			if err != nil {
				t.Fatal(err)
			}
			pc, err := ph.Incoming(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inv := pc.Invite()
			if got := inv.Recipient.User; got != "+14155550123" {
				t.Errorf("Request-URI user %q", got)
			}
			body := string(inv.Body())
			for _, want := range []string{" RTP/AVP 0 8 9 111 110 101", "a=rtpmap:111 opus/48000/2", "a=fmtp:111 minptime=20;useinbandfec=1",
				"a=rtpmap:110 telephone-event/48000", "a=rtpmap:101 telephone-event/8000"} {
				if !strings.Contains(body, want) {
					t.Errorf("offer lacks %q:\n%s", want, body)
				}
			}
			if pai := inv.GetHeaders("P-Asserted-Identity"); len(pai) == 0 || !strings.Contains(pai[0].Value(), "+15550001111") {
				t.Errorf("P-Asserted-Identity %v", pai)
			}
			waitFor(t, 10*time.Second, "the agent's tone at the callee", func() bool { return toneLevel(pc.Heard(), 440) > -30 })
			pc.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
			waitFor(t, 10*time.Second, "the callee at the recognizer", func() bool { return eng.utterances() > 0 })
			call.Hangup(ctx, session.EndAPI)
			select {
			case <-pc.Done():
			case <-ctx.Done():
				t.Fatal("no BYE at the callee")
			}
			<-call.Done()
			if want := []sip.EventKind{sip.EventRinging, sip.EventInProgress, sip.EventHangup, sip.EventEnded}; !slices.Equal(evs.kinds(), want) {
				t.Errorf("events %v, want %v", evs.kinds(), want)
			}
			if call.EndReason() != session.EndAPI {
				t.Errorf("end reason %q", call.EndReason())
			}
		})
	}
}

// TestDialDigestAuth: a trunk that challenges with 401 or 407 gets the credentials.
func TestDialDigestAuth(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		t.Run(fmt.Sprint("proxy=", proxy), func(t *testing.T) {
			t.Parallel()
			eng := newEngine(t, engineOptions{})
			srv := newServer(t, sip.Options{})
			ph := siptest.NewPhone(t, siptest.PhoneOptions{Challenge: !proxy, ProxyChallenge: proxy, Username: "acct", Password: "pw"})
			tr := phoneTrunk(ph, sip.UDP)
			tr.Username, tr.Password = "acct", "pw"
			ctx := ctxTimeout(t, 30*time.Second)
			call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: tr, Conversation: eng.factory()})
			if err != nil {
				t.Fatal(err)
			}
			call.Hangup(ctx, session.EndAPI)
			tr.Password = "wrong"
			_, err = srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: tr, Conversation: eng.factory()})
			var de *sip.DialError
			if !errors.As(err, &de) || de.Outcome != sip.OutcomeFailed {
				t.Fatalf("wrong password: %v", err)
			}
		})
	}
}

// TestDialEarlyMedia: audio in a 183 flows before the answer.
func TestDialEarlyMedia(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{EarlyMedia: true, RingFor: 1500 * time.Millisecond})
	ctx := ctxTimeout(t, 30*time.Second)
	var evs events
	call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, sip.UDP),
		Conversation: eng.factory(), OnEvent: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	if got := call.Stats().PacketsReceived; got < 40 {
		t.Errorf("only %d RTP packets before the answer; early media did not flow", got)
	}
	call.Hangup(ctx, session.EndAPI)
}

// TestDialOutcomes: final answers, the ring timeout, an unreachable trunk and cancellation map
// to the dial outcomes.
func TestDialOutcomes(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	cases := []struct {
		status  int
		outcome sip.Outcome
	}{
		{486, sip.OutcomeBusy}, {600, sip.OutcomeBusy}, {408, sip.OutcomeNoAnswer}, {480, sip.OutcomeNoAnswer},
		{404, sip.OutcomeInvalidNumber}, {484, sip.OutcomeInvalidNumber}, {604, sip.OutcomeInvalidNumber},
		{403, sip.OutcomeFailed}, {503, sip.OutcomeFailed},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			ph := siptest.NewPhone(t, siptest.PhoneOptions{AnswerStatus: tc.status})
			var evs events
			_, err := srv.Dial(ctxTimeout(t, 10*time.Second), sip.DialRequest{From: "+15550001111", To: "+14155550123",
				Trunk: phoneTrunk(ph, sip.UDP), Conversation: eng.factory(), OnEvent: evs.add})
			var de *sip.DialError
			if !errors.As(err, &de) {
				t.Fatalf("err %v", err)
			}
			if de.Outcome != tc.outcome || de.Status != tc.status {
				t.Errorf("outcome %s (%d), want %s", de.Outcome, de.Status, tc.outcome)
			}
			if want := fmt.Sprintf("the trunk answered %d Refused", tc.status); de.Summary() != want || de.Q850 != 0 {
				t.Errorf("summary %q, Q.850 %d; want %q, 0", de.Summary(), de.Q850, want)
			}
			ev, ok := evs.last(sip.EventEnded)
			if !ok || ev.Outcome != tc.outcome || ev.EndReason != tc.outcome.EndReason() {
				t.Errorf("ended event %+v", ev)
			}
		})
	}
	// Issue 22 item 8: the Reason header's Q.850 cause is kept, with a detail for a person.
	t.Run("reason header", func(t *testing.T) {
		ph := siptest.NewPhone(t, siptest.PhoneOptions{AnswerStatus: 486, RefuseReason: `SIP;cause=486;text="busy", Q.850;cause=17;text="user busy"`})
		_, err := srv.Dial(ctxTimeout(t, 10*time.Second), sip.DialRequest{From: "+15550001111", To: "+14155550123",
			Trunk: phoneTrunk(ph, sip.UDP), Conversation: eng.factory()})
		var de *sip.DialError
		if !errors.As(err, &de) || de.Outcome != sip.OutcomeBusy || de.Status != 486 || de.Q850 != 17 {
			t.Fatalf("err %v (%+v)", err, de)
		}
		if want := "the trunk answered 486 Refused (Q.850 cause 17)"; de.Summary() != want {
			t.Errorf("summary %q, want %q", de.Summary(), want)
		}
	})
	t.Run("ring timeout", func(t *testing.T) {
		ph := siptest.NewPhone(t, siptest.PhoneOptions{NoAnswer: true})
		start := time.Now()
		_, err := srv.Dial(ctxTimeout(t, 10*time.Second), sip.DialRequest{From: "+15550001111", To: "+14155550123",
			Trunk: phoneTrunk(ph, sip.UDP), Conversation: eng.factory(), RingTimeout: time.Second})
		var de *sip.DialError
		if !errors.As(err, &de) || de.Outcome != sip.OutcomeNoAnswer {
			t.Fatalf("err %v", err)
		}
		if de.Q850 != sip.Q850NoAnswer || de.Summary() != "no answer within the ring timeout (Q.850 cause 19)" {
			t.Errorf("Q.850 %d, summary %q", de.Q850, de.Summary())
		}
		if el := time.Since(start); el < time.Second || el > 5*time.Second {
			t.Errorf("gave up after %v", el)
		}
		pc, err := ph.Incoming(ctxTimeout(t, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-pc.Done():
			if pc.EndedBy() != "cancelled" {
				t.Errorf("callee ended by %q, want cancelled", pc.EndedBy())
			}
			// Issue 22 item 8: the ring timeout's CANCEL says no answer (Q.850 cause 19).
			cs := pc.Requests("CANCEL")
			reason := ""
			if len(cs) > 0 {
				if h := cs[0].GetHeader("Reason"); h != nil {
					reason = h.Value()
				}
			}
			if len(cs) != 1 || !strings.Contains(reason, "Q.850;cause=19") {
				t.Errorf("%d CANCELs; ring-timeout CANCEL Reason %q, want Q.850 cause 19", len(cs), reason)
			}
		case <-time.After(3 * time.Second):
			t.Error("the callee never saw the CANCEL")
		}
	})
	t.Run("cancelled by the dialler", func(t *testing.T) {
		ph := siptest.NewPhone(t, siptest.PhoneOptions{NoAnswer: true})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			if _, err := ph.Incoming(ctxTimeout(t, 5*time.Second)); err == nil {
				cancel()
			}
		}()
		_, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, sip.UDP), Conversation: eng.factory()})
		cancel()
		var de *sip.DialError
		if !errors.As(err, &de) || de.Outcome != sip.OutcomeCanceled {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nobody listens there any more: the connection is refused
		tr := loopbackTrunk("dead")
		tr.URI, tr.Transport = "sip:"+addr, sip.TCP
		_, err = srv.Dial(ctxTimeout(t, 10*time.Second), sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: tr, Conversation: eng.factory()})
		var de *sip.DialError
		if !errors.As(err, &de) || de.Outcome != sip.OutcomeFailed || de.Detail != sip.DetailUpstreamUnreachable {
			t.Fatalf("err %v", err)
		}
		if !strings.Contains(de.Summary(), "did not answer") || strings.Contains(de.Summary(), "127.0.0.1") {
			t.Errorf("summary %q", de.Summary())
		}
	})
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
}

// TestDialSessionTimer: the callee sets a short session interval with Parley as refresher;
// Parley refreshes it.
func TestDialSessionTimer(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{MinSE: time.Second})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{AnswerSessionExpires: 2 * time.Second, AnswerRefresher: "uac"})
	ctx := ctxTimeout(t, 30*time.Second)
	call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, sip.UDP), Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := ph.Incoming(ctx)
	waitFor(t, 4*time.Second, "a refresh from Parley", func() bool { return len(pc.Requests("INVITE")) >= 1 })
	call.Hangup(ctx, session.EndAPI)
}

// TestDialCalleeHangsUp: issue 22 item 8: the callee of an outbound call hanging up ends it as
// callee_hung_up, not caller_hung_up.
func TestDialCalleeHangsUp(t *testing.T) {
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	evs := &events{}
	call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, sip.UDP),
		Conversation: eng.factory(), OnEvent: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := ph.Incoming(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the call in progress", func() bool { return call.State() == sip.CallInProgress })
	if err := pc.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	<-call.Done()
	if got := call.EndReason(); got != session.EndCalleeHungUp {
		t.Errorf("end reason %q, want callee_hung_up", got)
	}
	// Issue 22 item 4: how the leg ended, named for the callee.
	if ev, ok := evs.last(sip.EventHangup); !ok || ev.End.Text != "the callee hung up (BYE)" {
		t.Errorf("hangup event %+v", ev)
	}
	select {
	case <-call.Conversation().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end")
	}
	if got := call.Conversation().EndReason(); got != session.EndCalleeHungUp {
		t.Errorf("conversation end reason %q, want callee_hung_up", got)
	}
}
