package runtime

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
)

// Issue 13 item 2: a chat is a durable text conversation. Its state is in the store, any node
// answers its next message (after a restart, after its node died), and only a real end ends it.

// storeKinds are the engines a chat test runs on: a SQLite file, and a fresh PostgreSQL schema
// (skipped with a note when PostgreSQL is missing, failed with PARLEY_REQUIRE_PEERS=1). Each
// gives the options of one database, which a test opens as often as it restarts.
func storeKinds(t *testing.T) []struct {
	name string
	opts func(t *testing.T) store.Options
} {
	out := []struct {
		name string
		opts func(t *testing.T) store.Options
	}{{"sqlite", func(t *testing.T) store.Options { return store.Options{DataDir: t.TempDir()} }}}
	ok := false
	t.Run("postgres available", func(t *testing.T) { testenv.PostgresURL(t); ok = true })
	if ok {
		out = append(out, struct {
			name string
			opts func(t *testing.T) store.Options
		}{"postgres", func(t *testing.T) store.Options { return pgOptions(t) }})
	}
	return out
}

// pgOptions makes a PostgreSQL schema for t (dropped when it ends) and returns the options of
// a store in it.
func pgOptions(t testing.TB) store.Options {
	t.Helper()
	base := testenv.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "rt_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return store.Options{URL: base + sep + "search_path=" + schema, MaxConns: 4}
}

// nodeOn starts a runtime named name on st and b with its own test providers (whose fake LLM
// records what it was asked); opt changes its options.
func (r *rig) nodeOn(name string, st *store.Store, b bus.Bus, opt func(*Options)) (*Runtime, *TestProviders) {
	r.t.Helper()
	tp, err := NewTestProviders(quiet())
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { tp.Close() })
	o := Options{NodeID: name, Store: st, Bus: b, Providers: tp, TestProviders: tp, DataDir: r.t.TempDir(), Log: quiet()}
	if opt != nil {
		opt(&o)
	}
	rt, err := New(o)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { rt.Close() })
	return rt, tp
}

// asked returns the messages of the last request the fake LLM got, as "role: content".
func asked(t *testing.T, tp *TestProviders) []string {
	t.Helper()
	reqs := tp.Fakes.Chat.Requests()
	if len(reqs) == 0 {
		t.Fatal("the fake LLM was asked nothing")
	}
	var out []string
	for _, m := range reqs[len(reqs)-1].Body["messages"].([]any) {
		mm := m.(map[string]any)
		out = append(out, fmt.Sprintf("%s: %v", mm["role"], mm["content"]))
	}
	return out
}

func mustSend(t *testing.T, rt *Runtime, id store.ConversationID, text string) Turn {
	t.Helper()
	turn, err := rt.Send(context.Background(), id, text, nil, nil)
	if err != nil {
		t.Fatalf("send %q on %s: %v", text, rt.NodeID(), err)
	}
	if want := "You said: " + text; turn.Agent.Text != want {
		t.Fatalf("reply %q, want %q", turn.Agent.Text, want)
	}
	return turn
}

