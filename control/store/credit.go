package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CreditKind says what a credit transaction is: credit added, a part of a conversation's
// charge, or an operator's adjustment. The set is open: readers must tolerate new kinds.
type CreditKind string

// Credit kinds.
const (
	CreditTopUp         CreditKind = "top_up"         // credit added (parley admin credit add)
	CreditCallMinutes   CreditKind = "call_minutes"   // a voice call's time (phone and browser)
	CreditChatTurns     CreditKind = "chat_turns"     // a chat's turns (what its language model used)
	CreditSTTSeconds    CreditKind = "stt_seconds"    // audio sent to speech-to-text
	CreditLLMTokens     CreditKind = "llm_tokens"     // a voice call's language-model tokens
	CreditTTSCharacters CreditKind = "tts_characters" // text sent to text-to-speech
	CreditTesting       CreditKind = "testing"        // rehearsals (evaluation runs)
	CreditAdjustment    CreditKind = "adjustment"     // an operator's correction, either way
	CreditUsage         CreditKind = "usage"          // a conversation charged as one sum, before kinds
)

// CreditKinds lists the kinds, top-ups first, then charges, then the rest.
var CreditKinds = []CreditKind{CreditTopUp, CreditCallMinutes, CreditChatTurns, CreditSTTSeconds, CreditLLMTokens,
	CreditTTSCharacters, CreditTesting, CreditAdjustment, CreditUsage}

// Spends reports whether a transaction of kind k is spending (a charge), as opposed to credit
// added or an adjustment.
func (k CreditKind) Spends() bool { return k != CreditTopUp && k != CreditAdjustment }

// CreditEntry is one change of an organization's balance to record.
type CreditEntry struct {
	OrgID          OrgID
	Kind           CreditKind
	AmountMicros   int64 // positive adds credit, negative spends it; never 0
	Reason         string
	ConversationID ConversationID // the conversation a charge is for, or ""
}

// CreditTxFilter narrows a ledger page.
type CreditTxFilter struct {
	Kinds         []string  // only these kinds; empty means all
	CreatedAfter  time.Time // only transactions made after this; zero means no bound
	CreatedBefore time.Time // only transactions made before this; zero means no bound
}

// CreditSummary is an organization's credit at one moment.
type CreditSummary struct {
	BalanceMicros  int64 // on the account (may be below zero)
	ReservedMicros int64 // held by calls in progress
	SpentMicros    int64 // charged since the period's start
}

// Reservation is the credit a call in progress holds.
type Reservation struct {
	OrgID          OrgID
	ConversationID ConversationID
	AmountMicros   int64     // what the call may have cost by CoveredUntil
	CoveredUntil   time.Time // the call is covered until then
	ExpiresAt      time.Time // the hold counts against the available credit until then
}

const creditTxCols = `id, org_id, kind, amount_micros, balance_after, reason, conversation_id, created_at`

func scanCreditTx(r rowScanner) (CreditTransaction, error) {
	var c CreditTransaction
	err := r.Scan(&c.ID, &c.OrgID, &c.Kind, &c.AmountMicros, &c.BalanceAfter, &c.Reason,
		nullTextCol[ConversationID]{&c.ConversationID}, timeCol{&c.CreatedAt})
	return c, err
}

// Credit is the repository of organizations' credit: the ledger of transactions and the
// reservations of calls in progress. Credit belongs to the organization, not to a project:
// reads apply the scope's organization only.
type Credit struct{ q *Queries }

// Credit returns the credit repository.
func (q *Queries) Credit() Credit { return Credit{q} }

// orgOnly applies the organization of sc (objects of the organization as a whole).
func (b *sel) orgOnly(sc Scope, orgCol string) *sel {
	if !validID(sc.Org) {
		b.err = fmt.Errorf("store: %w: organization %q is not a canonical UUID", ErrInvalid, sc.Org)
		return b
	}
	return b.cond(orgCol+" = ?", string(sc.Org))
}

// oneOf adds col IN (vals) when vals is not empty.
func (b *sel) oneOf(col string, vals []string) *sel {
	if len(vals) == 0 {
		return b
	}
	ph := make([]string, len(vals))
	for i, v := range vals {
		ph[i] = b.arg(v)
	}
	b.where = append(b.where, col+" IN ("+strings.Join(ph, ", ")+")")
	return b
}

// between adds col > after and col < before for the bounds that are set.
func (b *sel) between(col string, after, before time.Time) *sel {
	if !after.IsZero() {
		b.cond(col+" > ?", ts(after))
	}
	if !before.IsZero() {
		b.cond(col+" < ?", ts(before))
	}
	return b
}

