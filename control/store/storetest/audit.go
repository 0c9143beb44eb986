package storetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// event returns a valid audit event for org.
func event(org store.OrgID, action string) store.AuditEvent {
	return store.AuditEvent{
		OrgID: org, ActorType: store.ActorOperator, ActorID: "root", Action: action,
		ObjectType: "agent", ObjectID: "a1", RequestID: "req_1",
	}
}

func testAuditList(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")
	proj := newProject(t, s, org.ID, "Web")
	k, _, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "server", AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}

	base := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	full := store.AuditEvent{
		OrgID: org.ID, ProjectID: proj.ID, ActorType: store.ActorAPIKey, ActorID: string(k.ID), ActorMode: store.ModeTest,
		Action: "agent.created", ObjectType: "agent", ObjectID: "0190a6f0-0000-7000-8000-0000000000aa", RequestID: "req_abc",
		Data: json.RawMessage(`{"name": "Sales", "tags": ["a", "b"], "n": 1.5, "nested": {"ok": true}}`), CreatedAt: base,
	}
	inserts := []store.AuditEvent{
		full,
		{OrgID: org.ID, ActorType: store.ActorSystem, Action: "agent.published", CreatedAt: base.Add(time.Microsecond)},
		{OrgID: other.ID, ActorType: store.ActorSystem, Action: "agent.created", CreatedAt: base.Add(time.Microsecond)},
		{OrgID: org.ID, ActorType: store.ActorOperator, ActorID: "root", Action: "key.revoked", CreatedAt: base.Add(2 * time.Microsecond)},
	}
	for _, e := range inserts {
		if err := s.InsertAudit(ctx, e); err != nil {
			t.Fatalf("InsertAudit %s: %v", e.Action, err)
		}
	}

	all := must[[]store.AuditEvent](t, "ListAudit")(s.ListAudit(ctx, store.AuditFilter{OrgID: org.ID}))
	if actions := actionsOf(all); actions != "agent.created agent.published key.revoked" {
		t.Fatalf("ListAudit = %s, want this org's events oldest first", actions)
	}
	got := all[0]
	if got.ID == "" || got.OrgID != full.OrgID || got.ProjectID != full.ProjectID || got.ActorType != full.ActorType ||
		got.ActorID != full.ActorID || got.ActorMode != full.ActorMode || got.Action != full.Action ||
		got.ObjectType != full.ObjectType || got.ObjectID != full.ObjectID || got.RequestID != full.RequestID ||
		!got.CreatedAt.Equal(base) {
		t.Fatalf("stored event = %+v\nwant %+v", got, full)
	}
	var gotData, wantData any
	if err := json.Unmarshal(got.Data, &gotData); err != nil {
		t.Fatalf("stored data %q: %v", got.Data, err)
	}
	_ = json.Unmarshal(full.Data, &wantData)
	if !reflect.DeepEqual(gotData, wantData) {
		t.Fatalf("stored data %s, want %s", got.Data, full.Data)
	}
	if sys := all[1]; sys.ProjectID != "" || sys.ActorMode != "" || sys.ActorID != "" || string(sys.Data) != "{}" {
		t.Fatalf("minimal event read back as %+v (data %s)", sys, sys.Data)
	}

	filters := []struct {
		name string
		f    store.AuditFilter
		want string
	}{
		{"actions", store.AuditFilter{Actions: []string{"agent.created", "key.revoked"}}, "agent.created key.revoked"},
		{"one action", store.AuditFilter{Actions: []string{"agent.published"}}, "agent.published"},
		{"unknown action", store.AuditFilter{Actions: []string{"nothing.done"}}, ""},
		{"created after", store.AuditFilter{CreatedAfter: base}, "agent.published key.revoked"},
		{"created after +1µs", store.AuditFilter{CreatedAfter: base.Add(time.Microsecond)}, "key.revoked"},
		{"created before +2µs", store.AuditFilter{CreatedBefore: base.Add(2 * time.Microsecond)}, "agent.created agent.published"},
		{"after ID", store.AuditFilter{AfterID: all[0].ID}, "agent.published key.revoked"},
		{"after last ID", store.AuditFilter{AfterID: all[2].ID}, ""},
		{"limit", store.AuditFilter{Limit: 2}, "agent.created agent.published"},
		{"after ID and limit", store.AuditFilter{AfterID: all[0].ID, Limit: 1}, "agent.published"},
		{"everything", store.AuditFilter{Actions: []string{"key.revoked", "agent.published"}, CreatedAfter: base, AfterID: all[0].ID, Limit: 5}, "agent.published key.revoked"},
	}
	for _, c := range filters {
		c.f.OrgID = org.ID
		got := must[[]store.AuditEvent](t, "ListAudit "+c.name)(s.ListAudit(ctx, c.f))
		if a := actionsOf(got); a != c.want {
			t.Errorf("ListAudit %s = %q, want %q", c.name, a, c.want)
		}
	}
	_, err = s.ListAudit(ctx, store.AuditFilter{OrgID: org.ID, AfterID: "bad"})
	wantErr(t, "ListAudit with a bad cursor", err, store.ErrInvalid)
}

