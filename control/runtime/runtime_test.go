package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
)

// rig is a store, a bus and the test providers shared by one or more runtimes (nodes).
type rig struct {
	t     testing.TB
	st    *store.Store
	bus   bus.Bus
	tp    *TestProviders
	org   store.Org
	proj  store.Project
	agent store.Agent
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRig(t testing.TB) *rig {
	t.Helper()
	b := bus.NewMemory()
	t.Cleanup(func() { b.Close() })
	return newRigOn(t, openStore(t, store.Options{DataDir: t.TempDir()}), b)
}

// openStore opens and migrates a store, closed when t ends.
func openStore(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// newRigOn is a rig on a store and a bus.
func newRigOn(t testing.TB, st *store.Store, b bus.Bus) *rig {
	t.Helper()
	ctx := context.Background()
	tp, err := NewTestProviders(quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	r := &rig{t: t, st: st, bus: b, tp: tp}
	r.org, _ = st.CreateOrg(ctx, "Acme")
	r.proj, _ = st.CreateProject(ctx, r.org.ID, "One")
	def := `{"agent": {"name": "Ava", "kind": "custom", "direction": "outbound", "channels": ["phone", "chat"],
		"system_prompt": "You help {{customer}}.", "first_message": "Hi {{customer}}, this is Ava."}, "references": {}}`
	parsed, err := ParseStored(json.RawMessage(def))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(parsed)
	a, err := st.Agents().Create(ctx, store.OrgScope(r.org.ID), store.NewAgent{ProjectID: r.proj.ID, Name: "Ava", Kind: "custom", Direction: "outbound",
		Channels: []string{"phone", "chat"}, Definition: raw})
	if err != nil {
		t.Fatal(err)
	}
	if _, r.agent, err = st.Agents().Publish(ctx, store.OrgScope(r.org.ID), a.ID, "", "test"); err != nil {
		t.Fatal(err)
	}
	return r
}

// node starts a runtime on the rig's store and bus.
func (r *rig) node(name string, media bool, others ...string) *Runtime {
	r.t.Helper()
	rt, err := New(Options{NodeID: name, Store: r.st, Bus: r.bus, Providers: r.tp, TestProviders: r.tp, Media: media,
		MediaNodes: func() []string { return others }, DataDir: r.t.TempDir(), CalleePace: 50 * time.Millisecond,
		RingFor: 10 * time.Millisecond, Log: quiet()})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { rt.Close() })
	return rt
}

// conversation stores a conversation of the rig's agent.
func (r *rig) conversation(channel string, mode store.Mode, status string) store.Conversation {
	r.t.Helper()
	c, err := r.st.CreateConversation(context.Background(), store.Conversation{OrgID: r.org.ID, ProjectID: r.proj.ID, AgentID: r.agent.ID,
		Channel: channel, Direction: "outbound", Mode: mode, Status: status, Language: "en", ViaAPI: channel == store.ChannelChat,
		ToNumber: "+14155550100", Variables: json.RawMessage(`{"customer": "Ada"}`)})
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
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) get(id store.ConversationID) store.Conversation {
	r.t.Helper()
	c, err := r.st.GetConversation(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
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
		out = append(out, l.Role+": "+l.Text)
	}
	return out
}

func TestChat(t *testing.T) {
	r := newRig(t)
	r.tp.Fakes.Chat.SetLatency(0, 50) // 50 tokens a second: the reply streams over a while
	rt := r.node("a", false)
	ctx := context.Background()
	c := r.conversation(store.ChannelChat, store.ModeLive, store.ConvInProgress)
	first, err := rt.StartChat(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Text != "Hi Ada, this is Ava." {
		t.Fatalf("opening lines %+v", first)
	}
	// The reply streams: deltas arrive before Send returns.
	var mu sync.Mutex
	var deltas []string
	done := make(chan Turn, 1)
	go func() {
		turn, err := rt.Send(ctx, c.ID, "What can you do?", nil, func(d string) { mu.Lock(); deltas = append(deltas, d); mu.Unlock() })
		if err != nil {
			t.Error(err)
		}
		done <- turn
	}()
	waitFor(t, 5*time.Second, "a first delta", func() bool { mu.Lock(); defer mu.Unlock(); return len(deltas) > 0 })
	select {
	case <-done:
		t.Fatal("the turn completed with its first delta: nothing streamed")
	default:
	}
	// One message at a time.
	if _, err := rt.Send(ctx, c.ID, "Hello?", nil, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second message while answering: %v, want ErrBusy", err)
	}
	turn := <-done
	if turn.Agent.Text != "You said: What can you do?" || strings.Join(deltas, "") != turn.Agent.Text {
		t.Fatalf("turn %+v, deltas %q", turn, deltas)
	}
	waitFor(t, 5*time.Second, "three stored lines", func() bool { return len(r.lines(c.ID)) == 3 })
	if got := texts(r.lines(c.ID)); !slices.Equal(got, []string{"agent: Hi Ada, this is Ava.", "user: What can you do?", "agent: You said: What can you do?"}) {
		t.Fatalf("stored %q", got)
	}
	// Ending it stores the end, the cost, the charge and the event.
	if err := rt.End(ctx, c.ID, session.EndAPI, true); err != nil {
		t.Fatal(err)
	}
	got := r.get(c.ID)
	if got.Status != store.ConvEnded || got.EndReason != string(session.EndAPI) || got.CostMicros <= 0 {
		t.Fatalf("after end: %+v", got)
	}
	org, _ := r.st.GetOrg(ctx, r.org.ID)
	if org.CreditMicros != -got.CostMicros {
		t.Fatalf("credit %d after a conversation costing %d", org.CreditMicros, got.CostMicros)
	}
	evs, _ := r.st.ListEvents(ctx, r.org.ID, store.ModeLive, "", 20)
	var ended, final int // issue 14: transcript batches come too, and the whole transcript with the end
	for _, e := range evs {
		switch {
		case e.Type == "conversation.ended" && e.ConversationID == c.ID:
			ended++
		case e.Type == "conversation.transcript" && strings.Contains(string(e.Data), `"final":true`):
			final++
		}
	}
	if ended != 1 || final != 1 {
		t.Fatalf("events %+v", evs)
	}
	if _, err := rt.Send(ctx, c.ID, "Still there?", nil, nil); !errors.Is(err, ErrNotLive) && !errors.Is(err, ErrEnded) {
		t.Fatalf("a message after the end: %v", err)
	}
	waitFor(t, time.Second, "the runtime to forget it", func() bool { return rt.Live() == 0 })
}

// TestTestCallAcrossNodes places a test call from a node without the media role: it runs on
// the media node, is steered from the first, and its lines are stored in order.
func TestTestCallAcrossNodes(t *testing.T) {
	r := newRig(t)
	media := r.node("media", true)
	api := r.node("api", false, "media")
	ctx := context.Background()
	c := r.conversation(store.ChannelPhone, store.ModeTest, store.ConvPending)
	watch, release := api.Watch(c.ID)
	defer release()
	if err := api.Place(ctx, store.ModeTest, PlaceRequest{ConversationID: c.ID, Lines: []string{"Hello?", "Tell me more.", "Bye."}}); err != nil {
		t.Fatal(err)
	}
	if owner, err := api.Owner(ctx, c.ID); err != nil || owner != "media" {
		t.Fatalf("owner = %q, %v", owner, err)
	}
	select {
	case <-watch:
	case <-time.After(5 * time.Second):
		t.Fatal("no line note reached the api node")
	}
	waitFor(t, 5*time.Second, "the call in progress", func() bool { return r.get(c.ID).Status == store.ConvInProgress })
	cmd, err := r.st.CreateCommand(ctx, store.Command{OrgID: r.org.ID, ConversationID: c.ID, Kind: store.CommandSay, Params: json.RawMessage(`{"text": "A word from the supervisor."}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Command(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the say done", func() bool {
		got, _ := r.st.GetCommand(ctx, cmd.ID)
		return got.Status == store.CommandDone
	})
	waitFor(t, 10*time.Second, "the call to end", func() bool { return r.get(c.ID).Status == store.ConvEnded })
	got := r.get(c.ID)
	if got.EndReason != string(session.EndCallerHungUp) || got.RingingAt == nil || got.StartedAt == nil || got.CostMicros != 0 || got.OwnerNode != "media" {
		t.Fatalf("ended %+v", got)
	}
	lines := r.lines(c.ID)
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d: %q", i, l.Seq, texts(lines))
		}
	}
	all := strings.Join(texts(lines), "\n")
	for _, want := range []string{"agent: Hi Ada, this is Ava.", "user: Hello?", "agent: You said: Hello?", "agent: A word from the supervisor.", "user: Bye.", "agent: You said: Bye."} {
		if !strings.Contains(all, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, all)
		}
	}
	// The end is stored a moment before the media node lets the call go (unregister): a command
	// in that instant is still taken, and settled by unregister. Once the node has forgotten the
	// call, a command is refused.
	waitFor(t, time.Second, "the media node to forget it", func() bool { return media.Live() == 0 })
	if err := api.Command(ctx, cmd); !errors.Is(err, ErrNotLive) {
		t.Fatalf("a command after the end: %v", err)
	}
}

func TestTestCallTransferAndEnd(t *testing.T) {
	r := newRig(t)
	rt := r.node("a", true)
	ctx := context.Background()
	for _, kind := range []string{store.CommandTransfer, store.CommandEnd} {
		c := r.conversation(store.ChannelPhone, store.ModeTest, store.ConvPending)
		if err := rt.Place(ctx, store.ModeTest, PlaceRequest{ConversationID: c.ID, Lines: []string{"one", "two", "three", "four", "five", "six"}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the call in progress", func() bool { return r.get(c.ID).Status == store.ConvInProgress })
		cmd, _ := r.st.CreateCommand(ctx, store.Command{OrgID: r.org.ID, ConversationID: c.ID, Kind: kind})
		if err := rt.Command(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the call to end", func() bool { return r.get(c.ID).Status == store.ConvEnded })
		want := map[string]session.EndReason{store.CommandTransfer: session.EndTransferred, store.CommandEnd: session.EndAPI}[kind]
		if got := r.get(c.ID); got.EndReason != string(want) {
			t.Fatalf("%s: ended %s", kind, got.EndReason)
		}
		// The command's outcome is recorded once the stop it made returns, which may be after
		// the end is stored.
		var got store.Command
		waitFor(t, 5*time.Second, "the command settled", func() bool {
			got, _ = r.st.GetCommand(ctx, cmd.ID)
			return got.Status != store.CommandPending
		})
		if got.Status != store.CommandDone {
			t.Fatalf("%s: command %+v", kind, got)
		}
	}
}

func TestPlaceWithoutMedia(t *testing.T) {
	r := newRig(t)
	rt := r.node("api", false)
	c := r.conversation(store.ChannelPhone, store.ModeLive, store.ConvPending)
	if err := rt.Place(context.Background(), store.ModeLive, PlaceRequest{ConversationID: c.ID}); !errors.Is(err, ErrNoMedia) {
		t.Fatalf("Place = %v, want ErrNoMedia", err)
	}
	rt2 := r.node("media-without-trunk", true)
	if err := rt2.Place(context.Background(), store.ModeLive, PlaceRequest{ConversationID: c.ID}); !errors.Is(err, ErrNoMedia) {
		t.Fatalf("Place on a media node without a dialer = %v, want ErrNoMedia", err)
	}
}

func TestReapLost(t *testing.T) {
	r := newRig(t)
	rt := r.node("a", false)
	ctx := context.Background()
	c := r.conversation(store.ChannelPhone, store.ModeTest, store.ConvPending)
	r.st.SetConversationStatus(ctx, c.ID, store.ConvInProgress, time.Now())
	if n, err := rt.ReapLost(ctx, time.Hour); n != 0 || err != nil {
		t.Fatalf("reaped a fresh conversation: %d %v", n, err)
	}
	if n, err := rt.ReapLost(ctx, -time.Minute); n != 1 || err != nil {
		t.Fatalf("ReapLost = %d, %v", n, err)
	}
	if got := r.get(c.ID); got.EndReason != string(session.EndNetworkLost) {
		t.Fatalf("reaped as %q", got.EndReason)
	}
}

// registerChat makes an in-progress test chat and registers it as live on rt.
func registerChat(t *testing.T, r *rig, rt *Runtime) (store.Conversation, *live) {
	t.Helper()
	c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
	l, err := rt.register(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}

// TestPersisterOrder feeds lines out of order: they are stored in seq order, none skipped.
func TestPersisterOrder(t *testing.T) {
	r := newRig(t)
	rt := r.node("a", false)
	c, l := registerChat(t, r, rt)
	now := time.Now()
	for _, seq := range []int64{2, 3, 1, 5, 4} {
		l.p.LineAdded(session.Line{Seq: seq, Role: session.RoleUser, Text: "x", Start: now, End: now})
	}
	waitFor(t, 5*time.Second, "five lines", func() bool { return len(r.lines(c.ID)) == 5 })
	l.p.Ended(session.EndCompleted, session.Cost{LLMInputTokens: 3})
	<-l.p.done
	if got := r.get(c.ID); got.LastSeq != 5 || got.Status != store.ConvEnded || got.CostMicros != 0 {
		t.Fatalf("after end %+v", got)
	}
}

// TestPersisterEndWaitsForCommand: a command being carried out when the conversation ends
// (the end or transfer that caused it) holds the end's storing until its outcome is recorded,
// so a client that sees the end finds the command settled; a hold never released delays the
// end by commandWait only.
func TestPersisterEndWaitsForCommand(t *testing.T) {
	r := newRig(t)
	rt := r.node("a", false)
	c, l := registerChat(t, r, rt)
	l.p.holdEnd()
	l.p.Ended(session.EndAPI, session.Cost{})
	select {
	case <-l.p.done:
		t.Fatal("the end was stored while a command held it")
	case <-time.After(300 * time.Millisecond):
	}
	if got := r.get(c.ID); got.Status == store.ConvEnded {
		t.Fatalf("stored ended while held: %+v", got)
	}
	l.p.releaseEnd()
	select {
	case <-l.p.done:
	case <-time.After(commandWait / 2):
		t.Fatal("the end was not stored once the command let go")
	}
	if got := r.get(c.ID); got.Status != store.ConvEnded || got.EndReason != string(session.EndAPI) {
		t.Fatalf("after the release %+v", got)
	}

	// Never released (a command whose record hangs): the end is stored after commandWait.
	c2, l2 := registerChat(t, r, rt)
	l2.p.holdEnd()
	start := time.Now()
	l2.p.Ended(session.EndAPI, session.Cost{})
	select {
	case <-l2.p.done:
		if d := time.Since(start); d < commandWait-100*time.Millisecond {
			t.Fatalf("stored after %v, before commandWait (%v)", d, commandWait)
		}
	case <-time.After(commandWait + 5*time.Second):
		t.Fatal("a hold never released kept the end from being stored")
	}
	if got := r.get(c2.ID); got.Status != store.ConvEnded {
		t.Fatalf("after commandWait %+v", got)
	}
}

var _ = fakes.ScriptEcho

// TestCloseEndsAsShutdown is issue 22 item 2: closing a node's runtime ends the calls still
// live as shutdown (not failed), stores their end, and returns within its budget.
func TestCloseEndsAsShutdown(t *testing.T) {
	r := newRig(t)
	rt := r.node("a", true)
	ctx := context.Background()
	c := r.conversation(store.ChannelPhone, store.ModeTest, store.ConvPending)
	if err := rt.Place(ctx, store.ModeTest, PlaceRequest{ConversationID: c.ID, Lines: []string{"one", "two", "three", "four", "five", "six"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the call in progress", func() bool { return r.get(c.ID).Status == store.ConvInProgress })
	start := time.Now()
	rt.Close()
	if d := time.Since(start); d > closeBudget+500*time.Millisecond {
		t.Errorf("Close took %v (budget %v)", d, closeBudget)
	}
	got := r.get(c.ID)
	if got.Status != store.ConvEnded || got.EndReason != string(session.EndShutdown) {
		t.Fatalf("after Close: status %s, end reason %q; want ended, shutdown", got.Status, got.EndReason)
	}
}

// TestReapLostRecoversRecording is issue 22 item 3: the recording a killed node left (its
// header sizes never patched) is repaired and named on the reaped conversation; a recording of
// a conversation that does not exist is removed.
func TestReapLostRecoversRecording(t *testing.T) {
	r := newRig(t)
	dataDir := t.TempDir()
	ctx := context.Background()
	c := r.conversation(store.ChannelPhone, store.ModeTest, store.ConvPending)
	r.st.SetConversationStatus(ctx, c.ID, store.ConvInProgress, time.Now())
	dir := filepath.Join(dataDir, "recordings")
	os.MkdirAll(dir, 0o750)
	// A WAV as media.Recorder starts it (sizes 0 until a checkpoint), with 1,000.5 frames of audio.
	h := make([]byte, 44)
	copy(h, "RIFF")
	binary.LittleEndian.PutUint32(h[4:], 36)
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1)
	binary.LittleEndian.PutUint16(h[22:], 2)
	binary.LittleEndian.PutUint32(h[24:], 16000)
	binary.LittleEndian.PutUint32(h[28:], 64000)
	binary.LittleEndian.PutUint16(h[32:], 4)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	wav := append(h, make([]byte, 4002)...)
	path := filepath.Join(dir, string(c.ID)+".wav")
	if err := os.WriteFile(path, wav, 0o640); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(dir, string(store.NewConversationID())+".wav")
	os.WriteFile(orphan, wav, 0o640)
	rt, err := New(Options{NodeID: "a", Store: r.st, Bus: r.bus, DataDir: dataDir, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if n, err := rt.ReapLost(ctx, -time.Minute); n != 1 || err != nil {
		t.Fatalf("ReapLost = %d, %v", n, err)
	}
	got := r.get(c.ID)
	if got.Recording != "recordings/"+string(c.ID)+".wav" {
		t.Fatalf("recording %q", got.Recording)
	}
	b, _ := os.ReadFile(path)
	if len(b) != 44+4000 || binary.LittleEndian.Uint32(b[40:]) != 4000 || binary.LittleEndian.Uint32(b[4:]) != 36+4000 {
		t.Errorf("repaired WAV: %d bytes, data size %d, RIFF size %d", len(b), binary.LittleEndian.Uint32(b[40:]), binary.LittleEndian.Uint32(b[4:]))
	}
	waitFor(t, 5*time.Second, "the orphaned recording removed", func() bool {
		_, err := os.Stat(orphan)
		return errors.Is(err, os.ErrNotExist)
	})
}

// TestReapDeadNodes is issue 22 item 9: the calls of a node the cluster takes for dead end at
// once (network_lost when live, failed when not started), their slots are given back and
// their ownership removed; the calls of living nodes and of this node are left alone.
func TestReapDeadNodes(t *testing.T) {
	r := newRig(t)
	rt := r.node("a", false)
	ctx := context.Background()
	own := func(status, node string) store.Conversation {
		c := r.conversation(store.ChannelPhone, store.ModeLive, store.ConvPending)
		if status != store.ConvPending {
			r.st.SetConversationStatus(ctx, c.ID, status, time.Now())
		}
		if err := r.st.SetConversationOwner(ctx, c.ID, node); err != nil {
			t.Fatal(err)
		}
		if err := r.bus.Set(ctx, ownerKey(c.ID), []byte(node), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := rt.AcquireCallSlot(ctx, r.org.ID, c.ID, 0); err != nil {
			t.Fatal(err)
		}
		return c
	}
	live, ringing, alive, mine := own(store.ConvInProgress, "b"), own(store.ConvRinging, "b"), own(store.ConvInProgress, "c"), own(store.ConvInProgress, "a")
	deadNodes := map[string]bool{}
	dead := func(n string) bool { return deadNodes[n] }
	if n, err := rt.ReapDeadNodes(ctx, dead); n != 0 || err != nil {
		t.Fatalf("nothing dead yet: %d, %v", n, err)
	}
	deadNodes["b"], deadNodes["a"] = true, true // a is this node: never reaped by itself
	if n, err := rt.ReapDeadNodes(ctx, dead); n != 2 || err != nil {
		t.Fatalf("ReapDeadNodes = %d, %v", n, err)
	}
	for c, want := range map[store.ConversationID]session.EndReason{live.ID: session.EndNetworkLost, ringing.ID: session.EndFailed} {
		if got := r.get(c); got.Status != store.ConvEnded || got.EndReason != string(want) {
			t.Errorf("%s: %s %q, want ended %q", c, got.Status, got.EndReason, want)
		}
		if _, err := rt.Owner(ctx, c); !errors.Is(err, ErrNotLive) {
			t.Errorf("%s: still owned (%v)", c, err)
		}
	}
	for _, c := range []store.ConversationID{alive.ID, mine.ID} {
		if got := r.get(c); got.Status == store.ConvEnded {
			t.Errorf("%s of a living node ended", c)
		}
	}
	if n, _ := r.bus.IncrBy(ctx, slotsKey(r.org.ID), 0, 0); n != 2 {
		t.Errorf("%d slots held, want 2 (the living calls')", n)
	}
	if n, err := rt.ReapDeadNodes(ctx, dead); n != 0 || err != nil {
		t.Fatalf("second pass = %d, %v", n, err)
	}
}
