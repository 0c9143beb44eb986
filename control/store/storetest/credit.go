package storetest

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testCreditLedger: the credit repository records kinds and conversations, lists the scope's
// organization's ledger newest first with kind and date filters and keyset pages, and sums
// the balance and what was spent.
func testCreditLedger(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")
	conv := store.ConversationID("0190a6f0-0000-7000-8000-0000000000c1")
	record := func(o store.OrgID, kind store.CreditKind, micros int64, c store.ConversationID) store.CreditTransaction {
		t.Helper()
		_, tx, err := s.Credit().Record(ctx, store.CreditEntry{OrgID: o, Kind: kind, AmountMicros: micros, Reason: string(kind), ConversationID: c})
		if err != nil {
			t.Fatalf("Record %s: %v", kind, err)
		}
		return tx
	}
	before := time.Now().Add(-time.Second)
	top := record(org.ID, store.CreditTopUp, 10_000_000, "")
	call := record(org.ID, store.CreditCallMinutes, -300_000, conv)
	stt := record(org.ID, store.CreditSTTSeconds, -200_000, conv)
	adj := record(org.ID, store.CreditAdjustment, -1_000_000, "")
	record(other.ID, store.CreditTopUp, 5, "")
	if _, err := s.AddCredit(ctx, org.ID, 7, "legacy top-up"); err != nil {
		t.Fatal(err)
	}

	sc := store.OrgScope(org.ID)
	list := func(f store.CreditTxFilter, pg store.Page) []store.CreditTransaction {
		t.Helper()
		return must[[]store.CreditTransaction](t, "Credit.List")(s.Credit().List(ctx, sc, f, pg))
	}
	all := list(store.CreditTxFilter{}, store.Page{Limit: 10})
	if len(all) != 5 || all[0].Kind != store.CreditTopUp || all[0].AmountMicros != 7 || all[1].ID != adj.ID || all[4].ID != top.ID {
		t.Fatalf("ledger = %+v, want this organization's five, newest first", all)
	}
	if got := all[3]; got.ID != call.ID || got.ConversationID != conv || got.BalanceAfter != 9_700_000 || got.Kind != store.CreditCallMinutes {
		t.Fatalf("call charge = %+v", got)
	}
	if got := list(store.CreditTxFilter{Kinds: []string{string(store.CreditCallMinutes), string(store.CreditSTTSeconds)}}, store.Page{Limit: 10}); len(got) != 2 || got[0].ID != stt.ID {
		t.Fatalf("by kind = %+v", got)
	}
	page := list(store.CreditTxFilter{}, store.Page{Limit: 2, After: string(adj.ID)})
	if len(page) != 3 || page[0].ID != stt.ID || page[1].ID != call.ID {
		t.Fatalf("page after the adjustment = %+v (want two and one more)", page)
	}
	if got := list(store.CreditTxFilter{CreatedAfter: time.Now().Add(time.Hour)}, store.Page{Limit: 10}); len(got) != 0 {
		t.Fatalf("created after an hour from now: %+v", got)
	}
	if got := list(store.CreditTxFilter{CreatedAfter: before, CreatedBefore: time.Now().Add(time.Hour)}, store.Page{Limit: 10}); len(got) != 5 {
		t.Fatalf("created in the last second: %d", len(got))
	}
	// Another organization, or a scope of it, sees none of these.
	if got := must[[]store.CreditTransaction](t, "other")(s.Credit().List(ctx, store.OrgScope(other.ID), store.CreditTxFilter{}, store.Page{Limit: 10})); len(got) != 1 {
		t.Fatalf("the other organization's ledger = %+v", got)
	}

	sum := must[store.CreditSummary](t, "Summary")(s.Credit().Summary(ctx, sc, time.Now(), before))
	if sum.BalanceMicros != 8_500_007 || sum.ReservedMicros != 0 || sum.SpentMicros != 500_000 {
		t.Fatalf("summary = %+v, want balance 8500007, spent 500000 (adjustments and top-ups are not spending)", sum)
	}
	if sum := must[store.CreditSummary](t, "Summary later")(s.Credit().Summary(ctx, sc, time.Now(), time.Now().Add(time.Hour))); sum.SpentMicros != 0 {
		t.Fatalf("spent since later = %d", sum.SpentMicros)
	}

	for name, e := range map[string]store.CreditEntry{
		"unknown kind":     {OrgID: org.ID, Kind: "gift", AmountMicros: 1, Reason: "x"},
		"zero":             {OrgID: org.ID, Kind: store.CreditTopUp, Reason: "x"},
		"no reason":        {OrgID: org.ID, Kind: store.CreditTopUp, AmountMicros: 1},
		"bad conversation": {OrgID: org.ID, Kind: store.CreditLLMTokens, AmountMicros: -1, Reason: "x", ConversationID: "c1"},
	} {
		_, _, err := s.Credit().Record(ctx, e)
		wantErr(t, "Record "+name, err, store.ErrInvalid)
	}
	_, _, err := s.Credit().Record(ctx, store.CreditEntry{OrgID: "0190a6f0-0000-7000-8000-000000000000", Kind: store.CreditTopUp, AmountMicros: 1, Reason: "x"})
	wantErr(t, "Record for an unknown organization", err, store.ErrNotFound)
}

