package store_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/store/storetest"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestStore runs the conformance suite against both engines.
func TestStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, openSQLite)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, postgresOpener(t))
	})
}

// openSQLite opens a store on a fresh file.
func openSQLite(t *testing.T) *store.Store {
	t.Helper()
	return open(t, store.Options{DataDir: t.TempDir()})
}

func open(t *testing.T, o store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postgresOpener returns an opener that gives every test its own schema on the test server,
// dropped when the test ends, so tests run in parallel without seeing each other.
func postgresOpener(t *testing.T) storetest.Opener {
	base := testenv.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	admin.SetMaxOpenConns(2)
	t.Cleanup(func() { admin.Close() })
	return func(t *testing.T) *store.Store {
		t.Helper()
		return open(t, store.Options{URL: pgSchema(t, admin, base), MaxConns: 4})
	}
}

// pgSchema creates a schema for t, dropped when t ends, and returns a URL whose search_path
// selects it.
func pgSchema(t *testing.T, admin *sql.DB, base string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
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

// TestMigrateTwoStores migrates one database from two pools at once, as two processes would.
func TestMigrateTwoStores(t *testing.T) {
	check := func(t *testing.T, a, b *store.Store) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			all  []int
			errs []error
		)
		for _, s := range []*store.Store{a, b, a, b} {
			wg.Go(func() {
				applied, err := s.Migrate(t.Context())
				mu.Lock()
				defer mu.Unlock()
				all = append(all, applied...)
				errs = append(errs, err)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		slices.Sort(all)
		if len(all) != a.LatestVersion() || all[0] != 1 {
			t.Fatalf("applied %v in total, want each version once", all)
		}
		for _, s := range []*store.Store{a, b} {
			if err := s.CheckSchema(t.Context()); err != nil {
				t.Fatalf("CheckSchema: %v", err)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		check(t, open(t, store.Options{DataDir: dir}), open(t, store.Options{DataDir: dir}))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		base := testenv.PostgresURL(t)
		admin, err := sql.Open("pgx", base)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		url := pgSchema(t, admin, base)
		check(t, open(t, store.Options{URL: url}), open(t, store.Options{URL: url}))
	})
}

// TestOpenURLs checks every way of naming a SQLite database.
func TestOpenURLs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cases := []struct {
		name string
		o    store.Options
		file string // the database file that must appear
	}{
		{"data dir", store.Options{DataDir: filepath.Join(dir, "new", "data")}, filepath.Join(dir, "new", "data", "parley.db")},
		{"sqlite absolute", store.Options{URL: "sqlite://" + filepath.Join(dir, "abs.db")}, filepath.Join(dir, "abs.db")},
		{"sqlite relative", store.Options{URL: "sqlite://rel.db"}, filepath.Join(dir, "rel.db")},
		{"sqlite: relative", store.Options{URL: "sqlite:short.db"}, filepath.Join(dir, "short.db")},
		{"plain path", store.Options{URL: filepath.Join(dir, "plain.db")}, filepath.Join(dir, "plain.db")},
		{"odd characters", store.Options{URL: filepath.Join(dir, "we rd #name%.db")}, filepath.Join(dir, "we rd #name%.db")},
		{"extra parameters", store.Options{URL: "sqlite://" + filepath.Join(dir, "p.db") + "?_pragma=synchronous(FULL)"}, filepath.Join(dir, "p.db")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, c.o)
			if s.Dialect() != store.SQLite {
				t.Fatalf("Dialect = %q", s.Dialect())
			}
			if _, err := s.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if _, err := os.Stat(c.file); err != nil {
				t.Fatalf("database file: %v", err)
			}
		})
	}
	for _, bad := range []store.Options{
		{},
		{URL: filepath.Join(dir, "what?.db")},
		{URL: "mysql://localhost/db"},
		{URL: "sqlite://"},
		{URL: ":memory:"},
		{URL: "sqlite://file:x.db?mode=memory"},
		{URL: "postgres://%zz"},
	} {
		_, err := store.Open(t.Context(), bad)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestOpenUnusable checks that a database that cannot be opened is a clear error naming it.
func TestOpenUnusable(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, mention string
		o             store.Options
	}{
		{"data dir under a file", notDir, store.Options{DataDir: filepath.Join(notDir, "data")}},
		{"file under a file", filepath.Join(notDir, "x.db"), store.Options{URL: filepath.Join(notDir, "x.db")}},
		{"not a database", garbage, store.Options{URL: garbage}},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name, mention string
			o             store.Options
		}{"read-only directory", filepath.Join(ro, "parley.db"), store.Options{DataDir: ro}})
	} else {
		t.Log("running as root: the read-only directory case cannot be checked; read-only writes are checked by TestReadOnly")
	}
	for _, c := range cases {
		s, err := store.Open(t.Context(), c.o)
		if err == nil {
			// SQLite may open lazily; the first real use must then fail.
			_, err = s.Migrate(t.Context())
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v does not name %s", c.name, err, c.mention)
		}
	}
}

// TestReadOnly checks that writing to a database that refuses writes fails clearly.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.db")
	rw := open(t, store.Options{URL: path})
	if _, err := rw.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	rw.Close()

	ro := open(t, store.Options{URL: path + "?_pragma=query_only(1)"})
	if _, err := ro.ListOrgs(t.Context()); err != nil {
		t.Fatalf("reading a read-only database: %v", err)
	}
	_, err := ro.CreateOrg(t.Context(), "Acme")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("write to a read-only database: %v, want an error naming %s", err, path)
	}
}

// TestDiskFull fills a database capped by max_page_count (512 pages of 4 KB: the schema and
// some room) and checks the error is clear.
func TestDiskFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.db")
	s := open(t, store.Options{URL: path + "?_pragma=max_page_count(512)"})
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	org, err := s.CreateOrg(t.Context(), "Acme")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 16<<10)})
	for i := range 400 {
		err = s.InsertAudit(t.Context(), store.AuditEvent{OrgID: org.ID, ActorType: store.ActorSystem, Action: "test.filled", Data: data})
		if err != nil {
			break
		}
		if i == 399 {
			t.Fatal("6.4 MB went into a 2 MB database")
		}
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("error on a full database: %v, want one naming %s and saying it is full", err, path)
	}
	// The store still reads.
	if _, err := s.GetOrg(t.Context(), org.ID); err != nil {
		t.Fatalf("read after the disk filled: %v", err)
	}
}

// TestPostgresUnreachable checks that a server that is not there is a clear error, quickly.
func TestPostgresUnreachable(t *testing.T) {
	_, err := store.Open(t.Context(), store.Options{URL: "postgres://parley:secret@127.0.0.1:1/db?connect_timeout=2"})
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	if !strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %q should name the server and hide the password", err)
	}
}
