package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

func testTxCommit(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	var org store.Org
	err := s.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if org, err = tx.CreateOrg(ctx, "Acme"); err != nil {
			return err
		}
		if _, err := tx.CreateProject(ctx, org.ID, "Web"); err != nil {
			return err
		}
		// Reads inside the transaction see its own writes.
		if _, err := tx.FindProjectByName(ctx, org.ID, "Web"); err != nil {
			return err
		}
		return tx.InsertAudit(ctx, event(org.ID, "organization.created"))
	})
	if err != nil {
		t.Fatalf("Tx: %v", err)
	}
	if _, err := s.FindProjectByName(ctx, org.ID, "Web"); err != nil {
		t.Fatalf("project after commit: %v", err)
	}
	if got := must[[]store.AuditEvent](t, "ListAudit")(s.ListAudit(ctx, store.AuditFilter{OrgID: org.ID})); len(got) != 1 {
		t.Fatalf("%d audit events after commit, want 1", len(got))
	}
}

func testTxRollback(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	boom := errors.New("boom")
	err := s.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.SetOrgFrozen(ctx, org.ID, true); err != nil {
			return err
		}
		if _, err := tx.CreateProject(ctx, org.ID, "Web"); err != nil {
			return err
		}
		if err := tx.InsertAudit(ctx, event(org.ID, "organization.frozen")); err != nil {
			return err
		}
		return fmt.Errorf("later step: %w", boom)
	})
	wantErr(t, "Tx", err, boom)
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, org.ID)); got.Frozen {
		t.Fatal("a rolled-back change is visible")
	}
	if got := must[[]store.AuditEvent](t, "ListAudit")(s.ListAudit(ctx, store.AuditFilter{OrgID: org.ID})); len(got) != 0 {
		t.Fatalf("a rolled-back audit event is visible: %+v", got)
	}
	if ps := must[[]store.Project](t, "ListProjects")(s.ListProjects(ctx, org.ID)); len(ps) != 0 {
		t.Fatalf("a rolled-back project is visible: %+v", ps)
	}

	// A failing statement inside a transaction rolls back what came before it.
	err = s.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.CreateProject(ctx, org.ID, "Phone"); err != nil {
			return err
		}
		_, err := tx.CreateOrg(ctx, "Acme") // taken
		return err
	})
	wantErr(t, "Tx with a conflict", err, store.ErrConflict)
	if _, err := s.FindProjectByName(ctx, org.ID, "Phone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("project of a failed transaction: %v", err)
	}
}

func testTxPanic(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Fatalf("recovered %v, want the panic to pass through", p)
			}
		}()
		_ = s.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.SetOrgFrozen(ctx, org.ID, true); err != nil {
				return err
			}
			panic("kaboom")
		})
	}()
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, org.ID)); got.Frozen {
		t.Fatal("the change of a panicking transaction is visible")
	}
	// The connection went back to the pool in a usable state: writes still work.
	if err := s.SetOrgFrozen(ctx, org.ID, true); err != nil {
		t.Fatalf("write after a panicking transaction: %v", err)
	}
}

func testTimestamps(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	before := time.Now().Add(-time.Second)
	org := newOrg(t, s, "Acme")
	after := time.Now().Add(time.Second)
	got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, org.ID))
	for _, tm := range []time.Time{org.CreatedAt, org.UpdatedAt, got.CreatedAt, got.UpdatedAt} {
		if tm.Location() != time.UTC {
			t.Fatalf("time %v is in %v, want UTC", tm, tm.Location())
		}
		if tm.Nanosecond()%1000 != 0 {
			t.Fatalf("time %v has sub-microsecond digits", tm)
		}
		if tm.Before(before) || tm.After(after) {
			t.Fatalf("time %v is not now", tm)
		}
	}
	if !got.CreatedAt.Equal(org.CreatedAt) {
		t.Fatalf("created_at read back as %v, created as %v", got.CreatedAt, org.CreatedAt)
	}

	// A time in another zone with nanoseconds comes back as the same instant in UTC, to the µs.
	zone := time.FixedZone("UTC+09:30", 9*3600+1800)
	exp := time.Now().In(zone).Add(48 * time.Hour).Truncate(time.Second).Add(123456789 * time.Nanosecond)
	k, secret, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "k", AllProjects: true, ExpiresAt: &exp})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	stored := must[store.Key](t, "LookupKey")(s.LookupKey(ctx, secret))
	want := exp.Truncate(time.Microsecond)
	for _, e := range []*time.Time{k.ExpiresAt, stored.ExpiresAt} {
		if e == nil || !e.Equal(want) || e.Location() != time.UTC || e.Nanosecond() != 123456000 {
			t.Fatalf("expires_at = %v, want %v in UTC", e, want.UTC())
		}
	}
	if s := stored.CreatedAt.Format(time.RFC3339Nano); s[len(s)-1] != 'Z' {
		t.Fatalf("created_at renders as %q, want an RFC 3339 UTC time", s)
	}
}

func testConcurrentWriters(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	const writers, each = 8, 12
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range each {
				err := func() error {
					if _, err := s.AddCredit(ctx, org.ID, 1, "unit"); err != nil {
						return err
					}
					if _, err := s.CreateProject(ctx, org.ID, fmt.Sprintf("p-%d-%d", w, i)); err != nil {
						return err
					}
					return s.Tx(ctx, func(tx *store.Tx) error {
						if err := tx.SetOrgFrozen(ctx, org.ID, false); err != nil {
							return err
						}
						return tx.InsertAudit(ctx, event(org.ID, "project.created"))
					})
				}()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if _, err := s.ListProjects(ctx, org.ID); err != nil { // readers interleave with writers
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent writers failed: %v", err)
	}
	const total = writers * each
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, org.ID)); got.CreditMicros != total {
		t.Fatalf("balance = %d, want %d", got.CreditMicros, total)
	}
	if n := len(must[[]store.Project](t, "ListProjects")(s.ListProjects(ctx, org.ID))); n != total {
		t.Fatalf("%d projects, want %d", n, total)
	}
	txs := must[[]store.CreditTransaction](t, "List")(s.ListCreditTransactions(ctx, store.CreditFilter{OrgID: org.ID, Limit: 1000}))
	if len(txs) != total {
		t.Fatalf("%d credit transactions, want %d", len(txs), total)
	}
	seen := map[int64]bool{}
	for _, tx := range txs {
		seen[tx.BalanceAfter] = true
	}
	if len(seen) != total {
		t.Fatalf("balance_after repeats: %d distinct values in %d transactions (lost update)", len(seen), total)
	}
	if n := len(must[[]store.AuditEvent](t, "ListAudit")(s.ListAudit(ctx, store.AuditFilter{OrgID: org.ID, Limit: 1000}))); n != total {
		t.Fatalf("%d audit events, want %d", n, total)
	}
}
