package billing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// fakeCredit is an organization's credit with one call's hold: Reserve grants a hold that the
// balance less the other calls' holds covers.
type fakeCredit struct {
	balance, others int64
	held            store.Reservation
	calls           int
	err             error
}

func (f *fakeCredit) Reserve(_ context.Context, r store.Reservation, _ time.Time) (int64, bool, error) {
	f.calls++
	if f.err != nil {
		return 0, false, f.err
	}
	spendable := f.balance - f.others
	if r.AmountMicros > spendable {
		return spendable, false, nil
	}
	f.held = r
	return spendable, true, nil
}

// TestHold drives a hold with a clock that the test moves: renewals a block at a time, a last
// partial grant, and the end once the covered time runs out; a top-up in time saves the call.
func TestHold(t *testing.T) {
	start := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	ctx := context.Background()
	// 60,000 micro-USD a minute: a five-minute block is 300,000.
	p := HoldPolicy{PerMinute: 60_000}
	c := &fakeCredit{balance: 700_000}
	h := NewHold(c, "0190a6f0-0000-7000-8000-0000000000a1", "0190a6f0-0000-7000-8000-0000000000c1", start, p)
	step := func(now time.Duration) Step {
		t.Helper()
		s, err := h.Step(ctx, at(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Answered: the first block is held, renewed 30 s before it runs out.
	if s := step(0); s.End || !s.Next.Equal(at(4*time.Minute+30*time.Second)) || c.held.AmountMicros != 300_000 ||
		!c.held.CoveredUntil.Equal(at(5*time.Minute)) || !c.held.ExpiresAt.Equal(at(7*time.Minute)) {
		t.Fatalf("first step %+v, held %+v", s, c.held)
	}
	// Called early, nothing is asked of the store.
	if s := step(time.Minute); !s.Next.Equal(at(4*time.Minute+30*time.Second)) || c.calls != 1 {
		t.Fatalf("early step %+v, %d reservations", s, c.calls)
	}
	// Renewal: the hold covers the call from its start to ten minutes.
	if s := step(4*time.Minute + 30*time.Second); !s.Next.Equal(at(9*time.Minute+30*time.Second)) || c.held.AmountMicros != 600_000 {
		t.Fatalf("renewal %+v, held %+v", s, c.held)
	}
	// The next block is not covered (900,000 > 700,000): the hold takes what is left, 11:40.
	s := step(9*time.Minute + 30*time.Second)
	if covered, amount := h.Covered(); s.End || !covered.Equal(at(11*time.Minute+40*time.Second)) || amount != 700_000 || !s.Next.Equal(at(11*time.Minute+10*time.Second)) {
		t.Fatalf("partial grant %+v, covered %v %d", s, covered, amount)
	}
	// 30 s before, nothing more can be held: one more try when the covered time runs out.
	if s := step(11*time.Minute + 10*time.Second); s.End || !s.Next.Equal(at(11*time.Minute+40*time.Second)) {
		t.Fatalf("renewal without credit: %+v", s)
	}
	// At the covered time nothing more can be held: the call ends.
	if s := step(11*time.Minute + 40*time.Second); !s.End {
		t.Fatalf("out of credit: %+v", s)
	}

	// The same, but a top-up arrives before the covered time runs out: the call goes on.
	c = &fakeCredit{balance: 310_000}
	h = NewHold(c, "0190a6f0-0000-7000-8000-0000000000a1", "0190a6f0-0000-7000-8000-0000000000c2", start, p)
	step(0)
	if s := step(4*time.Minute + 30*time.Second); s.End || !s.Next.Equal(at(5*time.Minute)) {
		t.Fatalf("renewal refused (10 s more is not worth it): %+v", s)
	}
	c.balance = 10_000_000
	if s := step(5 * time.Minute); s.End || c.held.AmountMicros != 600_000 || !s.Next.Equal(at(9*time.Minute+30*time.Second)) {
		t.Fatalf("after the top-up %+v, held %+v", s, c.held)
	}

	// Other calls' holds count: with none spendable the call ends at once.
	c = &fakeCredit{balance: 100_000, others: 100_000}
	h = NewHold(c, "0190a6f0-0000-7000-8000-0000000000a1", "0190a6f0-0000-7000-8000-0000000000c3", start, p)
	if s := step(0); !s.End {
		t.Fatalf("nothing spendable: %+v", s)
	}

	// A store error is returned; the hold is left as it was.
	c = &fakeCredit{balance: 10_000_000, err: errors.New("store down")}
	h = NewHold(c, "0190a6f0-0000-7000-8000-0000000000a1", "0190a6f0-0000-7000-8000-0000000000c4", start, p)
	if _, err := h.Step(ctx, start); err == nil {
		t.Fatal("no error from a failing store")
	}
	if covered, amount := h.Covered(); !covered.Equal(start) || amount != 0 {
		t.Fatalf("covered %v %d after an error", covered, amount)
	}

	// A free call holds nothing.
	h = NewHold(&fakeCredit{}, "0190a6f0-0000-7000-8000-0000000000a1", "0190a6f0-0000-7000-8000-0000000000c5", start, HoldPolicy{})
	if s := step(0); s.End || !s.Next.Equal(at(5*time.Minute)) {
		t.Fatalf("free call: %+v", s)
	}
}

func TestFormatUSD(t *testing.T) {
	for micros, want := range map[int64]string{0: "0.000000", 1: "0.000001", 12_500_000: "12.500000", -2_500_001: "-2.500001",
		-9223372036854775808: "-9223372036854.775808"} {
		if got := FormatUSD(micros); got != want {
			t.Errorf("FormatUSD(%d) = %s, want %s", micros, got, want)
		}
	}
}

func TestMonthStart(t *testing.T) {
	loc, name := Location("America/Los_Angeles")
	if name != "America/Los_Angeles" {
		t.Fatalf("location %s", name)
	}
	// 1 December 05:00 UTC is still 30 November in Los Angeles.
	got := MonthStart(time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC), loc)
	if want := time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("month start %v, want %v", got, want)
	}
	if _, name := Location("Mars/Olympus"); name != "UTC" {
		t.Fatalf("unknown zone is %s", name)
	}
}
