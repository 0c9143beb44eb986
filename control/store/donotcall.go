package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do-not-call sources: how a number came onto the list.
const (
	DNCSourceAPI    = "api"            // added through the API or the console
	DNCSourceCaller = "caller_request" // the person asked the agent during a call
	DNCSourceImport = "import"         // added by an import
)

// DoNotCall is one number of an organization's do-not-call list.
type DoNotCall struct {
	OrgID     OrgID
	Number    string
	Reason    string
	Source    string
	CreatedAt time.Time
}

const dncCols = `org_id, number, reason, source, created_at`

func scanDNC(r rowScanner) (DoNotCall, error) {
	var d DoNotCall
	err := r.Scan(&d.OrgID, &d.Number, &d.Reason, &d.Source, timeCol{&d.CreatedAt})
	return d, err
}

// AddDoNotCall puts a number on an organization's do-not-call list; a number already on it is
// left as it is.
func (q *Queries) AddDoNotCall(ctx context.Context, org OrgID, number, reason string) error {
	_, _, err := q.DoNotCallList().add(ctx, org, DoNotCall{Number: number, Reason: reason, Source: DNCSourceAPI})
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

// DoNotCallList is the repository of the do-not-call list. The list belongs to the whole
// organization (it is checked for every call of every project), so only a scope that reaches
// every project reads it or removes from it; any scope of the organization may add to it,
// since adding only protects people.
type DoNotCallList struct{ q *Queries }

// DoNotCallList returns the do-not-call repository.
func (q *Queries) DoNotCallList() DoNotCallList { return DoNotCallList{q} }

// Add puts d.Number on the scope's organization's list and reports whether it was added (false:
// it was there already; the entry returned is the one kept).
func (r DoNotCallList) Add(ctx context.Context, sc Scope, d DoNotCall) (DoNotCall, bool, error) {
	return r.add(ctx, sc.Org, d)
}

func (r DoNotCallList) add(ctx context.Context, org OrgID, d DoNotCall) (DoNotCall, bool, error) {
	switch {
	case !validID(org) || !ValidE164(d.Number):
		return DoNotCall{}, false, fmt.Errorf("store: %w: do-not-call needs an organization and an E.164 number", ErrInvalid)
	case d.Source != DNCSourceAPI && d.Source != DNCSourceCaller && d.Source != DNCSourceImport:
		return DoNotCall{}, false, fmt.Errorf("store: %w: do-not-call source %q", ErrInvalid, d.Source)
	}
	d.OrgID, d.CreatedAt = org, r.q.s.timeNow()
	res, err := r.q.exec(ctx, "add do-not-call",
		`INSERT INTO do_not_call (`+dncCols+`) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, number) DO NOTHING`,
		string(org), d.Number, d.Reason, d.Source, ts(d.CreatedAt))
	if err != nil {
		return DoNotCall{}, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return d, true, nil
	}
	kept, err := one(ctx, r.q, "read do-not-call", newSel(`SELECT `+dncCols+` FROM do_not_call`).
		cond("org_id = ?", string(org)).cond("number = ?", d.Number), scanDNC)
	return kept, false, err
}

func (r DoNotCallList) sel(sc Scope) *sel {
	b := newSel(`SELECT ` + dncCols + ` FROM do_not_call`)
	if !validID(sc.Org) {
		b.err = fmt.Errorf("store: %w: organization %q is not a canonical UUID", ErrInvalid, sc.Org)
		return b
	}
	b.cond("org_id = ?", string(sc.Org))
	if !sc.AllProjects {
		b.empty = true // the organization's list is not a project's to read
	}
	return b
}

// Get returns the entry of number, or ErrNotFound.
func (r DoNotCallList) Get(ctx context.Context, sc Scope, number string) (DoNotCall, error) {
	return one(ctx, r.q, "get do-not-call", r.sel(sc).cond("number = ?", number), scanDNC)
}

// List returns the scope's entries, ordered by number, after pg.After (a number): a page of up
// to pg.Limit, and one more when another page follows. number filters by prefix.
func (r DoNotCallList) List(ctx context.Context, sc Scope, prefix string, pg Page) ([]DoNotCall, error) {
	b := r.sel(sc)
	if prefix != "" {
		b.cond("number LIKE ?", prefix+"%")
	}
	if pg.After != "" {
		b.cond("number > ?", pg.After)
	}
	return many(ctx, r.q, "list do-not-call", b, " ORDER BY number LIMIT "+b.arg(clampLimit(pg.Limit)+1), scanDNC)
}

// Remove takes number off the list (ErrNotFound when it is not on it, or the scope does not
// reach the list) and returns the entry removed.
func (r DoNotCallList) Remove(ctx context.Context, sc Scope, number string) (DoNotCall, error) {
	var d DoNotCall
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if d, err = q.DoNotCallList().Get(ctx, sc, number); err != nil {
			return err
		}
		_, err = q.exec(ctx, "remove do-not-call", `DELETE FROM do_not_call WHERE org_id = $1 AND number = $2`, string(d.OrgID), d.Number)
		return err
	})
	return d, err
}

// isNotFound reports whether err wraps ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
