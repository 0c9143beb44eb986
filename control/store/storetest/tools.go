package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// toolsTests are the conformance tests of tools, MCP servers and tool-call records (issue 17).
var toolsTests = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"ToolsCRUD", testToolsCRUD},
	{"MCPServers", testMCPServers},
	{"ToolCalls", testToolCalls},
}

// testToolsCRUD: a tool is created, found by name (ignoring case), replaced and deleted in its
// scope; a name is unique in its project; outside the scope it is not found.
func testToolsCRUD(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	sc := store.OrgScope(w.org.ID)
	r := w.s.Tools()
	spec := json.RawMessage(`{"description":"d","request":{"method":"GET","url":"https://example.com/{{id}}"}}`)
	tl := must[store.Tool](t, "create")(r.Create(ctx, sc, store.ToolWrite{ProjectID: w.p1.ID, Name: "lookup", Spec: spec}))
	_, err := r.Create(ctx, sc, store.ToolWrite{ProjectID: w.p1.ID, Name: "LOOKUP", Spec: spec})
	wantErr(t, "same name", err, store.ErrConflict)
	must[store.Tool](t, "other project")(r.Create(ctx, sc, store.ToolWrite{ProjectID: w.p2.ID, Name: "lookup", Spec: spec}))
	_, err = r.Create(ctx, sc, store.ToolWrite{ProjectID: w.p1.ID, Name: "bad name", Spec: spec})
	wantErr(t, "bad name", err, store.ErrInvalid)
	got := must[[]store.Tool](t, "by name")(r.List(ctx, sc, store.ToolFilter{ProjectID: w.p1.ID, Names: []string{"Lookup", "ghost"}}, store.Page{Limit: 10}))
	if len(got) != 1 || got[0].ID != tl.ID {
		t.Fatalf("by name: %+v", got)
	}
	if none := must[[]store.Tool](t, "no names")(r.List(ctx, sc, store.ToolFilter{Names: []string{}}, store.Page{Limit: 10})); len(none) != 0 {
		t.Fatalf("an empty name list matched %d", len(none))
	}
	narrow := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}}
	_, err = r.Get(ctx, narrow, tl.ID)
	wantErr(t, "outside", err, store.ErrNotFound)
	_, err = r.Replace(ctx, narrow, tl.ID, store.ToolWrite{Name: "x", Spec: spec})
	wantErr(t, "replace outside", err, store.ErrNotFound)
	ch := must[store.Tool](t, "replace")(r.Replace(ctx, sc, tl.ID, store.ToolWrite{Name: "lookup2", Spec: json.RawMessage(`{"description":"e"}`)}))
	if ch.Name != "lookup2" || string(must[store.Tool](t, "get")(r.Get(ctx, sc, tl.ID)).Spec) == string(spec) {
		t.Fatalf("replaced %+v", ch)
	}
	_, err = r.Delete(ctx, narrow, tl.ID)
	wantErr(t, "delete outside", err, store.ErrNotFound)
	must[store.Tool](t, "delete")(r.Delete(ctx, sc, tl.ID))
	_, err = r.Get(ctx, sc, tl.ID)
	wantErr(t, "deleted", err, store.ErrNotFound)
}

// testMCPServers: a server keeps its discovery; a refresh applies unless the server changed
// since; stale servers are listed for the refresher.
func testMCPServers(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	sc := store.OrgScope(w.org.ID)
	r := w.s.MCPServers()
	at := time.Now().Add(-2 * time.Hour)
	m := must[store.MCPServer](t, "create")(r.Create(ctx, sc, store.ToolWrite{ProjectID: w.p1.ID, Name: "everything", Spec: json.RawMessage(`{"url":"https://x"}`)},
		store.Discovery{Tools: json.RawMessage(`[{"name":"echo"}]`), ProtocolVersion: "2025-06-18", At: at}))
	got := must[store.MCPServer](t, "get")(r.Get(ctx, sc, m.ID))
	if got.ProtocolVersion != "2025-06-18" || got.LastError != "" || got.RefreshedAt == nil || !json.Valid(got.Discovered) {
		t.Fatalf("got %+v", got)
	}
	stale := must[[]store.MCPServer](t, "stale")(w.s.MCPServersRefreshedBefore(ctx, time.Now().Add(-time.Hour), 10))
	if len(stale) != 1 {
		t.Fatalf("stale %d", len(stale))
	}
	// A refresh with the server's current updated_at applies; with an older one it does not.
	if err := w.s.SetDiscovery(ctx, m.ID, got.UpdatedAt, store.Discovery{Tools: json.RawMessage(`[]`), LastError: "connect: refused", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if g := must[store.MCPServer](t, "get")(r.Get(ctx, sc, m.ID)); g.LastError != "connect: refused" {
		t.Fatalf("refresh not applied: %+v", g)
	}
	if err := w.s.SetDiscovery(ctx, m.ID, got.UpdatedAt.Add(-time.Second), store.Discovery{LastError: "older", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if g := must[store.MCPServer](t, "get")(r.Get(ctx, sc, m.ID)); g.LastError != "connect: refused" {
		t.Fatalf("a refresh of an older version applied: %+v", g)
	}
	if len(must[[]store.MCPServer](t, "stale")(w.s.MCPServersRefreshedBefore(ctx, time.Now().Add(-time.Hour), 10))) != 0 {
		t.Fatal("a fresh server is listed as stale")
	}
	if b := must[store.MCPServer](t, "by id")(w.s.MCPServersByID(ctx, m.ID)); b.Name != "everything" {
		t.Fatalf("by id %+v", b)
	}
	_, err := r.Get(ctx, store.OrgScope(newOrg(t, w.s, "Other").ID), m.ID)
	wantErr(t, "other org", err, store.ErrNotFound)
	must[store.MCPServer](t, "delete")(r.Delete(ctx, sc, m.ID))
}

// testToolCalls: calls are recorded on their conversation, in order.
func testToolCalls(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	a := must[store.Agent](t, "agent")(w.s.Agents().Create(ctx, store.OrgScope(w.org.ID), newAgent(w.p1.ID, "A")))
	c := must[store.Conversation](t, "conversation")(w.s.CreateConversation(ctx, store.Conversation{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: a.ID,
		Channel: store.ChannelChat, Direction: "inbound", Mode: store.ModeLive, Language: "en"}))
	for i, st := range []string{"ok", "timeout"} {
		if err := w.s.InsertToolCall(ctx, store.ToolCall{OrgID: w.org.ID, ConversationID: c.ID, ToolName: "lookup", Kind: "http",
			Arguments: json.RawMessage(`{"id":1}`), Status: st, Duration: time.Duration(i+1) * 10 * time.Millisecond, ResultBytes: 20, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	got := must[[]store.ToolCall](t, "list")(w.s.ToolCalls(ctx, w.org.ID, c.ID))
	if len(got) != 2 || got[0].Status != "ok" || got[1].Status != "timeout" || got[1].Duration != 20*time.Millisecond || got[0].ResultBytes != 20 {
		t.Fatalf("calls %+v", got)
	}
	if other := must[[]store.ToolCall](t, "other org")(w.s.ToolCalls(ctx, newOrg(t, w.s, "Other").ID, c.ID)); len(other) != 0 {
		t.Fatal("another organization reads the calls")
	}
}
