package store

import (
	"context"
	"encoding/json"
	"fmt"
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