func actionsOf(es []store.AuditEvent) string {
	a := make([]string, len(es))
	for i, e := range es {
		a[i] = e.Action
	}
	return strings.Join(a, " ")
}

func testAuditRefused(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	cases := []struct {
		name   string
		mutate func(*store.AuditEvent)
		want   error
	}{
		{"no org", func(e *store.AuditEvent) { e.OrgID = "" }, store.ErrInvalid},
		{"unknown org", func(e *store.AuditEvent) { e.OrgID = "0190a6f0-0000-7000-8000-000000000000" }, store.ErrNotFound},
		{"bad project", func(e *store.AuditEvent) { e.ProjectID = "web" }, store.ErrInvalid},
		{"bad actor type", func(e *store.AuditEvent) { e.ActorType = "robot" }, store.ErrInvalid},
		{"bad actor mode", func(e *store.AuditEvent) { e.ActorMode = "demo" }, store.ErrInvalid},
		{"key actor without mode", func(e *store.AuditEvent) {
			e.ActorType, e.ActorID = store.ActorAPIKey, "0190a6f0-0000-7000-8000-000000000001"
		}, store.ErrInvalid},
		{"no action", func(e *store.AuditEvent) { e.Action = "" }, store.ErrInvalid},
		{"undotted action", func(e *store.AuditEvent) { e.Action = "created" }, store.ErrInvalid},
		{"upper-case action", func(e *store.AuditEvent) { e.Action = "Agent.Created" }, store.ErrInvalid},
		{"data not JSON", func(e *store.AuditEvent) { e.Data = json.RawMessage(`{oops`) }, store.ErrInvalid},
		{"data not an object", func(e *store.AuditEvent) { e.Data = json.RawMessage(`[1]`) }, store.ErrInvalid},
		{"data null", func(e *store.AuditEvent) { e.Data = json.RawMessage(`null`) }, store.ErrInvalid},
		{"bad ID", func(e *store.AuditEvent) { e.ID = "x" }, store.ErrInvalid},
	}
	for _, c := range cases {
		e := event(org.ID, "agent.created")
		c.mutate(&e)
		wantErr(t, c.name, s.InsertAudit(ctx, e), c.want)
	}
	if got := must[[]store.AuditEvent](t, "ListAudit")(s.ListAudit(ctx, store.AuditFilter{OrgID: org.ID})); len(got) != 0 {
		t.Fatalf("refused events were stored: %+v", got)
	}
	e := event(org.ID, "agent.created")
	e.ID = "0190a6f0-0000-7000-8000-0000000000ff"
	if err := s.InsertAudit(ctx, e); err != nil {
		t.Fatalf("InsertAudit with an ID: %v", err)
	}
	wantErr(t, "InsertAudit with a taken ID", s.InsertAudit(ctx, e), store.ErrConflict)
}

func testBootstrap(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	o, p, created, err := s.Bootstrap(ctx)
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	if !created || o.Name != "Default" || p.Name != "Default" || p.OrgID != o.ID {
		t.Fatalf("Bootstrap = %+v %+v created=%v", o, p, created)
	}
	o2, p2, created, err := s.Bootstrap(ctx)
	if err != nil {
		t.Fatalf("second Bootstrap: %v", err)
	}
	if created || o2.ID != o.ID || p2.ID != p.ID {
		t.Fatalf("second Bootstrap = %+v %+v created=%v, want the same rows, not created", o2, p2, created)
	}
	// Another organization does not disturb it.
	newOrg(t, s, "Other")
	o3, p3, created, err := s.Bootstrap(ctx)
	if err != nil || created || o3.ID != o.ID || p3.ID != p.ID {
		t.Fatalf("third Bootstrap = %v %v created=%v err=%v", o3.ID, p3.ID, created, err)
	}
	if ps := must[[]store.Project](t, "ListProjects")(s.ListProjects(ctx, o.ID)); len(ps) != 1 {
		t.Fatalf("Default org has %d projects, want 1", len(ps))
	}
}

func testBootstrapConcurrent(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	const n = 6
	type result struct {
		o       store.Org
		p       store.Project
		created bool
		err     error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			o, p, created, err := s.Bootstrap(ctx)
			results <- result{o, p, created, err}
		}()
	}
	close(start)
	var first *result
	creators := 0
	for range n {
		r := <-results
		if r.err != nil {
			t.Fatalf("concurrent Bootstrap: %v", r.err)
		}
		if r.created {
			creators++
		}
		if first == nil {
			first = &r
		} else if r.o.ID != first.o.ID || r.p.ID != first.p.ID {
			t.Fatalf("concurrent Bootstraps disagree: %v/%v and %v/%v", r.o.ID, r.p.ID, first.o.ID, first.p.ID)
		}
	}
	if creators != 1 {
		t.Fatalf("%d concurrent Bootstraps reported creating, want exactly 1", creators)
	}
	if orgs := must[[]store.Org](t, "ListOrgs")(s.ListOrgs(ctx)); len(orgs) != 1 {
		t.Fatalf("%d organizations after concurrent Bootstrap, want 1", len(orgs))
	}
}
