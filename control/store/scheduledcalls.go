package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ScheduledCallID names a scheduled call.
type ScheduledCallID string

// Scheduled call statuses: scheduled (waiting for its time), dialing (leased by a worker),
// placed (its conversation exists), failed (with a code and reason), cancelled.
const (
	ScheduledWaiting   = "scheduled"
	ScheduledDialing   = "dialing"
	ScheduledPlaced    = "placed"
	ScheduledFailed    = "failed"
	ScheduledCancelled = "cancelled"
)

// ScheduledCall is an outbound call to place at DueAt (DialAt, or the first opening of its call
// window at or after it). Request is the call's body as sent, checked again when it is dialled.
type ScheduledCall struct {
	ID             ScheduledCallID
	OrgID          OrgID
	ProjectID      ProjectID
	AgentID        AgentID
	Mode           Mode
	Request        json.RawMessage
	ToNumber       string
	DialAt         time.Time
	DueAt          time.Time
	Status         string
	FailureCode    string
	FailureReason  string
	ConversationID ConversationID // set when a worker leases it (the id the call will take)
	Attempts       int
	LeasedBy       string
	LeaseUntil     *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	PlacedAt       *time.Time
	CancelledAt    *time.Time
}

// ScheduledCallFilter selects scheduled calls, newest first.
type ScheduledCallFilter struct {
	OrgID      OrgID
	Mode       Mode
	ProjectIDs []ProjectID // nil: every project
	AgentID    AgentID
	Status     string
	BeforeID   ScheduledCallID
	Limit      int
}

const schedCols = `id, org_id, project_id, agent_id, mode, request, to_number, dial_at, due_at, status, failure_code, failure_reason,
	conversation_id, attempts, leased_by, lease_until, created_at, updated_at, placed_at, cancelled_at`

func scanScheduled(r rowScanner) (ScheduledCall, error) {
	var s ScheduledCall
	err := r.Scan(&s.ID, &s.OrgID, &s.ProjectID, &s.AgentID, &s.Mode, jsonCol{&s.Request}, &s.ToNumber, timeCol{&s.DialAt},
		timeCol{&s.DueAt}, &s.Status, nullTextCol[string]{&s.FailureCode}, nullTextCol[string]{&s.FailureReason},
		nullTextCol[ConversationID]{&s.ConversationID}, &s.Attempts, nullTextCol[string]{&s.LeasedBy}, nullTimeCol{&s.LeaseUntil},
		timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt}, nullTimeCol{&s.PlacedAt}, nullTimeCol{&s.CancelledAt})
	return s, err
}

// CreateScheduledCall stores a call to place at s.DueAt.
func (q *Queries) CreateScheduledCall(ctx context.Context, s ScheduledCall) (ScheduledCall, error) {
	switch {
	case !validID(s.OrgID) || !validID(s.ProjectID) || !validID(s.AgentID):
		return ScheduledCall{}, fmt.Errorf("store: %w: scheduled call ids", ErrInvalid)
	case s.Mode != ModeLive && s.Mode != ModeTest:
		return ScheduledCall{}, fmt.Errorf("store: %w: mode %q", ErrInvalid, s.Mode)
	case !isJSONObject(s.Request):
		return ScheduledCall{}, fmt.Errorf("store: %w: the request is not a JSON object", ErrInvalid)
	case s.DialAt.IsZero() || s.DueAt.IsZero() || s.DueAt.Before(s.DialAt):
		return ScheduledCall{}, fmt.Errorf("store: %w: due_at must be set and not before dial_at", ErrInvalid)
	case s.ToNumber == "":
		return ScheduledCall{}, fmt.Errorf("store: %w: no number to call", ErrInvalid)
	}
	now := q.s.timeNow()
	s.ID, s.Status, s.CreatedAt, s.UpdatedAt = newID[ScheduledCallID](), ScheduledWaiting, now, now
	s.DialAt, s.DueAt = normTime(s.DialAt), normTime(s.DueAt)
	s.FailureCode, s.FailureReason, s.ConversationID, s.Attempts, s.LeasedBy, s.LeaseUntil = "", "", "", 0, "", nil
	_, err := q.exec(ctx, "create scheduled call",
		`INSERT INTO scheduled_calls (id, org_id, project_id, agent_id, mode, request, to_number, dial_at, due_at, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
		string(s.ID), string(s.OrgID), string(s.ProjectID), string(s.AgentID), string(s.Mode), string(s.Request), s.ToNumber,
		ts(s.DialAt), ts(s.DueAt), s.Status, ts(now))
	if err != nil {
		return ScheduledCall{}, err
	}
	return s, nil
}

// GetScheduledCall returns a scheduled call, or ErrNotFound.
func (q *Queries) GetScheduledCall(ctx context.Context, id ScheduledCallID) (ScheduledCall, error) {
	if !validID(id) {
		return ScheduledCall{}, notFound("scheduled call", id)
	}
	var s ScheduledCall
	err := q.get(ctx, "get scheduled call", `SELECT `+schedCols+` FROM scheduled_calls WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { s, err = scanScheduled(r); return err })
	return s, err
}

