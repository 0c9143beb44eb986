package store

// issue 18: saved conversations (evaluations) of an agent and the runs that rehearse them.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// EvaluationID names a saved conversation; EvaluationRunID a run.
type (
	EvaluationID    string
	EvaluationRunID string
)

// Statuses of an evaluation run.
const (
	EvalRunQueued   = "queued"
	EvalRunRunning  = "running"
	EvalRunFinished = "finished"
	EvalRunFailed   = "failed"
)

// EvaluationRunKind is the job kind of a run.
const EvaluationRunKind = "evaluations.run"

// Evaluation is a saved conversation of an agent. Its script, mocks, criteria, variables,
// language and channel are one JSON document the domain reads.
type Evaluation struct {
	ID             EvaluationID
	OrgID          OrgID
	ProjectID      ProjectID
	AgentID        AgentID
	Name           string
	ConversationID ConversationID // "" when written by hand
	Spec           json.RawMessage
	CreatedAt      time.Time
}

// EvaluationRun is one rehearsal of every saved conversation of an agent.
type EvaluationRun struct {
	ID           EvaluationRunID
	OrgID        OrgID
	ProjectID    ProjectID
	AgentID      AgentID
	AgentVersion int // 0: the current definition
	Mode         Mode
	Status       string
	Reason       string
	Results      json.RawMessage // an array the domain reads
	Totals       json.RawMessage // an object the domain reads
	Attempts     int
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
}

const evalCols = `id, org_id, project_id, agent_id, name, conversation_id, spec, created_at`

func scanEvaluation(r rowScanner) (Evaluation, error) {
	var e Evaluation
	err := r.Scan(&e.ID, &e.OrgID, &e.ProjectID, &e.AgentID, &e.Name, nullTextCol[ConversationID]{&e.ConversationID}, jsonCol{&e.Spec}, timeCol{&e.CreatedAt})
	return e, err
}

const evalRunCols = `id, org_id, project_id, agent_id, agent_version, mode, status, reason, results, totals, attempts, created_at, started_at, finished_at`

func scanEvalRun(r rowScanner) (EvaluationRun, error) {
	var e EvaluationRun
	err := r.Scan(&e.ID, &e.OrgID, &e.ProjectID, &e.AgentID, &e.AgentVersion, &e.Mode, &e.Status, &e.Reason, jsonCol{&e.Results}, jsonCol{&e.Totals},
		&e.Attempts, timeCol{&e.CreatedAt}, nullTimeCol{&e.StartedAt}, nullTimeCol{&e.FinishedAt})
	return e, err
}

// Evaluations is the repository of saved conversations.
type Evaluations struct{ q *Queries }

// Evaluations returns the repository of saved conversations.
func (q *Queries) Evaluations() Evaluations { return Evaluations{q} }

func scopedEvals(sc Scope) *sel {
	return newSel(`SELECT `+evalCols+` FROM evaluations`).scope(sc, "org_id", "project_id", "")
}

// Get returns the scope's evaluation id of agent, or ErrNotFound.
func (r Evaluations) Get(ctx context.Context, sc Scope, agent AgentID, id EvaluationID) (Evaluation, error) {
	return one(ctx, r.q, "get evaluation", scopedEvals(sc).id("agent_id", string(agent)).id("id", string(id)), scanEvaluation)
}

// List returns the scope's evaluations of agent, oldest first, with one more when another
// page follows.
func (r Evaluations) List(ctx context.Context, sc Scope, agent AgentID, pg Page) ([]Evaluation, error) {
	b := scopedEvals(sc).id("agent_id", string(agent))
	return many(ctx, r.q, "list evaluations", b, b.page("id", pg, false), scanEvaluation)
}

// All returns every evaluation of agent (at most limit), oldest first, for a run.
func (r Evaluations) All(ctx context.Context, agent AgentID, limit int) ([]Evaluation, error) {
	return list(ctx, r.q, "list evaluations of a run", `SELECT `+evalCols+` FROM evaluations WHERE agent_id = $1 ORDER BY id LIMIT $2`,
		[]any{string(agent), limit}, scanEvaluation)
}

