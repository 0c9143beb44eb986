package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testConversationScope checks the Conversations repository: lists with their filters and
// pages, and that outside the caller's scope (another organization, a project not reached, the
// other key mode) or once deleted a conversation, its lines and its commands are not found.
func testConversationScope(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	repo := w.s.Conversations()
	mk := func(p store.ProjectID, channel string, mode store.Mode) store.Conversation {
		c := newConv(w, p, channel)
		c.Mode = mode
		return must[store.Conversation](t, "create")(w.s.CreateConversation(ctx, c))
	}
	c1 := mk(w.p1.ID, store.ChannelPhone, store.ModeLive)
	c2 := mk(w.p1.ID, store.ChannelChat, store.ModeLive)
	c3 := mk(w.p2.ID, store.ChannelPhone, store.ModeLive)
	tc := mk(w.p1.ID, store.ChannelPhone, store.ModeTest)
	now := time.Now()
	if err := w.s.AppendLines(ctx, c1.ID, []store.ConversationLine{{Seq: 1, Role: "user", Text: "a", Start: now, End: now},
		{Seq: 2, Role: "agent", Text: "b", Start: now, End: now}}); err != nil {
		t.Fatal(err)
	}
	live := store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeLive}
	test := live
	test.Mode = store.ModeTest
	other := store.Scope{Org: newOrg(t, w.s, "Other").ID, AllProjects: true, Mode: store.ModeLive}

	cmd := must[store.Command](t, "AddCommand")(repo.AddCommand(ctx, live, c1.ID, store.CommandNote, []byte(`{"text": "n"}`)))
	if cmd.ConversationID != c1.ID || cmd.OrgID != w.org.ID || cmd.Status != store.CommandPending {
		t.Fatalf("command %+v", cmd)
	}
	if got := must[store.Conversation](t, "Get")(repo.Get(ctx, live, c1.ID)); got.ID != c1.ID {
		t.Fatalf("Get = %+v", got)
	}
	if got := must[store.Conversation](t, "Get test")(repo.Get(ctx, test, tc.ID)); got.ID != tc.ID {
		t.Fatalf("Get test = %+v", got)
	}
	if got := must[store.Conversation](t, "Get operator")(repo.Get(ctx, store.OrgScope(w.org.ID), tc.ID)); got.ID != tc.ID {
		t.Fatal("the operator's scope sees both modes")
	}
	if ls := must[[]store.ConversationLine](t, "Lines")(repo.Lines(ctx, live, c1.ID, 1, 10)); len(ls) != 1 || ls[0].Seq != 2 {
		t.Fatalf("Lines after 1 = %+v", ls)
	}
	if ls := must[[]store.ConversationLine](t, "AllLines")(repo.AllLines(ctx, live, c1.ID)); len(ls) != 2 {
		t.Fatalf("AllLines = %+v", ls)
	}
	if got := must[store.Command](t, "Command")(repo.Command(ctx, live, c1.ID, cmd.ID)); got.ID != cmd.ID {
		t.Fatalf("Command = %+v", got)
	}
	_, err := repo.Command(ctx, live, c2.ID, cmd.ID)
	wantErr(t, "Command of another conversation", err, store.ErrNotFound)

	ids := func(cs []store.Conversation) []store.ConversationID {
		out := []store.ConversationID{}
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	lists := []struct {
		name string
		sc   store.Scope
		f    store.ConversationListFilter
		pg   store.Page
		want []store.ConversationID
	}{
		{"live, newest first", live, store.ConversationListFilter{}, store.Page{}, []store.ConversationID{c3.ID, c2.ID, c1.ID}},
		{"test", test, store.ConversationListFilter{}, store.Page{}, []store.ConversationID{tc.ID}},
		{"reach p2", live.Narrow(w.p2.ID), store.ConversationListFilter{}, store.Page{}, []store.ConversationID{c3.ID}},
		{"reach none", store.Scope{Org: w.org.ID, Mode: store.ModeLive}, store.ConversationListFilter{}, store.Page{}, []store.ConversationID{}},
		{"other org", other, store.ConversationListFilter{}, store.Page{}, []store.ConversationID{}},
		{"project", live, store.ConversationListFilter{ProjectID: w.p1.ID}, store.Page{}, []store.ConversationID{c2.ID, c1.ID}},
		{"channel", live, store.ConversationListFilter{Channel: store.ChannelChat}, store.Page{}, []store.ConversationID{c2.ID}},
		{"after, one more than the limit", live, store.ConversationListFilter{}, store.Page{After: string(c3.ID), Limit: 1}, []store.ConversationID{c2.ID, c1.ID}},
	}
	for _, l := range lists {
		if got := ids(must[[]store.Conversation](t, "List")(repo.List(ctx, l.sc, l.f, l.pg))); !slices.Equal(got, l.want) {
			t.Errorf("List %s = %v, want %v", l.name, got, l.want)
		}
	}

	// Outside the scope a conversation is missing, whatever the reason.
	outside := map[string]struct {
		sc store.Scope
		id store.ConversationID
	}{
		"other org":                   {other, c1.ID},
		"other project":               {live.Narrow(w.p2.ID), c1.ID},
		"other mode":                  {test, c1.ID},
		"live key, test conversation": {live, tc.ID},
	}
	for name, o := range outside {
		_, err := repo.Get(ctx, o.sc, o.id)
		wantErr(t, "Get "+name, err, store.ErrNotFound)
		_, err = repo.Delete(ctx, o.sc, o.id, now)
		wantErr(t, "Delete "+name, err, store.ErrNotFound)
		_, err = repo.AddCommand(ctx, o.sc, o.id, store.CommandSay, nil)
		wantErr(t, "AddCommand "+name, err, store.ErrNotFound)
		_, err = repo.Command(ctx, o.sc, o.id, cmd.ID)
		wantErr(t, "Command "+name, err, store.ErrNotFound)
		if ls, err := repo.Lines(ctx, o.sc, o.id, 0, 10); err != nil || len(ls) != 0 {
			t.Errorf("Lines %s = %v, %v; want none", name, ls, err)
		}
	}

	// Deleted: found only by ListDeleted.
	if _, err := w.s.EndConversation(ctx, c1.ID, store.ConversationEnd{Reason: "completed", At: now}); err != nil {
		t.Fatal(err)
	}
	if before := must[store.Conversation](t, "Delete")(repo.Delete(ctx, live, c1.ID, now)); before.ToNumber == "" {
		t.Fatal("Delete should return the conversation as it was")
	}
	_, err = repo.Get(ctx, live, c1.ID)
	wantErr(t, "Get deleted", err, store.ErrNotFound)
	_, err = repo.Command(ctx, live, c1.ID, cmd.ID)
	wantErr(t, "Command of a deleted conversation", err, store.ErrNotFound)
	_, err = repo.AddCommand(ctx, live, c1.ID, store.CommandSay, nil)
	wantErr(t, "AddCommand to a deleted conversation", err, store.ErrNotFound)
	if got := ids(must[[]store.Conversation](t, "List")(repo.List(ctx, live, store.ConversationListFilter{}, store.Page{}))); slices.Contains(got, c1.ID) {
		t.Fatal("a deleted conversation is listed")
	}
	deleted := []struct {
		name string
		sc   store.Scope
		want []store.ConversationID
	}{
		{"own", live, []store.ConversationID{c1.ID}},
		{"other mode", test, []store.ConversationID{}},
		{"other project", live.Narrow(w.p2.ID), []store.ConversationID{}},
		{"other org", other, []store.ConversationID{}},
	}
	for _, d := range deleted {
		got := ids(must[[]store.Conversation](t, "ListDeleted")(repo.ListDeleted(ctx, d.sc, store.ConversationListFilter{}, store.Page{})))
		if !slices.Equal(got, d.want) {
			t.Errorf("ListDeleted %s = %v, want %v", d.name, got, d.want)
		}
	}
}
