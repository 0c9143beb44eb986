package sip_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

func transfer(t *testing.T, conv *session.Conversation, tr session.TransferRequest) session.CommandResult {
	t.Helper()
	select {
	case r := <-conv.Execute(session.Command{Kind: session.CommandTransfer, Transfer: tr}):
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the transfer command never finished")
	}
	return session.CommandResult{}
}

// TestColdTransfer: REFER to the caller; a 2xx sipfrag ends our leg as transferred, a failure
// sipfrag, a refused REFER or no final NOTIFY fail the command with the reason and the call
// goes on.
func TestColdTransfer(t *testing.T) {
	cases := []struct {
		name   string
		po     siptest.PhoneOptions
		ok     bool
		reason string
	}{
		{"succeeds", siptest.PhoneOptions{}, true, ""},
		{"target busy", siptest.PhoneOptions{ReferResult: "SIP/2.0 486 Busy Here"}, false, "486"},
		{"REFER refused", siptest.PhoneOptions{Refer: "reject"}, false, "REFER refused: 603"},
		{"no final NOTIFY", siptest.PhoneOptions{Refer: "silent"}, false, "timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setupCall(t, sip.Options{}, tc.po, siptest.CallOptions{}, engineOptions{})
			r := transfer(t, s.pcall.Conversation(), session.TransferRequest{Destination: "+14155550999", Mode: session.TransferCold, Timeout: 2 * time.Second})
			if tc.ok {
				if r.Status != session.CommandDone {
					t.Fatalf("transfer %+v", r)
				}
				refers := s.call.Requests("REFER")
				if len(refers) != 1 || !strings.Contains(refers[0].GetHeaders("Refer-To")[0].Value(), "sip:+14155550999@127.0.0.1") {
					t.Errorf("REFER %v", refers)
				}
				select {
				case <-s.call.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("no BYE after the transfer")
				}
				waitFor(t, 5*time.Second, "the end", func() bool {
					ev, ok := s.rt.lastEnded()
					return ok && ev.EndReason == session.EndTransferred
				})
				return
			}
			if r.Status != session.CommandFailed || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("transfer %+v, want failed with %q", r, tc.reason)
			}
			if s.pcall.State() != sip.CallInProgress {
				t.Fatal("the call ended after a failed transfer")
			}
			s.call.ResetHeard()
			s.pcall.Conversation().Execute(session.Command{Kind: session.CommandSay, Text: "Sorry, that did not work."})
			waitFor(t, 10*time.Second, "the agent again", func() bool { return toneLevel(s.call.Heard(), 440) > -30 })
			s.call.Bye(ctxTimeout(t, 5*time.Second))
		})
	}
}

// countTap counts the frames a conversation tap (a recorder, a listener) receives.
type countTap struct{ caller, agent atomic.Int64 }

func (c *countTap) CallerFrame(*media.Frame) { c.caller.Add(1) }
func (c *countTap) AgentFrame(*media.Frame)  { c.agent.Add(1) }

// humanLines and userLinesAfter read a conversation's transcript: the human's lines (agent lines
// marked human) and the caller's lines after seq.
func humanLines(conv *session.Conversation) []session.Line {
	var out []session.Line
	for _, l := range conv.Transcript() {
		if h, _ := l.Meta["human"].(bool); l.Role == session.RoleAgent && h {
			out = append(out, l)
		}
	}
	return out
}

func userLinesAfter(conv *session.Conversation, seq int64) int {
	n := 0
	for _, l := range conv.Transcript() {
		if l.Role == session.RoleUser && l.Seq > seq {
			n++
		}
	}
	return n
}

// takeoverSeq is the seq of the line that says a human took over (0 when none did).
func takeoverSeq(conv *session.Conversation) int64 {
	for _, l := range conv.Transcript() {
		if l.Role == session.RoleSystem && strings.Contains(l.Text, "took over") {
			return l.Seq
		}
	}
	return 0
}

