package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// TestTakeInboundRefusals: each reason the runtime does not take a call to a number, read in
// the one statement of the route.
func TestTakeInboundRefusals(t *testing.T) {
	ir := newInboundRig(t, store.Options{DataDir: t.TempDir()})
	ctx := context.Background()
	st, rt := ir.st, ir.rt
	refused := func(number string, maxCalls int) RefusalReason {
		t.Helper()
		p, err := rt.TakeInbound(ctx, InboundCall{To: number, From: "+15550001111"}, maxCalls)
		var rf *Refusal
		if !errors.As(err, &rf) {
			t.Fatalf("a call to %s: %+v, %v; want a refusal", number, p, err)
		}
		return rf.Reason
	}
	addNumber := func(number string, agent store.AgentID) {
		t.Helper()
		if _, err := st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: ir.org.ID, ProjectID: ir.proj.ID, Number: number, AgentID: agent}); err != nil {
			t.Fatal(err)
		}
	}
	if r := refused("+14155559999", 0); r != RefuseUnknownNumber {
		t.Errorf("an unknown number: %s", r)
	}
	addNumber("+14155550061", "")
	if r := refused("+14155550061", 0); r != RefuseNoAgent {
		t.Errorf("a number without an agent: %s", r)
	}
	addNumber("+14155550062", ir.agent.ID) // the rig's agent places calls
	if r := refused("+14155550062", 0); r != RefuseAgentOutboundOnly {
		t.Errorf("a number of an outbound agent: %s", r)
	}
	def := `{"agent": {"name": "Draft", "kind": "custom", "direction": "inbound", "channels": ["phone"], "system_prompt": "Hi."}, "references": {}}`
	parsed, _ := ParseStored(json.RawMessage(def))
	raw, _ := json.Marshal(parsed)
	draft, err := st.Agents().Create(ctx, store.OrgScope(ir.org.ID), store.NewAgent{ProjectID: ir.proj.ID, Name: "Draft", Kind: "custom",
		Direction: "inbound", Channels: []string{"phone"}, Definition: raw})
	if err != nil {
		t.Fatal(err)
	}
	addNumber("+14155550063", draft.ID)
	if r := refused("+14155550063", 0); r != RefuseNoAgent {
		t.Errorf("a number of an unpublished agent: %s", r)
	}
	if _, _, err := st.Agents().Delete(ctx, store.OrgScope(ir.org.ID), draft.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := refused("+14155550063", 0); r != RefuseNoAgent {
		t.Errorf("a number of a deleted agent: %s", r)
	}

	// The number of an inbound agent: taken, unless its project or organization is frozen,
	// it has no credit left, or it is over its limit of calls.
	st.SetProjectFrozen(ctx, ir.proj.ID, true)
	if r := refused(ir.number, 0); r != RefuseProjectFrozen {
		t.Errorf("a frozen project: %s", r)
	}
	st.SetProjectFrozen(ctx, ir.proj.ID, false)
	st.SetOrgFrozen(ctx, ir.org.ID, true)
	if r := refused(ir.number, 0); r != RefuseOrgFrozen {
		t.Errorf("a frozen organization: %s", r)
	}
	st.SetOrgFrozen(ctx, ir.org.ID, false)
	org, _ := st.GetOrg(ctx, ir.org.ID)
	if _, _, err := st.Credit().Reserve(ctx, store.Reservation{OrgID: org.ID, ConversationID: store.NewConversationID(), AmountMicros: org.CreditMicros,
		CoveredUntil: time.Now().Add(time.Minute), ExpiresAt: time.Now().Add(time.Minute)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := refused(ir.number, 0); r != RefuseNoCredit {
		t.Errorf("an organization whose credit is all held: %s", r)
	}
	if _, err := st.AddCredit(ctx, org.ID, 1_000_000, "test"); err != nil {
		t.Fatal(err)
	}
	p, err := rt.TakeInbound(ctx, InboundCall{To: ir.number, From: "+15550001111"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := refused(ir.number, 1); r != RefuseOverLimit {
		t.Errorf("over the limit of calls: %s", r)
	}
	p.OnEvent(CallEvent{Kind: CallEnded, EndReason: session.EndCallerHungUp})
	waitFor(t, 5*time.Second, "the call's end", func() bool { return rt.Live() == 0 })
	if c := ir.get(store.ConversationID(p.ID)); c.EndReason != string(session.EndCallerHungUp) || c.OwnerNode != "media" {
		t.Errorf("the call refused by its caller: %+v", c)
	}
}

// TestInboundCallStoreWork (issue 20): one inbound call's control-plane work costs at most a
// budget of statements and transactions (on SQLite 3 and 18 when its ringing, answer and
// greeting are stored together, as they mostly are; at worst, each stored apart, 5 and 22;
// before issue 20 it was 7 and 40), and stores everything it did before: the call
// ringing, then started (with conversation.started), its greeting with a transcript batch, its
// end with the outcome, the charge in four parts, the hold dropped, conversation.ended and
// the final transcript, and its recording.
func TestInboundCallStoreWork(t *testing.T) {
	ir := newInboundRig(t, store.Options{DataDir: t.TempDir()})
	ctx := context.Background()
	ir.call(t) // statements prepared
	ir.count.take()
	id := ir.call(t)
	txs, stmts, ops := ir.count.take()
	if txs > 5 || stmts > 22 {
		t.Errorf("one call: %d transactions and %d statements, want at most 5 and 22: %v", txs, stmts, ops)
	}
	c := ir.get(id)
	if c.Status != store.ConvEnded || c.EndReason != string(session.EndCallerHungUp) || c.RingingAt == nil || c.StartedAt == nil ||
		c.Outcome.SIPStatus != 200 || c.CostMicros <= 0 || c.Recording == "" || c.LastSeq != 1 || c.Direction != "inbound" || c.FromNumber != "+15550001111" {
		t.Fatalf("the call as stored: %+v", c)
	}
	var types []string
	evs, err := ir.st.ListEvents(ctx, ir.org.ID, store.ModeLive, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.ConversationID == id {
			types = append(types, e.Type)
		}
	}
	if want := []string{"conversation.started", "conversation.transcript", "conversation.ended", "conversation.transcript"}; !slices.Equal(types, want) {
		t.Errorf("the call's events %v, want %v", types, want)
	}
	parts, err := ir.st.Credit().List(ctx, store.OrgScope(ir.org.ID), store.CreditTxFilter{}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	n := 0
	for _, p := range parts {
		if p.ConversationID == id {
			sum -= p.AmountMicros
			n++
		}
	}
	if n != 4 || sum != c.CostMicros {
		t.Errorf("the call was charged %d µUSD in %d parts, want %d in 4", sum, n, c.CostMicros)
	}
	sum2, err := ir.st.Credit().Summary(ctx, store.OrgScope(ir.org.ID), time.Now(), time.Time{})
	if err != nil || sum2.ReservedMicros != 0 {
		t.Errorf("credit held after the calls: %+v, %v", sum2, err)
	}
}
