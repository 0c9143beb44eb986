package sip_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// callSetup is an inbound call from a test phone to an agent.
type callSetup struct {
	eng   *engine
	rt    *router
	srv   *sip.Server
	ph    *siptest.Phone
	call  *siptest.Call
	pcall *sip.Call
}

func setupCall(t *testing.T, o sip.Options, po siptest.PhoneOptions, co siptest.CallOptions, eo engineOptions) *callSetup {
	t.Helper()
	s := &callSetup{eng: newEngine(t, eo), rt: newRouter()}
	s.rt.add("+14155550100", sip.Plan{Conversation: s.eng.factory()})
	o.Router = s.rt
	s.srv = newServer(t, o)
	s.ph = siptest.NewPhone(t, po)
	tp := sip.UDP
	if po.Transport != "" {
		tp = sip.Transport(po.Transport)
	}
	c, err := s.ph.Call(ctxTimeout(t, 20*time.Second), target(s.srv, tp, "+14155550100"), co)
	if err != nil {
		t.Fatal(err)
	}
	s.call = c
	waitFor(t, 5*time.Second, "the call at Parley", func() bool { return len(s.srv.ActiveCalls()) == 1 })
	s.pcall = s.srv.ActiveCalls()[0]
	waitFor(t, 5*time.Second, "the conversation", func() bool { return s.pcall.State() == sip.CallInProgress })
	return s
}

func (s *callSetup) transcriptHas(text string) bool {
	for _, l := range s.pcall.Conversation().Transcript() {
		if strings.Contains(l.Text, text) {
			return true
		}
	}
	return false
}

// TestReinviteHoldUnhold: a sendonly re-INVITE (hold) is answered recvonly and Parley stops
// sending; inactive hold with no RTP at all does not trip the media timeout; sendrecv resumes
// sending; RTP stopping afterwards does end the call as media_timeout.
func TestReinviteHoldUnhold(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{MediaTimeout: time.Second}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	waitFor(t, 5*time.Second, "RTP from Parley", func() bool { return s.call.RTPReceived() > 10 })
	res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{Direction: siptest.SendOnly})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("hold: %v %v", res, err)
	}
	if !strings.Contains(s.call.RemoteSDP(), "a=recvonly") {
		t.Errorf("hold answered:\n%s", s.call.RemoteSDP())
	}
	if n := s.pcall.Negotiated(); n.Local != sip.RecvOnly || n.Sending() {
		t.Errorf("negotiated %+v", n)
	}
	time.Sleep(100 * time.Millisecond) // let packets in flight land
	before := s.call.RTPReceived()
	time.Sleep(500 * time.Millisecond) // a window in which Parley must send nothing
	if after := s.call.RTPReceived(); after > before+1 {
		t.Errorf("Parley sent %d packets while on hold", after-before)
	}
	// Inactive, and the phone goes silent: no media timeout while on hold.
	if res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{Direction: siptest.Inactive}); err != nil || res.StatusCode != 200 {
		t.Fatalf("inactive: %v %v", res, err)
	}
	s.call.StopRTP()
	select {
	case <-s.call.Done():
		t.Fatal("the call ended while on hold")
	case <-time.After(2500 * time.Millisecond):
	}
	// Unhold: Parley sends again and expects RTP again.
	s.call.ResumeRTP()
	if res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{Direction: siptest.SendRecv}); err != nil || res.StatusCode != 200 {
		t.Fatalf("unhold: %v %v", res, err)
	}
	before = s.call.RTPReceived()
	waitFor(t, 3*time.Second, "RTP after unhold", func() bool { return s.call.RTPReceived() > before+10 })
	s.call.StopRTP()
	select {
	case <-s.call.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no BYE after the RTP stopped")
	}
	waitFor(t, 3*time.Second, "the end", func() bool { ev, ok := s.rt.lastEnded(); return ok && ev.EndReason == session.EndMediaTimeout })
}

// TestReinviteCodecChange: a re-INVITE offering only PCMA moves both directions to PCMA.
func TestReinviteCodecChange(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	if got := s.pcall.Negotiated().Audio.Name; got != "PCMU" {
		t.Fatalf("initial codec %s", got)
	}
	res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{Codecs: []codec.Info{codec.PCMA}})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("re-INVITE: %v %v", res, err)
	}
	if got := s.pcall.Negotiated().Audio.Name; got != "PCMA" {
		t.Fatalf("codec after re-INVITE %s", got)
	}
	waitFor(t, 3*time.Second, "PCMA from Parley", func() bool { return s.call.LastPayloadType() == 8 })
	s.call.ResetHeard()
	s.pcall.Conversation().Execute(session.Command{Kind: session.CommandSay, Text: "Still here after the codec change."})
	waitFor(t, 10*time.Second, "the agent's tone in PCMA", func() bool { return toneLevel(s.call.Heard(), 440) > -30 })
	s.call.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
	waitFor(t, 10*time.Second, "the caller's PCMA audio at the recognizer", func() bool { return s.eng.utterances() > 0 })
	s.call.Bye(ctx)
}

