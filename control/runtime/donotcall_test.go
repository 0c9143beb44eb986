package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// TestDoNotCallToolOffered checks when add_to_do_not_call is offered and what it writes (issue
// 15; the SIP end-to-end test is control/api TestCampaignDoNotCallTool).
func TestDoNotCallToolOffered(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, store.Options{DataDir: t.TempDir()})
	org, err := st.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	on := agentdef.Defaults()
	off := agentdef.Defaults()
	off.Agent.DoNotCallTool = false
	if !on.Agent.DoNotCallTool {
		t.Fatal("do_not_call_tool is off by default")
	}
	base := store.Conversation{ID: "c1", OrgID: org.ID, Channel: store.ChannelPhone, Direction: "outbound", Mode: store.ModeLive,
		FromNumber: "+14155550001", ToNumber: "+14155550123"}
	offered := func(c store.Conversation, def agentdef.Definition) (session.ToolRunner, bool) {
		var a session.Agent
		r := doNotCallFor(st, quiet(), c, &def, &a, nil)
		return r, len(a.Tools) == 1 && a.Tools[0].Name == ToolDoNotCall && json.Valid(a.Tools[0].Parameters)
	}
	for name, c := range map[string]func(*store.Conversation){
		"chat":      func(c *store.Conversation) { c.Channel = store.ChannelChat },
		"browser":   func(c *store.Conversation) { c.Channel = store.ChannelVoice },
		"anonymous": func(c *store.Conversation) { c.Direction, c.FromNumber = "inbound", "anonymous" },
	} {
		conv := base
		c(&conv)
		if r, ok := offered(conv, on); ok || r != nil {
			t.Errorf("%s: the tool is offered", name)
		}
	}
	if r, ok := offered(base, off); ok || r != nil {
		t.Error("do_not_call_tool false: the tool is offered")
	}

	// Outbound: the callee's number; inbound: the caller's.
	r, ok := offered(base, on)
	if !ok {
		t.Fatal("an outbound phone call is not offered the tool")
	}
	if _, err := r.Call(ctx, "other_tool", nil); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("another tool with no runner behind: %v", err)
	}
	out, err := r.Call(ctx, ToolDoNotCall, json.RawMessage(`{"reason":"stop calling me"}`))
	if err != nil || !strings.Contains(out, `"added":true`) {
		t.Fatalf("the call: %s, %v", out, err)
	}
	if out, err := r.Call(ctx, ToolDoNotCall, json.RawMessage(`not json`)); err != nil || !strings.Contains(out, `"added":false`) {
		t.Errorf("a second call: %s, %v", out, err)
	}
	d, err := st.DoNotCallList().Get(ctx, store.OrgScope(org.ID), "+14155550123")
	if err != nil || d.Source != store.DNCSourceCaller || d.Reason != "asked during conversation c1: stop calling me" {
		t.Errorf("the entry: %+v, %v", d, err)
	}
	in := base
	in.Direction = "inbound"
	r, _ = offered(in, on)
	if _, err := r.Call(ctx, ToolDoNotCall, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DoNotCallList().Get(ctx, store.OrgScope(org.ID), "+14155550001"); err != nil {
		t.Errorf("the inbound caller's number: %v", err)
	}
	// A test conversation rings nobody and leaves the list alone.
	test := base
	test.Mode, test.ToNumber = store.ModeTest, "+14155550999"
	r, _ = offered(test, on)
	if out, err := r.Call(ctx, ToolDoNotCall, nil); err != nil || !strings.Contains(out, `"test":true`) {
		t.Errorf("a test conversation: %s, %v", out, err)
	}
	if _, err := st.DoNotCallList().Get(ctx, store.OrgScope(org.ID), "+14155550999"); err == nil {
		t.Error("a test conversation wrote to the list")
	}
}