// testCreditReservations: a hold is set only when the organization's credit less its other
// calls' holds covers it, counts until it expires, and is dropped by Release.
func testCreditReservations(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")
	if _, err := s.AddCredit(ctx, org.ID, 1_000, "top-up"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	c1, c2 := store.ConversationID("0190a6f0-0000-7000-8000-0000000000c1"), store.ConversationID("0190a6f0-0000-7000-8000-0000000000c2")
	hold := func(o store.OrgID, c store.ConversationID, micros int64, expires time.Time) (int64, bool) {
		t.Helper()
		spendable, ok, err := s.Credit().Reserve(ctx, store.Reservation{OrgID: o, ConversationID: c, AmountMicros: micros,
			CoveredUntil: expires.Add(-time.Minute), ExpiresAt: expires}, now)
		if err != nil {
			t.Fatalf("Reserve %s %d: %v", c, micros, err)
		}
		return spendable, ok
	}
	if sp, ok := hold(org.ID, c1, 600, now.Add(time.Hour)); !ok || sp != 1_000 {
		t.Fatalf("first hold: %d %v", sp, ok)
	}
	if sp, ok := hold(org.ID, c2, 500, now.Add(time.Hour)); ok || sp != 400 {
		t.Fatalf("second hold over the rest: %d %v, want refused with 400 spendable", sp, ok)
	}
	if _, ok := hold(org.ID, c2, 400, now.Add(time.Hour)); !ok {
		t.Fatal("second hold of the rest refused")
	}
	// Renewing a hold counts the others only.
	if sp, ok := hold(org.ID, c1, 600, now.Add(2*time.Hour)); !ok || sp != 600 {
		t.Fatalf("renewal: %d %v", sp, ok)
	}
	sum := must[store.CreditSummary](t, "Summary")(s.Credit().Summary(ctx, store.OrgScope(org.ID), now, time.Time{}))
	if sum.BalanceMicros != 1_000 || sum.ReservedMicros != 1_000 {
		t.Fatalf("summary = %+v", sum)
	}
	// Another organization's credit is its own.
	if _, ok := hold(other.ID, "0190a6f0-0000-7000-8000-0000000000c3", 1, now.Add(time.Hour)); ok {
		t.Fatal("an organization without credit held some")
	}
	// Past its expiry a hold no longer counts; Release drops it.
	if sum := must[store.CreditSummary](t, "Summary later")(s.Credit().Summary(ctx, store.OrgScope(org.ID), now.Add(90*time.Minute), time.Time{})); sum.ReservedMicros != 600 {
		t.Fatalf("reserved once c2 expired = %d", sum.ReservedMicros)
	}
	if err := s.Credit().Release(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if sum := must[store.CreditSummary](t, "Summary released")(s.Credit().Summary(ctx, store.OrgScope(org.ID), now, time.Time{})); sum.ReservedMicros != 400 {
		t.Fatalf("reserved once c1 was released = %d", sum.ReservedMicros)
	}
	_, _, err := s.Credit().Reserve(ctx, store.Reservation{OrgID: "0190a6f0-0000-7000-8000-000000000000", ConversationID: c1, ExpiresAt: now}, now)
	wantErr(t, "Reserve for an unknown organization", err, store.ErrNotFound)
}

// testAuditLog: the audit-log repository lists the scope's organization's events oldest first
// with action and time filters, reads nothing for a scope that does not reach every project,
// and purges the events of every organization older than a cutoff.
func testAuditLog(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")
	p := newProject(t, s, org.ID, "Web")
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, e := range []store.AuditEvent{
		event(org.ID, "agent.created"), event(org.ID, "agent.published"), event(other.ID, "agent.created"),
		event(org.ID, "phone_number.updated"), event(org.ID, "agent.created"),
	} {
		e.CreatedAt = base.Add(time.Duration(i) * 24 * time.Hour)
		if err := s.InsertAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	sc := store.OrgScope(org.ID)
	list := func(sc store.Scope, f store.AuditQuery, pg store.Page) string {
		t.Helper()
		return actionsOf(must[[]store.AuditEvent](t, "AuditLog.List")(s.AuditLog().List(ctx, sc, f, pg)))
	}
	if got := list(sc, store.AuditQuery{}, store.Page{Limit: 10}); got != "agent.created agent.published phone_number.updated agent.created" {
		t.Fatalf("all = %s", got)
	}
	if got := list(sc, store.AuditQuery{Actions: []string{"agent.created", "phone_number.updated"}, CreatedAfter: base}, store.Page{Limit: 10}); got != "phone_number.updated agent.created" {
		t.Fatalf("filtered = %s", got)
	}
	if got := list(sc, store.AuditQuery{CreatedBefore: base.Add(36 * time.Hour)}, store.Page{Limit: 1}); got != "agent.created agent.published" {
		t.Fatalf("first page before day 2 = %s (want one and one more)", got)
	}
	all := must[[]store.AuditEvent](t, "List")(s.AuditLog().List(ctx, sc, store.AuditQuery{}, store.Page{Limit: 10}))
	if got := list(sc, store.AuditQuery{}, store.Page{Limit: 10, After: string(all[2].ID)}); got != "agent.created" {
		t.Fatalf("after the third = %s", got)
	}
	if got := list(sc.Narrow(p.ID), store.AuditQuery{}, store.Page{Limit: 10}); got != "" {
		t.Fatalf("a scope of one project reads %s", got)
	}
	if got := list(store.OrgScope(other.ID), store.AuditQuery{}, store.Page{Limit: 10}); got != "agent.created" {
		t.Fatalf("the other organization reads %s", got)
	}

	n := must[int](t, "PurgeBefore")(s.AuditLog().PurgeBefore(ctx, base.Add(36*time.Hour)))
	if n != 2 {
		t.Fatalf("purged %d, want 2", n)
	}
	if got := list(sc, store.AuditQuery{}, store.Page{Limit: 10}); got != "phone_number.updated agent.created" {
		t.Fatalf("after the purge = %s", got)
	}
	if got := list(store.OrgScope(other.ID), store.AuditQuery{}, store.Page{Limit: 10}); got != "agent.created" {
		t.Fatalf("the other organization's event (day 2) was purged: %s", got)
	}
}