// ListScheduledCalls returns scheduled calls newest first.
func (q *Queries) ListScheduledCalls(ctx context.Context, f ScheduledCallFilter) ([]ScheduledCall, error) {
	if !validID(f.OrgID) || (f.BeforeID != "" && !validID(f.BeforeID)) {
		return nil, fmt.Errorf("store: %w: bad organization or cursor ID", ErrInvalid)
	}
	where := []string{"org_id = $1", "mode = $2"}
	args := []any{string(f.OrgID), string(f.Mode)}
	if f.ProjectIDs != nil {
		if len(f.ProjectIDs) == 0 {
			return nil, nil
		}
		var ps []string
		for _, p := range f.ProjectIDs {
			args = append(args, string(p))
			ps = append(ps, fmt.Sprintf("$%d", len(args)))
		}
		where = append(where, "project_id IN ("+strings.Join(ps, ", ")+")")
	}
	if f.AgentID != "" {
		args = append(args, string(f.AgentID))
		where = append(where, fmt.Sprintf("agent_id = $%d", len(args)))
	}
	if f.Status != "" {
		args = append(args, f.Status)
		where = append(where, fmt.Sprintf("status = $%d", len(args)))
	}
	if f.BeforeID != "" {
		args = append(args, string(f.BeforeID))
		where = append(where, fmt.Sprintf("id < $%d", len(args)))
	}
	args = append(args, clampLimit(f.Limit))
	return list(ctx, q, "list scheduled calls",
		`SELECT `+schedCols+` FROM scheduled_calls WHERE `+strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)),
		args, scanScheduled)
}

