package store

import (
	"context"
	"fmt"
	"time"
)

// AuditQuery narrows a page of the audit log.
type AuditQuery struct {
	Actions       []string  // only these actions; empty means all
	CreatedAfter  time.Time // only events recorded after this; zero means no bound
	CreatedBefore time.Time // only events recorded before this; zero means no bound
}

// AuditLog is the repository of the audit log. The log is the organization's: reading it
// takes a scope that reaches every project (a narrower scope reads nothing).
type AuditLog struct{ q *Queries }

// AuditLog returns the audit-log repository.
func (q *Queries) AuditLog() AuditLog { return AuditLog{q} }

// List returns the scope's organization's events that f selects, oldest first: a page of up
// to pg.Limit, and one more when another page follows.
func (r AuditLog) List(ctx context.Context, sc Scope, f AuditQuery, pg Page) ([]AuditEvent, error) {
	if len(f.Actions) > maxActions {
		return nil, fmt.Errorf("store: %w: more than %d actions in one filter", ErrInvalid, maxActions)
	}
	b := newSel(`SELECT `+auditCols+` FROM audit_events`).orgOnly(sc, "org_id").
		oneOf("action", f.Actions).between("created_at", f.CreatedAfter, f.CreatedBefore)
	if !sc.AllProjects {
		b.empty = true
	}
	return many(ctx, r.q, "list audit events", b, b.page("id", pg, false), scanAudit)
}

// auditPurgeBatch is how many events one statement of PurgeBefore deletes, so that a large
// purge never holds a long lock.
const auditPurgeBatch = 5000

// PurgeBefore deletes the events of every organization recorded before cutoff and returns how
// many it deleted. It crosses organizations: it is for the retention job only.
func (r AuditLog) PurgeBefore(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		res, err := r.q.exec(ctx, "purge audit events",
			`DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE created_at < $1 LIMIT $2)`,
			ts(cutoff), auditPurgeBatch)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("store: purge audit events: %w", err)
		}
		total += int(n)
		if n < auditPurgeBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
