package sip_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestDTMFAloneGetsReply is issue 22 item 5 against the SIP test phone: a caller who only
// presses keys (RFC 4733 events, no speech) gets a reply, after the terminator and after the
// inter-digit timeout, both set in the agent definition.
func TestDTMFAloneGetsReply(t *testing.T) {
	t.Parallel()
	agent := session.Agent{SystemPrompt: "You run a phone menu.", FirstMessage: "Press 1 for sales, 2 for support.",
		Turn: session.TurnSettings{DTMFTerminator: "#", DTMFTimeout: 500 * time.Millisecond}}
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{},
		engineOptions{agent: agent, turns: []fakes.ScriptTurn{{Text: "Sales, one moment."}, {Text: "Support, one moment."}}})
	ctx := ctxTimeout(t, 30*time.Second)
	agentSaid := func(text string) func() bool {
		return func() bool {
			for _, l := range s.pcall.Conversation().Transcript() {
				if l.Role == session.RoleAgent && strings.Contains(l.Text, text) {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, 10*time.Second, "the greeting", agentSaid("Press 1"))
	if err := s.call.SendDTMF(ctx, "1#"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reply to 1#", agentSaid("Sales, one moment."))
	if err := s.call.SendDTMF(ctx, "2"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for !agentSaid("Support, one moment.")() {
		if time.Now().After(deadline) {
			for _, l := range s.pcall.Conversation().Transcript() {
				t.Logf("%s: %q", l.Role, l.Text)
			}
			t.Fatal("no reply to 2 after the inter-digit timeout")
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Errorf("the turn of 2 ended after %v, before the inter-digit timeout", el)
	}
	if n := s.eng.utterances(); n != 0 {
		t.Errorf("the recognizer heard %d utterances; the caller only pressed keys", n)
	}
	s.call.Bye(ctx)
}