// checkCreditEntry refuses a credit change the ledger must not hold.
func checkCreditEntry(e CreditEntry) error {
	switch {
	case !validID(e.OrgID):
		return notFound("organization", e.OrgID)
	case e.AmountMicros == 0:
		return fmt.Errorf("store: %w: credit amount is zero", ErrInvalid)
	case e.AmountMicros > maxCreditMicros || e.AmountMicros < -maxCreditMicros:
		return fmt.Errorf("store: %w: credit amount %d micro-USD is out of range", ErrInvalid, e.AmountMicros)
	case e.Reason == "" || len(e.Reason) > 500:
		return fmt.Errorf("store: %w: a credit change needs a reason of 1 to 500 bytes", ErrInvalid)
	case !slices.Contains(CreditKinds, e.Kind):
		return fmt.Errorf("store: %w: unknown credit kind %q", ErrInvalid, e.Kind)
	case e.ConversationID != "" && !validID(e.ConversationID):
		return fmt.Errorf("store: %w: conversation %q is not a canonical UUID", ErrInvalid, e.ConversationID)
	}
	return nil
}

// RecordAll records several changes of one organization's credit, in order, as Record would
// one after the other (issue 20: a call's charges with its end): the balance moves once, by
// their sum, and each gets its transaction with the balance after it. It costs two statements
// whatever their number.
func (r Credit) RecordAll(ctx context.Context, es []CreditEntry) error {
	if len(es) == 0 {
		return nil
	}
	var sum int64
	for _, e := range es {
		if err := checkCreditEntry(e); err != nil {
			return err
		}
		if e.OrgID != es[0].OrgID {
			return fmt.Errorf("store: %w: credit changes of several organizations", ErrInvalid)
		}
		sum += e.AmountMicros
	}
	if sum > maxCreditMicros || sum < -maxCreditMicros {
		return fmt.Errorf("store: %w: credit amount %d micro-USD is out of range", ErrInvalid, sum)
	}
	return r.q.atomic(ctx, func(q *Queries) error {
		now := q.s.timeNow()
		var balance int64
		err := q.get(ctx, "add credit", `UPDATE organizations SET credit_micros = credit_micros + $2, updated_at = $3 WHERE id = $1 RETURNING credit_micros`,
			[]any{string(es[0].OrgID), sum, ts(now)}, func(r rowScanner) error { return r.Scan(&balance) })
		if err != nil {
			return err
		}
		balance -= sum // before the first
		var sb strings.Builder
		args := make([]any, 0, 8*len(es))
		for i, e := range es {
			balance += e.AmountMicros
			if i > 0 {
				sb.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&sb, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
			args = append(args, string(newID[CreditTxID]()), string(e.OrgID), string(e.Kind), e.AmountMicros, balance, e.Reason, nullText(e.ConversationID), ts(now))
		}
		_, err = q.exec(ctx, "record credit transactions", `INSERT INTO credit_transactions (`+creditTxCols+`) VALUES `+sb.String(), args...)
		return err
	})
}

// Record changes the organization's balance by e.AmountMicros and writes the transaction, in
// one database transaction. It returns the organization as changed and the transaction.
func (r Credit) Record(ctx context.Context, e CreditEntry) (Org, CreditTransaction, error) {
	if err := checkCreditEntry(e); err != nil {
		return Org{}, CreditTransaction{}, err
	}
	var (
		o Org
		t CreditTransaction
	)
	err := r.q.atomic(ctx, func(q *Queries) error {
		now := q.s.timeNow()
		err := q.get(ctx, "add credit",
			`UPDATE organizations SET credit_micros = credit_micros + $2, updated_at = $3 WHERE id = $1 RETURNING `+orgCols,
			[]any{string(e.OrgID), e.AmountMicros, ts(now)},
			func(r rowScanner) (err error) { o, err = scanOrg(r); return err })
		if err != nil {
			return err
		}
		t = CreditTransaction{ID: newID[CreditTxID](), OrgID: e.OrgID, Kind: e.Kind, AmountMicros: e.AmountMicros,
			BalanceAfter: o.CreditMicros, Reason: e.Reason, ConversationID: e.ConversationID, CreatedAt: now}
		_, err = q.exec(ctx, "record credit transaction",
			`INSERT INTO credit_transactions (`+creditTxCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			string(t.ID), string(t.OrgID), string(t.Kind), t.AmountMicros, t.BalanceAfter, t.Reason, nullText(t.ConversationID), ts(now))
		return err
	})
	if err != nil {
		return Org{}, CreditTransaction{}, err
	}
	return o, t, nil
}

// List returns the scope's organization's transactions that f selects, newest first: a page of
// up to pg.Limit, and one more when another page follows.
func (r Credit) List(ctx context.Context, sc Scope, f CreditTxFilter, pg Page) ([]CreditTransaction, error) {
	b := newSel(`SELECT `+creditTxCols+` FROM credit_transactions`).orgOnly(sc, "org_id").
		oneOf("kind", f.Kinds).between("created_at", f.CreatedAfter, f.CreatedBefore)
	return many(ctx, r.q, "list credit transactions", b, b.page("id", pg, true), scanCreditTx)
}

// Summary returns the scope's organization's balance, what calls in progress hold at now, and
// what was charged since (not summed when since is zero).
func (r Credit) Summary(ctx context.Context, sc Scope, now, since time.Time) (CreditSummary, error) {
	var s CreditSummary
	if !validID(sc.Org) {
		return s, notFound("organization", sc.Org)
	}
	var spending []string
	for _, k := range CreditKinds {
		if k.Spends() {
			spending = append(spending, string(k))
		}
	}
	err := r.q.atomic(ctx, func(q *Queries) error {
		err := q.get(ctx, "credit balance", `SELECT credit_micros FROM organizations WHERE id = $1`, []any{string(sc.Org)},
			func(rs rowScanner) error { return rs.Scan(&s.BalanceMicros) })
		if err != nil {
			return err
		}
		if s.ReservedMicros, err = q.Credit().reserved(ctx, sc.Org, "", now); err != nil {
			return err
		}
		if since.IsZero() {
			return nil
		}
		b := newSel(`SELECT CAST(COALESCE(-SUM(amount_micros), 0) AS BIGINT) FROM credit_transactions`).orgOnly(sc, "org_id").
			oneOf("kind", spending).cond("created_at >= ?", ts(since))
		return q.get(ctx, "credit spent", b.sql(), b.args, func(rs rowScanner) error { return rs.Scan(&s.SpentMicros) })
	})
	return s, err
}

// reserved sums the holds of org's calls in progress at now, but for the conversation except.
func (r Credit) reserved(ctx context.Context, org OrgID, except ConversationID, now time.Time) (int64, error) {
	var n int64
	b := newSel(`SELECT CAST(COALESCE(SUM(amount_micros), 0) AS BIGINT) FROM credit_reservations`).
		cond("org_id = ?", string(org)).cond("expires_at > ?", ts(now))
	if except != "" {
		b.cond("conversation_id <> ?", string(except))
	}
	err := r.q.get(ctx, "credit reserved", b.sql(), b.args, func(rs rowScanner) error { return rs.Scan(&n) })
	return n, err
}

// Reserve sets the hold of a call in progress to res when the organization's spendable credit
// for it (its balance less what its other calls hold at now) covers res.AmountMicros. It
// reports that spendable credit and whether the hold was set; an unknown organization is
// ErrNotFound. Concurrent reservations of one organization are serialised on its row.
func (r Credit) Reserve(ctx context.Context, res Reservation, now time.Time) (spendable int64, ok bool, err error) {
	switch {
	case !validID(res.OrgID):
		return 0, false, notFound("organization", res.OrgID)
	case !validID(res.ConversationID):
		return 0, false, fmt.Errorf("store: %w: conversation %q is not a canonical UUID", ErrInvalid, res.ConversationID)
	case res.AmountMicros < 0 || res.AmountMicros > maxCreditMicros:
		return 0, false, fmt.Errorf("store: %w: reservation of %d micro-USD is out of range", ErrInvalid, res.AmountMicros)
	}
	err = r.q.atomic(ctx, func(q *Queries) error {
		var balance int64
		err := q.get(ctx, "lock organization credit",
			`UPDATE organizations SET updated_at = updated_at WHERE id = $1 RETURNING credit_micros`, []any{string(res.OrgID)},
			func(rs rowScanner) error { return rs.Scan(&balance) })
		if err != nil {
			return err
		}
		others, err := q.Credit().reserved(ctx, res.OrgID, res.ConversationID, now)
		if err != nil {
			return err
		}
		if spendable = balance - others; res.AmountMicros > spendable {
			return nil
		}
		ok = true
		_, err = q.exec(ctx, "reserve credit",
			`INSERT INTO credit_reservations (conversation_id, org_id, amount_micros, covered_until, expires_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6)
			ON CONFLICT (conversation_id) DO UPDATE SET amount_micros = excluded.amount_micros,
				covered_until = excluded.covered_until, expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
			string(res.ConversationID), string(res.OrgID), res.AmountMicros, ts(res.CoveredUntil), ts(res.ExpiresAt), ts(now))
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return spendable, ok, nil
}

// Release drops the hold of a conversation (none is fine). The runtime calls it in the
// transaction that charges the conversation.
func (r Credit) Release(ctx context.Context, id ConversationID) error {
	if !validID(id) {
		return nil
	}
	_, err := r.q.exec(ctx, "release credit", `DELETE FROM credit_reservations WHERE conversation_id = $1`, string(id))
	return err
}