// TestReinviteLateOffer: a re-INVITE without SDP gets Parley's offer (current codec first) in
// the 200 and the answer in the ACK.
func TestReinviteLateOffer(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{NoSDP: true, Codecs: []codec.Info{codec.G722}})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("re-INVITE: %v %v", res, err)
	}
	if body := string(res.Body()); !strings.Contains(body, "RTP/AVP 0 8 9 111") {
		t.Errorf("Parley's offer:\n%s", body)
	}
	waitFor(t, 3*time.Second, "the answer applied", func() bool { return s.pcall.Negotiated().Audio.Name == "PCMU" })
	if st, err := s.call.Options(ctx); err != nil || st != 200 {
		t.Errorf("in-dialog OPTIONS: %d %v", st, err)
	}
	s.call.Bye(ctx)
}

// TestDTMFFromCaller: digits by RFC 4733, by INFO application/dtmf-relay and by INFO
// application/dtmf all reach the conversation.
func TestDTMFFromCaller(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	if err := s.call.SendDTMF(ctx, "15#"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"DTMF 1", "DTMF 5", "DTMF #"} {
		waitFor(t, 3*time.Second, d+" (RFC 4733)", func() bool { return s.transcriptHas(d) })
	}
	if st, err := s.call.SendInfoDTMF(ctx, "application/dtmf-relay", '7'); err != nil || st != 200 {
		t.Fatalf("INFO dtmf-relay: %d %v", st, err)
	}
	waitFor(t, 3*time.Second, "DTMF 7 (INFO dtmf-relay)", func() bool { return s.transcriptHas("DTMF 7") })
	if st, err := s.call.SendInfoDTMF(ctx, "application/dtmf", '9'); err != nil || st != 200 {
		t.Fatalf("INFO dtmf: %d %v", st, err)
	}
	waitFor(t, 3*time.Second, "DTMF 9 (INFO dtmf)", func() bool { return s.transcriptHas("DTMF 9") })
	if st, _ := s.call.SendInfoDTMF(ctx, "application/dtmf-relay", 'x'); st != 400 {
		t.Errorf("a bad digit was answered %d, want 400", st)
	}
	s.call.Bye(ctx)
}

// TestDTMFToCaller: the engine's digits go as RFC 4733 events when negotiated, by INFO when not.
func TestDTMFToCaller(t *testing.T) {
	t.Parallel()
	for _, noDTMF := range []bool{false, true} {
		s := setupCall(t, sip.Options{}, siptest.PhoneOptions{NoDTMF: noDTMF}, siptest.CallOptions{}, engineOptions{})
		ctx := ctxTimeout(t, 30*time.Second)
		if err := s.pcall.SendDTMF(ctx, "42*A"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 3*time.Second, "the digits at the phone", func() bool { return s.call.DTMF() == "42*A" })
		if noDTMF && len(s.call.Requests("INFO")) != 4 {
			t.Errorf("%d INFOs, want 4", len(s.call.Requests("INFO")))
		}
		s.call.Bye(ctx)
	}
}

// TestSessionTimerParleyRefreshes: the caller does not support timers, so Parley is the
// refresher and re-INVITEs at half the interval.
func TestSessionTimerParleyRefreshes(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{SessionExpires: 2 * time.Second, MinSE: time.Second}, siptest.PhoneOptions{},
		siptest.CallOptions{NoTimerSupport: true}, engineOptions{})
	if se := s.call.Header("Session-Expires"); se != "2;refresher=uas" {
		t.Errorf("Session-Expires %q", se)
	}
	waitFor(t, 4*time.Second, "two refreshes", func() bool { return len(s.call.Requests("INVITE")) >= 2 })
	if s.pcall.State() != sip.CallInProgress {
		t.Error("the call ended")
	}
	s.call.Bye(ctxTimeout(t, 5*time.Second))
}

// TestSessionTimerPeerRefreshes: the caller is the refresher; its refreshes keep the call, and
// when they stop Parley ends the session (BYE) before the interval runs out.
func TestSessionTimerPeerRefreshes(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{SessionExpires: 3 * time.Second, MinSE: time.Second}, siptest.PhoneOptions{},
		siptest.CallOptions{SessionExpires: 3 * time.Second, Refresher: "uac"}, engineOptions{})
	if se := s.call.Header("Session-Expires"); se != "3;refresher=uac" || s.call.Header("Require") != "timer" {
		t.Errorf("Session-Expires %q, Require %q", se, s.call.Header("Require"))
	}
	select {
	case <-s.call.Done():
		t.Fatal("the call ended although refreshed")
	case <-time.After(4 * time.Second):
	}
	s.call.StopRefreshing()
	select {
	case <-s.call.Done():
	case <-time.After(6 * time.Second):
		t.Fatal("no BYE after the refreshes stopped")
	}
	waitFor(t, 3*time.Second, "the end", func() bool { ev, ok := s.rt.lastEnded(); return ok && ev.EndReason == session.EndNetworkLost })
}