// TestWarmTransfer: the caller hears ringback while the human's phone rings; the human hears the
// briefing (the agent's voice: the fake TTS tone); then both are bridged through the
// conversation's takeover: audio both ways, the conversation live in human_takeover, the human's
// words transcribed as agent lines marked human and the caller's as user lines, both taps (the
// Plan's and a conversation tap) fed. The transfer (a steering command, or the LLM's
// transfer_call) finishes only when the bridged call is over. A hang-up of either party hangs up
// the other and ends the conversation as transferred; a conversation ended from outside hangs up
// both with its own reason.
func TestWarmTransfer(t *testing.T) {
	cases := []struct {
		name   string
		byTool bool   // the LLM asks for the transfer (else a steering command)
		end    string // who ends the bridged call: human, caller, api
		reason session.EndReason
	}{
		{"command, human hangs up", false, "human", session.EndTransferred},
		{"tool, caller hangs up", true, "caller", session.EndTransferred},
		{"command, ended by the API", false, "api", session.EndAPI},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			human := siptest.NewPhone(t, siptest.PhoneOptions{RingFor: 1500 * time.Millisecond})
			const summary = "The caller wants a table for two at eight."
			eo := engineOptions{}
			if tc.byTool {
				args, _ := json.Marshal(map[string]string{"destination": human.URI(), "mode": "warm", "summary": summary})
				eo.agent.Tools = []session.ToolSpec{{Name: session.ToolTransfer}}
				eo.turns = []fakes.ScriptTurn{{ToolCalls: []fakes.ScriptToolCall{{Name: session.ToolTransfer, Args: args}}}}
			}
			eng := newEngine(t, eo)
			rt := newRouter()
			var tapCaller, tapAgent atomic.Int64
			rt.add("+14155550100", sip.Plan{
				Conversation: eng.factory(),
				Transfer:     sip.TransferOptions{Briefing: eng.tts, BriefingVoice: "voice1"},
				Tap: func(fromCaller bool, f *media.Frame) {
					if fromCaller {
						tapCaller.Add(1)
					} else {
						tapAgent.Add(1)
					}
				},
			})
			srv := newServer(t, sip.Options{Router: rt})
			caller := siptest.NewPhone(t, siptest.PhoneOptions{})
			ctx := ctxTimeout(t, 60*time.Second)
			a, err := caller.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the greeting", func() bool { return toneLevel(a.Heard(), 440) > -30 })
			pcall := srv.ActiveCalls()[0]
			conv := pcall.Conversation()
			var ct countTap
			defer conv.AddTap(&ct)()
			a.ResetHeard()
			res := make(chan session.CommandResult, 1)
			if tc.byTool {
				// The caller speaks; the LLM answers with transfer_call.
				a.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
			} else {
				go func() {
					res <- transfer(t, conv, session.TransferRequest{Destination: human.URI(), Mode: session.TransferWarm,
						Summary: summary, Timeout: 10 * time.Second})
				}()
			}
			b, err := human.Incoming(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, "ringback at the caller", func() bool {
				h := a.Heard()
				return toneLevel(h, 480) > -35 && toneLevel(h, 440) > -35
			})
			waitFor(t, 10*time.Second, "the briefing at the human", func() bool { return toneLevel(b.Heard(), 440) > -30 })
			waitFor(t, 10*time.Second, "the takeover", func() bool { return takeoverSeq(conv) > 0 })
			seq := takeoverSeq(conv)
			if st := conv.State(); st != session.StateTakeover && st != session.StateUserSpeaking {
				t.Fatalf("conversation state %s while bridged", st)
			}

			// Bridged: both speak (speech-like bursts), each hears the other, both are transcribed.
			a.ResetHeard()
			b.ResetHeard()
			a.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
			b.SetSource(burstSource(1000, -12, 800*time.Millisecond, 700*time.Millisecond))
			c0, a0, cc0, ca0 := tapCaller.Load(), tapAgent.Load(), ct.caller.Load(), ct.agent.Load()
			waitFor(t, 5*time.Second, "the caller at the human", func() bool { return toneLevel(b.Heard(), 700) > -25 })
			waitFor(t, 5*time.Second, "the human at the caller", func() bool { return toneLevel(a.Heard(), 1000) > -25 })
			waitFor(t, 10*time.Second, "the human's words in the transcript", func() bool { return len(humanLines(conv)) > 0 })
			waitFor(t, 10*time.Second, "the caller's words in the transcript", func() bool { return userLinesAfter(conv, seq) > 0 })
			waitFor(t, 5*time.Second, "both directions at both taps", func() bool {
				return tapCaller.Load() > c0+25 && tapAgent.Load() > a0+25 && ct.caller.Load() > cc0+25 && ct.agent.Load() > ca0+25
			})
			if hl := humanLines(conv)[0]; hl.Seq < seq || strings.TrimSpace(hl.Text) == "" {
				t.Errorf("human line %+v (takeover at seq %d)", hl, seq)
			}
			if pcall.State() != sip.CallInProgress {
				t.Fatalf("call state %s while bridged", pcall.State())
			}
			select {
			case <-conv.Done():
				t.Fatalf("the conversation ended (%s) while bridged", conv.EndReason())
			case r := <-res:
				t.Fatalf("the transfer finished (%+v) while bridged", r)
			default:
			}

			// The end.
			ended := make(chan struct{})
			switch tc.end {
			case "human":
				if err := b.Bye(ctx); err != nil {
					t.Fatal(err)
				}
				close(ended)
			case "caller":
				if err := a.Bye(ctx); err != nil {
					t.Fatal(err)
				}
				close(ended)
			case "api":
				go func() { conv.End(session.EndAPI); close(ended) }()
			}
			for _, p := range []struct {
				who string
				c   *siptest.Call
			}{{"caller", a}, {"human", b}} {
				select {
				case <-p.c.Done():
				case <-time.After(5 * time.Second):
					t.Fatalf("the %s's leg did not end", p.who)
				}
			}
			select {
			case <-ended:
			case <-time.After(5 * time.Second):
				t.Fatal("Conversation.End did not return")
			}
			select {
			case <-conv.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the conversation did not end")
			}
			if r := conv.EndReason(); r != tc.reason {
				t.Errorf("conversation ended as %s, want %s", r, tc.reason)
			}
			if !tc.byTool {
				select {
				case r := <-res:
					if r.Status != session.CommandDone {
						t.Errorf("transfer %+v", r)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the transfer command did not finish after the bridged call")
				}
			}
			waitFor(t, 5*time.Second, "the call's end", func() bool {
				ev, ok := rt.lastEnded()
				return ok && ev.EndReason == tc.reason
			})
			waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
		})
	}
}

