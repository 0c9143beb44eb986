package store

import (
	"context"
	"errors"
	"fmt"
)

// AddDoNotCall puts a number on an organization's do-not-call list; a number already on it is
// left as it is. (The list's API comes with its own operations; calls read it now.)
func (q *Queries) AddDoNotCall(ctx context.Context, org OrgID, number, reason string) error {
	if !validID(org) || !ValidE164(number) {
		return fmt.Errorf("store: %w: do-not-call needs an organization and an E.164 number", ErrInvalid)
	}
	_, err := q.exec(ctx, "add do-not-call",
		`INSERT INTO do_not_call (org_id, number, reason, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, number) DO NOTHING`,
		string(org), number, reason, ts(q.s.timeNow()))
	return err
}

// OnDoNotCall reports whether a number is on an organization's do-not-call list.
func (q *Queries) OnDoNotCall(ctx context.Context, org OrgID, number string) (bool, error) {
	var n string
	err := q.get(ctx, "read do-not-call", `SELECT number FROM do_not_call WHERE org_id = $1 AND number = $2`,
		[]any{string(org), number}, func(r rowScanner) error { return r.Scan(&n) })
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// isNotFound reports whether err wraps ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
