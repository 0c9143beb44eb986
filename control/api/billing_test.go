package api

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
)

var _ = register(
	scenario{"CreditBalanceAndLedger", testCreditBalanceAndLedger},
	scenario{"AuditEvents", testAuditEvents},
	scenario{"CallEndsWhenCreditRunsOut", testCallEndsWhenCreditRunsOut},
)

// data returns the data of a list answer.
func (r *resp) data() []map[string]any {
	var out []map[string]any
	for _, d := range r.JSON["data"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// testCreditBalanceAndLedger: the balance with what calls hold and this month's spending, and
// the ledger newest first with its filters and pages; credit is the organization's.
func testCreditBalanceAndLedger(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	conv := store.ConversationID("0190a6f0-0000-7000-8000-0000000000c1")
	record := func(kind store.CreditKind, micros int64) string {
		_, tx, err := st.Credit().Record(ctx, store.CreditEntry{OrgID: w.org.ID, Kind: kind, AmountMicros: micros, Reason: "for " + string(kind), ConversationID: conv})
		if err != nil {
			t.Fatal(err)
		}
		return string(tx.ID)
	}
	w.credit(t, 25)
	record(store.CreditCallMinutes, -1_500_000)
	stt := record(store.CreditSTTSeconds, -250_000)
	if _, err := st.AddCredit(ctx, w.org.ID, -1_000_000, "goodwill reversed"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Credit().Reserve(ctx, store.Reservation{OrgID: w.org.ID, ConversationID: "0190a6f0-0000-7000-8000-0000000000c2",
		AmountMicros: 2_000_000, CoveredUntil: time.Now().Add(time.Minute), ExpiresAt: time.Now().Add(time.Hour)}, time.Now()); !ok || err != nil {
		t.Fatalf("reserve: %v %v", ok, err)
	}

	b := w.must(t, 200, req{method: "GET", path: "/v1/billing/balance", key: kLive})
	if b.Str("object") != "credit_balance" || b.Str("currency") != "USD" || b.Str("balance") != "22.250000" || b.JSON["balance_micros"] != float64(22_250_000) ||
		b.Str("reserved") != "2.000000" || b.Str("available") != "20.250000" || b.JSON["available_micros"] != float64(20_250_000) ||
		b.Str("month_spent") != "1.750000" || b.Str("timezone") != "UTC" {
		t.Fatalf("balance %s", b)
	}
	if ms, _ := time.Parse(time.RFC3339, b.Str("month_start")); ms.Day() != 1 || ms.Hour() != 0 || time.Since(ms) > 32*24*time.Hour {
		t.Fatalf("month_start %s", b.Str("month_start"))
	}
	// Every key of the organization with billing:read reads it: a test key, a key of one project.
	for _, k := range []string{kTest, kNarrow} {
		if r := w.must(t, 200, req{method: "GET", path: "/v1/billing/balance", key: k}); r.Str("balance") != "22.250000" {
			t.Fatalf("%s reads %s", k, r)
		}
	}
	w.fails(t, 403, fault.CodeMissingPermission, req{method: "GET", path: "/v1/billing/balance", key: kReadOnly})

	list := func(key, query string) *resp {
		return w.must(t, 200, req{method: "GET", path: "/v1/billing/transactions" + query, key: key})
	}
	all := list(kLive, "").data()
	if len(all) != 4 || all[0]["kind"] != "adjustment" || all[0]["amount"] != "-1.000000" || all[0]["conversation_id"] != nil ||
		all[1]["id"] != stt || all[1]["conversation_id"] != string(conv) || all[1]["balance_after"] != "23.250000" ||
		all[3]["kind"] != "top_up" || all[3]["amount_micros"] != float64(25_000_000) || all[3]["description"] != "test" {
		t.Fatalf("ledger %v", all)
	}
	if got := list(kLive, "?kind=call_minutes&kind=stt_seconds").data(); len(got) != 2 || got[0]["kind"] != "stt_seconds" {
		t.Fatalf("by kind %v", got)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	if got := list(kLive, "?created_after="+future).data(); len(got) != 0 {
		t.Fatalf("created after an hour from now: %v", got)
	}
	if got := list(kLive, "?created_before="+future+"&kind=top_up").data(); len(got) != 1 {
		t.Fatalf("top-ups made before an hour from now: %v", got)
	}
	first := list(kLive, "?limit=3")
	next := list(kLive, "?limit=3&cursor="+first.Str("next_cursor"))
	if first.JSON["has_more"] != true || len(next.data()) != 1 || next.data()[0]["kind"] != "top_up" || next.JSON["next_cursor"] != nil {
		t.Fatalf("pages %s then %s", first, next)
	}
	w.fails(t, 422, fault.CodeCursorMismatch, req{method: "GET", path: "/v1/billing/transactions?kind=top_up&cursor=" + first.Str("next_cursor"), key: kLive})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/billing/transactions?kind=gift", key: kLive})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/billing/transactions?created_after=yesterday", key: kLive})
	w.fails(t, 403, fault.CodeMissingPermission, req{method: "GET", path: "/v1/billing/transactions", key: kReadOnly})
	// Another organization's keys see their own credit only.
	other := newWorld(t, st, worldOpts{})
	if r := other.must(t, 200, req{method: "GET", path: "/v1/billing/balance", key: kLive}); r.Str("balance") != "0.000000" || r.Str("reserved") != "0.000000" {
		t.Fatalf("another organization's balance %s", r)
	}
	if got := other.must(t, 200, req{method: "GET", path: "/v1/billing/transactions", key: kLive}).data(); len(got) != 0 {
		t.Fatalf("another organization's ledger %v", got)
	}
}

// testAuditEvents: a change through the API is listed with its actor, request id and changed
// fields once a minute has passed; filters, pages and the cursor kept for later; a test key
// reads none, a key of some projects is refused.
func testAuditEvents(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	n, err := st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550101"})
	if err != nil {
		t.Fatal(err)
	}
	patch := w.must(t, 200, req{method: "PATCH", path: "/v1/phone-numbers/" + string(n.ID), key: kLive, body: map[string]any{"label": "Main"}})
	w.must(t, 200, req{method: "PATCH", path: "/v1/phone-numbers/" + string(n.ID), key: kLive, body: map[string]any{"label": "Sales"}})
	events := func(key, query string) *resp {
		return w.must(t, 200, req{method: "GET", path: "/v1/audit-events" + query, key: key})
	}
	// Events of the last minute wait.
	if r := events(kLive, ""); len(r.data()) != 0 || r.JSON["next_cursor"] != nil {
		t.Fatalf("the last minute's events are listed: %s", r)
	}
	later := time.Now().Add(2 * time.Minute)
	w.now.Store(&later)
	all := events(kLive, "").data()
	if len(all) != 2 {
		t.Fatalf("events %v", all)
	}
	ev := all[0]
	actor := ev["actor"].(map[string]any)
	data := ev["data"].(map[string]any)
	if ev["object"] != "audit_event" || ev["action"] != "phone_number.updated" || ev["object_type"] != "phone_number" || ev["object_id"] != string(n.ID) ||
		ev["project_id"] != string(w.p1.ID) || actor["type"] != "api_key" || actor["id"] != string(w.keyIDs[kLive]) || actor["mode"] != "live" ||
		ev["request_id"] != patch.Header.Get("X-Request-Id") || data["label"].(map[string]any)["to"] != "Main" {
		t.Fatalf("event %v", ev)
	}
	// Pages, oldest first; the last page keeps a cursor, which later reads what was done since.
	first := events(kLive, "?limit=1")
	last := events(kLive, "?limit=1&cursor="+first.Str("next_cursor"))
	if first.JSON["has_more"] != true || last.JSON["has_more"] != false || last.Str("next_cursor") == "" ||
		last.data()[0]["data"].(map[string]any)["label"].(map[string]any)["to"] != "Sales" {
		t.Fatalf("pages %s then %s", first, last)
	}
	if r := events(kLive, "?limit=1&cursor="+last.Str("next_cursor")); len(r.data()) != 0 || r.Str("next_cursor") != last.Str("next_cursor") {
		t.Fatalf("nothing new: %s", r)
	}
	w.must(t, 200, req{method: "PATCH", path: "/v1/phone-numbers/" + string(n.ID), key: kLive, body: map[string]any{"label": "Support"}})
	evenLater := later.Add(2 * time.Minute)
	w.now.Store(&evenLater)
	if r := events(kLive, "?limit=1&cursor="+last.Str("next_cursor")); len(r.data()) != 1 || r.data()[0]["data"].(map[string]any)["label"].(map[string]any)["to"] != "Support" {
		t.Fatalf("what was done since: %s", r)
	}
	// Filters.
	if got := events(kLive, "?action=agent.created&action=project.created").data(); len(got) != 0 {
		t.Fatalf("by action %v", got)
	}
	if got := events(kLive, "?action=phone_number.updated").data(); len(got) != 3 {
		t.Fatalf("by action %v", got)
	}
	if got := events(kLive, "?created_after="+url.QueryEscape(all[1]["created_at"].(string))).data(); len(got) != 1 {
		t.Fatalf("created after %v", got)
	}
	// A test key reads none; a key of one project is refused; so is a key without audit:read.
	if got := events(kTest, "").data(); len(got) != 0 {
		t.Fatalf("a test key reads %v", got)
	}
	w.fails(t, 403, fault.CodeAllProjectsRequired, req{method: "GET", path: "/v1/audit-events", key: kNarrow})
	w.fails(t, 403, fault.CodeMissingPermission, req{method: "GET", path: "/v1/audit-events", key: kReadOnly})
	// Another organization reads its own log only.
	other := newWorld(t, st, worldOpts{})
	other.now.Store(&evenLater)
	if got := other.must(t, 200, req{method: "GET", path: "/v1/audit-events", key: kLive}).data(); len(got) != 0 {
		t.Fatalf("another organization reads %v", got)
	}
}

// testCallEndsWhenCreditRunsOut: a live call whose credit cannot cover its first minutes is
// ended politely with end_reason credit_exhausted once answered, and its charge is in the
// ledger part by part.
func testCallEndsWhenCreditRunsOut(t *testing.T, e engine) {
	// Six dollars a minute: one dollar covers ten seconds, less than is worth holding.
	price := runtime.Pricing{CallPerMinute: 6_000_000, STTPerMinute: 4_300, TTSPer1KChars: 30_000, LLMInputPer1M: 150_000, LLMOutputPer1M: 600_000}
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{pricing: &price}})
	w.credit(t, 1)
	agent := w.outboundAgent(t, "+14155550001")
	r := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("broke"),
		body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}})
	id := r.Str("id")
	got := w.waitStatus(t, kLive, id, "ended")
	if got.Str("end_reason") != "credit_exhausted" {
		t.Fatalf("ended %s", got)
	}
	var said bool
	for _, l := range w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/transcript", key: kLive}).JSON["lines"].([]any) {
		said = said || strings.Contains(l.(map[string]any)["text"].(string), "I have to end this call now")
	}
	if !said {
		t.Error("the agent did not say goodbye")
	}
	charges := w.must(t, 200, req{method: "GET", path: "/v1/billing/transactions?kind=call_minutes", key: kLive}).data()
	if len(charges) != 1 || charges[0]["conversation_id"] != id || charges[0]["amount_micros"].(float64) >= 0 {
		t.Fatalf("call charge %v", charges)
	}
	if b := w.must(t, 200, req{method: "GET", path: "/v1/billing/balance", key: kLive}); b.Str("reserved") != "0.000000" {
		t.Fatalf("the ended call still holds credit: %s", b)
	}
}
