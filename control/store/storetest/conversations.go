package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testConversations runs the conformance tests of conversations, transcript lines, commands,
// scheduled calls, attachments, the do-not-call list and events.
func testConversations(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"ConversationCreateGet", testConversationCreateGet},
		{"ConversationStatus", testConversationStatus},
		{"ConversationLines", testConversationLines},
		{"ConversationListDelete", testConversationListDelete},
		{"ConversationScope", testConversationScope},
		{"Commands", testCommands},
		{"ScheduledCalls", testScheduledCalls},
		{"ScheduledCallsTwoWorkers", testScheduledCallsTwoWorkers},
		{"ScheduledCallsLostWorker", testScheduledCallsLostWorker},
		{"Attachments", testAttachments},
		{"DoNotCallEvents", testDoNotCallEvents},
		{"ChatState", testChatState}, // issue 13
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// newConv returns a conversation of project p to create.
func newConv(w agentWorld, p store.ProjectID, channel string) store.Conversation {
	return store.Conversation{OrgID: w.org.ID, ProjectID: p, AgentID: "0190a6f0-0000-7000-8000-0000000000aa",
		Channel: channel, Direction: "outbound", Mode: store.ModeLive, Language: "en", ToNumber: "+14155550100",
		Metadata: json.RawMessage(`{"crm": 7}`), Variables: json.RawMessage(`{"customer": "Ada"}`)}
}

func testConversationCreateGet(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	in := newConv(w, w.p1.ID, store.ChannelPhone)
	in.AgentVersion, in.ExternalID = 3, "ext-1"
	c := must[store.Conversation](t, "CreateConversation")(w.s.CreateConversation(ctx, in))
	if c.Status != store.ConvPending || c.ID == "" || c.StartedAt != nil {
		t.Fatalf("created %+v", c)
	}
	got := must[store.Conversation](t, "GetConversation")(w.s.GetConversation(ctx, c.ID))
	sameJSON(t, "read back", got, c)
	chat := newConv(w, w.p1.ID, store.ChannelChat)
	chat.Status, chat.ViaAPI, chat.ID = store.ConvInProgress, true, store.NewConversationID()
	cc := must[store.Conversation](t, "CreateConversation chat")(w.s.CreateConversation(ctx, chat))
	if cc.ID != chat.ID || cc.StartedAt == nil || !cc.ViaAPI {
		t.Fatalf("chat created %+v", cc)
	}
	_, err := w.s.GetConversation(ctx, "0190a6f0-0000-7000-8000-000000000000")
	wantErr(t, "unknown", err, store.ErrNotFound)
	other := newOrg(t, w.s, "Other")
	bad := []struct {
		name string
		fix  func(*store.Conversation)
		want error
	}{
		{"channel", func(c *store.Conversation) { c.Channel = "fax" }, store.ErrInvalid},
		{"direction", func(c *store.Conversation) { c.Direction = "up" }, store.ErrInvalid},
		{"mode", func(c *store.Conversation) { c.Mode = "demo" }, store.ErrInvalid},
		{"status", func(c *store.Conversation) { c.Status = store.ConvEnded }, store.ErrInvalid},
		{"language", func(c *store.Conversation) { c.Language = "" }, store.ErrInvalid},
		{"metadata", func(c *store.Conversation) { c.Metadata = json.RawMessage(`[1]`) }, store.ErrInvalid},
		{"agent id", func(c *store.Conversation) { c.AgentID = "x" }, store.ErrInvalid},
		{"other org's project", func(c *store.Conversation) { c.OrgID = other.ID }, store.ErrNotFound},
		{"same id", func(c *store.Conversation) { c.ID = cc.ID }, store.ErrConflict},
	}
	for _, b := range bad {
		c := newConv(w, w.p1.ID, store.ChannelPhone)
		b.fix(&c)
		_, err := w.s.CreateConversation(ctx, c)
		wantErr(t, b.name, err, b.want)
	}
}

