package billing

import (
	"context"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// Reserver sets the credit hold of a call in progress; store.Credit is one.
type Reserver interface {
	// Reserve sets the hold to res when the organization's credit spendable by this call (its
	// balance less its other calls' holds at now) covers it, and reports that spendable credit.
	Reserve(ctx context.Context, res store.Reservation, now time.Time) (spendable int64, ok bool, err error)
}

// HoldPolicy says how a call in progress holds credit. Zero members take the defaults.
type HoldPolicy struct {
	// PerMinute is what a minute of the call may cost, in micro-USD.
	PerMinute int64
	// Block is how long each renewal covers (default 5 minutes).
	Block time.Duration
	// Lead is how long before the covered time runs out the hold is renewed (default 30 s).
	Lead time.Duration
	// MinGrant is the shortest extension worth granting when the credit cannot cover a whole
	// block (default 15 s): a shorter one ends the call at the end of its covered time.
	MinGrant time.Duration
	// Slack is how long past the covered time the hold still counts against the available
	// credit (default 2 minutes), so that a renewal a moment late does not free it; a hold
	// whose node died stops counting by itself.
	Slack time.Duration
}

func (p HoldPolicy) withDefaults() HoldPolicy {
	if p.Block <= 0 {
		p.Block = 5 * time.Minute
	}
	if p.Lead <= 0 {
		p.Lead = 30 * time.Second
	}
	if p.MinGrant <= 0 {
		p.MinGrant = 15 * time.Second
	}
	if p.Slack <= 0 {
		p.Slack = 2 * time.Minute
	}
	return p
}

// Hold is the credit a call in progress holds, renewed a block at a time. Its reservation is
// cumulative: it covers what the call may have cost from its start to the covered time, since
// the call is charged only when it ends (and the charge replaces the hold). When the
// organization's credit cannot cover another block, the hold takes what it can (at least
// MinGrant); when it can take nothing and the covered time has run out, the call must end
// with the reason credit_exhausted.
//
// Hold keeps no clock and no timer: its driver (the runtime) calls Step at the time the last
// Step named, with the time it is now. It is not safe for concurrent use.
type Hold struct {
	r       Reserver
	p       HoldPolicy
	org     store.OrgID
	conv    store.ConversationID
	start   time.Time
	covered time.Time // the call is covered until then
	amount  int64     // the hold set, in micro-USD
}

// NewHold returns the hold of conversation conv of org, in progress since start. Nothing is
// reserved until the first Step.
func NewHold(r Reserver, org store.OrgID, conv store.ConversationID, start time.Time, p HoldPolicy) *Hold {
	return &Hold{r: r, p: p.withDefaults(), org: org, conv: conv, start: start, covered: start}
}

// Step is what the driver does next.
type Step struct {
	// End: the covered time has run out and could not be extended; end the call with
	// credit_exhausted.
	End bool
	// Next is when to call Step again (unless End).
	Next time.Time
}

// Covered returns until when the call is covered, and the amount held for it.
func (h *Hold) Covered() (time.Time, int64) { return h.covered, h.amount }

// Step renews the hold when its covered time is about to run out (within Lead of it), and
// says what to do next.
func (h *Hold) Step(ctx context.Context, now time.Time) (Step, error) {
	if h.p.PerMinute <= 0 {
		return Step{Next: now.Add(h.p.Block)}, nil // a free call holds nothing
	}
	renewAt := h.covered.Add(-h.p.Lead)
	if h.amount > 0 && now.Before(renewAt) {
		return Step{Next: renewAt}, nil
	}
	from := h.covered
	if now.After(from) {
		from = now
	}
	spendable, ok, err := h.reserve(ctx, from.Add(h.p.Block), now)
	if err != nil {
		return Step{}, err
	}
	if !ok {
		// Take what the credit covers, when it is worth it.
		if until := h.start.Add(h.affordable(spendable)); until.Sub(from) >= h.p.MinGrant {
			if _, ok, err = h.reserve(ctx, until, now); err != nil {
				return Step{}, err
			}
		}
	}
	if !ok && !now.Before(h.covered) {
		return Step{End: true}, nil
	}
	if !ok {
		return Step{Next: h.covered}, nil // try once more when the covered time runs out
	}
	next := h.covered.Add(-h.p.Lead)
	if next.Before(now) {
		next = h.covered // a short grant: renewing before it runs out would grant nothing more
	}
	return Step{Next: next}, nil
}

// reserve asks for the hold that covers the call until until.
func (h *Hold) reserve(ctx context.Context, until, now time.Time) (int64, bool, error) {
	amount := h.cost(until.Sub(h.start))
	spendable, ok, err := h.r.Reserve(ctx, store.Reservation{OrgID: h.org, ConversationID: h.conv, AmountMicros: amount,
		CoveredUntil: until, ExpiresAt: until.Add(h.p.Slack)}, now)
	if err == nil && ok {
		h.covered, h.amount = until, amount
	}
	return spendable, ok, err
}

// cost is what d of the call may cost, rounded up to a micro-dollar.
func (h *Hold) cost(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	const usPerMinute = int64(time.Minute / time.Microsecond)
	return (h.p.PerMinute*d.Microseconds() + usPerMinute - 1) / usPerMinute
}

// affordable is how long of the call micros covers.
func (h *Hold) affordable(micros int64) time.Duration {
	if micros <= 0 {
		return 0
	}
	const usPerMinute = int64(time.Minute / time.Microsecond)
	minutes, rest := micros/h.p.PerMinute, micros%h.p.PerMinute
	if minutes > 1_000_000 { // about two years: more than any call lasts (and no overflow)
		minutes = 1_000_000
	}
	return time.Duration(minutes)*time.Minute + time.Duration(rest*usPerMinute/h.p.PerMinute)*time.Microsecond
}