// CancelScheduledCall cancels a call that is still waiting. A call that is dialling, placed,
// failed or cancelled already is ErrConflict (the returned call shows its status).
func (q *Queries) CancelScheduledCall(ctx context.Context, id ScheduledCallID, at time.Time) (ScheduledCall, error) {
	var s ScheduledCall
	err := q.atomic(ctx, func(q *Queries) error {
		now := ts(normTime(at))
		err := q.get(ctx, "cancel scheduled call",
			`UPDATE scheduled_calls SET status = 'cancelled', cancelled_at = $2, updated_at = $2 WHERE id = $1 AND status = 'scheduled' RETURNING `+schedCols,
			[]any{string(id), now}, func(r rowScanner) (err error) { s, err = scanScheduled(r); return err })
		if err == nil || !isNotFound(err) {
			return err
		}
		if s, err = q.GetScheduledCall(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("store: cancel scheduled call %s: %w: it is %s", id, ErrConflict, s.Status)
	})
	return s, err
}

// LeaseDueScheduledCalls takes up to limit calls that are due at now and marks them dialing
// for worker until now+lease, naming the conversation each will place. On PostgreSQL the rows
// are locked FOR UPDATE SKIP LOCKED, so workers running at once each take different calls; on
// SQLite the IMMEDIATE transaction serializes them. A call whose lease ran out (its worker went
// away) while dialing is leased again only when its conversation was never made; otherwise it
// is marked placed.
func (q *Queries) LeaseDueScheduledCalls(ctx context.Context, worker string, now time.Time, lease time.Duration, limit int) ([]ScheduledCall, error) {
	if worker == "" || lease <= 0 {
		return nil, fmt.Errorf("store: %w: a lease needs a worker and a duration", ErrInvalid)
	}
	var out []ScheduledCall
	err := q.atomic(ctx, func(q *Queries) error {
		out = nil
		n := ts(normTime(now))
		rows, err := list(ctx, q, "select due scheduled calls",
			`SELECT `+schedCols+` FROM scheduled_calls
			WHERE (status = 'scheduled' AND due_at <= $1) OR (status = 'dialing' AND lease_until < $1)
			ORDER BY due_at LIMIT $2 `+q.s.d.skipLocked,
			[]any{n, clampLimit(limit)}, scanScheduled)
		if err != nil {
			return err
		}
		until := ts(normTime(now.Add(lease)))
		for _, s := range rows {
			if s.Status == ScheduledDialing && s.ConversationID != "" {
				if _, err := q.GetConversation(ctx, s.ConversationID); err == nil {
					// Its worker placed the call and went away before recording it.
					if _, err := q.exec(ctx, "recover placed call",
						`UPDATE scheduled_calls SET status = 'placed', placed_at = $2, updated_at = $2, leased_by = NULL, lease_until = NULL WHERE id = $1`,
						string(s.ID), n); err != nil {
						return err
					}
					continue
				} else if !isNotFound(err) {
					return err
				}
			}
			if s.ConversationID == "" {
				s.ConversationID = newID[ConversationID]()
			}
			s.Status, s.LeasedBy, s.Attempts = ScheduledDialing, worker, s.Attempts+1
			lu := normTime(now.Add(lease))
			s.LeaseUntil = &lu
			if _, err := q.exec(ctx, "lease scheduled call",
				`UPDATE scheduled_calls SET status = 'dialing', leased_by = $2, lease_until = $3, conversation_id = $4, attempts = attempts + 1, updated_at = $5 WHERE id = $1`,
				string(s.ID), worker, until, string(s.ConversationID), n); err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// FinishScheduledCall records how a leased call went: placed (its conversation made), failed
// with a code and reason, or back to scheduled at a later due time (retry set). Only the
// worker holding the lease may finish it; another gets ErrConflict.
func (q *Queries) FinishScheduledCall(ctx context.Context, id ScheduledCallID, worker, status, code, reason string, at time.Time, retry *time.Time) error {
	now := ts(normTime(at))
	var res interface{ RowsAffected() (int64, error) }
	var err error
	switch status {
	case ScheduledPlaced:
		res, err = q.exec(ctx, "scheduled call placed",
			`UPDATE scheduled_calls SET status = 'placed', placed_at = $3, updated_at = $3, leased_by = NULL, lease_until = NULL
			WHERE id = $1 AND status = 'dialing' AND leased_by = $2`, string(id), worker, now)
	case ScheduledFailed:
		res, err = q.exec(ctx, "scheduled call failed",
			`UPDATE scheduled_calls SET status = 'failed', failure_code = $3, failure_reason = $4, updated_at = $5, leased_by = NULL, lease_until = NULL
			WHERE id = $1 AND status = 'dialing' AND leased_by = $2`, string(id), worker, nullText(code), nullText(reason), now)
	case ScheduledWaiting:
		if retry == nil {
			return fmt.Errorf("store: %w: rescheduling needs a time", ErrInvalid)
		}
		res, err = q.exec(ctx, "scheduled call rescheduled",
			`UPDATE scheduled_calls SET status = 'scheduled', due_at = $3, updated_at = $4, leased_by = NULL, lease_until = NULL, conversation_id = NULL
			WHERE id = $1 AND status = 'dialing' AND leased_by = $2`, string(id), worker, ts(normTime(*retry)), now)
	default:
		return fmt.Errorf("store: %w: scheduled call status %q", ErrInvalid, status)
	}
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("store: finish scheduled call %s: %w: not leased by %s", id, ErrConflict, worker)
	}
	return nil
}