func testConversationStatus(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c := must[store.Conversation](t, "create")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelPhone)))
	at := time.Now()
	steps := []struct {
		status string
		want   bool
	}{
		{store.ConvRinging, true}, {store.ConvRinging, false}, {store.ConvInProgress, true}, {store.ConvRinging, false},
	}
	for _, s := range steps {
		ok, err := w.s.SetConversationStatus(ctx, c.ID, s.status, at)
		if err != nil || ok != s.want {
			t.Fatalf("SetConversationStatus %s = %v, %v; want %v", s.status, ok, err, s.want)
		}
	}
	_, err := w.s.SetConversationStatus(ctx, c.ID, store.ConvEnded, at)
	wantErr(t, "status ended", err, store.ErrInvalid)
	// Issue 22 item 9: the owners of conversations not ended, and a node's conversations.
	node := "node-" + string(c.ID)
	if err := w.s.SetConversationOwner(ctx, c.ID, node); err != nil {
		t.Fatal(err)
	}
	if owners := must[[]string](t, "owners")(w.s.ActiveOwners(ctx)); !slices.Contains(owners, node) {
		t.Fatalf("active owners %v lack %s", owners, node)
	}
	if cs := must[[]store.Conversation](t, "of node")(w.s.ActiveConversationsOf(ctx, node, 10)); len(cs) != 1 || cs[0].ID != c.ID {
		t.Fatalf("conversations of %s: %+v", node, cs)
	}
	bad := store.ConversationEnd{Reason: "busy", At: at, Outcome: store.CallOutcome{SIPStatus: 99}}
	if _, err := w.s.EndConversation(ctx, c.ID, bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SIP status 99: %v", err)
	}
	end := store.ConversationEnd{Reason: "completed", At: at, Turns: json.RawMessage(`[{"turn": 1}]`), Cost: json.RawMessage(`{"llm_input_tokens": 5}`), CostMicros: 42,
		Outcome: store.CallOutcome{SIPStatus: 486, Q850Cause: 17, Detail: "the trunk answered 486 Busy Here (Q.850 cause 17)"}}
	if ok, err := w.s.EndConversation(ctx, c.ID, end); !ok || err != nil {
		t.Fatalf("EndConversation = %v, %v", ok, err)
	}
	if ok, err := w.s.EndConversation(ctx, c.ID, store.ConversationEnd{Reason: "failed", At: at}); ok || err != nil {
		t.Fatalf("second EndConversation = %v, %v; want false", ok, err)
	}
	if ok, _ := w.s.SetConversationStatus(ctx, c.ID, store.ConvInProgress, at); ok {
		t.Fatal("an ended conversation moved back")
	}
	got := must[store.Conversation](t, "get")(w.s.GetConversation(ctx, c.ID))
	if got.Status != store.ConvEnded || got.EndReason != "completed" || got.CostMicros != 42 || got.RingingAt == nil || got.StartedAt == nil || got.EndedAt == nil {
		t.Fatalf("after end: %+v", got)
	}
	sameJSON(t, "turns", json.RawMessage(got.Turns), json.RawMessage(`[{"turn":1}]`))
	if cs := must[[]store.Conversation](t, "of node")(w.s.ActiveConversationsOf(ctx, node, 10)); len(cs) != 0 {
		t.Fatalf("an ended conversation listed as active: %+v", cs)
	}
	if got.Outcome != end.Outcome { // issue 22 item 8
		t.Fatalf("outcome %+v, want %+v", got.Outcome, end.Outcome)
	}
	_, err = w.s.EndConversation(ctx, c.ID, store.ConversationEnd{At: at})
	wantErr(t, "end without reason", err, store.ErrInvalid)
	if err := w.s.SetConversationOwner(ctx, c.ID, "node-a"); err != nil {
		t.Fatal(err)
	}
	if got := must[store.Conversation](t, "get")(w.s.GetConversation(ctx, c.ID)); got.OwnerNode != "node-a" {
		t.Fatalf("owner = %q", got.OwnerNode)
	}
}

