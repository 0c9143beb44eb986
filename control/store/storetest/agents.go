package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testAgents runs the conformance tests of agents, versions, phone numbers and idempotency
// records as parallel subtests, each on its own store.
func testAgents(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"AgentCreateGet", testAgentCreateGet},
		{"AgentNames", testAgentNames},
		{"AgentList", testAgentList},
		{"AgentScope", testAgentScope},
		{"AgentChange", testAgentChange},
		{"AgentPublish", testAgentPublish},
		{"AgentPublishConcurrent", testAgentPublishConcurrent},
		{"AgentDeleteRestorePurge", testAgentDeleteRestorePurge},
		{"PhoneNumbers", testPhoneNumbers},
		{"Idempotency", testIdempotency},
		{"UniqueName", testUniqueName},
		{"AssignWhileDeleting", testAssignWhileDeleting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// newAgent returns a NewAgent in project p with name.
func newAgent(p store.ProjectID, name string) store.NewAgent {
	return store.NewAgent{ProjectID: p, Name: name, Kind: "custom", Direction: "inbound",
		Channels: []string{"chat"}, Definition: json.RawMessage(`{"agent": {"name": "` + name + `"}, "references": {}}`)}
}

// agentWorld is an organization with two projects.
type agentWorld struct {
	s      *store.Store
	org    store.Org
	p1, p2 store.Project
}

func newAgentWorld(t *testing.T, open Opener) agentWorld {
	s := migrated(t, open)
	org := newOrg(t, s, "Acme")
	return agentWorld{s: s, org: org, p1: newProject(t, s, org.ID, "One"), p2: newProject(t, s, org.ID, "Two")}
}

// all is the scope of the whole organization (the operator's).
func (w agentWorld) all() store.Scope { return store.OrgScope(w.org.ID) }

func (w agentWorld) create(t *testing.T, p store.ProjectID, name string) store.Agent {
	t.Helper()
	return must[store.Agent](t, "Agents.Create "+name)(w.s.Agents().Create(t.Context(), w.all(), newAgent(p, name)))
}

func testAgentCreateGet(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	na := newAgent(w.p1.ID, "Support")
	na.Description, na.Kind, na.Direction, na.Channels = "Helps", "desk", "outbound", []string{"phone", "voice"}
	a := must[store.Agent](t, "CreateAgent")(w.s.Agents().Create(ctx, w.all(), na))
	if a.Status != store.AgentDraft || a.Version != 0 || a.PublishedAt != nil || a.Deleted() || a.Name != "Support" {
		t.Fatalf("created agent = %+v", a)
	}
	got := must[store.Agent](t, "Agents.Get")(w.s.Agents().Get(ctx, w.all(), a.ID))
	sameJSON(t, "agent read back", got, a)
	var def map[string]any
	if err := json.Unmarshal(got.Definition, &def); err != nil || def["agent"] == nil {
		t.Fatalf("definition read back as %s (%v)", got.Definition, err)
	}
	_, err := w.s.Agents().Get(ctx, w.all(), "0190a6f0-0000-7000-8000-000000000000")
	wantErr(t, "Agents.Get unknown", err, store.ErrNotFound)
	_, err = w.s.Agents().Get(ctx, w.all(), "not-an-id")
	wantErr(t, "Agents.Get malformed", err, store.ErrNotFound)

	other := newOrg(t, w.s, "Globex")
	bad := []struct {
		name string
		fix  func(*store.NewAgent)
		want error
	}{
		{"empty name", func(n *store.NewAgent) { n.Name = "" }, store.ErrInvalid},
		{"long name", func(n *store.NewAgent) { n.Name = strings.Repeat("x", 121) }, store.ErrInvalid},
		{"bad kind", func(n *store.NewAgent) { n.Kind = "robot" }, store.ErrInvalid},
		{"bad direction", func(n *store.NewAgent) { n.Direction = "sideways" }, store.ErrInvalid},
		{"no channel", func(n *store.NewAgent) { n.Channels = nil }, store.ErrInvalid},
		{"definition not an object", func(n *store.NewAgent) { n.Definition = json.RawMessage(`[]`) }, store.ErrInvalid},
		{"unknown project", func(n *store.NewAgent) { n.ProjectID = "0190a6f0-0000-7000-8000-000000000000" }, store.ErrNotFound},
	}
	for _, c := range bad {
		n := newAgent(w.p1.ID, "Other")
		c.fix(&n)
		_, err := w.s.Agents().Create(ctx, w.all(), n)
		wantErr(t, c.name, err, c.want)
	}
	// A project outside the scope is missing, whatever the reason.
	for name, sc := range map[string]store.Scope{"other org": store.OrgScope(other.ID), "other project": w.all().Narrow(w.p2.ID)} {
		_, err := w.s.Agents().Create(ctx, sc, newAgent(w.p1.ID, "Other"))
		wantErr(t, "create in "+name, err, store.ErrNotFound)
	}
}

func testAgentNames(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	w.create(t, w.p1.ID, "Support")
	_, err := w.s.Agents().Create(ctx, w.all(), newAgent(w.p1.ID, "SUPPORT"))
	wantErr(t, "same name, other case", err, store.ErrConflict)
	// Another project may use the name.
	w.create(t, w.p2.ID, "Support")
	// UniqueName numbers it.
	for _, want := range []string{"Support (2)", "Support (3)"} {
		n := newAgent(w.p1.ID, "Support")
		n.UniqueName = true
		a := must[store.Agent](t, "CreateAgent unique")(w.s.Agents().Create(ctx, w.all(), n))
		if a.Name != want {
			t.Fatalf("unique name = %q, want %q", a.Name, want)
		}
	}
	n := newAgent(w.p1.ID, "Support (2)")
	n.UniqueName = true
	if a := must[store.Agent](t, "CreateAgent from a numbered name")(w.s.Agents().Create(ctx, w.all(), n)); a.Name != "Support (4)" {
		t.Fatalf("unique name from %q = %q, want Support (4)", "Support (2)", a.Name)
	}
	// A deleted agent's name is free again.
	del := w.create(t, w.p1.ID, "Sales")
	if _, _, err := w.s.Agents().Delete(ctx, w.all(), del.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	w.create(t, w.p1.ID, "Sales")
	// Concurrent unique creators all get distinct names.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var names []string
	for range 5 {
		wg.Go(func() {
			n := newAgent(w.p2.ID, "Busy")
			n.UniqueName = true
			var a store.Agent
			var err error
			for range 5 { // a racing creator may take the name first; the API retries likewise
				if a, err = w.s.Agents().Create(ctx, w.all(), n); !errors.Is(err, store.ErrConflict) {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("concurrent CreateAgent: %v", err)
				return
			}
			names = append(names, a.Name)
		})
	}
	wg.Wait()
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != 5 {
		t.Fatalf("concurrent unique names: %v", names)
	}
}

func testUniqueName(t *testing.T, open Opener) {
	taken := func(names ...string) func(string) bool {
		return func(s string) bool { return slices.Contains(names, s) }
	}
	long := strings.Repeat("é", 120)
	cases := []struct {
		name  string
		taken []string
		want  string
	}{
		{"Support", nil, "Support"},
		{"Support", []string{"Support"}, "Support (2)"},
		{"Support", []string{"Support", "Support (2)"}, "Support (3)"},
		{"Support (7)", []string{"Support (7)"}, "Support (8)"},
		{"(2)", []string{"(2)"}, "(2) (2)"},
		{long, []string{long}, strings.Repeat("é", 116) + " (2)"},
	}
	for _, c := range cases {
		if got := store.UniqueName(c.name, taken(c.taken...)); got != c.want {
			t.Errorf("UniqueName(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func testAgentList(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	var all []store.Agent
	for i := range 7 {
		p := w.p1.ID
		if i%2 == 1 {
			p = w.p2.ID
		}
		na := newAgent(p, fmt.Sprintf("A%d", i))
		if i%3 == 0 {
			na.Kind, na.Direction = "faq", "outbound"
		}
		all = append(all, must[store.Agent](t, "CreateAgent")(w.s.Agents().Create(ctx, w.all(), na)))
	}
	other := newOrg(t, w.s, "Other")
	op := newProject(t, w.s, other.ID, "P")
	must[store.Agent](t, "Agents.Create other org")(w.s.Agents().Create(ctx, store.OrgScope(other.ID), newAgent(op.ID, "X")))
	if _, _, err := w.s.Agents().Publish(ctx, w.all(), all[2].ID, "", "test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.s.Agents().Delete(ctx, w.all(), all[4].ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	names := func(as []store.Agent) string {
		s := make([]string, len(as))
		for i, a := range as {
			s[i] = a.Name
		}
		return strings.Join(s, " ")
	}
	sc := w.all()
	cases := []struct {
		name string
		sc   store.Scope
		f    store.AgentFilter
		pg   store.Page
		want string
	}{
		{"all", sc, store.AgentFilter{}, store.Page{}, "A0 A1 A2 A3 A5 A6"},
		{"reach p2", sc.Narrow(w.p2.ID), store.AgentFilter{}, store.Page{}, "A1 A3 A5"},
		{"reach none", store.Scope{Org: w.org.ID}, store.AgentFilter{}, store.Page{}, ""},
		{"other org", store.OrgScope(other.ID), store.AgentFilter{}, store.Page{}, "X"},
		{"project p1", sc, store.AgentFilter{ProjectID: w.p1.ID}, store.Page{}, "A0 A2 A6"},
		{"project outside reach", sc.Narrow(w.p2.ID), store.AgentFilter{ProjectID: w.p1.ID}, store.Page{}, ""},
		{"published", sc, store.AgentFilter{Status: store.AgentPublished}, store.Page{}, "A2"},
		{"draft", sc, store.AgentFilter{Status: store.AgentDraft}, store.Page{}, "A0 A1 A3 A5 A6"},
		{"archived", sc, store.AgentFilter{Status: store.AgentArchived}, store.Page{}, ""},
		{"kind", sc, store.AgentFilter{Kind: "faq"}, store.Page{}, "A0 A3 A6"},
		{"direction", sc, store.AgentFilter{Direction: "outbound", ProjectID: w.p1.ID}, store.Page{}, "A0 A6"},
		{"after", sc, store.AgentFilter{}, store.Page{After: string(all[2].ID)}, "A3 A5 A6"},
		{"limit, one more", sc, store.AgentFilter{}, store.Page{Limit: 2}, "A0 A1 A2"},
		{"after and limit", sc, store.AgentFilter{}, store.Page{After: string(all[0].ID), Limit: 2}, "A1 A2 A3"},
	}
	for _, c := range cases {
		got := must[[]store.Agent](t, "Agents.List "+c.name)(w.s.Agents().List(ctx, c.sc, c.f, c.pg))
		if n := names(got); n != c.want {
			t.Errorf("Agents.List %s = %q, want %q", c.name, n, c.want)
		}
	}
	_, err := w.s.Agents().List(ctx, sc, store.AgentFilter{}, store.Page{After: "bad"})
	wantErr(t, "bad cursor", err, store.ErrInvalid)
}

// testAgentScope: outside the scope (another organization, a project not reached) every read
// and write of an agent is ErrNotFound, as for an unknown one.
func testAgentScope(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	a := w.create(t, w.p1.ID, "Support")
	if _, _, err := w.s.Agents().Publish(ctx, w.all(), a.ID, "", "test"); err != nil {
		t.Fatal(err)
	}
	other := newOrg(t, w.s, "Globex")
	newProject(t, w.s, other.ID, "Theirs")
	def := json.RawMessage(`{"agent": {}}`)
	for name, sc := range map[string]store.Scope{
		"other org":     store.OrgScope(other.ID),
		"other project": w.all().Narrow(w.p2.ID),
		"no project":    {Org: w.org.ID},
	} {
		_, err := w.s.Agents().Get(ctx, sc, a.ID)
		wantErr(t, "Get "+name, err, store.ErrNotFound)
		_, err = w.s.Agents().Change(ctx, sc, a.ID, store.AgentChange{Channels: []string{"chat"}, Definition: def})
		wantErr(t, "Change "+name, err, store.ErrNotFound)
		_, _, err = w.s.Agents().Publish(ctx, sc, a.ID, "", "")
		wantErr(t, "Publish "+name, err, store.ErrNotFound)
		_, err = w.s.Agents().Version(ctx, sc, a.ID, 1)
		wantErr(t, "Version "+name, err, store.ErrNotFound)
		_, err = w.s.Agents().Versions(ctx, sc, a.ID, store.Page{})
		wantErr(t, "Versions "+name, err, store.ErrNotFound)
		_, _, err = w.s.Agents().Delete(ctx, sc, a.ID, time.Now().Add(time.Hour))
		wantErr(t, "Delete "+name, err, store.ErrNotFound)
	}
	// Untouched, and reachable through its own project.
	got := must[store.Agent](t, "Agents.Get own project")(w.s.Agents().Get(ctx, w.all().Narrow(w.p1.ID), a.ID))
	if got.Version != 1 || got.Deleted() {
		t.Fatalf("agent after refused writes = %+v", got)
	}
	// The system lookups cross organizations.
	if _, err := w.s.SystemAgents().Get(ctx, a.ID); err != nil {
		t.Fatalf("SystemAgents.Get: %v", err)
	}
	if _, err := w.s.SystemAgents().Version(ctx, a.ID, 1); err != nil {
		t.Fatalf("SystemAgents.Version: %v", err)
	}
}

func testAgentChange(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	a := w.create(t, w.p1.ID, "Support")
	w.create(t, w.p1.ID, "Sales")
	def := json.RawMessage(`{"agent": {"name": "x", "system_prompt": "new"}, "references": {"tools": ["T"]}}`)
	got := must[store.Agent](t, "ChangeAgent")(w.s.Agents().Change(ctx, w.all(), a.ID, store.AgentChange{Description: "d", Channels: []string{"voice"}, Definition: def}))
	if got.Name != "Support" || got.Description != "d" || !slices.Equal(got.Channels, []string{"voice"}) || !got.UpdatedAt.After(a.UpdatedAt) && !got.UpdatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("changed agent = %+v", got)
	}
	back := must[store.Agent](t, "Agents.Get")(w.s.Agents().Get(ctx, w.all(), a.ID))
	var d map[string]any
	json.Unmarshal(back.Definition, &d)
	if d["agent"].(map[string]any)["system_prompt"] != "new" {
		t.Fatalf("definition not replaced: %s", back.Definition)
	}
	name := "Sales"
	_, err := w.s.Agents().Change(ctx, w.all(), a.ID, store.AgentChange{Name: &name, Channels: []string{"chat"}, Definition: def})
	wantErr(t, "rename to a taken name", err, store.ErrConflict)
	name = "support" // its own name in another case
	got = must[store.Agent](t, "rename case")(w.s.Agents().Change(ctx, w.all(), a.ID, store.AgentChange{Name: &name, Channels: []string{"chat"}, Definition: def}))
	if got.Name != "support" {
		t.Fatalf("renamed to %q", got.Name)
	}
	_, err = w.s.Agents().Change(ctx, w.all(), "0190a6f0-0000-7000-8000-000000000000", store.AgentChange{Channels: []string{"chat"}, Definition: def})
	wantErr(t, "change unknown", err, store.ErrNotFound)
}

func testAgentPublish(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	a := w.create(t, w.p1.ID, "Support")
	v1, pa, err := w.s.Agents().Publish(ctx, w.all(), a.ID, "first", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || v1.Note != "first" || v1.PublishedBy != "key-1" || pa.Status != store.AgentPublished || pa.Version != 1 || pa.PublishedAt == nil || !pa.PublishedAt.Equal(v1.PublishedAt) {
		t.Fatalf("publish 1 = %+v / %+v", v1, pa)
	}
	def2 := json.RawMessage(`{"agent": {"v": 2}}`)
	if _, err := w.s.Agents().Change(ctx, w.all(), a.ID, store.AgentChange{Channels: []string{"chat"}, Definition: def2}); err != nil {
		t.Fatal(err)
	}
	// The frozen version keeps the old definition; the agent has the new one.
	got1 := must[store.AgentVersion](t, "GetAgentVersion 1")(w.s.Agents().Version(ctx, w.all(), a.ID, 1))
	sameJSON(t, "version 1 definition", got1.Definition, a.Definition)
	v2, _, err := w.s.Agents().Publish(ctx, w.all(), a.ID, strings.Repeat("ü", store.MaxNote), "key-2")
	if err != nil || v2.Version != 2 {
		t.Fatalf("publish 2 = %+v, %v", v2, err)
	}
	sameJSON(t, "version 2 definition", must[store.AgentVersion](t, "GetAgentVersion 2")(w.s.Agents().Version(ctx, w.all(), a.ID, 2)).Definition, def2)
	_, _, err = w.s.Agents().Publish(ctx, w.all(), a.ID, strings.Repeat("x", store.MaxNote+1), "")
	wantErr(t, "long note", err, store.ErrInvalid)
	for range 3 {
		if _, _, err := w.s.Agents().Publish(ctx, w.all(), a.ID, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	vs := must[[]store.AgentVersion](t, "Agents.Versions")(w.s.Agents().Versions(ctx, w.all(), a.ID, store.Page{}))
	var nums []int
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	if !slices.Equal(nums, []int{5, 4, 3, 2, 1}) {
		t.Fatalf("versions newest first = %v", nums)
	}
	page := must[[]store.AgentVersion](t, "Agents.Versions page")(w.s.Agents().Versions(ctx, w.all(), a.ID, store.Page{After: "4", Limit: 2}))
	if len(page) != 3 || page[0].Version != 3 || page[1].Version != 2 || page[2].Version != 1 {
		t.Fatalf("page below 4 (one more than the limit) = %+v", page)
	}
	_, err = w.s.Agents().Versions(ctx, w.all(), a.ID, store.Page{After: "x"})
	wantErr(t, "bad version cursor", err, store.ErrInvalid)
	_, err = w.s.Agents().Version(ctx, w.all(), a.ID, 6)
	wantErr(t, "unknown version", err, store.ErrNotFound)
	_, err = w.s.Agents().Version(ctx, w.all(), a.ID, 0)
	wantErr(t, "version 0", err, store.ErrNotFound)
	_, _, err = w.s.Agents().Publish(ctx, w.all(), "0190a6f0-0000-7000-8000-000000000000", "", "")
	wantErr(t, "publish unknown", err, store.ErrNotFound)
}

func testAgentPublishConcurrent(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	a := w.create(t, w.p1.ID, "Support")
	const n = 6
	var wg sync.WaitGroup
	got := make(chan int, n)
	for range n {
		wg.Go(func() {
			v, _, err := w.s.Agents().Publish(ctx, w.all(), a.ID, "", "")
			if err != nil {
				t.Errorf("concurrent PublishAgent: %v", err)
				return
			}
			got <- v.Version
		})
	}
	wg.Wait()
	close(got)
	var nums []int
	for v := range got {
		nums = append(nums, v)
	}
	slices.Sort(nums)
	if !slices.Equal(nums, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("concurrent publishes numbered %v, want 1..6 once each", nums)
	}
}

func testAgentDeleteRestorePurge(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	a := w.create(t, w.p1.ID, "Support")
	if _, _, err := w.s.Agents().Publish(ctx, w.all(), a.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	num := must[store.PhoneNumber](t, "CreatePhoneNumber")(w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550100", AgentID: a.ID}))
	purge := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	del, released, err := w.s.Agents().Delete(ctx, w.all(), a.ID, purge)
	if err != nil {
		t.Fatal(err)
	}
	if del.Status != store.AgentArchived || !del.Deleted() || !del.PurgesAt.Equal(purge) || len(released) != 1 || released[0].ID != num.ID {
		t.Fatalf("deleted = %+v, released %+v", del, released)
	}
	if n := must[store.PhoneNumber](t, "GetPhoneNumber")(w.s.GetPhoneNumber(ctx, num.ID)); n.AgentID != "" || n.AssignedAt != nil {
		t.Fatalf("number still assigned after delete: %+v", n)
	}
	_, err = w.s.Agents().Get(ctx, w.all(), a.ID)
	wantErr(t, "Agents.Get deleted", err, store.ErrNotFound)
	_, _, err = w.s.Agents().Delete(ctx, w.all(), a.ID, purge)
	wantErr(t, "delete twice", err, store.ErrNotFound)
	_, _, err = w.s.Agents().Publish(ctx, w.all(), a.ID, "", "")
	wantErr(t, "publish deleted", err, store.ErrNotFound)
	// Restore: published again, since it was published before.
	w.create(t, w.p1.ID, "Support") // the name is taken meanwhile
	_, err = w.s.SystemAgents().Restore(ctx, a.ID, "")
	wantErr(t, "restore onto a taken name", err, store.ErrConflict)
	r := must[store.Agent](t, "RestoreAgent renamed")(w.s.SystemAgents().Restore(ctx, a.ID, "Support (old)"))
	if r.Status != store.AgentPublished || r.Deleted() || r.Name != "Support (old)" {
		t.Fatalf("restored = %+v", r)
	}
	_, err = w.s.SystemAgents().Restore(ctx, a.ID, "")
	wantErr(t, "restore a live agent", err, store.ErrNotFound)
	// Purge: only agents due by now go, with their versions.
	d2 := w.create(t, w.p2.ID, "Later")
	w.s.Agents().Delete(ctx, w.all(), a.ID, purge)
	w.s.Agents().Delete(ctx, w.all(), d2.ID, purge.Add(time.Hour))
	gone := must[[]store.Agent](t, "PurgeAgents")(w.s.SystemAgents().PurgeDue(ctx, purge, 10))
	if len(gone) != 1 || gone[0].ID != a.ID {
		t.Fatalf("purged %+v, want only %s", gone, a.ID)
	}
	_, err = w.s.SystemAgents().GetIncludingDeleted(ctx, a.ID)
	wantErr(t, "purged agent", err, store.ErrNotFound)
	_, err = w.s.SystemAgents().Version(ctx, a.ID, 1)
	wantErr(t, "purged agent's version", err, store.ErrNotFound)
	if got := must[store.Agent](t, "not yet due")(w.s.SystemAgents().GetIncludingDeleted(ctx, d2.ID)); !got.Deleted() {
		t.Fatal("agent not due was changed")
	}
	if gone := must[[]store.Agent](t, "PurgeAgents again")(w.s.SystemAgents().PurgeDue(ctx, purge, 10)); len(gone) != 0 {
		t.Fatalf("second purge removed %d", len(gone))
	}
}

func testPhoneNumbers(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	a := w.create(t, w.p1.ID, "Support")
	b := w.create(t, w.p1.ID, "Sales")
	c := w.create(t, w.p2.ID, "Elsewhere")
	add := func(p store.ProjectID, number string) store.PhoneNumber {
		return must[store.PhoneNumber](t, "CreatePhoneNumber "+number)(w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: p, Number: number, Trunk: "main", Label: "Line"}))
	}
	n1 := add(w.p1.ID, "+14155550101")
	n2 := add(w.p1.ID, "+14155550102")
	n3 := add(w.p2.ID, "+442071838750")
	if n1.Trunk != "main" || n1.AgentID != "" || n1.Label != "Line" {
		t.Fatalf("added %+v", n1)
	}
	_, err := w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p2.ID, Number: "+14155550101"})
	wantErr(t, "number twice", err, store.ErrConflict)
	for _, bad := range []string{"4155550101", "+0123456", "+1415555010123456", "+1 415 555", ""} {
		_, err := w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: bad})
		wantErr(t, "number "+bad, err, store.ErrInvalid)
	}
	_, err = w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+15550000000", AgentID: c.ID})
	wantErr(t, "agent of another project", err, store.ErrOtherProject)
	// Assign in order: n2 first, then n1; the agent's order follows.
	assign := func(n store.PhoneNumber, id store.AgentID) (store.PhoneNumber, error) {
		return w.s.Numbers().Change(ctx, store.OrgScope(w.org.ID), n.ID, store.PhoneNumberChange{AgentID: &id})
	}
	if _, err := assign(n2, a.ID); err != nil {
		t.Fatal(err)
	}
	got, err := assign(n1, a.ID)
	if err != nil || got.AgentID != a.ID || got.AssignedAt == nil {
		t.Fatalf("assign = %+v, %v", got, err)
	}
	order := must[[]store.PhoneNumber](t, "AgentPhoneNumbers")(w.s.AgentPhoneNumbers(ctx, a.ID))
	if len(order) != 2 || order[0].ID != n2.ID || order[1].ID != n1.ID {
		t.Fatalf("agent numbers = %+v, want n2 then n1", order)
	}
	// Re-assigning the same agent keeps the place; a label change too.
	label := "Main line"
	if _, err := w.s.Numbers().Change(ctx, store.OrgScope(w.org.ID), n2.ID, store.PhoneNumberChange{AgentID: &a.ID, Label: &label}); err != nil {
		t.Fatal(err)
	}
	order = must[[]store.PhoneNumber](t, "AgentPhoneNumbers")(w.s.AgentPhoneNumbers(ctx, a.ID))
	if order[0].ID != n2.ID || order[0].Label != "Main line" {
		t.Fatalf("after relabel = %+v", order)
	}
	_, err = assign(n3, a.ID)
	wantErr(t, "assign across projects", err, store.ErrOtherProject)
	_, err = assign(n1, "0190a6f0-0000-7000-8000-000000000000")
	wantErr(t, "assign unknown agent", err, store.ErrNotFound)
	if got, err := assign(n1, b.ID); err != nil || got.AgentID != b.ID {
		t.Fatalf("move to b = %+v, %v", got, err)
	}
	if got, err := assign(n1, ""); err != nil || got.AgentID != "" || got.AssignedAt != nil {
		t.Fatalf("clear = %+v, %v", got, err)
	}
	long := strings.Repeat("l", store.MaxLabel+1)
	_, err = w.s.Numbers().Change(ctx, store.OrgScope(w.org.ID), n1.ID, store.PhoneNumberChange{Label: &long})
	wantErr(t, "long label", err, store.ErrInvalid)
	found := must[store.PhoneNumber](t, "FindPhoneNumber")(w.s.FindPhoneNumber(ctx, "+442071838750"))
	if found.ID != n3.ID {
		t.Fatalf("FindPhoneNumber = %+v", found)
	}
	ids := func(ns []store.PhoneNumber) []store.PhoneNumberID {
		out := []store.PhoneNumberID{}
		for _, n := range ns {
			out = append(out, n.ID)
		}
		return out
	}
	all := store.OrgScope(w.org.ID)
	other := store.OrgScope(newOrg(t, w.s, "Other").ID)
	lists := []struct {
		name string
		sc   store.Scope
		f    store.PhoneNumberFilter
		pg   store.Page
		want []store.PhoneNumberID
	}{
		{"all", all, store.PhoneNumberFilter{}, store.Page{}, []store.PhoneNumberID{n1.ID, n2.ID, n3.ID}},
		{"reach p2", all.Narrow(w.p2.ID), store.PhoneNumberFilter{}, store.Page{}, []store.PhoneNumberID{n3.ID}},
		{"reach none", store.Scope{Org: w.org.ID}, store.PhoneNumberFilter{}, store.Page{}, []store.PhoneNumberID{}},
		{"other org", other, store.PhoneNumberFilter{}, store.Page{}, []store.PhoneNumberID{}},
		{"project", all, store.PhoneNumberFilter{ProjectID: w.p1.ID}, store.Page{}, []store.PhoneNumberID{n1.ID, n2.ID}},
		{"agent", all, store.PhoneNumberFilter{AgentID: a.ID}, store.Page{}, []store.PhoneNumberID{n2.ID}},
		{"after, one more than the limit", all, store.PhoneNumberFilter{}, store.Page{After: string(n1.ID), Limit: 1}, []store.PhoneNumberID{n2.ID, n3.ID}},
	}
	for _, l := range lists {
		if got := ids(must[[]store.PhoneNumber](t, "Numbers.List")(w.s.Numbers().List(ctx, l.sc, l.f, l.pg))); !slices.Equal(got, l.want) {
			t.Errorf("Numbers.List %s = %v, want %v", l.name, got, l.want)
		}
	}
	// Outside the scope a number is missing, whatever the reason.
	for name, sc := range map[string]store.Scope{"other org": other, "other project": all.Narrow(w.p2.ID)} {
		_, err := w.s.Numbers().Get(ctx, sc, n1.ID)
		wantErr(t, "Numbers.Get "+name, err, store.ErrNotFound)
		_, err = w.s.Numbers().Change(ctx, sc, n1.ID, store.PhoneNumberChange{Label: &label})
		wantErr(t, "Numbers.Change "+name, err, store.ErrNotFound)
	}
}

func testIdempotency(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	now := time.Date(2035, 3, 4, 5, 6, 7, 0, time.UTC)
	body := []byte("{\"id\": \"x\"}\n\x00\xff")
	rec := store.IdempotencyRecord{OrgID: org.ID, Operation: "createAgent", Key: "k-1", Fingerprint: "fp", Status: 201,
		Header: map[string]string{"Content-Type": "application/json", "Location": "/v1/agents/x"}, Body: body,
		CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	if err := s.SaveIdempotency(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got := must[store.IdempotencyRecord](t, "GetIdempotency")(s.GetIdempotency(ctx, org.ID, "createAgent", "k-1", now.Add(time.Hour)))
	if string(got.Body) != string(body) || got.Status != 201 || got.Fingerprint != "fp" || got.Header["Location"] != "/v1/agents/x" || !got.ExpiresAt.Equal(rec.ExpiresAt) {
		t.Fatalf("record read back = %+v", got)
	}
	wantErr(t, "save a live key again", s.SaveIdempotency(ctx, rec), store.ErrConflict)
	// Scoped by operation and organization.
	other := rec
	other.Operation = "publishAgent"
	if err := s.SaveIdempotency(ctx, other); err != nil {
		t.Fatalf("same key, other operation: %v", err)
	}
	_, err := s.GetIdempotency(ctx, org.ID, "createAgent", "k-2", now)
	wantErr(t, "unknown key", err, store.ErrNotFound)
	// Expired: not found, and replaced by a new save.
	later := now.Add(25 * time.Hour)
	_, err = s.GetIdempotency(ctx, org.ID, "createAgent", "k-1", later)
	wantErr(t, "expired key", err, store.ErrNotFound)
	again := rec
	again.Fingerprint, again.CreatedAt, again.ExpiresAt = "fp2", later, later.Add(24*time.Hour)
	if err := s.SaveIdempotency(ctx, again); err != nil {
		t.Fatalf("save over an expired record: %v", err)
	}
	if got := must[store.IdempotencyRecord](t, "GetIdempotency")(s.GetIdempotency(ctx, org.ID, "createAgent", "k-1", later)); got.Fingerprint != "fp2" {
		t.Fatalf("replaced record = %+v", got)
	}
	if n := must[int64](t, "PurgeIdempotency")(s.PurgeIdempotency(ctx, later)); n != 1 { // the publishAgent record
		t.Fatalf("purged %d, want 1", n)
	}
	bad := rec
	bad.Status = 42
	wantErr(t, "bad status", s.SaveIdempotency(ctx, bad), store.ErrInvalid)
}

// testAssignWhileDeleting races an assignment against the agent's deletion: whichever wins, no
// number is left pointing at a deleted agent.
func testAssignWhileDeleting(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	for i := range 8 {
		a := w.create(t, w.p1.ID, fmt.Sprintf("Racer %d", i))
		n := must[store.PhoneNumber](t, "CreatePhoneNumber")(w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: fmt.Sprintf("+1415555%04d", i)}))
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, _, err := w.s.Agents().Delete(ctx, w.all(), a.ID, time.Now().Add(time.Hour)); err != nil {
				t.Errorf("DeleteAgent: %v", err)
			}
		})
		wg.Go(func() {
			_, err := w.s.Numbers().Change(ctx, store.OrgScope(w.org.ID), n.ID, store.PhoneNumberChange{AgentID: &a.ID})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ChangePhoneNumber: %v", err)
			}
		})
		wg.Wait()
		got := must[store.PhoneNumber](t, "GetPhoneNumber")(w.s.GetPhoneNumber(ctx, n.ID))
		if got.AgentID != "" {
			t.Fatalf("round %d: number assigned to the deleted agent %s", i, got.AgentID)
		}
	}
}