// TestChatSurvivesRestart: a chat started and talked to on one node is still in progress after
// that node stops (the graceful stop of SIGTERM), and the next message, answered by a new
// node on a store opened again (a new process), continues it with its whole history: the LLM
// is asked with every earlier turn.
func TestChatSurvivesRestart(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			opts := k.opts(t)
			b1 := bus.NewMemory()
			defer b1.Close()
			r := newRigOn(t, openStore(t, opts), b1)
			a, tpA := r.nodeOn("a", r.st, b1, nil)
			ctx := context.Background()
			c := r.conversation(store.ChannelChat, store.ModeLive, store.ConvInProgress)
			if _, err := a.StartChat(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
			mustSend(t, a, c.ID, "My name is Ada.")
			mustSend(t, a, c.ID, "I like tea.")
			if got := asked(t, tpA); len(got) != 5 {
				t.Fatalf("the second message asked %q", got)
			}
			a.Close()
			if got := r.get(c.ID); got.Status != store.ConvInProgress || got.EndReason != "" {
				t.Fatalf("after the node stopped: %s %q; want in_progress", got.Status, got.EndReason)
			}
			if _, err := a.Send(ctx, c.ID, "Hello?", nil, nil); !errors.Is(err, ErrUnreachable) {
				t.Fatalf("a message to the stopped node: %v, want ErrUnreachable (retry elsewhere)", err)
			}

			// A new process: the store opened again, a new bus, a new node.
			st2 := openStore(t, opts)
			b2 := bus.NewMemory()
			defer b2.Close()
			bnode, tpB := r.nodeOn("b", st2, b2, nil)
			turn := mustSend(t, bnode, c.ID, "What do I like?")
			want := []string{"system: You help Ada.", "assistant: Hi Ada, this is Ava.", "user: My name is Ada.", "assistant: You said: My name is Ada.",
				"user: I like tea.", "assistant: You said: I like tea.", "user: What do I like?"}
			if got := asked(t, tpB); !slices.Equal(got, want) {
				t.Fatalf("the restarted node asked the LLM\n%q\nwant\n%q", got, want)
			}
			if turn.User.Seq != 6 || turn.Agent.Seq != 7 {
				t.Fatalf("turn seqs %d, %d; want 6, 7", turn.User.Seq, turn.Agent.Seq)
			}
			lines, _ := st2.AllLines(ctx, c.ID)
			if got := texts(lines); !slices.Equal(got, []string{"agent: Hi Ada, this is Ava.", "user: My name is Ada.", "agent: You said: My name is Ada.",
				"user: I like tea.", "agent: You said: I like tea.", "user: What do I like?", "agent: You said: What do I like?"}) {
				t.Fatalf("stored %q", got)
			}
			for i, l := range lines {
				if l.Seq != int64(i+1) {
					t.Fatalf("line %d has seq %d", i, l.Seq)
				}
			}
			got, st, _ := st2.GetChat(ctx, c.ID)
			if got.Status != store.ConvInProgress || st.Turns != 3 || st.Lease != "" || got.OwnerNode != "b" {
				t.Fatalf("after the message on b: %s, %+v, owner %q", got.Status, st, got.OwnerNode)
			}
			// The API's end still ends it, charging what every node's messages used.
			if err := bnode.End(ctx, c.ID, session.EndAPI, false); err != nil {
				t.Fatal(err)
			}
			got, _ = st2.GetConversation(ctx, c.ID)
			if got.Status != store.ConvEnded || got.EndReason != string(session.EndAPI) || got.CostMicros <= 0 {
				t.Fatalf("after the end: %+v", got)
			}
			if _, err := bnode.Send(ctx, c.ID, "Still there?", nil, nil); !errors.Is(err, ErrEnded) {
				t.Fatalf("a message after the end: %v, want ErrEnded", err)
			}
		})
	}
}