func testConversationLines(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c := must[store.Conversation](t, "create")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelPhone)))
	now := time.Now()
	mk := func(seq int64, role, text string) store.ConversationLine {
		return store.ConversationLine{Seq: seq, Role: role, Text: text, Start: now, End: now.Add(time.Second), Meta: json.RawMessage(`{"k": 1}`)}
	}
	if err := w.s.AppendLines(ctx, c.ID, []store.ConversationLine{mk(1, "agent", "Hello"), mk(2, "user", "Hi")}); err != nil {
		t.Fatal(err)
	}
	if err := w.s.AppendLines(ctx, c.ID, []store.ConversationLine{mk(3, "note", "n"), mk(2, "user", "again")}); err == nil {
		t.Fatal("a repeated seq was stored")
	}
	if err := w.s.AppendLines(ctx, c.ID, []store.ConversationLine{mk(3, "tool", "t")}); err != nil {
		t.Fatalf("after a refused batch: %v", err)
	}
	for _, bad := range []store.ConversationLine{mk(0, "user", "x"), mk(9, "robot", "x"), {Seq: 9, Role: "user", Meta: json.RawMessage(`1`)}} {
		if err := w.s.AppendLines(ctx, c.ID, []store.ConversationLine{bad}); err == nil {
			t.Fatalf("line %+v was stored", bad)
		}
	}
	got := must[[]store.ConversationLine](t, "ListLines")(w.s.ListLines(ctx, c.ID, 1, 10))
	if len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 3 || got[0].Text != "Hi" || got[1].Role != "tool" {
		t.Fatalf("lines after 1: %+v", got)
	}
	if all := must[[]store.ConversationLine](t, "AllLines")(w.s.AllLines(ctx, c.ID)); len(all) != 3 {
		t.Fatalf("all lines: %d", len(all))
	}
	if cv := must[store.Conversation](t, "get")(w.s.GetConversation(ctx, c.ID)); cv.LastSeq != 3 {
		t.Fatalf("last seq = %d", cv.LastSeq)
	}
}

