// Package billing holds the rules of an organization's credit: the balance it can still spend
// (less what calls in progress hold), the ledger of top-ups and charges, the check every
// operation that spends makes first (CheckCanSpend), and the hold of a call in progress that
// ends it politely when its credit runs out (Hold).
//
// Amounts are kept in micro-USD (millionths of a US dollar) and shown on the wire twice, as is
// done for conversation costs: an exact decimal string of dollars with six places ("12.500000")
// and the integer of micro-dollars (12500000), with currency "USD". Clients that add amounts up
// use the integers; nothing here is ever a binary floating-point number.
//
// It must never import net/http or the transport.
package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Currency is the currency of every amount.
const Currency = "USD"

// CreditBalance is the CreditBalance object of the interface.
type CreditBalance struct {
	Object           string   `json:"object" jsonschema:"enum=credit_balance"`
	Currency         string   `json:"currency" doc:"The currency of every amount." jsonschema:"enum=USD"`
	Balance          string   `json:"balance" doc:"What is on the account: top-ups less what was charged. Below zero when the last calls cost more than was left." jsonschema:"pattern=^-?[0-9]+\\.[0-9]{6}$"`
	BalanceMicros    int64    `json:"balance_micros" doc:"balance in millionths of a dollar."`
	Reserved         string   `json:"reserved" doc:"What calls in progress hold: each reserves what its next minutes may cost and renews the reservation as it goes on." jsonschema:"pattern=^-?[0-9]+\\.[0-9]{6}$"`
	ReservedMicros   int64    `json:"reserved_micros" doc:"reserved in millionths of a dollar."`
	Available        string   `json:"available" doc:"What can still be spent: balance less reserved. At zero or below, operations that spend answer 402 credit_exhausted." jsonschema:"pattern=^-?[0-9]+\\.[0-9]{6}$"`
	AvailableMicros  int64    `json:"available_micros" doc:"available in millionths of a dollar."`
	MonthSpent       string   `json:"month_spent" doc:"What this month's charges came to (every kind of transaction but top_up and adjustment), since month_start." jsonschema:"pattern=^-?[0-9]+\\.[0-9]{6}$"`
	MonthSpentMicros int64    `json:"month_spent_micros" doc:"month_spent in millionths of a dollar."`
	MonthStart       app.Time `json:"month_start" doc:"The start of this month in the organization's timezone, with that zone's offset."`
	Timezone         string   `json:"timezone" doc:"The organization's timezone (an IANA name; UTC unless the operator set another), in which months are counted."`
}

// SchemaDoc describes the object in the document.
func (CreditBalance) SchemaDoc() string {
	return "The organization's credit: what is on the account, what can still be spent, and what this month has spent. " +
		"Amounts are exact decimal strings of US dollars with six places, each beside its integer of micro-dollars."
}

// CreditTransaction is one line of the ledger.
type CreditTransaction struct {
	Object             string   `json:"object" jsonschema:"enum=credit_transaction"`
	ID                 string   `json:"id" jsonschema:"format=uuid"`
	Kind               string   `json:"kind" doc:"What the transaction is: top_up (credit added), call_minutes, chat_turns, stt_seconds, llm_tokens, tts_characters (the parts of a conversation's charge), testing (rehearsals), adjustment (an operator's correction, either way), usage (a conversation charged as one sum before charges were broken down). An open set: tolerate new values." jsonschema:"enum=top_up,enum=call_minutes,enum=chat_turns,enum=stt_seconds,enum=llm_tokens,enum=tts_characters,enum=testing,enum=adjustment,enum=usage"`
	Currency           string   `json:"currency" jsonschema:"enum=USD"`
	Amount             string   `json:"amount" doc:"Positive adds credit, negative spends it; a decimal number of dollars with six places." jsonschema:"pattern=^-?[0-9]+\\.[0-9]{6}$"`
	AmountMicros       int64    `json:"amount_micros" doc:"amount in millionths of a dollar."`
	BalanceAfter       string   `json:"balance_after" doc:"The balance once this transaction was made." jsonschema:"pattern=^-?[0-9]+\\.[0-9]{6}$"`
	BalanceAfterMicros int64    `json:"balance_after_micros" doc:"balance_after in millionths of a dollar."`
	Description        string   `json:"description" doc:"What it was for, in words (what was used, or the operator's reason)."`
	ConversationID     *string  `json:"conversation_id" doc:"The conversation a charge is for; null for top-ups and adjustments." jsonschema:"format=uuid,nullable"`
	CreatedAt          app.Time `json:"created_at"`
}

// SchemaDoc describes the object in the document.
func (CreditTransaction) SchemaDoc() string {
	return "One change of the organization's balance: a top-up, one part of a conversation's charge, or an adjustment. " +
		"A voice call's charge is one transaction per part (call_minutes, stt_seconds, llm_tokens, tts_characters); a chat's is one chat_turns transaction. Test-mode conversations cost nothing and are not in the ledger."
}