// TestChatOwnerDies runs two nodes on PostgreSQL and Redis. Node a answers the chat, then
// dies while answering a message (its store and bus are cut, nothing is given up): while its
// hold on the chat lasts node b refuses the next message as busy (two nodes never answer one
// chat at once); once it runs out, b answers with the history a stored, without a's
// unfinished message.
func TestChatOwnerDies(t *testing.T) {
	opts := pgOptions(t)
	redisURL := testenv.RedisURL(t)
	openBus := func() bus.Bus {
		var p [6]byte
		rand.Read(p[:])
		b, err := bus.Open(context.Background(), redisURL, nil, bus.WithPrefix("rtchat"+hex.EncodeToString(p[:])+":"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	busA, busB := openBus(), openBus()
	stA, stB := openStore(t, opts), openStore(t, opts)
	r := newRigOn(t, stB, busB)
	const ttl = time.Second
	a, tpA := r.nodeOn("a", stA, busA, func(o *Options) { o.ChatLeaseTTL = ttl })
	bn, tpB := r.nodeOn("b", stB, busB, func(o *Options) { o.ChatLeaseTTL = ttl })
	ctx := context.Background()
	c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
	if _, err := a.StartChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	mustSend(t, a, c.ID, "one")
	tpA.Fakes.Chat.StallNext(1, 0)
	stalled := make(chan error, 1)
	go func() {
		_, err := a.Send(ctx, c.ID, "two", nil, nil)
		stalled <- err
	}()
	waitFor(t, 5*time.Second, "node a to ask its LLM", func() bool { return len(tpA.Fakes.Chat.Requests()) == 2 })
	if _, err := bn.Send(ctx, c.ID, "three", nil, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("node b while a answers: %v, want ErrBusy", err)
	}
	// Node a dies: its store and bus go away with it.
	stA.Close()
	busA.Close()
	start := time.Now()
	var turn Turn
	waitFor(t, 10*time.Second, "node b to take the chat", func() bool {
		var err error
		turn, err = bn.Send(ctx, c.ID, "three", nil, nil)
		if err != nil && !errors.Is(err, ErrBusy) {
			t.Fatalf("node b: %v", err)
		}
		return err == nil
	})
	if d := time.Since(start); d > 3*ttl {
		t.Errorf("node b waited %v for a hold of %v", d, ttl)
	}
	if turn.Agent.Text != "You said: three" {
		t.Fatalf("b's reply %q", turn.Agent.Text)
	}
	want := []string{"system: You help Ada.", "assistant: Hi Ada, this is Ava.", "user: one", "assistant: You said: one", "user: three"}
	if got := asked(t, tpB); !slices.Equal(got, want) {
		t.Fatalf("node b asked\n%q\nwant\n%q", got, want)
	}
	tpA.Fakes.Chat.Close() // let a's stalled request go: a's answer is stored nowhere
	select {
	case err := <-stalled:
		if err == nil {
			t.Fatal("the dead node's message succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dead node's message never returned")
	}
	if got := texts(r.lines(c.ID)); !slices.Equal(got, []string{"agent: Hi Ada, this is Ava.", "user: one", "agent: You said: one", "user: three", "agent: You said: three"}) {
		t.Fatalf("stored %q", got)
	}
	mustSend(t, bn, c.ID, "four")
	if got := r.get(c.ID); got.Status != store.ConvInProgress {
		t.Fatalf("status %s", got.Status)
	}
}

// TestChatConcurrentSends sends many messages to one chat at once from two nodes on one store,
// each retried while the chat is busy: every message is answered once, and the history holds
// each message followed by its own reply (never two messages, or two replies, in a row).
func TestChatConcurrentSends(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			b := bus.NewMemory()
			defer b.Close()
			r := newRigOn(t, openStore(t, k.opts(t)), b)
			a, tpA := r.nodeOn("a", r.st, b, nil)
			bn, tpB := r.nodeOn("b", r.st, b, nil)
			tpA.Fakes.Chat.SetLatency(5*time.Millisecond, 0)
			tpB.Fakes.Chat.SetLatency(5*time.Millisecond, 0)
			ctx := context.Background()
			c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
			if _, err := a.StartChat(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
			const n = 12
			var busy atomic.Int64
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rt := []*Runtime{a, bn}[i%2]
					text := fmt.Sprintf("message %d", i)
					for try := 0; try < 2000; try++ {
						turn, err := rt.Send(ctx, c.ID, text, nil, nil)
						if errors.Is(err, ErrBusy) {
							busy.Add(1)
							time.Sleep(time.Millisecond)
							continue
						}
						if err != nil || turn.Agent.Text != "You said: "+text {
							t.Errorf("%s: %+v %v", text, turn, err)
						}
						return
					}
					t.Errorf("%s: always busy", text)
				}()
			}
			wg.Wait()
			if busy.Load() == 0 {
				t.Log("no message found the chat busy: the sends did not overlap")
			}
			lines := r.lines(c.ID)
			if len(lines) != 1+2*n {
				t.Fatalf("%d lines: %q", len(lines), texts(lines))
			}
			seen := map[string]bool{}
			for i := 1; i < len(lines); i += 2 {
				u, ag := lines[i], lines[i+1]
				if u.Role != "user" || ag.Role != "agent" || ag.Text != "You said: "+u.Text || seen[u.Text] {
					t.Fatalf("lines %d-%d interleaved: %q", i+1, i+2, texts(lines))
				}
				seen[u.Text] = true
			}
			// The LLM history is as clean: each request ends with its own message after the
			// replies to all earlier ones.
			_, st, _ := r.st.GetChat(ctx, c.ID)
			if st.Turns != n || st.Messages != 1+2*n {
				t.Fatalf("state %+v", st)
			}
			msgs, _ := r.st.ChatMessages(ctx, c.ID)
			for i := 1; i < len(msgs); i += 2 {
				if !strings.Contains(string(msgs[i]), `"user"`) || !strings.Contains(string(msgs[i+1]), `"assistant"`) {
					t.Fatalf("messages %d-%d: %s %s", i+1, i+2, msgs[i], msgs[i+1])
				}
			}
		})
	}
}

