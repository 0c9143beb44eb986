package storetest

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// reachScopes are the scopes that must not see an object of w's organization, project p1 and
// live mode: another organization, another project, the other mode.
func reachScopes(t *testing.T, w agentWorld) map[string]store.Scope {
	other := newOrg(t, w.s, "Other")
	return map[string]store.Scope{
		"another organization": {Org: other.ID, AllProjects: true, Mode: store.ModeLive},
		"another project":      {Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}, Mode: store.ModeLive},
		"the other mode":       {Org: w.org.ID, AllProjects: true, Mode: store.ModeTest},
	}
}

// testScheduledCallsScope: the scheduled-call repository applies the whole scope, mode
// included.
func testScheduledCallsScope(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	now := time.Now()
	live := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p1.ID}, Mode: store.ModeLive}
	s := must[store.ScheduledCall](t, "create")(w.s.ScheduledCalls().Create(ctx, live, newScheduled(w, now.Add(time.Hour))))
	if got := must[store.ScheduledCall](t, "get")(w.s.ScheduledCalls().Get(ctx, live, s.ID)); got.ID != s.ID || got.Mode != store.ModeLive {
		t.Fatalf("got %+v", got)
	}
	for name, sc := range reachScopes(t, w) {
		_, err := w.s.ScheduledCalls().Get(ctx, sc, s.ID)
		wantErr(t, "get from "+name, err, store.ErrNotFound)
		_, err = w.s.ScheduledCalls().Cancel(ctx, sc, s.ID, now)
		wantErr(t, "cancel from "+name, err, store.ErrNotFound)
		if l := must[[]store.ScheduledCall](t, "list from "+name)(w.s.ScheduledCalls().List(ctx, sc, store.ScheduledCallFilter{}, store.Page{Limit: 10})); len(l) != 0 {
			t.Fatalf("%s lists %d calls", name, len(l))
		}
		if name != "the other mode" {
			in := newScheduled(w, now) // in project p1 of w's organization
			in.OrgID, in.Mode = sc.Org, sc.Mode
			_, err = w.s.ScheduledCalls().Create(ctx, sc, in)
			wantErr(t, "create from "+name, err, store.ErrNotFound)
		}
	}
	_, err := w.s.ScheduledCalls().Get(ctx, live, "not-a-uuid")
	wantErr(t, "malformed id", err, store.ErrNotFound)
	pg := must[[]store.ScheduledCall](t, "page")(w.s.ScheduledCalls().List(ctx, live, store.ScheduledCallFilter{AgentID: s.AgentID, Status: store.ScheduledWaiting}, store.Page{Limit: 1}))
	if len(pg) != 1 || pg[0].ID != s.ID {
		t.Fatalf("page %+v", pg)
	}
	if got := must[store.ScheduledCall](t, "cancel")(w.s.ScheduledCalls().Cancel(ctx, live, s.ID, now)); got.Status != store.ScheduledCancelled {
		t.Fatalf("cancelled %+v", got)
	}
}

// testStartLookupsScope: the lookups of a conversation's start (agent, number called,
// conversation, picture) apply the scope.
func testStartLookupsScope(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	live := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p1.ID}, Mode: store.ModeLive}
	ag := w.create(t, w.p1.ID, "Support")
	num := must[store.PhoneNumber](t, "number")(w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550100", AgentID: ag.ID}))
	conv := must[store.Conversation](t, "conversation")(w.s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelChat)))
	at := must[store.Attachment](t, "attachment")(w.s.CreateAttachment(ctx, store.Attachment{ID: store.NewAttachmentID(), OrgID: w.org.ID, MIME: "image/png", Size: 1, Path: "attachments/x.png"}))
	if got := must[store.Agent](t, "agent")(w.s.AgentInScope(ctx, live, ag.ID)); got.ID != ag.ID {
		t.Fatalf("agent %+v", got)
	}
	if got := must[store.PhoneNumber](t, "by number")(w.s.Numbers().ByNumber(ctx, live, num.Number)); got.ID != num.ID {
		t.Fatalf("number %+v", got)
	}
	if got := must[store.Conversation](t, "conversation")(w.s.ConversationInScope(ctx, live, conv.ID)); got.ID != conv.ID {
		t.Fatalf("conversation %+v", got)
	}
	if got := must[store.Attachment](t, "attachment")(w.s.AttachmentInScope(ctx, live, at.ID)); got.ID != at.ID {
		t.Fatalf("attachment %+v", got)
	}
	for name, sc := range reachScopes(t, w) {
		if name != "the other mode" { // agents and numbers are shared by both modes
			_, err := w.s.AgentInScope(ctx, sc, ag.ID)
			wantErr(t, "agent from "+name, err, store.ErrNotFound)
			_, err = w.s.Numbers().ByNumber(ctx, sc, num.Number)
			wantErr(t, "number from "+name, err, store.ErrNotFound)
		}
		_, err := w.s.ConversationInScope(ctx, sc, conv.ID)
		wantErr(t, "conversation from "+name, err, store.ErrNotFound)
		if name == "another organization" { // pictures belong to the organization
			_, err = w.s.AttachmentInScope(ctx, sc, at.ID)
			wantErr(t, "attachment from "+name, err, store.ErrNotFound)
		}
	}
	must[bool](t, "end")(w.s.EndConversation(ctx, conv.ID, store.ConversationEnd{Reason: "completed", At: time.Now()}))
	must[store.Conversation](t, "delete")(w.s.Conversations().Delete(ctx, live, conv.ID, time.Now()))
	_, err := w.s.ConversationInScope(ctx, live, conv.ID)
	wantErr(t, "deleted conversation", err, store.ErrNotFound)
}