func testConversationListDelete(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	var ids []store.ConversationID
	for i := range 5 {
		c := newConv(w, w.p1.ID, []string{store.ChannelPhone, store.ChannelChat}[i%2])
		if i == 4 {
			c.ProjectID, c.ExternalID = w.p2.ID, "ext-4"
		}
		ids = append(ids, must[store.Conversation](t, "create")(w.s.CreateConversation(ctx, c)).ID)
	}
	test := newConv(w, w.p1.ID, store.ChannelPhone)
	test.Mode = store.ModeTest
	must[store.Conversation](t, "create test")(w.s.CreateConversation(ctx, test))
	list := func(f store.ConversationFilter) []store.ConversationID {
		t.Helper()
		f.OrgID = w.org.ID
		if f.Mode == "" {
			f.Mode = store.ModeLive
		}
		cs := must[[]store.Conversation](t, "ListConversations")(w.s.ListConversations(ctx, f))
		out := make([]store.ConversationID, len(cs))
		for i, c := range cs {
			out[i] = c.ID
		}
		return out
	}
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	if got := list(store.ConversationFilter{}); !slices.Equal(got, rev) {
		t.Fatalf("newest first: %v, want %v", got, rev)
	}
	if got := list(store.ConversationFilter{Limit: 2, BeforeID: rev[1]}); !slices.Equal(got, rev[2:4]) {
		t.Fatalf("page: %v", got)
	}
	if got := list(store.ConversationFilter{Channel: store.ChannelChat}); !slices.Equal(got, []store.ConversationID{ids[3], ids[1]}) {
		t.Fatalf("chats: %v", got)
	}
	if got := list(store.ConversationFilter{ProjectIDs: []store.ProjectID{w.p2.ID}}); !slices.Equal(got, ids[4:]) {
		t.Fatalf("reach p2: %v", got)
	}
	if got := list(store.ConversationFilter{ExternalID: "ext-4"}); !slices.Equal(got, ids[4:]) {
		t.Fatalf("external id: %v", got)
	}
	if got := list(store.ConversationFilter{Mode: store.ModeTest}); len(got) != 1 {
		t.Fatalf("test mode: %v", got)
	}
	future := time.Now().Add(time.Hour)
	if got := list(store.ConversationFilter{CreatedAfter: &future}); len(got) != 0 {
		t.Fatalf("created after the future: %v", got)
	}
	if got := list(store.ConversationFilter{CreatedBefore: &future, Status: store.ConvPending, Direction: "outbound"}); len(got) != 5 {
		t.Fatalf("created before the future: %v", got)
	}
	// Deleting: only an ended conversation; it leaves a tombstone.
	all := store.OrgScope(w.org.ID)
	_, err := w.s.Conversations().Delete(ctx, all, ids[0], time.Now())
	wantErr(t, "delete a live one", err, store.ErrConflict)
	w.s.EndConversation(ctx, ids[0], store.ConversationEnd{Reason: "completed", At: time.Now()})
	now := time.Now()
	w.s.AppendLines(ctx, ids[0], []store.ConversationLine{{Seq: 1, Role: "user", Text: "secret", Start: now, End: now}})
	cmd := must[store.Command](t, "command")(w.s.CreateCommand(ctx, store.Command{OrgID: w.org.ID, ConversationID: ids[0], Kind: store.CommandNote}))
	before := must[store.Conversation](t, "delete")(w.s.Conversations().Delete(ctx, all, ids[0], now))
	if before.ToNumber == "" {
		t.Fatal("DeleteConversation should return the conversation as it was")
	}
	_, err = w.s.Conversations().Delete(ctx, all, ids[0], now)
	wantErr(t, "delete twice", err, store.ErrNotFound)
	if lines := must[[]store.ConversationLine](t, "lines")(w.s.ListLines(ctx, ids[0], 0, 10)); len(lines) != 0 {
		t.Fatalf("lines left: %v", lines)
	}
	_, err = w.s.GetCommand(ctx, cmd.ID)
	wantErr(t, "command of a deleted conversation", err, store.ErrNotFound)
	gone := must[store.Conversation](t, "get")(w.s.GetConversation(ctx, ids[0]))
	if !gone.Deleted() || string(gone.Metadata) != "{}" || gone.ToNumber != "" {
		t.Fatalf("tombstone: %+v", gone)
	}
	if got := list(store.ConversationFilter{Deleted: true}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("deleted list: %v", got)
	}
	if got := list(store.ConversationFilter{}); slices.Contains(got, ids[0]) {
		t.Fatal("a deleted conversation is listed")
	}
}

func testCommands(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c := must[store.Conversation](t, "create")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelPhone)))
	say := must[store.Command](t, "say")(w.s.CreateCommand(ctx, store.Command{OrgID: w.org.ID, ConversationID: c.ID, Kind: store.CommandSay, Params: json.RawMessage(`{"text": "hi"}`)}))
	note := must[store.Command](t, "note")(w.s.CreateCommand(ctx, store.Command{OrgID: w.org.ID, ConversationID: c.ID, Kind: store.CommandNote}))
	end := must[store.Command](t, "end")(w.s.CreateCommand(ctx, store.Command{OrgID: w.org.ID, ConversationID: c.ID, Kind: store.CommandEnd}))
	if say.Status != store.CommandPending {
		t.Fatalf("new command %+v", say)
	}
	if ok, err := w.s.FinishCommand(ctx, say.ID, store.CommandDone, "", time.Now()); !ok || err != nil {
		t.Fatalf("finish = %v %v", ok, err)
	}
	if ok, _ := w.s.FinishCommand(ctx, say.ID, store.CommandFailed, "late", time.Now()); ok {
		t.Fatal("a finished command changed")
	}
	if n, err := w.s.FailPendingCommands(ctx, c.ID, "the conversation ended", time.Now()); n != 2 || err != nil {
		t.Fatalf("FailPendingCommands = %d, %v", n, err)
	}
	got := must[store.Command](t, "get")(w.s.GetCommand(ctx, note.ID))
	if got.Status != store.CommandFailed || got.Reason != "the conversation ended" || got.CompletedAt == nil {
		t.Fatalf("failed command %+v", got)
	}
	if got := must[store.Command](t, "get end")(w.s.GetCommand(ctx, end.ID)); got.Status != store.CommandDone || got.Reason != "" {
		t.Fatalf("pending end command %+v", got)
	}
	if got := must[store.Command](t, "get say")(w.s.GetCommand(ctx, say.ID)); got.Status != store.CommandDone || string(got.Params) == "{}" {
		t.Fatalf("done command %+v", got)
	}
	_, err := w.s.CreateCommand(ctx, store.Command{OrgID: w.org.ID, ConversationID: c.ID, Kind: "dance"})
	wantErr(t, "bad kind", err, store.ErrInvalid)
	_, err = w.s.FinishCommand(ctx, say.ID, "maybe", "", time.Now())
	wantErr(t, "bad status", err, store.ErrInvalid)
}