// TestChatIdleEndsAfterRestart: the idle deadline is kept in the store, so a node that did not
// start the chat ends it when it passes (reason silence_timeout), after the first node stopped.
// A message moves the deadline; a chat being answered is not ended.
func TestChatIdleEndsAfterRestart(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			opts := k.opts(t)
			b := bus.NewMemory()
			defer b.Close()
			r := newRigOn(t, openStore(t, opts), b)
			var clock atomic.Pointer[time.Time]
			t0 := time.Now()
			clock.Store(&t0)
			now := func() time.Time { return *clock.Load() }
			set := func(d time.Duration) { at := t0.Add(d); clock.Store(&at) }
			withClock := func(o *Options) { o.Now, o.ChatIdleTimeout = now, time.Hour }
			a, _ := r.nodeOn("a", r.st, b, withClock)
			ctx := context.Background()
			c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
			quiet := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
			for _, id := range []store.ConversationID{c.ID, quiet.ID} {
				if _, err := a.StartChat(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
			bn, tpB := r.nodeOn("b", openStore(t, opts), b, withClock)
			set(50 * time.Minute)
			if n, err := bn.EndIdleChats(ctx); n != 0 || err != nil {
				t.Fatalf("before the deadline: %d %v", n, err)
			}
			mustSend(t, bn, c.ID, "still here") // its deadline moves to 1h50m
			set(70 * time.Minute)
			if n, err := bn.EndIdleChats(ctx); n != 1 || err != nil {
				t.Fatalf("past the quiet chat's deadline: %d %v", n, err)
			}
			if got := r.get(quiet.ID); got.Status != store.ConvEnded || got.EndReason != string(session.EndSilenceTimeout) {
				t.Fatalf("the quiet chat: %s %q", got.Status, got.EndReason)
			}
			if got := r.get(c.ID); got.Status != store.ConvInProgress {
				t.Fatalf("the chat with a message ended: %s %q", got.Status, got.EndReason)
			}
			// Past its own deadline while a message is being answered: left alone until done.
			set(3 * time.Hour)
			tpB.Fakes.Chat.StallNext(1, 0)
			done := make(chan error, 1)
			go func() { _, err := bn.Send(ctx, c.ID, "slow", nil, nil); done <- err }()
			waitFor(t, 5*time.Second, "the LLM asked", func() bool { return len(tpB.Fakes.Chat.Requests()) == 2 })
			if n, err := bn.EndIdleChats(ctx); n != 0 || err != nil {
				t.Fatalf("a chat being answered was ended: %d %v", n, err)
			}
			tpB.Fakes.Chat.Close()
			<-done
			set(10 * time.Hour)
			if n, err := bn.EndIdleChats(ctx); n != 1 || err != nil {
				t.Fatalf("the second chat past its deadline: %d %v", n, err)
			}
			if got := r.get(c.ID); got.EndReason != string(session.EndSilenceTimeout) {
				t.Fatalf("ended %q", got.EndReason)
			}
			if _, err := bn.Send(ctx, c.ID, "hello?", nil, nil); !errors.Is(err, ErrEnded) {
				t.Fatalf("a message after the idle end: %v", err)
			}
		})
	}
}

