package storetest

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testInboundRoute (issue 20): the route of an inbound call in one read: the number, its agent
// of the same organization (not deleted), the project, the organization and its credit held.
// An unknown number is ErrNotFound, a number no agent answers ErrNoAgent. And a call's
// charges recorded at once (RecordAll) leave the ledger as recording them one by one would.
func testInboundRoute(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	ag := w.create(t, w.p1.ID, "Desk")
	num := must[store.PhoneNumber](t, "number")(w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550100", AgentID: ag.ID}))
	bare := must[store.PhoneNumber](t, "number")(w.s.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550101"}))
	must[store.Org](t, "credit")(w.s.AddCredit(ctx, w.org.ID, 1_000_000, "test"))
	now := time.Now()
	must[int64](t, "reserve")(func() (int64, error) {
		n, _, err := w.s.Credit().Reserve(ctx, store.Reservation{OrgID: w.org.ID, ConversationID: store.NewConversationID(), AmountMicros: 300,
			CoveredUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Minute)}, now)
		return n, err
	}())
	r := must[store.InboundRoute](t, "route")(w.s.InboundRoute(ctx, num.Number, now))
	if r.Number.ID != num.ID || r.Agent.ID != ag.ID || r.Project.ID != w.p1.ID || r.Org.ID != w.org.ID || r.Org.CreditMicros != 1_000_000 || r.ReservedMicros != 300 {
		t.Fatalf("route %+v", r)
	}
	if r := must[store.InboundRoute](t, "route")(w.s.InboundRoute(ctx, num.Number, now.Add(2*time.Minute))); r.ReservedMicros != 0 {
		t.Errorf("an expired hold still counts: %d", r.ReservedMicros)
	}
	_, err := w.s.InboundRoute(ctx, "+14155550199", now)
	wantErr(t, "an unknown number", err, store.ErrNotFound)
	r, err = w.s.InboundRoute(ctx, bare.Number, now)
	wantErr(t, "a number without an agent", err, store.ErrNoAgent)
	if r.Number.ID != bare.ID {
		t.Errorf("the number without an agent: %+v", r.Number)
	}
	must[store.Agent](t, "delete")(func() (store.Agent, error) {
		a, _, err := w.s.Agents().Delete(ctx, w.all(), ag.ID, now.Add(time.Hour))
		return a, err
	}())
	_, err = w.s.InboundRoute(ctx, num.Number, now)
	if err == nil {
		t.Errorf("the number of a deleted agent is routed")
	}

	// RecordAll: the balance moved once, each transaction with the balance after it.
	conv := store.NewConversationID()
	err = w.s.Tx(ctx, func(tx *store.Tx) error {
		return tx.Credit().RecordAll(ctx, []store.CreditEntry{
			{OrgID: w.org.ID, Kind: store.CreditCallMinutes, AmountMicros: -100, Reason: "call", ConversationID: conv},
			{OrgID: w.org.ID, Kind: store.CreditTTSCharacters, AmountMicros: -20, Reason: "tts", ConversationID: conv}})
	})
	if err != nil {
		t.Fatal(err)
	}
	txs := must[[]store.CreditTransaction](t, "ledger")(w.s.Credit().List(ctx, w.all(), store.CreditTxFilter{}, store.Page{Limit: 10}))
	var after []int64
	for _, x := range txs {
		if x.ConversationID == conv {
			after = append(after, x.BalanceAfter)
		}
	}
	if len(after) != 2 || after[0] != 999_880 || after[1] != 999_900 { // newest first
		t.Errorf("balances after the charges %v, want [999880 999900]", after)
	}
	if o := must[store.Org](t, "org")(w.s.GetOrg(ctx, w.org.ID)); o.CreditMicros != 999_880 {
		t.Errorf("balance %d after the charges", o.CreditMicros)
	}
	err = w.s.Credit().RecordAll(ctx, []store.CreditEntry{{OrgID: w.org.ID, Kind: store.CreditCallMinutes, AmountMicros: 0, Reason: "x"}})
	wantErr(t, "a zero charge", err, store.ErrInvalid)
}
