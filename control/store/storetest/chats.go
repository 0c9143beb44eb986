package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testChatState is issue 13 item 2 in the store: a chat's state and LLM messages are kept
// with it; one holder at a time leases it, a lease that ran out is taken by another holder,
// and the first holder's late write then stores nothing; idle chats are found by their
// deadline (or, stored by an older version without one, by their last change); the reaper of
// lost calls never sees a chat in progress; deleting the chat removes its messages.
func testChatState(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	in := newConv(w, w.p1.ID, store.ChannelChat)
	in.Status, in.ViaAPI = store.ConvInProgress, true
	c := must[store.Conversation](t, "create chat")(w.s.CreateConversation(ctx, in))
	t0 := time.Now().UTC().Truncate(time.Second) // the later checks ask at time.Now(): t0 must follow the clock
	if err := w.s.StartChatState(ctx, c.ID, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	_, st, err := w.s.GetChat(ctx, c.ID)
	if err != nil || st.IdleSeconds != 3600 || st.IdleAt == nil || !st.IdleAt.Equal(t0.Add(time.Hour)) || st.Lease != "" || st.Messages != 0 {
		t.Fatalf("a started chat: %+v, %v", st, err)
	}

	// A holds it; B cannot take it until A's lease runs out.
	_, st, ok, err := w.s.LeaseChat(ctx, c.ID, "node-a/1", t0, 10*time.Second)
	if err != nil || !ok || st.Lease != "node-a/1" {
		t.Fatalf("lease by A: %v %v %+v", ok, err, st)
	}
	if got := must[store.Conversation](t, "get")(w.s.GetConversation(ctx, c.ID)); got.OwnerNode != "node-a" {
		t.Fatalf("owner %q", got.OwnerNode)
	}
	if _, _, ok, err := w.s.LeaseChat(ctx, c.ID, "node-b/1", t0.Add(5*time.Second), 10*time.Second); ok || err != nil {
		t.Fatalf("B took a held lease: %v %v", ok, err)
	}
	if ok, err := w.s.RenewChatLease(ctx, c.ID, "node-a/1", t0.Add(20*time.Second)); !ok || err != nil {
		t.Fatalf("renew by A: %v %v", ok, err)
	}
	if _, _, ok, _ := w.s.LeaseChat(ctx, c.ID, "node-b/1", t0.Add(15*time.Second), 10*time.Second); ok {
		t.Fatal("B took a renewed lease")
	}
	msg := func(s string) json.RawMessage { return json.RawMessage(`{"role": "user", "content": "` + s + `"}`) }
	line := func(seq int64, role, text string) store.ConversationLine {
		return store.ConversationLine{Seq: seq, Role: role, Text: text, Start: t0, End: t0}
	}
	idle := t0.Add(time.Hour + 20*time.Second)
	if err := w.s.SaveChat(ctx, c.ID, "node-a/1", store.ChatUpdate{Lines: []store.ConversationLine{line(1, "user", "one"), line(2, "agent", "One.")},
		Messages: []json.RawMessage{msg("one"), json.RawMessage(`{"role": "assistant", "content": "One."}`)}, From: 0, Turns: 1,
		Cost: json.RawMessage(`{"llm_input_tokens": 7}`), IdleAt: &idle, At: t0.Add(20 * time.Second), Release: true}); err != nil {
		t.Fatal(err)
	}
	_, st, _ = w.s.GetChat(ctx, c.ID)
	if st.Turns != 1 || st.Messages != 2 || st.Lease != "" || st.LeaseUntil != nil || !st.IdleAt.Equal(idle) {
		t.Fatalf("after A's message: %+v", st)
	}
	sameJSON(t, "cost", st.Cost, json.RawMessage(`{"llm_input_tokens":7}`))
	if got := must[[]store.ConversationLine](t, "lines")(w.s.AllLines(ctx, c.ID)); len(got) != 2 {
		t.Fatalf("lines %+v", got)
	}

	// A leases again, and dies: its lease runs out, B takes the chat, and A's late write of
	// what it answered stores nothing.
	if _, _, ok, _ := w.s.LeaseChat(ctx, c.ID, "node-a/2", t0.Add(time.Minute), 10*time.Second); !ok {
		t.Fatal("A could not lease a free chat")
	}
	_, st, ok, err = w.s.LeaseChat(ctx, c.ID, "node-b/2", t0.Add(time.Minute+11*time.Second), 10*time.Second)
	if !ok || err != nil || st.Turns != 1 || st.Messages != 2 {
		t.Fatalf("B after A's lease ran out: %v %v %+v", ok, err, st)
	}
	late := store.ChatUpdate{Lines: []store.ConversationLine{line(3, "user", "two")}, Messages: []json.RawMessage{msg("two")}, From: 2, Turns: 2, At: t0.Add(2 * time.Minute), Release: true}
	wantErr(t, "a write by a holder whose lease was taken", w.s.SaveChat(ctx, c.ID, "node-a/2", late), store.ErrConflict)
	if ok, _ := w.s.RenewChatLease(ctx, c.ID, "node-a/2", t0.Add(time.Hour)); ok {
		t.Fatal("A renewed a lease B holds")
	}
	_ = w.s.ReleaseChatLease(ctx, c.ID, "node-a/2") // A's release leaves B's lease alone
	if _, st, _ := w.s.GetChat(ctx, c.ID); st.Lease != "node-b/2" {
		t.Fatalf("lease after A's release: %q", st.Lease)
	}
	// A writer that read fewer messages than are stored stores nothing either.
	stale := late
	stale.From = 1
	wantErr(t, "a stale message count", w.s.SaveChat(ctx, c.ID, "node-b/2", stale), store.ErrConflict)
	late.Lines = append(late.Lines, line(4, "agent", "Two."))
	late.Messages = append(late.Messages, json.RawMessage(`{"role": "assistant", "content": "Two."}`))
	if err := w.s.SaveChat(ctx, c.ID, "node-b/2", late); err != nil {
		t.Fatal(err)
	}
	ms := must[[]json.RawMessage](t, "messages")(w.s.ChatMessages(ctx, c.ID))
	if len(ms) != 4 {
		t.Fatalf("%d messages", len(ms))
	}
	for i, want := range []string{`{"role":"user","content":"one"}`, `{"role":"assistant","content":"One."}`, `{"role":"user","content":"two"}`, `{"role":"assistant","content":"Two."}`} {
		sameJSON(t, "message", ms[i], json.RawMessage(want))
	}
	if got := must[store.Conversation](t, "get")(w.s.GetConversation(ctx, c.ID)); got.LastSeq != 4 {
		t.Fatalf("last seq %d", got.LastSeq)
	}

	// Idle: not before the deadline, nor while a holder answers; after it, yes. The reaper of
	// lost calls never lists a chat in progress, however old.
	if ids, err := w.s.IdleChats(ctx, t0.Add(30*time.Minute), time.Time{}, 10); err != nil || len(ids) != 0 {
		t.Fatalf("idle before the deadline: %v %v", ids, err)
	}
	later := t0.Add(3 * time.Hour)
	if ids, _ := w.s.IdleChats(ctx, later, time.Time{}, 10); len(ids) != 1 || ids[0] != c.ID {
		t.Fatalf("idle after the deadline: %v", ids)
	}
	if _, _, ok, _ := w.s.LeaseChat(ctx, c.ID, "node-c/1", later, time.Minute); !ok {
		t.Fatal("lease for the idle end")
	}
	if ids, _ := w.s.IdleChats(ctx, later.Add(time.Second), time.Time{}, 10); len(ids) != 0 {
		t.Fatalf("a held chat listed as idle: %v", ids)
	}
	if cs, err := w.s.ActiveConversations(ctx, later.Add(24*time.Hour), 10); err != nil || len(cs) != 0 {
		t.Fatalf("the reaper of lost calls sees %d conversations (%v)", len(cs), err)
	}

	// A chat of an older version (no deadline stored) is idle by its last change.
	old := newConv(w, w.p1.ID, store.ChannelChat)
	old.Status, old.ViaAPI = store.ConvInProgress, true
	oc := must[store.Conversation](t, "create old chat")(w.s.CreateConversation(ctx, old))
	if ids, _ := w.s.IdleChats(ctx, time.Now(), time.Now().Add(-time.Hour), 10); len(ids) != 0 {
		t.Fatalf("a fresh old-version chat listed: %v", ids)
	}
	if ids, _ := w.s.IdleChats(ctx, time.Now(), time.Now().Add(time.Hour), 10); len(ids) != 1 || ids[0] != oc.ID {
		t.Fatalf("an old-version chat past the limit: %v", ids)
	}
	if ids, _ := w.s.IdleChats(ctx, time.Now(), time.Time{}, 10); len(ids) != 0 {
		t.Fatalf("old-version chats with no limit: %v", ids)
	}
	// A chat started without a limit is never idle, whatever the limit of the node that looks.
	never := newConv(w, w.p1.ID, store.ChannelChat)
	never.Status, never.ViaAPI = store.ConvInProgress, true
	nc := must[store.Conversation](t, "create chat without limit")(w.s.CreateConversation(ctx, never))
	if err := w.s.StartChatState(ctx, nc.ID, 0, t0); err != nil {
		t.Fatal(err)
	}
	if ids, _ := w.s.IdleChats(ctx, time.Now().Add(time.Hour), time.Now().Add(time.Hour), 10); len(ids) != 1 || ids[0] != oc.ID {
		t.Fatalf("idle with a chat without limit: %v", ids)
	}
	if _, st, _ := w.s.GetChat(ctx, nc.ID); st.IdleSeconds != -1 || st.IdleAt != nil {
		t.Fatalf("a chat without limit: %+v", st)
	}

	// A phone call is no chat: it cannot be leased. Ending and deleting the chat removes its
	// messages; an ended chat cannot be leased.
	call := must[store.Conversation](t, "create call")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelPhone)))
	if got, _, ok, err := w.s.LeaseChat(ctx, call.ID, "node-a/3", later, time.Minute); ok || err != nil || got.Channel != store.ChannelPhone {
		t.Fatalf("lease of a call: %v %v", ok, err)
	}
	if ok, err := w.s.EndConversation(ctx, c.ID, store.ConversationEnd{Reason: "ended_by_api", At: later}); !ok || err != nil {
		t.Fatalf("end: %v %v", ok, err)
	}
	if got, _, ok, _ := w.s.LeaseChat(ctx, c.ID, "node-a/4", later.Add(time.Hour), time.Minute); ok || got.Status != store.ConvEnded {
		t.Fatal("an ended chat was leased")
	}
	wantErr(t, "a write to an ended chat", w.s.SaveChat(ctx, c.ID, "node-c/1", store.ChatUpdate{From: 4, At: later}), store.ErrConflict)
	if _, err := w.s.Conversations().Delete(ctx, store.OrgScope(w.org.ID), c.ID, later); err != nil {
		t.Fatal(err)
	}
	if ms, err := w.s.ChatMessages(ctx, c.ID); err != nil || len(ms) != 0 {
		t.Fatalf("messages after delete: %d %v", len(ms), err)
	}
	_, _, _, err = w.s.LeaseChat(ctx, c.ID, "", later, time.Minute)
	wantErr(t, "a lease without holder", err, store.ErrInvalid)
	wantErr(t, "a message that is no object", w.s.SaveChat(ctx, oc.ID, "x", store.ChatUpdate{Messages: []json.RawMessage{json.RawMessage(`[1]`)}}), store.ErrInvalid)
}