// TestSessionTimerTooSmall: an interval below Min-SE from a timer-aware caller is refused 422
// with Min-SE (RFC 4028 §9).
func TestSessionTimerTooSmall(t *testing.T) {
	t.Parallel()
	rt := newRouter()
	srv := newServer(t, sip.Options{Router: rt})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	c, err := ph.Call(ctxTimeout(t, 10*time.Second), target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{SessionExpires: 30 * time.Second})
	if err == nil || c.Status() != 422 || c.Header("Min-SE") != "90" {
		t.Fatalf("status %d, Min-SE %q", c.Status(), c.Header("Min-SE"))
	}
}

// TestMediaTimeout: RTP from the caller stopping ends the call as media_timeout with a BYE; a
// silent agent (no first message, nothing said) never does.
func TestMediaTimeout(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{MediaTimeout: time.Second}, siptest.PhoneOptions{}, siptest.CallOptions{},
		engineOptions{noGreeting: true})
	select {
	case <-s.call.Done():
		t.Fatal("a quiet agent ended the call")
	case <-time.After(2500 * time.Millisecond):
	}
	if got := s.call.RTPReceived(); got < 100 {
		t.Errorf("Parley sent %d packets in 2.5 s of agent silence; RTP must keep flowing", got)
	}
	s.call.StopRTP()
	select {
	case <-s.call.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no BYE after the caller's RTP stopped")
	}
	if got := s.call.EndedBy(); got != "bye received" {
		t.Errorf("ended by %q", got)
	}
	waitFor(t, 3*time.Second, "the end", func() bool { ev, ok := s.rt.lastEnded(); return ok && ev.EndReason == session.EndMediaTimeout })
}

// TestAgentSilentOnHold is issue 22 item 4: when the caller puts the call on hold (sendonly)
// while the agent speaks, the agent stops, and the transcript does not claim the greeting was
// heard whole; what the caller's side sends during the hold (music on hold) gets no reply;
// once the call resumes, the caller is answered.
func TestAgentSilentOnHold(t *testing.T) {
	long := "Hello and welcome to the support line of the example company, where every single call matters to us a great deal."
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{
		agent: session.Agent{FirstMessage: long}, turns: []fakes.ScriptTurn{{Text: "Reply after the hold."}},
		dgScript: []string{"hello again"}})
	ctx := ctxTimeout(t, 30*time.Second)
	holds := &holdTap{}
	s.pcall.Conversation().AddTap(holds) // a recording pauses on hold
	waitFor(t, 5*time.Second, "the greeting playing", func() bool { return s.call.RTPReceived() > 20 })
	if res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{Direction: siptest.SendOnly}); err != nil || res.StatusCode != 200 {
		t.Fatalf("hold: %v %v", res, err)
	}
	waitFor(t, 3*time.Second, "the taps told of the hold", func() bool { return holds.String() == "on" })
	conv := s.pcall.Conversation()
	agentLines := func() []session.Line {
		var out []session.Line
		for _, l := range conv.Transcript() {
			if l.Role == session.RoleAgent {
				out = append(out, l)
			}
		}
		return out
	}
	waitFor(t, 3*time.Second, "the greeting's line", func() bool { return len(agentLines()) > 0 })
	if g := agentLines()[0]; !g.Interrupted || g.Text == long {
		t.Errorf("the greeting cut by the hold is recorded as heard: %+v", g)
	}
	// Music on hold: the caller's side keeps sending sound. No reply may come.
	s.call.SetSource(burstSource(700, -12, 800*time.Millisecond, 400*time.Millisecond))
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := len(agentLines()); n > 1 {
			t.Fatalf("the agent replied while on hold: %+v", agentLines()[1:])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res, err := s.call.Reinvite(ctx, siptest.ReinviteOptions{Direction: siptest.SendRecv}); err != nil || res.StatusCode != 200 {
		t.Fatalf("resume: %v %v", res, err)
	}
	waitFor(t, 3*time.Second, "the taps told of the resume", func() bool { return holds.String() == "on off" })
	defer func() {
		if t.Failed() {
			t.Logf("utterances %d, transcript %+v, state %s", s.eng.utterances(), conv.Transcript(), conv.State())
		}
	}()
	waitFor(t, 15*time.Second, "the reply after the hold", func() bool {
		for _, l := range agentLines() {
			// The reply begins (the test's caller keeps making noise, so it may be barged in).
			if strings.HasPrefix(l.Text, "Rep") {
				return true
			}
		}
		return false
	})
}

// holdTap records the hold changes a conversation tells its taps (session.HoldTap).
type holdTap struct {
	mu  sync.Mutex
	got []string
}

func (h *holdTap) CallerFrame(*media.Frame) {}
func (h *holdTap) AgentFrame(*media.Frame)  {}
func (h *holdTap) Hold(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, map[bool]string{true: "on", false: "off"}[on])
}
func (h *holdTap) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.got, " ")
}