// Service serves the organization's credit.
type Service struct {
	Store *store.Store
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Balance returns the actor's organization's credit now.
func (s *Service) Balance(ctx context.Context, act app.Actor) (CreditBalance, error) {
	org, err := s.Store.GetOrg(ctx, act.Scope.Org)
	if err != nil {
		return CreditBalance{}, err
	}
	now := s.now()
	loc, tz := Location(org.Timezone)
	start := MonthStart(now, loc)
	sum, err := s.Store.Credit().Summary(ctx, act.Scope, now, start)
	if err != nil {
		return CreditBalance{}, err
	}
	avail := sum.BalanceMicros - sum.ReservedMicros
	return CreditBalance{Object: "credit_balance", Currency: Currency,
		Balance: FormatUSD(sum.BalanceMicros), BalanceMicros: sum.BalanceMicros,
		Reserved: FormatUSD(sum.ReservedMicros), ReservedMicros: sum.ReservedMicros,
		Available: FormatUSD(avail), AvailableMicros: avail,
		MonthSpent: FormatUSD(sum.SpentMicros), MonthSpentMicros: sum.SpentMicros,
		MonthStart: app.Time{Time: start}, Timezone: tz}, nil
}

// Transactions returns a page of the actor's organization's ledger that f selects, newest
// first, with one more when another page follows.
func (s *Service) Transactions(ctx context.Context, act app.Actor, f store.CreditTxFilter, pg store.Page) ([]CreditTransaction, error) {
	ts, err := s.Store.Credit().List(ctx, act.Scope, f, pg)
	out := make([]CreditTransaction, len(ts))
	for i, t := range ts {
		out[i] = View(t)
	}
	return out, err
}

// View is the interface's form of a stored transaction.
func View(t store.CreditTransaction) CreditTransaction {
	return CreditTransaction{Object: "credit_transaction", ID: string(t.ID), Kind: string(t.Kind), Currency: Currency,
		Amount: FormatUSD(t.AmountMicros), AmountMicros: t.AmountMicros,
		BalanceAfter: FormatUSD(t.BalanceAfter), BalanceAfterMicros: t.BalanceAfter,
		Description: t.Reason, ConversationID: optional(string(t.ConversationID)), CreatedAt: app.T(t.CreatedAt)}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AddCredit adds amountMicros (negative removes credit) to the actor's organization as a
// transaction of kind (top_up or adjustment), recording credit.added or credit.adjusted.
// The operator calls it from the admin CLI.
func (s *Service) AddCredit(ctx context.Context, act app.Actor, kind store.CreditKind, amountMicros int64, reason string) (store.Org, error) {
	if kind != store.CreditTopUp && kind != store.CreditAdjustment {
		return store.Org{}, fmt.Errorf("billing: credit is added as top_up or adjustment, not %s", kind)
	}
	if kind == store.CreditTopUp && amountMicros < 0 {
		return store.Org{}, fmt.Errorf("billing: a top-up adds credit; remove credit with an adjustment")
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (store.Org, error) {
		o, t, err := tx.Credit().Record(ctx, store.CreditEntry{OrgID: act.Scope.Org, Kind: kind, AmountMicros: amountMicros, Reason: reason})
		if err != nil {
			return store.Org{}, err
		}
		action := "credit.added"
		if kind == store.CreditAdjustment {
			action = "credit.adjusted"
		}
		err = au.Record(action, "credit_transaction", string(t.ID), "", map[string]any{
			"kind": kind, "amount_micros": amountMicros, "reason": reason,
			"balance_micros": app.Changed(o.CreditMicros-amountMicros, o.CreditMicros)})
		return o, err
	})
}

// CheckCanSpend refuses an operation that spends (placing a call, starting or continuing a
// chat, a rehearsal) when the organization's available credit (balance less what calls in
// progress hold at now) is used up: 402 credit_exhausted. Call it on the transaction that
// makes the change, so the balance it reads is the one the change commits against.
func CheckCanSpend(ctx context.Context, q *store.Queries, org store.OrgID, now time.Time) error {
	sum, err := q.Credit().Summary(ctx, store.OrgScope(org), now, time.Time{})
	if err != nil {
		return err
	}
	if avail := sum.BalanceMicros - sum.ReservedMicros; avail <= 0 {
		return fault.E(fault.CodeCreditExhausted, "The organization's credit is used up (%s USD available); add credit to place calls and start chats.", FormatUSD(avail))
	}
	return nil
}

// FormatUSD renders micro-dollars as an exact decimal string of dollars with six places.
func FormatUSD(micros int64) string {
	sign := ""
	u := uint64(micros)
	if micros < 0 {
		sign, u = "-", uint64(-micros)
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/1_000_000, u%1_000_000)
}

// Location returns the organization's timezone and its name; an unknown or empty name is UTC.
func Location(name string) (*time.Location, string) {
	if name == "" {
		return time.UTC, "UTC"
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC, "UTC"
	}
	return loc, name
}

// MonthStart is the first instant of now's calendar month in loc.
func MonthStart(now time.Time, loc *time.Location) time.Time {
	t := now.In(loc)
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
}