// TestChatReapAndClose: neither the reaper of lost calls nor a node's stop ends a chat; a
// steering command reaches a chat no node keeps (say, then end).
func TestChatReapAndClose(t *testing.T) {
	r := newRig(t)
	a := r.node("a", false)
	ctx := context.Background()
	c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
	if _, err := a.StartChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ReapLost(ctx, -time.Hour); n != 0 || err != nil {
		t.Fatalf("the reaper ended %d conversations (%v)", n, err)
	}
	a.Close()
	bn := r.node("b", false)
	if n, _ := bn.ReapLost(ctx, -time.Hour); n != 0 || r.get(c.ID).Status != store.ConvInProgress {
		t.Fatalf("after a's stop the reaper ended the chat: %+v", r.get(c.ID))
	}
	say, _ := r.st.CreateCommand(ctx, store.Command{OrgID: r.org.ID, ConversationID: c.ID, Kind: store.CommandSay, Params: []byte(`{"text": "A word from the supervisor."}`)})
	if err := bn.Command(ctx, say); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.st.GetCommand(ctx, say.ID); got.Status != store.CommandDone {
		t.Fatalf("say: %+v", got)
	}
	turn := mustSend(t, bn, c.ID, "ok")
	if turn.User.Seq != 3 {
		t.Fatalf("user seq %d after the greeting and the say", turn.User.Seq)
	}
	if got := asked(t, r.tp); !slices.Contains(got, "assistant: A word from the supervisor.") {
		t.Fatalf("the LLM was not told what was said: %q", got)
	}
	end, _ := r.st.CreateCommand(ctx, store.Command{OrgID: r.org.ID, ConversationID: c.ID, Kind: store.CommandEnd})
	if err := bn.Command(ctx, end); err != nil {
		t.Fatal(err)
	}
	if got := r.get(c.ID); got.Status != store.ConvEnded || got.EndReason != string(session.EndAPI) {
		t.Fatalf("after end: %s %q", got.Status, got.EndReason)
	}
}

// TestChatCommandWaitsForMessage: a say and an end sent while a message is being answered are
// carried out after it, in that order (the reply is not cut, nothing interleaves); deleting
// (End if idle) meanwhile is refused as busy.
func TestChatCommandWaitsForMessage(t *testing.T) {
	r := newRig(t)
	a := r.node("a", false)
	bn := r.node("b", false)
	ctx := context.Background()
	c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
	if _, err := a.StartChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	r.tp.Fakes.Chat.SetLatency(300*time.Millisecond, 0)
	done := make(chan error, 1)
	go func() { _, err := a.Send(ctx, c.ID, "slow one", nil, nil); done <- err }()
	waitFor(t, 5*time.Second, "the LLM asked", func() bool { return len(r.tp.Fakes.Chat.Requests()) == 1 })
	if err := bn.End(ctx, c.ID, session.EndAPI, true); !errors.Is(err, ErrBusy) {
		t.Fatalf("End if idle while answering: %v, want ErrBusy", err)
	}
	say, _ := r.st.CreateCommand(ctx, store.Command{OrgID: r.org.ID, ConversationID: c.ID, Kind: store.CommandSay, Params: []byte(`{"text": "One moment."}`)})
	if err := bn.Command(ctx, say); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.st.GetCommand(ctx, say.ID); got.Status != store.CommandPending {
		t.Fatalf("the say ran while the message was answered: %+v", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the say done", func() bool {
		got, _ := r.st.GetCommand(ctx, say.ID)
		return got.Status == store.CommandDone
	})
	end, _ := r.st.CreateCommand(ctx, store.Command{OrgID: r.org.ID, ConversationID: c.ID, Kind: store.CommandEnd})
	if err := a.Command(ctx, end); err != nil {
		t.Fatal(err)
	}
	if got := texts(r.lines(c.ID)); !slices.Equal(got, []string{"agent: Hi Ada, this is Ava.", "user: slow one", "agent: You said: slow one", "agent: One moment."}) {
		t.Fatalf("stored %q", got)
	}
	if got := r.get(c.ID); got.EndReason != string(session.EndAPI) {
		t.Fatalf("ended %q", got.EndReason)
	}
}

