package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestSIPRouterEndDetail (issue 22 item 4): sipp calls an inbound agent and hangs up with a BYE
// carrying `Reason: Q.850;cause=16`; the conversation is stored ended caller_hung_up with that
// cause and a detail written for a person (end_detail in the API).
func TestSIPRouterEndDetail(t *testing.T) {
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
	if _, err := r.st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: r.org.ID, ProjectID: r.proj.ID, Number: "+14155550052", AgentID: ag.ID}); err != nil {
		t.Fatal(err)
	}
	r.st.AddCredit(ctx, r.org.ID, 5_000_000, "test")
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
	scenario := siptest.SippCaller(siptest.SippCall{Hold: 1500 * time.Millisecond, NoDTMF: true})
	withReason := strings.Replace(scenario, "CSeq: 2 BYE", "CSeq: 2 BYE\n      Reason: Q.850;cause=16;text=\"Normal call clearing\"", 1)
	if withReason == scenario {
		t.Fatal("the caller scenario has no BYE to add a Reason to")
	}
	os.WriteFile(filepath.Join(dir, "uac.xml"), []byte(withReason), 0o644)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, sippBin, srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550052", "-m", "1", "-i", "127.0.0.1",
		"-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "20s", "-timeout_error")
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sipp: %v\n%s", err, out)
	}
	var c store.Conversation
	waitFor(t, 10*time.Second, "the call's end", func() bool {
		cs, _ := r.st.ListConversations(ctx, store.ConversationFilter{OrgID: r.org.ID, Mode: store.ModeLive, Status: store.ConvEnded, Channel: store.ChannelPhone})
		if len(cs) == 1 {
			c = cs[0]
			return true
		}
		return false
	})
	want := store.CallOutcome{Q850Cause: 16, Detail: "the caller hung up (BYE, Q.850 cause 16 normal call clearing)"}
	if c.EndReason != string(session.EndCallerHungUp) || c.Outcome != want {
		t.Fatalf("ended %q with %+v; want caller_hung_up with %+v", c.EndReason, c.Outcome, want)
	}
}
