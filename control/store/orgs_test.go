package store

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// clockStore is a migrated SQLite store on a clock the test sets.
func clockStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 678901234, time.FixedZone("CET", 3600))}
	s, err := Open(t.Context(), Options{URL: filepath.Join(t.TempDir(), "clock.db"), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestOrgTimesFollowClock(t *testing.T) {
	s, c := clockStore(t)
	ctx := t.Context()
	t0 := c.now()
	o, err := s.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	want := t0.UTC().Truncate(time.Microsecond)
	if !o.CreatedAt.Equal(want) || o.CreatedAt.Location() != time.UTC || !o.UpdatedAt.Equal(want) {
		t.Fatalf("created %v / updated %v, want %v", o.CreatedAt, o.UpdatedAt, want)
	}
	t1 := t0.Add(time.Hour)
	c.set(t1)
	if err := s.SetOrgFrozen(ctx, o.ID, true); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOrg(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(want) || !got.UpdatedAt.Equal(t1.Truncate(time.Microsecond)) {
		t.Fatalf("after freezing: created %v updated %v", got.CreatedAt, got.UpdatedAt)
	}
	t2 := t1.Add(time.Minute)
	c.set(t2)
	if got, err = s.AddCredit(ctx, o.ID, 5, "test"); err != nil {
		t.Fatal(err)
	}
	txs, err := s.ListCreditTransactions(ctx, CreditFilter{OrgID: o.ID})
	if err != nil || len(txs) != 1 {
		t.Fatalf("credit transactions %v, %v", txs, err)
	}
	if w := t2.Truncate(time.Microsecond); !got.UpdatedAt.Equal(w) || !txs[0].CreatedAt.Equal(w) {
		t.Fatalf("after credit: org updated %v, transaction at %v, want %v", got.UpdatedAt, txs[0].CreatedAt, w)
	}
}
