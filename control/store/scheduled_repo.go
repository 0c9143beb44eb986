package store

import (
	"context"
	"fmt"
	"time"
)

// ScheduledCalls is the repository of scheduled calls. Every read and write takes the caller's
// Scope, mode included: a call scheduled with a live key is not seen with a test key. The
// workers' lease and finish (LeaseDueScheduledCalls, FinishScheduledCall) cross organizations
// and stay on Queries.
type ScheduledCalls struct{ q *Queries }

// ScheduledCalls returns the scheduled-call repository.
func (q *Queries) ScheduledCalls() ScheduledCalls { return ScheduledCalls{q} }

// ScheduledCallFilter narrows a list of scheduled calls.
type ScheduledCallFilter struct {
	AgentID AgentID // only this agent's calls
	Status  string  // only calls in this status
}

// Create stores a call to place at s.DueAt, in the scope's organization and a project it
// reaches (ErrNotFound otherwise) and in s.Mode.
func (r ScheduledCalls) Create(ctx context.Context, sc Scope, s ScheduledCall) (ScheduledCall, error) {
	switch {
	case !validID(s.OrgID) || !validID(s.ProjectID) || !validID(s.AgentID):
		return ScheduledCall{}, fmt.Errorf("store: %w: scheduled call ids", ErrInvalid)
	case s.OrgID != sc.Org || sc.Mode != "" && s.Mode != sc.Mode:
		return ScheduledCall{}, notFound("project", s.ProjectID)
	case s.Mode != ModeLive && s.Mode != ModeTest:
		return ScheduledCall{}, fmt.Errorf("store: %w: mode %q", ErrInvalid, s.Mode)
	case !isJSONObject(s.Request):
		return ScheduledCall{}, fmt.Errorf("store: %w: the request is not a JSON object", ErrInvalid)
	case s.DialAt.IsZero() || s.DueAt.IsZero() || s.DueAt.Before(s.DialAt):
		return ScheduledCall{}, fmt.Errorf("store: %w: due_at must be set and not before dial_at", ErrInvalid)
	case s.ToNumber == "":
		return ScheduledCall{}, fmt.Errorf("store: %w: no number to call", ErrInvalid)
	}
	if _, err := r.q.Projects().Get(ctx, sc, s.ProjectID); err != nil {
		return ScheduledCall{}, err
	}
	now := r.q.s.timeNow()
	s.ID, s.Status, s.CreatedAt, s.UpdatedAt = newID[ScheduledCallID](), ScheduledWaiting, now, now
	s.DialAt, s.DueAt = normTime(s.DialAt), normTime(s.DueAt)
	s.FailureCode, s.FailureReason, s.ConversationID, s.Attempts, s.LeasedBy, s.LeaseUntil = "", "", "", 0, "", nil
	_, err := r.q.exec(ctx, "create scheduled call",
		`INSERT INTO scheduled_calls (id, org_id, project_id, agent_id, mode, request, to_number, dial_at, due_at, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
		string(s.ID), string(s.OrgID), string(s.ProjectID), string(s.AgentID), string(s.Mode), string(s.Request), s.ToNumber,
		ts(s.DialAt), ts(s.DueAt), s.Status, ts(now))
	if err != nil {
		return ScheduledCall{}, err
	}
	return s, nil
}

func (r ScheduledCalls) sel(sc Scope) *sel {
	return newSel(`SELECT `+schedCols+` FROM scheduled_calls`).scope(sc, "org_id", "project_id", "mode")
}

// Get returns the scope's scheduled call with id, or ErrNotFound.
func (r ScheduledCalls) Get(ctx context.Context, sc Scope, id ScheduledCallID) (ScheduledCall, error) {
	return one(ctx, r.q, "get scheduled call", r.sel(sc).id("id", string(id)), scanScheduled)
}

// List returns the scope's scheduled calls that f selects, newest first: a page of up to
// pg.Limit, and one more when another page follows.
func (r ScheduledCalls) List(ctx context.Context, sc Scope, f ScheduledCallFilter, pg Page) ([]ScheduledCall, error) {
	b := r.sel(sc).optID("agent_id", string(f.AgentID))
	if f.Status != "" {
		b.cond("status = ?", f.Status)
	}
	return many(ctx, r.q, "list scheduled calls", b, b.page("id", pg, true), scanScheduled)
}

// Cancel cancels the scope's call with id while it is still waiting. A call that is dialling,
// placed, failed or cancelled already is ErrConflict (the returned call shows its status); one
// outside the scope is ErrNotFound.
func (r ScheduledCalls) Cancel(ctx context.Context, sc Scope, id ScheduledCallID, at time.Time) (ScheduledCall, error) {
	var s ScheduledCall
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if s, err = q.ScheduledCalls().Get(ctx, sc, id); err != nil {
			return err
		}
		now := ts(normTime(at))
		err = q.get(ctx, "cancel scheduled call",
			`UPDATE scheduled_calls SET status = 'cancelled', cancelled_at = $2, updated_at = $2 WHERE id = $1 AND status = 'scheduled' RETURNING `+schedCols,
			[]any{string(id), now}, func(r rowScanner) (err error) { s, err = scanScheduled(r); return err })
		if err == nil || !isNotFound(err) {
			return err
		}
		if s, err = q.ScheduledCalls().Get(ctx, sc, id); err != nil {
			return err
		}
		return fmt.Errorf("store: cancel scheduled call %s: %w: it is %s", id, ErrConflict, s.Status)
	})
	return s, err
}

// CancelForAgent cancels every call still scheduled for an agent of the organization, in
// both key modes (the agent is being deleted), with the failure code and reason given, and
// returns them. The caller has loaded the agent through its scope.
func (r ScheduledCalls) CancelForAgent(ctx context.Context, org OrgID, agent AgentID, code, reason string, at time.Time) ([]ScheduledCall, error) {
	if !validID(org) || !validID(agent) {
		return nil, nil
	}
	now := ts(normTime(at))
	return list(ctx, r.q, "cancel an agent's scheduled calls",
		`UPDATE scheduled_calls SET status = 'cancelled', cancelled_at = $3, updated_at = $3, failure_code = $4, failure_reason = $5
		WHERE org_id = $1 AND agent_id = $2 AND status = 'scheduled' RETURNING `+schedCols,
		[]any{string(org), string(agent), now, code, reason}, scanScheduled)
}
