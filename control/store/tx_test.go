package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// retryStore is a migrated SQLite store whose dialect calls errTransient retryable.
var errTransient = errors.New("transient")

func retryStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{URL: filepath.Join(t.TempDir(), "tx.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	d := *s.d
	d.classify = func(err error) errClass {
		if errors.Is(err, errTransient) {
			return errRetry
		}
		return classifySQLite(err)
	}
	s.d = &d
	return s
}

func TestTxRetriesTransientErrors(t *testing.T) {
	s := retryStore(t)
	ctx := t.Context()
	runs := 0
	err := s.Tx(ctx, func(tx *Tx) error {
		runs++
		if _, err := tx.CreateOrg(ctx, fmt.Sprintf("Attempt %d", runs)); err != nil {
			return err
		}
		if runs < 3 {
			return fmt.Errorf("deadlock, say: %w", errTransient)
		}
		return nil
	})
	if err != nil || runs != 3 {
		t.Fatalf("Tx = %v after %d runs, want success on the third", err, runs)
	}
	orgs, err := s.ListOrgs(ctx)
	if err != nil || len(orgs) != 1 || orgs[0].Name != "Attempt 3" {
		t.Fatalf("orgs = %+v, %v: want only the committed attempt", orgs, err)
	}
}

func TestTxGivesUp(t *testing.T) {
	s := retryStore(t)
	runs := 0
	err := s.Tx(t.Context(), func(*Tx) error { runs++; return errTransient })
	if !errors.Is(err, errTransient) || runs != txAttempts {
		t.Fatalf("Tx = %v after %d runs, want errTransient after %d", err, runs, txAttempts)
	}
	runs = 0
	permanent := errors.New("permanent")
	err = s.Tx(t.Context(), func(*Tx) error { runs++; return permanent })
	if !errors.Is(err, permanent) || runs != 1 {
		t.Fatalf("Tx = %v after %d runs, want no retry of a permanent error", err, runs)
	}
}

func TestTxRetryStopsWithContext(t *testing.T) {
	s := retryStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	runs := 0
	start := time.Now()
	err := s.Tx(ctx, func(*Tx) error { runs++; cancel(); return errTransient })
	if !errors.Is(err, context.Canceled) || runs != 1 {
		t.Fatalf("Tx = %v after %d runs, want it to stop when the context ends", err, runs)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Tx took %v to notice the cancelled context", d)
	}
}