// TestChatToolStateSurvives: a reply that called a tool is stored with the call and its
// result, so the next message, on another node, asks the model with the assistant's tool call
// and the tool message answering it (ids kept), as OpenAI's protocol requires.
func TestChatToolStateSurvives(t *testing.T) {
	r := newRig(t)
	a, tpA := r.nodeOn("a", r.st, r.bus, nil)
	bn, tpB := r.nodeOn("b", r.st, r.bus, nil)
	tpA.Fakes.Chat.Script().Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{ID: "call_42", Name: "lookup_order", Args: []byte(`{"order": "42"}`)}}},
		fakes.ScriptTurn{Text: "Order 42 ships today."})
	ctx := context.Background()
	c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
	if _, err := a.StartChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	turn, err := a.Send(ctx, c.ID, "Where is order 42?", nil, nil)
	if err != nil || turn.Agent.Text != "Order 42 ships today." {
		t.Fatalf("turn %+v, %v", turn, err)
	}
	mustSend(t, bn, c.ID, "Thanks")
	reqs := tpB.Fakes.Chat.Requests()
	last := reqs[len(reqs)-1]
	if last.Status != 200 {
		t.Fatalf("the fake refused the restored history (%d): %s", last.Status, last.Raw)
	}
	msgs := last.Body["messages"].([]any)
	var call, result map[string]any
	for _, m := range msgs {
		mm := m.(map[string]any)
		if tc, ok := mm["tool_calls"].([]any); ok && len(tc) == 1 {
			call = tc[0].(map[string]any)
		}
		if mm["role"] == "tool" {
			result = mm
		}
	}
	if call == nil || call["id"] != "call_42" || call["function"].(map[string]any)["name"] != "lookup_order" ||
		call["function"].(map[string]any)["arguments"] != `{"order":"42"}` {
		t.Fatalf("the restored tool call: %v\n%s", call, last.Raw)
	}
	if result == nil || result["tool_call_id"] != "call_42" {
		t.Fatalf("the restored tool result: %v\n%s", result, last.Raw)
	}
	if got := asked(t, tpB); got[len(got)-2] != "assistant: Order 42 ships today." || got[len(got)-1] != "user: Thanks" {
		t.Fatalf("asked %q", got)
	}
}

// BenchmarkChatSend measures what answering one chat message costs the runtime on SQLite with
// an LLM that answers at once: taking the lease, reading the state and the LLM messages back,
// building the engine, asking the (loopback) LLM and storing the turn, in chats of 20 messages.
func BenchmarkChatSend(b *testing.B) {
	r := newRig(b)
	rt := r.node("a", false)
	ctx := context.Background()
	var id store.ConversationID
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%20 == 0 {
			b.StopTimer()
			id = r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress).ID
			if _, err := rt.StartChat(ctx, id); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if _, err := rt.Send(ctx, id, "How are you today?", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
