package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/sip/siptest"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// TestSIPRouterInbound: sipp calls a number of an inbound agent; the router takes the call in a
// live conversation (in progress, the greeting spoken), sipp's BYE ends it as caller_hung_up,
// and the recording is named. An unknown number is refused 404 and a frozen organization 403.
func TestSIPRouterInbound(t *testing.T) {
	sippBin := testenv.NeedCommand(t, "sipp")
	r := newRig(t)
	rt := r.node("media", true)
	ctx := context.Background()
	def := `{"agent": {"name": "Desk", "kind": "custom", "direction": "inbound", "channels": ["phone"],
		"system_prompt": "You answer the phone.", "first_message": "Thank you for calling."}, "references": {}}`
	parsed, _ := runtime.ParseStored(json.RawMessage(def))
	raw, _ := json.Marshal(parsed)
	ag, err := r.st.Agents().Create(ctx, store.OrgScope(r.org.ID), store.NewAgent{ProjectID: r.proj.ID, Name: "Desk", Kind: "custom", Direction: "inbound",
		Channels: []string{"phone"}, Definition: raw})
	if err != nil {
		t.Fatal(err)
	}
	r.st.Agents().Publish(ctx, store.OrgScope(r.org.ID), ag.ID, "", "test")
	if _, err := r.st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: r.org.ID, ProjectID: r.proj.ID, Number: "+14155550050", AgentID: ag.ID}); err != nil {
		t.Fatal(err)
	}
	base := testenv.RTPBase(99)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 99}, RTPIP: netip.MustParseAddr("127.0.0.1"),
		Router: Router(rt, 0), Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "loop", URI: "sip:127.0.0.1:5060", Transport: sip.UDP,
			AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	defer func() { stop(); <-served }()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "uac.xml"), []byte(siptest.SippCaller(siptest.SippCall{Hold: 2500 * time.Millisecond, NoDTMF: true})), 0o644)
	sipp := func(number string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, sippBin, srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", number, "-m", "1", "-i", "127.0.0.1",
			"-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "20s", "-timeout_error")
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// No credit: refused.
	if out, err := sipp("+14155550050"); err == nil {
		t.Fatalf("a call of an organization without credit was taken:\n%s", out)
	}
	r.st.AddCredit(ctx, r.org.ID, 5_000_000, "test")
	if out, err := sipp("+14155550050"); err != nil {
		t.Fatalf("sipp: %v\n%s", err, out)
	}
	var c store.Conversation
	waitFor(t, 10*time.Second, "the call's end", func() bool {
		cs, _ := r.st.ListConversations(ctx, store.ConversationFilter{OrgID: r.org.ID, Mode: store.ModeLive, Status: store.ConvEnded, Channel: store.ChannelPhone})
		for _, x := range cs {
			if x.EndReason == string(session.EndCallerHungUp) {
				c = x
				return true
			}
		}
		return false
	})
	if c.Direction != "inbound" || c.FromNumber != "+15550001111" || c.ToNumber != "+14155550050" || c.StartedAt == nil || c.CostMicros <= 0 {
		t.Fatalf("conversation %+v", c)
	}
	lines := r.lines(c.ID)
	if len(lines) == 0 || !strings.Contains(lines[0].Text, "Thank you for calling") {
		t.Fatalf("lines %q", texts(lines))
	}
	waitFor(t, 5*time.Second, "the recording", func() bool { return r.get(c.ID).Recording != "" })
	// An unknown number.
	if out, err := sipp("+14155559999"); err == nil || !strings.Contains(out, "404") && !strings.Contains(out, "Unexpected") {
		t.Fatalf("an unknown number was taken: %v\n%s", err, out)
	}
	_ = rt
}