func newScheduled(w agentWorld, due time.Time) store.ScheduledCall {
	return store.ScheduledCall{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: "0190a6f0-0000-7000-8000-0000000000aa", Mode: store.ModeLive,
		Request: json.RawMessage(`{"to_number": "+14155550100"}`), ToNumber: "+14155550100", DialAt: due, DueAt: due}
}

func testScheduledCalls(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	now := time.Now()
	due := must[store.ScheduledCall](t, "create due")(w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), newScheduled(w, now.Add(-time.Minute))))
	later := must[store.ScheduledCall](t, "create later")(w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), newScheduled(w, now.Add(time.Hour))))
	cancel := must[store.ScheduledCall](t, "create to cancel")(w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), newScheduled(w, now.Add(-time.Second))))
	if c := must[store.ScheduledCall](t, "cancel")(w.s.ScheduledCalls().Cancel(ctx, store.OrgScope(w.org.ID), cancel.ID, now)); c.Status != store.ScheduledCancelled || c.CancelledAt == nil {
		t.Fatalf("cancelled %+v", c)
	}
	leased := must[[]store.ScheduledCall](t, "lease")(w.s.LeaseDueScheduledCalls(ctx, "w1", now, time.Minute, 10))
	if len(leased) != 1 || leased[0].ID != due.ID || leased[0].ConversationID == "" || leased[0].Status != store.ScheduledDialing {
		t.Fatalf("leased %+v", leased)
	}
	_, err := w.s.ScheduledCalls().Cancel(ctx, store.OrgScope(w.org.ID), due.ID, now)
	wantErr(t, "cancel a dialing call", err, store.ErrConflict)
	err = w.s.FinishScheduledCall(ctx, due.ID, "w2", store.ScheduledPlaced, "", "", now, nil)
	wantErr(t, "finish by another worker", err, store.ErrConflict)
	if err := w.s.FinishScheduledCall(ctx, due.ID, "w1", store.ScheduledPlaced, "", "", now, nil); err != nil {
		t.Fatal(err)
	}
	got := must[store.ScheduledCall](t, "get")(w.s.ScheduledCalls().Get(ctx, store.OrgScope(w.org.ID), due.ID))
	if got.Status != store.ScheduledPlaced || got.PlacedAt == nil || got.ConversationID != leased[0].ConversationID {
		t.Fatalf("placed %+v", got)
	}
	// The later call is due in an hour; it fails when it is dialled.
	leased = must[[]store.ScheduledCall](t, "lease later")(w.s.LeaseDueScheduledCalls(ctx, "w1", now.Add(2*time.Hour), time.Minute, 10))
	if len(leased) != 1 || leased[0].ID != later.ID {
		t.Fatalf("leased later %+v", leased)
	}
	if err := w.s.FinishScheduledCall(ctx, later.ID, "w1", store.ScheduledFailed, "do_not_call", "on the list", now, nil); err != nil {
		t.Fatal(err)
	}
	got = must[store.ScheduledCall](t, "get later")(w.s.ScheduledCalls().Get(ctx, store.OrgScope(w.org.ID), later.ID))
	if got.Status != store.ScheduledFailed || got.FailureCode != "do_not_call" || got.FailureReason != "on the list" {
		t.Fatalf("failed %+v", got)
	}
	list := must[[]store.ScheduledCall](t, "list")(w.s.ScheduledCalls().List(ctx, store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeLive}, store.ScheduledCallFilter{}, store.Page{Limit: 10}))
	if len(list) != 3 || list[0].ID != cancel.ID {
		t.Fatalf("list %d", len(list))
	}
	list = must[[]store.ScheduledCall](t, "list placed")(w.s.ScheduledCalls().List(ctx, store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeLive}, store.ScheduledCallFilter{Status: store.ScheduledPlaced}, store.Page{Limit: 10}))
	if len(list) != 1 || list[0].ID != due.ID {
		t.Fatalf("list placed %v", list)
	}
	bad := newScheduled(w, now)
	bad.DueAt = now.Add(-time.Hour)
	_, err = w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), bad)
	wantErr(t, "due before dial", err, store.ErrInvalid)
}