// TestWarmTransferWithoutTakeover: when no takeover can be started (here the second recognizer
// stream is refused), the human is not dropped: the legs are bridged directly, the transfer
// finishes at the bridge and the conversation ends as transferred while the call goes on, the
// Plan's tap still seeing both sides; the human hanging up hangs up the caller.
func TestWarmTransferWithoutTakeover(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	var tapCaller, tapAgent atomic.Int64
	rt.add("+14155550100", sip.Plan{
		Conversation: eng.factory(),
		Tap: func(fromCaller bool, f *media.Frame) {
			if fromCaller {
				tapCaller.Add(1)
			} else {
				tapAgent.Add(1)
			}
		},
	})
	srv := newServer(t, sip.Options{Router: rt})
	human := siptest.NewPhone(t, siptest.PhoneOptions{})
	caller := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 60*time.Second)
	a, err := caller.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the greeting", func() bool { return toneLevel(a.Heard(), 440) > -30 })
	pcall := srv.ActiveCalls()[0]
	conv := pcall.Conversation()
	eng.dg.FailHandshakes(1, 401)
	res := make(chan session.CommandResult, 1)
	go func() {
		res <- transfer(t, conv, session.TransferRequest{Destination: human.URI(), Mode: session.TransferWarm, Timeout: 10 * time.Second})
	}()
	b, err := human.Incoming(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.Status != session.CommandDone {
			t.Fatalf("transfer %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("the transfer did not finish")
	}
	waitFor(t, 5*time.Second, "the conversation to end as transferred", func() bool {
		select {
		case <-conv.Done():
			return conv.EndReason() == session.EndTransferred
		default:
			return false
		}
	})
	a.ResetHeard()
	b.ResetHeard()
	a.SetSource(toneSource(700, -12))
	b.SetSource(toneSource(1000, -12))
	c0, a0 := tapCaller.Load(), tapAgent.Load()
	waitFor(t, 5*time.Second, "the caller at the human", func() bool { return toneLevel(b.Heard(), 700) > -25 })
	waitFor(t, 5*time.Second, "the human at the caller", func() bool { return toneLevel(a.Heard(), 1000) > -25 })
	waitFor(t, 5*time.Second, "both directions at the tap", func() bool { return tapCaller.Load() > c0+25 && tapAgent.Load() > a0+25 })
	if pcall.State() != sip.CallInProgress {
		t.Fatalf("call state %s while bridged", pcall.State())
	}
	if err := b.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the caller got no BYE when the human hung up")
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
}

// TestWarmTransferEndedDuringBriefing: the conversation is ended from outside while the human
// is being briefed: the briefing is abandoned and there is nobody to hand over to, so no bridge;
// both legs are hung up, the conversation keeps its own end reason and the transfer fails.
func TestWarmTransferEndedDuringBriefing(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory(), Transfer: sip.TransferOptions{Briefing: eng.tts, BriefingVoice: "voice1"}})
	srv := newServer(t, sip.Options{Router: rt})
	human := siptest.NewPhone(t, siptest.PhoneOptions{})
	caller := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 60*time.Second)
	a, err := caller.Call(ctx, target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the greeting", func() bool { return toneLevel(a.Heard(), 440) > -30 })
	conv := srv.ActiveCalls()[0].Conversation()
	res := make(chan session.CommandResult, 1)
	go func() {
		res <- transfer(t, conv, session.TransferRequest{Destination: human.URI(), Mode: session.TransferWarm,
			Summary: "The caller wants a table for two at eight, and a high chair for the baby.", Timeout: 10 * time.Second})
	}()
	b, err := human.Incoming(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the briefing at the human", func() bool { return toneLevel(b.Heard(), 440) > -30 })
	ended := make(chan struct{})
	go func() { conv.End(session.EndAPI); close(ended) }()
	for _, p := range []struct {
		who string
		c   *siptest.Call
	}{{"human", b}, {"caller", a}} {
		select {
		case <-p.c.Done():
		case <-time.After(15 * time.Second):
			t.Fatalf("the %s's leg did not end", p.who)
		}
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Conversation.End did not return")
	}
	if r := conv.EndReason(); r != session.EndAPI {
		t.Errorf("conversation ended as %s", r)
	}
	select {
	case r := <-res:
		if r.Status != session.CommandFailed {
			t.Errorf("transfer %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the transfer command did not finish")
	}
	if takeoverSeq(conv) != 0 {
		t.Error("a takeover started after the conversation ended")
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
}

// TestWarmTransferFails: the human's phone is busy: the command fails with the reason, the
// caller comes off hold and the agent talks to them again.
func TestWarmTransferFails(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	busy := siptest.NewPhone(t, siptest.PhoneOptions{AnswerStatus: 486})
	r := transfer(t, s.pcall.Conversation(), session.TransferRequest{Destination: busy.URI(), Mode: session.TransferWarm, Timeout: 5 * time.Second})
	if r.Status != session.CommandFailed || !strings.Contains(r.Reason, "busy") {
		t.Fatalf("transfer %+v", r)
	}
	s.call.ResetHeard()
	s.pcall.Conversation().Execute(session.Command{Kind: session.CommandSay, Text: "They are busy, sorry."})
	waitFor(t, 10*time.Second, "the agent after the failed transfer", func() bool { return toneLevel(s.call.Heard(), 440) > -30 })
	s.call.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
	waitFor(t, 10*time.Second, "the caller heard again", func() bool { return s.eng.utterances() > 0 })
	s.call.Bye(ctxTimeout(t, 5*time.Second))
}

// TestIncomingRefer: the caller REFERs Parley to another phone: 202, NOTIFY 100 and 200; the
// conversation continues with the new party and the old leg is released.
func TestIncomingRefer(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	other := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	st, err := s.call.Refer(ctx, other.URI())
	if err != nil || st != 202 {
		t.Fatalf("REFER: %d %v", st, err)
	}
	if f, err := s.call.WaitNotify(ctx); err != nil || !strings.HasPrefix(f, "SIP/2.0 100") {
		t.Fatalf("first NOTIFY %q %v", f, err)
	}
	b, err := other.Incoming(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.call.WaitNotify(ctx); err != nil || !strings.HasPrefix(f, "SIP/2.0 200") {
		t.Fatalf("final NOTIFY %q %v", f, err)
	}
	select {
	case <-s.call.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the referrer's leg was not released")
	}
	s.pcall.Conversation().Execute(session.Command{Kind: session.CommandSay, Text: "Hello, new party."})
	waitFor(t, 10*time.Second, "the agent at the new party", func() bool { return toneLevel(b.Heard(), 440) > -30 })
	before := s.eng.utterances()
	b.SetSource(burstSource(700, -12, 800*time.Millisecond, 700*time.Millisecond))
	waitFor(t, 10*time.Second, "the new party at the recognizer", func() bool { return s.eng.utterances() > before })
	if s.pcall.State() != sip.CallInProgress {
		t.Fatalf("call state %s", s.pcall.State())
	}
	b.Bye(ctx)
	waitFor(t, 5*time.Second, "the end", func() bool { ev, ok := s.rt.lastEnded(); return ok && ev.EndReason == session.EndCallerHungUp })
}