// TestSIPRouterUnacknowledged is issue 22 item 1 end to end: with a limit of two calls, two
// INVITEs whose 200 is never acknowledged and one whose caller sends BYE before the ACK each
// end their conversation (stored ended), give their slot back and close their recording within
// a second of the call's end; the organization can then still take a call.
func TestSIPRouterUnacknowledged(t *testing.T) {
	r := newRig(t)
	rt := r.node("media", true)
	ctx := context.Background()
	def := `{"agent": {"name": "Desk", "kind": "custom", "direction": "inbound", "channels": ["phone"],
		"system_prompt": "You answer the phone.", "first_message": "Thank you for calling."}, "references": {}}`
	parsed, _ := runtime.ParseStored(json.RawMessage(def))
	raw, _ := json.Marshal(parsed)
	ag, err := r.st.Agents().Create(ctx, store.OrgScope(r.org.ID), store.NewAgent{ProjectID: r.proj.ID, Name: "Desk", Kind: "custom", Direction: "inbound",
		Channels: []string{"phone"}, Definition: raw})
	if err != nil {
		t.Fatal(err)
	}
	r.st.Agents().Publish(ctx, store.OrgScope(r.org.ID), ag.ID, "", "test")
	if _, err := r.st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: r.org.ID, ProjectID: r.proj.ID, Number: "+14155550051", AgentID: ag.ID}); err != nil {
		t.Fatal(err)
	}
	r.st.AddCredit(ctx, r.org.ID, 5_000_000, "test")
	base := testenv.RTPBase(99)
	const ackTimeout = 400 * time.Millisecond
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 99}, RTPIP: netip.MustParseAddr("127.0.0.1"),
		Router: Router(rt, 2), Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "loop", URI: "sip:127.0.0.1:5060", Transport: sip.UDP,
			AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}), AckTimeout: ackTimeout, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	defer func() { stop(); <-served }()
	rtpSink, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rtpSink.Close()
	rtpAddr := rtpSink.LocalAddr().(*net.UDPAddr).AddrPort()
	active := func() int64 {
		n, _ := rt.CallSlots(ctx, r.org.ID)
		return n
	}
	ended := func() []store.Conversation {
		cs, _ := r.st.ListConversations(ctx, store.ConversationFilter{OrgID: r.org.ID, Mode: store.ModeLive, Status: store.ConvEnded, Channel: store.ChannelPhone})
		return cs
	}
	for i, how := range []string{"no ack", "no ack", "bye before ack"} {
		u := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
		u.Invite("+14155550051", rtpAddr)
		if !u.WaitStatus(200, 200, 5*time.Second) {
			t.Fatalf("call %d (%s): %v", i, how, u)
		}
		start := time.Now()
		if how == "bye before ack" {
			u.Bye()
		}
		waitFor(t, ackTimeout+3*time.Second, fmt.Sprintf("call %d (%s) stored ended", i, how), func() bool { return len(ended()) == i+1 })
		if d := time.Since(start); d > ackTimeout+time.Second {
			t.Errorf("call %d (%s): ended %v after the 200", i, how, d)
		}
		waitFor(t, time.Second, "the slot given back", func() bool { return active() == 0 })
		waitFor(t, time.Second, "the conversation gone from the node", func() bool { return rt.Live() == 0 })
		u.Close()
	}
	for _, c := range ended() {
		want := string(session.EndNetworkLost)
		if c.EndReason != want && c.EndReason != string(session.EndCallerHungUp) {
			t.Errorf("conversation %s ended %q", c.ID, c.EndReason)
		}
		waitFor(t, time.Second, "the recording closed and named", func() bool { return r.get(c.ID).Recording != "" })
	}
	// Issue 22 item 8: a number whose agent only places calls says so.
	if _, err := r.st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: r.org.ID, ProjectID: r.proj.ID, Number: "+14155550052", AgentID: r.agent.ID}); err != nil {
		t.Fatal(err)
	}
	out := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	out.Invite("+14155550052", rtpAddr)
	if !out.WaitStatus(480, 480, 5*time.Second) || !strings.Contains(out.FinalReason(), "agent does not answer calls") {
		t.Errorf("a number of an outbound-only agent: %v, Reason %q", out, out.FinalReason())
	}
	// The organization is not blocked: a well-behaved call is taken.
	u := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+14155550051", rtpAddr)
	if !u.WaitStatus(200, 200, 5*time.Second) {
		t.Fatalf("the organization is blocked after unacknowledged calls: %v", u)
	}
	u.Ack()
	u.Bye()
	waitFor(t, 5*time.Second, "the last call's end", func() bool { return len(ended()) == 4 })
}
