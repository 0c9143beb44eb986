package storetest

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parley-voice/parley/control/store"
)

func testOpen(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	if d := s.Dialect(); d != store.SQLite && d != store.Postgres {
		t.Fatalf("Dialect() = %q", d)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping after Close succeeded")
	}
}

func testMigrateIdempotent(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	if v := must[int](t, "SchemaVersion")(s.SchemaVersion(ctx)); v != 0 {
		t.Fatalf("fresh SchemaVersion = %d, want 0", v)
	}
	latest := s.LatestVersion()
	if latest < 1 {
		t.Fatalf("LatestVersion = %d", latest)
	}
	applied := must[[]int](t, "Migrate")(s.Migrate(ctx))
	want := make([]int, latest)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(applied, want) {
		t.Fatalf("first Migrate applied %v, want %v", applied, want)
	}
	if v := must[int](t, "SchemaVersion")(s.SchemaVersion(ctx)); v != latest {
		t.Fatalf("SchemaVersion = %d, want %d", v, latest)
	}
	if again := must[[]int](t, "Migrate again")(s.Migrate(ctx)); len(again) != 0 {
		t.Fatalf("second Migrate applied %v, want nothing", again)
	}
	if err := s.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
	ms := must[[]store.MigrationStatus](t, "Migrations")(s.Migrations(ctx))
	if len(ms) != latest {
		t.Fatalf("Migrations lists %d, want %d", len(ms), latest)
	}
	for _, m := range ms {
		if !m.Known || m.AppliedAt == nil || m.Name == "" {
			t.Fatalf("migration %+v: want known, named and applied", m)
		}
	}
	if ms[0].Name != "foundation" {
		t.Fatalf("migration 1 is %q, want foundation", ms[0].Name)
	}
}

func testMigrateConcurrent(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	const n = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []int
		errs    []error
	)
	for range n {
		wg.Go(func() {
			a, err := s.Migrate(ctx)
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, a...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	slices.Sort(applied)
	if len(applied) != s.LatestVersion() || applied[0] != 1 || applied[len(applied)-1] != s.LatestVersion() {
		t.Fatalf("concurrent Migrate applied %v in total, want each of 1..%d once", applied, s.LatestVersion())
	}
	if err := s.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
}

func testUnmigratedRefused(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	err := s.CheckSchema(ctx)
	wantErr(t, "CheckSchema on an empty database", err, store.ErrNotMigrated)
	if !strings.Contains(err.Error(), "parley migrate") {
		t.Fatalf("error %q does not tell the operator to migrate", err)
	}
	_, err = s.CreateOrg(ctx, "Acme")
	wantErr(t, "CreateOrg before Migrate", err, store.ErrNotMigrated)
	_, err = s.ListOrgs(ctx)
	wantErr(t, "ListOrgs before Migrate", err, store.ErrNotMigrated)
	_, err = s.LookupKey(ctx, "sk_live_0123456789012345678901234567890123456789012")
	wantErr(t, "LookupKey before Migrate", err, store.ErrNotMigrated)
	err = s.Tx(ctx, func(*store.Tx) error { t.Error("Tx ran fn on an unmigrated store"); return nil })
	wantErr(t, "Tx before Migrate", err, store.ErrNotMigrated)

	must[[]int](t, "Migrate")(s.Migrate(ctx))
	if _, err := s.CreateOrg(ctx, "Acme"); err != nil {
		t.Fatalf("CreateOrg after Migrate: %v", err)
	}
}

func testSchemaTooNew(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	const future = 9999
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
		VALUES (`+strconv.Itoa(future)+`, 'from_the_future', '2030-01-02T03:04:05.000000Z')`); err != nil {
		t.Fatalf("insert future migration: %v", err)
	}
	applied, err := s.Migrate(ctx)
	wantErr(t, "Migrate on a newer schema", err, store.ErrSchemaTooNew)
	if len(applied) != 0 {
		t.Fatalf("Migrate applied %v on a newer schema", applied)
	}
	for _, v := range []string{strconv.Itoa(future), strconv.Itoa(s.LatestVersion())} {
		if !strings.Contains(err.Error(), v) {
			t.Fatalf("error %q does not name version %s", err, v)
		}
	}
	wantErr(t, "CheckSchema on a newer schema", s.CheckSchema(ctx), store.ErrSchemaTooNew)
	ms := must[[]store.MigrationStatus](t, "Migrations")(s.Migrations(ctx))
	if last := ms[len(ms)-1]; last.Version != future || last.Known || last.AppliedAt == nil {
		t.Fatalf("last migration %+v, want unknown applied %d", last, future)
	}
}