// testScheduledCallsTwoWorkers has two workers lease the same due calls at once, repeatedly:
// every call is leased exactly once.
func testScheduledCallsTwoWorkers(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	now := time.Now()
	const n = 30
	for range n {
		must[store.ScheduledCall](t, "create")(w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), newScheduled(w, now.Add(-time.Second))))
	}
	var mu sync.Mutex
	seen := map[store.ScheduledCallID]string{}
	var wg sync.WaitGroup
	for _, worker := range []string{"w1", "w2"} {
		wg.Go(func() {
			for {
				got, err := w.s.LeaseDueScheduledCalls(ctx, worker, now, time.Minute, 4)
				if err != nil {
					t.Errorf("%s: %v", worker, err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, s := range got {
					if prev, dup := seen[s.ID]; dup {
						t.Errorf("call %s leased by %s and %s", s.ID, prev, worker)
					}
					seen[s.ID] = worker
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d calls leased, want %d", len(seen), n)
	}
}

// testScheduledCallsLostWorker: a lease that ran out is taken again when its conversation was
// never made, and recorded as placed when it was.
func testScheduledCallsLostWorker(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	now := time.Now()
	a := must[store.ScheduledCall](t, "a")(w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), newScheduled(w, now)))
	b := must[store.ScheduledCall](t, "b")(w.s.ScheduledCalls().Create(ctx, store.OrgScope(w.org.ID), newScheduled(w, now)))
	leased := must[[]store.ScheduledCall](t, "lease")(w.s.LeaseDueScheduledCalls(ctx, "gone", now, time.Second, 10))
	if len(leased) != 2 {
		t.Fatalf("leased %d", len(leased))
	}
	// The lost worker made a's conversation before going away.
	for _, s := range leased {
		if s.ID == a.ID {
			c := newConv(w, w.p1.ID, store.ChannelPhone)
			c.ID = s.ConversationID
			must[store.Conversation](t, "conversation")(w.s.CreateConversation(ctx, c))
		}
	}
	if again := must[[]store.ScheduledCall](t, "lease early")(w.s.LeaseDueScheduledCalls(ctx, "w2", now, time.Minute, 10)); len(again) != 0 {
		t.Fatalf("a lease still running was taken: %v", again)
	}
	again := must[[]store.ScheduledCall](t, "lease after expiry")(w.s.LeaseDueScheduledCalls(ctx, "w2", now.Add(time.Minute), time.Minute, 10))
	if len(again) != 1 || again[0].ID != b.ID || again[0].Attempts != 2 {
		t.Fatalf("re-leased %+v", again)
	}
	if got := must[store.ScheduledCall](t, "a")(w.s.ScheduledCalls().Get(ctx, store.OrgScope(w.org.ID), a.ID)); got.Status != store.ScheduledPlaced {
		t.Fatalf("a is %s, want placed", got.Status)
	}
	retry := now.Add(time.Hour)
	if err := w.s.FinishScheduledCall(ctx, b.ID, "w2", store.ScheduledWaiting, "", "", now, &retry); err != nil {
		t.Fatal(err)
	}
	if got := must[store.ScheduledCall](t, "b")(w.s.ScheduledCalls().Get(ctx, store.OrgScope(w.org.ID), b.ID)); got.Status != store.ScheduledWaiting || !got.DueAt.Equal(retry.UTC().Truncate(time.Microsecond)) || got.ConversationID != "" {
		t.Fatalf("rescheduled %+v", got)
	}
}

func testAttachments(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c1 := must[store.Conversation](t, "c1")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelChat)))
	c2 := must[store.Conversation](t, "c2")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelChat)))
	var ids []store.AttachmentID
	for i := range 3 {
		a := must[store.Attachment](t, "create")(w.s.CreateAttachment(ctx, store.Attachment{OrgID: w.org.ID, KeyID: "k", MIME: "image/png", Size: 10, Path: fmt.Sprintf("attachments/%d.png", i)}))
		ids = append(ids, a.ID)
	}
	if err := w.s.ClaimAttachment(ctx, ids[0], c1.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.s.ClaimAttachment(ctx, ids[0], c1.ID); err != nil {
		t.Fatalf("claim again by the same conversation: %v", err)
	}
	wantErr(t, "claim by another", w.s.ClaimAttachment(ctx, ids[0], c2.ID), store.ErrConflict)
	if got := must[store.Attachment](t, "get")(w.s.GetAttachment(ctx, ids[0])); got.ConversationID != c1.ID || got.MIME != "image/png" {
		t.Fatalf("got %+v", got)
	}
	gone := must[[]store.Attachment](t, "delete")(w.s.DeleteConversationAttachments(ctx, c1.ID))
	if len(gone) != 1 || gone[0].ID != ids[0] {
		t.Fatalf("deleted %v", gone)
	}
	purged := must[[]store.Attachment](t, "purge")(w.s.PurgeUnusedAttachments(ctx, time.Now().Add(time.Minute), 10))
	if len(purged) != 2 {
		t.Fatalf("purged %d", len(purged))
	}
	_, err := w.s.GetAttachment(ctx, ids[1])
	wantErr(t, "purged", err, store.ErrNotFound)
	_, err = w.s.CreateAttachment(ctx, store.Attachment{OrgID: w.org.ID, MIME: "image/png", Size: 0, Path: "x"})
	wantErr(t, "empty", err, store.ErrInvalid)
}

