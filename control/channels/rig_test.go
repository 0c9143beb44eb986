package channels

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
)

// rig is a store, a bus and the fake vendors for runtimes under test, with an organization,
// a project and a published outbound agent.
type rig struct {
	t     *testing.T
	st    *store.Store
	bus   bus.Bus
	tp    *runtime.TestProviders
	org   store.Org
	proj  store.Project
	agent store.Agent
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := bus.NewMemory()
	t.Cleanup(func() { b.Close() })
	tp, err := runtime.NewTestProviders(quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	r := &rig{t: t, st: st, bus: b, tp: tp}
	r.org, _ = st.CreateOrg(ctx, "Acme")
	r.proj, _ = st.CreateProject(ctx, r.org.ID, "One")
	parsed, err := runtime.ParseStored(json.RawMessage(`{"agent": {"name": "Ava", "kind": "custom", "direction": "outbound",
		"channels": ["phone"], "system_prompt": "You help.", "first_message": "Hi, this is Ava."}, "references": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(parsed)
	a, err := st.Agents().Create(ctx, store.OrgScope(r.org.ID), store.NewAgent{ProjectID: r.proj.ID, Name: "Ava", Kind: "custom",
		Direction: "outbound", Channels: []string{"phone"}, Definition: raw})
	if err != nil {
		t.Fatal(err)
	}
	if _, r.agent, err = st.Agents().Publish(ctx, store.OrgScope(r.org.ID), a.ID, "", "test"); err != nil {
		t.Fatal(err)
	}
	return r
}

// node starts a runtime on the rig's store and bus.
func (r *rig) node(name string, media bool) *runtime.Runtime {
	r.t.Helper()
	rt, err := runtime.New(runtime.Options{NodeID: name, Store: r.st, Bus: r.bus, Providers: r.tp, TestProviders: r.tp, Media: media,
		DataDir: r.t.TempDir(), CalleePace: 50 * time.Millisecond, RingFor: 10 * time.Millisecond, Log: quiet()})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { rt.Close() })
	return rt
}

func (r *rig) get(id store.ConversationID) store.Conversation {
	r.t.Helper()
	c, err := r.st.GetConversation(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *rig) lines(id store.ConversationID) []store.ConversationLine {
	r.t.Helper()
	ls, err := r.st.AllLines(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return ls
}

func texts(ls []store.ConversationLine) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Text)
	}
	return out
}
