package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// evaluationTests are the conformance tests of saved conversations and their runs (issue 18).
var evaluationTests = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"Evaluations", testEvaluations},
	{"EvaluationRuns", testEvaluationRuns},
}

// testEvaluations: a saved conversation is created, listed and deleted in its scope and agent;
// outside either it is not found.
func testEvaluations(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	a1, a2 := w.create(t, w.p1.ID, "One"), w.create(t, w.p2.ID, "Two")
	r := w.s.Evaluations()
	spec := json.RawMessage(`{"turns":[{"text":"hi"}]}`)
	e := must[store.Evaluation](t, "create")(r.Create(ctx, store.Evaluation{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: a1.ID, Name: "n", Spec: spec}))
	must[store.Evaluation](t, "create 2")(r.Create(ctx, store.Evaluation{OrgID: w.org.ID, ProjectID: w.p2.ID, AgentID: a2.ID, Spec: spec}))
	_, err := r.Create(ctx, store.Evaluation{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: a1.ID, Spec: json.RawMessage(`{`)})
	wantErr(t, "not JSON", err, store.ErrInvalid)
	got := must[store.Evaluation](t, "get")(r.Get(ctx, w.all(), a1.ID, e.ID))
	if got.Name != "n" || got.ConversationID != "" || string(got.Spec) == "" || got.CreatedAt.IsZero() {
		t.Fatalf("got %+v", got)
	}
	if l := must[[]store.Evaluation](t, "list")(r.List(ctx, w.all(), a1.ID, store.Page{Limit: 10})); len(l) != 1 || l[0].ID != e.ID {
		t.Fatalf("list %+v", l)
	}
	if all := must[[]store.Evaluation](t, "all")(r.All(ctx, a1.ID, 10)); len(all) != 1 {
		t.Fatalf("all %+v", all)
	}
	narrow := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}}
	_, err = r.Get(ctx, narrow, a1.ID, e.ID)
	wantErr(t, "other project", err, store.ErrNotFound)
	_, err = r.Get(ctx, w.all(), a2.ID, e.ID)
	wantErr(t, "other agent", err, store.ErrNotFound)
	_, err = r.Delete(ctx, narrow, a1.ID, e.ID)
	wantErr(t, "delete outside", err, store.ErrNotFound)
	must[store.Evaluation](t, "delete")(r.Delete(ctx, w.all(), a1.ID, e.ID))
	_, err = r.Get(ctx, w.all(), a1.ID, e.ID)
	wantErr(t, "deleted", err, store.ErrNotFound)
}

// testEvaluationRuns: one queued or running run per organization; a run starts (again after a
// crash, counting attempts), finishes once, and a run whose job is gone is failed by the reaper.
func testEvaluationRuns(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	a1 := w.create(t, w.p1.ID, "One")
	r := w.s.EvaluationRuns()
	run := must[store.EvaluationRun](t, "create")(r.Create(ctx, store.EvaluationRun{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: a1.ID, Mode: store.ModeLive}))
	if run.Status != store.EvalRunQueued {
		t.Fatalf("run %+v", run)
	}
	_, err := r.Create(ctx, store.EvaluationRun{OrgID: w.org.ID, ProjectID: w.p2.ID, AgentID: a1.ID, Mode: store.ModeLive})
	wantErr(t, "second active run", err, store.ErrConflict)
	other := newOrg(t, w.s, "Other")
	op := newProject(t, w.s, other.ID, "P")
	must[store.EvaluationRun](t, "another organization")(r.Create(ctx, store.EvaluationRun{OrgID: other.ID, ProjectID: op.ID, AgentID: a1.ID, Mode: store.ModeLive}))
	_, err = r.Get(ctx, store.OrgScope(other.ID), run.ID)
	wantErr(t, "other org", err, store.ErrNotFound)
	now := time.Now()
	s1 := must[store.EvaluationRun](t, "start")(r.Start(ctx, run.ID, now))
	s2 := must[store.EvaluationRun](t, "start again")(r.Start(ctx, run.ID, now))
	if s1.Status != store.EvalRunRunning || s1.Attempts != 1 || s2.Attempts != 2 || s2.StartedAt == nil {
		t.Fatalf("started %+v %+v", s1, s2)
	}
	ok := must[bool](t, "finish")(r.Finish(ctx, run.ID, store.EvalRunFinished, "", json.RawMessage(`[{"status":"pass"}]`), json.RawMessage(`{"passed":1}`), now))
	again := must[bool](t, "finish again")(r.Finish(ctx, run.ID, store.EvalRunFailed, "late", json.RawMessage(`[]`), json.RawMessage(`{}`), now))
	if !ok || again {
		t.Fatalf("finish %v then %v", ok, again)
	}
	_, err = r.Start(ctx, run.ID, now)
	wantErr(t, "start finished", err, store.ErrConflict)
	g := must[store.EvaluationRun](t, "get")(r.Get(ctx, w.all(), run.ID))
	if g.Status != store.EvalRunFinished || g.FinishedAt == nil || string(g.Totals) == "{}" {
		t.Fatalf("finished %+v", g)
	}
	// A new run may start now; one with a live job is kept, one without is failed.
	kept := must[store.EvaluationRun](t, "create kept")(r.Create(ctx, store.EvaluationRun{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: a1.ID, Mode: store.ModeLive}))
	if _, _, err := w.s.EnqueueJob(ctx, store.NewJob{Kind: store.EvaluationRunKind, DedupeKey: string(kept.ID)}); err != nil {
		t.Fatal(err)
	}
	orphans := must[[]store.EvaluationRun](t, "orphaned")(r.Orphaned(ctx, time.Now().Add(2*time.Minute), 10))
	if len(orphans) != 1 || orphans[0].ID == kept.ID || orphans[0].Status == store.EvalRunFinished {
		t.Fatalf("orphaned %+v, want the other organization's run only", orphans)
	}
	if again := must[[]store.EvaluationRun](t, "orphaned now")(r.Orphaned(ctx, time.Now(), 10)); len(again) != 0 {
		t.Fatalf("a run made under a minute ago is not an orphan yet: %+v", again)
	}
	if n := must[int64](t, "reap")(r.FailOrphaned(ctx, time.Now().Add(2*time.Minute))); n != 1 { // the other organization's run has no job
		t.Fatalf("reaped %d, want 1", n)
	}
	if g := must[store.EvaluationRun](t, "kept")(r.ByID(ctx, kept.ID)); g.Status != store.EvalRunQueued {
		t.Fatalf("a run with a live job was reaped: %+v", g)
	}
}