// Create stores e (its org, project and agent set by the caller, who loaded the agent through
// the scope) with a new id.
func (r Evaluations) Create(ctx context.Context, e Evaluation) (Evaluation, error) {
	if !json.Valid(e.Spec) {
		return Evaluation{}, fmt.Errorf("store: %w: an evaluation's document is not JSON", ErrInvalid)
	}
	e.ID, e.CreatedAt, e.Spec = newID[EvaluationID](), r.q.s.timeNow(), slices.Clone(e.Spec)
	_, err := r.q.exec(ctx, "create evaluation",
		`INSERT INTO evaluations (id, org_id, project_id, agent_id, name, conversation_id, spec, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		string(e.ID), string(e.OrgID), string(e.ProjectID), string(e.AgentID), e.Name, nullText(e.ConversationID), string(e.Spec), ts(e.CreatedAt))
	return e, err
}

// Delete removes the scope's evaluation id of agent and returns it.
func (r Evaluations) Delete(ctx context.Context, sc Scope, agent AgentID, id EvaluationID) (Evaluation, error) {
	var e Evaluation
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if e, err = q.Evaluations().Get(ctx, sc, agent, id); err != nil {
			return err
		}
		res, err := q.exec(ctx, "delete evaluation", `DELETE FROM evaluations WHERE id = $1`, string(id))
		return affectedOne(res, err, "evaluation", id)
	})
	return e, err
}

// EvaluationRuns is the repository of runs.
type EvaluationRuns struct{ q *Queries }

// EvaluationRuns returns the repository of runs.
func (q *Queries) EvaluationRuns() EvaluationRuns { return EvaluationRuns{q} }

// Get returns the scope's run id, or ErrNotFound.
func (r EvaluationRuns) Get(ctx context.Context, sc Scope, id EvaluationRunID) (EvaluationRun, error) {
	b := newSel(`SELECT `+evalRunCols+` FROM evaluation_runs`).scope(sc, "org_id", "project_id", "").id("id", string(id))
	return one(ctx, r.q, "get evaluation run", b, scanEvalRun)
}

// ByID returns run id in any organization (the job's handler), or ErrNotFound.
func (r EvaluationRuns) ByID(ctx context.Context, id EvaluationRunID) (EvaluationRun, error) {
	return one(ctx, r.q, "get evaluation run", newSel(`SELECT `+evalRunCols+` FROM evaluation_runs`).id("id", string(id)), scanEvalRun)
}

// Create stores a queued run. A run of the organization already queued or running makes it
// ErrConflict.
func (r EvaluationRuns) Create(ctx context.Context, e EvaluationRun) (EvaluationRun, error) {
	e.ID, e.CreatedAt, e.Status = newID[EvaluationRunID](), r.q.s.timeNow(), EvalRunQueued
	e.Results, e.Totals = json.RawMessage(`[]`), json.RawMessage(`{}`)
	_, err := r.q.exec(ctx, "create evaluation run",
		`INSERT INTO evaluation_runs (id, org_id, project_id, agent_id, agent_version, mode, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		string(e.ID), string(e.OrgID), string(e.ProjectID), string(e.AgentID), e.AgentVersion, string(e.Mode), e.Status, ts(e.CreatedAt))
	return e, err
}

// Start moves run id to running (again, after a crash: the attempt is counted and the results
// of the earlier attempt are dropped) and returns it. A finished or failed run is ErrConflict.
func (r EvaluationRuns) Start(ctx context.Context, id EvaluationRunID, at time.Time) (EvaluationRun, error) {
	res, err := r.q.exec(ctx, "start evaluation run",
		`UPDATE evaluation_runs SET status = 'running', started_at = $2, attempts = attempts + 1, results = '[]', totals = '{}'
		WHERE id = $1 AND status IN ('queued', 'running')`, string(id), ts(at))
	if err != nil {
		return EvaluationRun{}, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return EvaluationRun{}, fmt.Errorf("store: start evaluation run %s: %w", id, ErrConflict)
	}
	return r.ByID(ctx, id)
}

// Finish records the outcome of run id: status finished or failed, with the results and
// totals. A run already finished or failed is left as it is (false).
func (r EvaluationRuns) Finish(ctx context.Context, id EvaluationRunID, status, reason string, results, totals json.RawMessage, at time.Time) (bool, error) {
	if status != EvalRunFinished && status != EvalRunFailed {
		return false, fmt.Errorf("store: %w: a run ends finished or failed, not %q", ErrInvalid, status)
	}
	if !json.Valid(results) || !json.Valid(totals) {
		return false, fmt.Errorf("store: %w: a run's results are not JSON", ErrInvalid)
	}
	res, err := r.q.exec(ctx, "finish evaluation run",
		`UPDATE evaluation_runs SET status = $2, reason = $3, results = $4, totals = $5, finished_at = $6 WHERE id = $1 AND status IN ('queued', 'running')`,
		string(id), status, reason, string(results), string(totals), ts(at))
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// EvalRunOrphanedReason is the reason of a run failed because its job died.
const EvalRunOrphanedReason = "The run was interrupted too many times (its node stopped while rehearsing); start it again."

// orphanedWhere picks the runs queued or running (made before $1) whose job is no longer
// queued or running.
const orphanedWhere = `status IN ('queued', 'running') AND created_at < $1 AND NOT EXISTS (
	SELECT 1 FROM jobs WHERE jobs.kind = $2 AND jobs.dedupe_key = CAST(evaluation_runs.id AS TEXT) AND jobs.state IN ('queued', 'running'))`

// Orphaned returns at most limit runs queued or running whose job is no longer queued or
// running (it died, or was purged), made over a minute before at, oldest first: the runs the
// reaper fails, one at a time, with their events.
func (r EvaluationRuns) Orphaned(ctx context.Context, at time.Time, limit int) ([]EvaluationRun, error) {
	return list(ctx, r.q, "list orphaned evaluation runs", `SELECT `+evalRunCols+` FROM evaluation_runs WHERE `+orphanedWhere+` ORDER BY id LIMIT $3`,
		[]any{ts(at.Add(-time.Minute)), EvaluationRunKind, limit}, scanEvalRun)
}

// FailOrphaned stores as failed the runs queued or running whose job is no longer queued or
// running (it died: its attempts were used up by crashes, or it was purged), so that no run
// stays running. It returns how many it failed.
func (r EvaluationRuns) FailOrphaned(ctx context.Context, at time.Time) (int64, error) {
	res, err := r.q.exec(ctx, "fail orphaned evaluation runs",
		`UPDATE evaluation_runs SET status = 'failed', reason = 'The run was interrupted too many times (its node stopped while rehearsing); start it again.', finished_at = $1
		WHERE status IN ('queued', 'running') AND created_at < $2 AND NOT EXISTS (
			SELECT 1 FROM jobs WHERE jobs.kind = $3 AND jobs.dedupe_key = CAST(evaluation_runs.id AS TEXT) AND jobs.state IN ('queued', 'running'))`,
		ts(at), ts(at.Add(-time.Minute)), EvaluationRunKind)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
