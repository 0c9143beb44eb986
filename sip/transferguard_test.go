package sip_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestCheckTransferDestination: the table of issue 22 item 7. Numbers go through the trunk;
// a SIP URI must name a public address unless the allow-list covers it.
func TestCheckTransferDestination(t *testing.T) {
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cases := []struct {
		dest  string
		allow []netip.Prefix
		ok    bool
	}{
		{"+14155550100", nil, true},
		{"sip:human@127.0.0.1:5060", nil, false},
		{"sip:human@127.0.0.5:5060", loop, true},
		{"sip:human@localhost", nil, false},
		{"sip:human@10.1.2.3", nil, false},
		{"sip:human@192.168.1.10", loop, false},
		{"sip:human@172.16.0.1", nil, false},
		{"sip:human@169.254.169.254", nil, false}, // link-local (cloud metadata)
		{"sip:human@100.64.0.1", nil, false},      // shared address space
		{"sip:human@0.0.0.0", nil, false},
		{"sip:human@[::1]:5060", nil, false},
		{"sip:human@[fe80::1]", nil, false},
		{"sip:human@[fd00::1]", nil, false},
		{"sip:human@224.0.0.1", nil, false},
		{"sip:human@203.0.113.7", nil, true}, // public unicast (nothing is sent by this check)
		{"sips:human@[2001:db8::7]", nil, true},
	}
	for _, c := range cases {
		err := sip.CheckTransferDestination(context.Background(), c.dest, c.allow)
		if c.ok && err != nil || !c.ok && !errors.Is(err, sip.ErrDestinationNotAllowed) {
			t.Errorf("%s (allow %v): %v", c.dest, c.allow, err)
		}
	}
}

// TestTransferToLoopbackRefused: a warm transfer to a phone on 127.0.0.1, from a server that
// does not allow loopback, fails with the reason and sends no INVITE; the call goes on.
func TestTransferToLoopbackRefused(t *testing.T) {
	s := setupCall(t, sip.Options{TransferAllow: []netip.Prefix{}}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	human := siptest.NewPhone(t, siptest.PhoneOptions{})
	for _, mode := range []session.TransferMode{session.TransferWarm, session.TransferCold} {
		r := transfer(t, s.pcall.Conversation(), session.TransferRequest{Destination: human.URI(), Mode: mode, Timeout: 3 * time.Second})
		if r.Status == session.CommandDone || !strings.Contains(r.Reason, "not allowed") {
			t.Errorf("%s transfer to %s: %+v", mode, human.URI(), r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if c, err := human.Incoming(ctx); err == nil {
		t.Errorf("the refused destination was called: %v", c.CallID())
	}
	if len(s.call.Requests("REFER")) != 0 {
		t.Error("a REFER was sent for a refused destination")
	}
	if s.pcall.State() != sip.CallInProgress {
		t.Errorf("the call is %s after the refused transfer", s.pcall.State())
	}
}

// TestTrunkTransferAllow (issue 22 item 7): a trunk's own allow-list lets its calls reach a
// PBX the node-wide list does not: the warm transfer to the loopback phone gets that far
// (the phone is busy: refused for that, not for the address).
func TestTrunkTransferAllow(t *testing.T) {
	t.Parallel()
	tr := loopbackTrunk("pbx")
	tr.TransferAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	s := setupCall(t, sip.Options{TransferAllow: []netip.Prefix{}, Trunks: sip.NewStaticTrunks(tr)}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	busy := siptest.NewPhone(t, siptest.PhoneOptions{AnswerStatus: 486})
	r := transfer(t, s.pcall.Conversation(), session.TransferRequest{Destination: busy.URI(), Mode: session.TransferWarm, Timeout: 5 * time.Second})
	if r.Status != session.CommandFailed || !strings.Contains(r.Reason, "busy") {
		t.Fatalf("transfer %+v; want it tried and refused busy", r)
	}
	if got := sip.TransferAllowFor(nil, tr); len(got) != 1 || sip.CheckTransferDestination(context.Background(), busy.URI(), got) != nil {
		t.Errorf("TransferAllowFor = %v", got)
	}
	s.call.Bye(ctxTimeout(t, 5*time.Second))
}

// TestOrgTransferAllow (issue 22 item 7): the organization's allow-list (the plan's
// TransferOptions.Allow, which the control plane fills) lets a call reach a PBX that neither
// the node's list nor a trunk allows: the call here comes in on no trunk of its own. The warm
// transfer to the loopback phone gets that far (the phone is busy: refused for that, not for
// the address); the same call without the organization's list is refused for the address.
func TestOrgTransferAllow(t *testing.T) {
	t.Parallel()
	for _, orgAllows := range []bool{true, false} {
		eng := newEngine(t, engineOptions{})
		rt := newRouter()
		plan := sip.Plan{Conversation: eng.factory()}
		if orgAllows {
			plan.Transfer.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}
		rt.add("+14155550100", plan)
		srv := newServer(t, sip.Options{Router: rt, TransferAllow: []netip.Prefix{}})
		ph := siptest.NewPhone(t, siptest.PhoneOptions{})
		call, err := ph.Call(ctxTimeout(t, 20*time.Second), target(srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the call at Parley", func() bool { return len(srv.ActiveCalls()) == 1 })
		pcall := srv.ActiveCalls()[0]
		waitFor(t, 5*time.Second, "the conversation", func() bool { return pcall.State() == sip.CallInProgress })
		busy := siptest.NewPhone(t, siptest.PhoneOptions{AnswerStatus: 486})
		r := transfer(t, pcall.Conversation(), session.TransferRequest{Destination: busy.URI(), Mode: session.TransferWarm, Timeout: 5 * time.Second})
		switch {
		case orgAllows && (r.Status != session.CommandFailed || !strings.Contains(r.Reason, "busy")):
			t.Errorf("with the organization's list: transfer %+v; want it tried and refused busy", r)
		case !orgAllows && (r.Status == session.CommandDone || !strings.Contains(r.Reason, "not allowed")):
			t.Errorf("without the organization's list: transfer %+v; want it refused for the address", r)
		}
		call.Bye(ctxTimeout(t, 5*time.Second))
	}
}