func testDoNotCallEvents(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	if err := w.s.AddDoNotCall(ctx, w.org.ID, "+14155550100", "asked"); err != nil {
		t.Fatal(err)
	}
	if err := w.s.AddDoNotCall(ctx, w.org.ID, "+14155550100", "again"); err != nil {
		t.Fatalf("adding twice: %v", err)
	}
	wantErr(t, "not E.164", w.s.AddDoNotCall(ctx, w.org.ID, "555", ""), store.ErrInvalid)
	for number, want := range map[string]bool{"+14155550100": true, "+14155550101": false} {
		if got, err := w.s.OnDoNotCall(ctx, w.org.ID, number); got != want || err != nil {
			t.Fatalf("OnDoNotCall %s = %v, %v", number, got, err)
		}
	}
	other := newOrg(t, w.s, "Other")
	if got, _ := w.s.OnDoNotCall(ctx, other.ID, "+14155550100"); got {
		t.Fatal("another organization's list applied")
	}
	e := must[store.Event](t, "event")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeLive,
		Type: "conversation.deleted", ConversationID: "0190a6f0-0000-7000-8000-0000000000bb", Data: json.RawMessage(`{"a": 1}`)}))
	must[store.Event](t, "test event")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, Mode: store.ModeTest, Type: "conversation.ended"}))
	got := must[[]store.Event](t, "list")(w.s.ListEvents(ctx, w.org.ID, store.ModeLive, "", 10))
	if len(got) != 1 || got[0].ID != e.ID || got[0].Type != "conversation.deleted" || got[0].ProjectID != w.p1.ID {
		t.Fatalf("events %+v", got)
	}
	_, err := w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, Mode: "x", Type: "t"})
	wantErr(t, "bad mode", err, store.ErrInvalid)
}
