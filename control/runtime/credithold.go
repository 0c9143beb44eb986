package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Credit of conversations: a live call holds credit while it is in progress (billing.Hold,
// renewed a block at a time) and ends politely with credit_exhausted when the hold runs out
// and cannot be renewed; its end charges it part by part and drops the hold, in the
// transaction that stores the end (storeEnd).

// creditGoodbye is what the agent says before a call is ended for want of credit.
const creditGoodbye = "I'm sorry, I have to end this call now. Goodbye."

// goodbyeWait bounds how long the goodbye may take before the call is ended anyway.
const goodbyeWait = 15 * time.Second

// creditHolds are the conversations whose hold runs (a call reports in progress once, but
// nothing breaks if it reports twice).
var creditHolds sync.Map // store.ConversationID → struct{}

// holdCredit starts the credit hold of a live voice call that has just been answered. It never
// blocks: the reservations are made on timers, which stop when the conversation's end is stored.
func (rt *Runtime) holdCredit(conv store.Conversation) {
	per := rt.pricing.ReservePerMinute(conv.Channel)
	if conv.Mode != store.ModeLive || per <= 0 {
		return
	}
	l := rt.lookup(conv.ID)
	if l == nil {
		return
	}
	if _, dup := creditHolds.LoadOrStore(conv.ID, struct{}{}); dup {
		return
	}
	h := billing.NewHold(rt.store.Credit(), conv.OrgID, conv.ID, rt.now(), billing.HoldPolicy{PerMinute: per})
	var (
		mu    sync.Mutex
		timer *time.Timer
		step  func()
	)
	step = func() {
		if l.ctx.Err() != nil {
			return
		}
		s, err := h.Step(l.ctx, rt.now())
		var wait time.Duration
		switch {
		case err != nil && l.ctx.Err() != nil:
			return
		case err != nil:
			// The store cannot be reached: the call goes on, and the hold is tried again.
			rt.log.Warn("call: cannot hold credit", "conversation", conv.ID, "err", err)
			wait = 5 * time.Second
		case s.End:
			rt.log.Info("call: credit used up; ending it", "conversation", conv.ID)
			rt.endForCredit(l)
			return
		default:
			wait = s.Next.Sub(rt.now())
		}
		mu.Lock()
		timer = time.AfterFunc(wait, step)
		mu.Unlock()
	}
	mu.Lock()
	timer = time.AfterFunc(0, step)
	mu.Unlock()
	context.AfterFunc(l.ctx, func() {
		mu.Lock()
		timer.Stop()
		mu.Unlock()
		creditHolds.Delete(conv.ID)
	})
}

// endForCredit ends a call whose credit ran out: the agent says goodbye (at most goodbyeWait),
// then the call ends with credit_exhausted.
func (rt *Runtime) endForCredit(l *live) {
	if sess := l.engine(); sess != nil {
		t := time.NewTimer(goodbyeWait)
		select {
		case <-sess.Execute(session.Command{Kind: session.CommandSay, Text: creditGoodbye, Interrupt: true}):
		case <-t.C:
		case <-l.ctx.Done():
		}
		t.Stop()
	}
	l.stop(session.EndCreditExhausted)
}

// chargeParts charges a live conversation's cost on tx, one credit transaction per part, and
// drops its credit hold.
func (rt *Runtime) chargeParts(ctx context.Context, tx *store.Tx, c store.Conversation, cost session.Cost) error {
	parts := rt.pricing.Parts(c.Channel, cost)
	entries := make([]store.CreditEntry, len(parts))
	for i, part := range parts {
		entries[i] = store.CreditEntry{OrgID: c.OrgID, Kind: part.Kind, AmountMicros: -part.Micros, Reason: part.Description, ConversationID: c.ID}
	}
	if err := tx.Credit().RecordAll(ctx, entries); err != nil { // issue 20: the parts in two statements
		return fmt.Errorf("charge: %w", err)
	}
	return tx.Credit().Release(ctx, c.ID)
}
