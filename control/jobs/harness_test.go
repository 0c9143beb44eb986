package jobs_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// opener returns a fresh, migrated store that nothing else uses, closed when t ends.
type opener func(t *testing.T) *store.Store

// engines runs fn once per store engine: a SQLite file and a PostgreSQL schema of its own.
func engines(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, func(t *testing.T) *store.Store { return openStore(t, store.Options{DataDir: t.TempDir()}) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		base := testenv.PostgresURL(t)
		fn(t, func(t *testing.T) *store.Store {
			return openStore(t, store.Options{URL: pgSchema(t, base), MaxConns: 6})
		})
	})
}

func openStore(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// pgSchema creates a schema for t on the server at base, dropped when t ends, and returns a URL
// whose search_path selects it.
func pgSchema(t testing.TB, base string) string {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_jobs_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// poll calls cond every few milliseconds until it is true, failing t at the deadline.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}

// placeholder returns the n-th query placeholder of the store's engine, for the tests' own SQL.
func placeholder(s *store.Store, n int) string {
	if s.Dialect() == store.SQLite {
		return "?" + strconv.Itoa(n)
	}
	return "$" + strconv.Itoa(n)
}

// run starts w.Run in a goroutine and returns a function that stops it and waits, failing t
// when Run errs or does not return in time.
func run(t *testing.T, w interface{ Run(context.Context) error }) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return within 30 s of its ctx being cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}
