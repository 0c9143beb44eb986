package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Org is an organization: it holds projects, API keys and the credit they spend.
type Org struct {
	ID           OrgID
	Name         string // unique across the deployment
	Frozen       bool   // a frozen organization may read but not change anything
	CreditMicros int64  // balance in millionths of a US dollar; may go below zero
	Timezone     string // IANA name, "UTC" by default
	// TransferAllow lists the non-public networks (canonical CIDRs) the organization's calls
	// may be transferred to, on top of the node's and the trunk's lists (issue 22 item 7).
	TransferAllow []string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// CreditTransaction is one change of an organization's balance.
type CreditTransaction struct {
	ID           CreditTxID
	OrgID        OrgID
	Kind         CreditKind
	AmountMicros int64 // positive adds credit, negative spends it
	BalanceAfter int64
	Reason       string
	// ConversationID is the conversation a charge is for ("" for top-ups and adjustments).
	ConversationID ConversationID
	CreatedAt      time.Time
}

// CreditFilter selects credit transactions, oldest first.
type CreditFilter struct {
	OrgID   OrgID
	AfterID CreditTxID // only transactions after this one (the previous page's last)
	Limit   int        // 1–1000; 0 means 100
}

// DefaultName names the organization and project that Bootstrap ensures.
const DefaultName = "Default"

// maxCreditMicros bounds one credit change (a billion dollars) so balances cannot overflow.
const maxCreditMicros = 1_000_000_000 * 1_000_000

const orgCols = `id, name, frozen, credit_micros, timezone, transfer_allow, created_at, updated_at`

func scanOrg(r rowScanner) (Org, error) {
	var o Org
	err := r.Scan(orgDest(&o)...)
	return o, err
}

// orgDest is the scan destination of orgCols, in order: every query that reads orgCols (alone
// or joined) scans through it, so a column added to one is never missed by another.
func orgDest(o *Org) []any {
	return []any{&o.ID, &o.Name, &o.Frozen, &o.CreditMicros, &o.Timezone, jsonCol{&o.TransferAllow}, timeCol{&o.CreatedAt}, timeCol{&o.UpdatedAt}}
}

// CreateOrg creates an organization. A name already taken is ErrConflict.
func (q *Queries) CreateOrg(ctx context.Context, name string) (Org, error) {
	if err := checkName("organization", name); err != nil {
		return Org{}, err
	}
	now := q.s.timeNow()
	o := Org{ID: newID[OrgID](), Name: name, Timezone: "UTC", TransferAllow: []string{}, CreatedAt: now, UpdatedAt: now}
	_, err := q.exec(ctx, "create organization",
		`INSERT INTO organizations (id, name, frozen, credit_micros, timezone, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		string(o.ID), o.Name, o.Frozen, o.CreditMicros, o.Timezone, ts(now), ts(now))
	if err != nil {
		return Org{}, err
	}
	return o, nil
}

// GetOrg returns the organization with id, or ErrNotFound.
func (q *Queries) GetOrg(ctx context.Context, id OrgID) (Org, error) {
	if !validID(id) {
		return Org{}, notFound("organization", id)
	}
	var o Org
	err := q.get(ctx, "get organization", `SELECT `+orgCols+` FROM organizations WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { o, err = scanOrg(r); return err })
	return o, err
}

// FindOrgByName returns the organization called name, or ErrNotFound.
func (q *Queries) FindOrgByName(ctx context.Context, name string) (Org, error) {
	var o Org
	err := q.get(ctx, "find organization", `SELECT `+orgCols+` FROM organizations WHERE name = $1`, []any{name},
		func(r rowScanner) (err error) { o, err = scanOrg(r); return err })
	return o, err
}

// ListOrgs returns every organization, oldest first.
func (q *Queries) ListOrgs(ctx context.Context) ([]Org, error) {
	return list(ctx, q, "list organizations", `SELECT `+orgCols+` FROM organizations ORDER BY id`, nil, scanOrg)
}

// SetOrgFrozen freezes or unfreezes an organization.
func (q *Queries) SetOrgFrozen(ctx context.Context, id OrgID, frozen bool) error {
	if !validID(id) {
		return notFound("organization", id)
	}
	res, err := q.exec(ctx, "freeze organization", `UPDATE organizations SET frozen = $2, updated_at = $3 WHERE id = $1`,
		string(id), frozen, ts(q.s.timeNow()))
	return affectedOne(res, err, "organization", id)
}

// SetOrgTransferAllow replaces the networks the organization's calls may be transferred to
// (addresses or CIDRs, stored canonical; an empty list clears it). A bad entry is ErrInvalid.
func (q *Queries) SetOrgTransferAllow(ctx context.Context, id OrgID, allow []string) error {
	if !validID(id) {
		return notFound("organization", id)
	}
	list, err := canonicalCIDRs("transfer", allow)
	if err != nil {
		return err
	}
	js, err := jsonText(list)
	if err != nil {
		return err
	}
	res, err := q.exec(ctx, "set organization transfer allow-list", `UPDATE organizations SET transfer_allow = $2, updated_at = $3 WHERE id = $1`,
		string(id), js, ts(q.s.timeNow()))
	return affectedOne(res, err, "organization", id)
}

// AddCredit changes an organization's balance by amountMicros (negative spends) and records a
// credit transaction in the same database transaction: a top_up when it adds credit, an
// adjustment when it removes some (Credit().Record names other kinds). It returns the
// organization as changed.
func (q *Queries) AddCredit(ctx context.Context, id OrgID, amountMicros int64, reason string) (Org, error) {
	kind := CreditTopUp
	if amountMicros < 0 {
		kind = CreditAdjustment
	}
	o, _, err := q.Credit().Record(ctx, CreditEntry{OrgID: id, Kind: kind, AmountMicros: amountMicros, Reason: reason})
	return o, err
}

// ListCreditTransactions returns an organization's credit transactions, oldest first.
func (q *Queries) ListCreditTransactions(ctx context.Context, f CreditFilter) ([]CreditTransaction, error) {
	if !validID(f.OrgID) || (f.AfterID != "" && !validID(f.AfterID)) {
		return nil, fmt.Errorf("store: %w: bad organization or cursor ID", ErrInvalid)
	}
	after := f.AfterID
	if after == "" {
		after = "00000000-0000-0000-0000-000000000000"
	}
	return list(ctx, q, "list credit transactions",
		`SELECT `+creditTxCols+` FROM credit_transactions WHERE org_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		[]any{string(f.OrgID), string(after), clampLimit(f.Limit)}, scanCreditTx)
}

// Bootstrap ensures that an organization named "Default" exists with a project named "Default"
// in it, and reports whether it created either. It is idempotent and safe to run concurrently:
// the inserts do nothing on a unique conflict and the rows are then read back.
func (q *Queries) Bootstrap(ctx context.Context) (org Org, project Project, created bool, err error) {
	var (
		o Org
		p Project
	)
	err = q.atomic(ctx, func(q *Queries) error {
		created = false
		now := ts(q.s.timeNow())
		res, err := q.exec(ctx, "bootstrap organization",
			`INSERT INTO organizations (id, name, frozen, credit_micros, timezone, created_at, updated_at)
			VALUES ($1, $2, $3, 0, 'UTC', $4, $4) ON CONFLICT (name) DO NOTHING`,
			string(newID[OrgID]()), DefaultName, false, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			created = true
		}
		if o, err = q.FindOrgByName(ctx, DefaultName); err != nil {
			return err
		}
		res, err = q.exec(ctx, "bootstrap project",
			`INSERT INTO projects (id, org_id, name, frozen, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (org_id, name) DO NOTHING`,
			string(newID[ProjectID]()), string(o.ID), DefaultName, false, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			created = true
		}
		p, err = q.FindProjectByName(ctx, o.ID, DefaultName)
		return err
	})
	if err != nil {
		return Org{}, Project{}, false, err
	}
	return o, p, created, nil
}

// affectedOne turns an UPDATE that matched no row into ErrNotFound.
func affectedOne(res sql.Result, err error, what string, id any) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: rows affected: %w", err)
	}
	if n == 0 {
		return notFound(what, id)
	}
	return nil
}
