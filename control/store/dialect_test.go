package store

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRewritePlaceholders(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"SELECT 1", "SELECT 1"},
		{"SELECT * FROM t WHERE a = $1 AND b = $2", "SELECT * FROM t WHERE a = ?1 AND b = ?2"},
		{"VALUES ($1,$2,$10,$11)", "VALUES (?1,?2,?10,?11)"},
		{"x = $1 OR y = $1", "x = ?1 OR y = ?1"},
		{"a = '$1' AND b = $2", "a = '$1' AND b = ?2"},
		{"a = 'it''s $1' AND b = $2", "a = 'it''s $1' AND b = ?2"},
		{`"col$1" = $1`, `"col$1" = ?1`},
		{`"we""ird $2" = $1`, `"we""ird $2" = ?1`},
		{"a = $1 -- and $2\n AND b = $3", "a = ?1 -- and $2\n AND b = ?3"},
		{"a = $1 /* $2 */ AND b = $3", "a = ?1 /* $2 */ AND b = ?3"},
		{"a = $1 /* unterminated $2", "a = ?1 /* unterminated $2"},
		{"a = 'unterminated $1", "a = 'unterminated $1"},
		{"price$1 = $1", "price$1 = ?1"},
		{"$ alone, $x, $$", "$ alone, $x, $$"},
		{"$1", "?1"},
		{"€ = $1", "€ = ?1"},
	}
	for _, c := range cases {
		if got := rewritePlaceholders(c.in); got != c.want {
			t.Errorf("rewritePlaceholders(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRebinderCaches(t *testing.T) {
	var r rebinder
	q := "SELECT $1"
	a, b := r.rebind(q), r.rebind(q)
	if a != "SELECT ?1" || b != a {
		t.Fatalf("rebind = %q, %q", a, b)
	}
	if _, ok := r.cache.Load(q); !ok {
		t.Fatal("rewrite not cached")
	}
	if n := testing.AllocsPerRun(100, func() { r.rebind(q) }); n != 0 {
		t.Fatalf("cached rebind allocates %v times", n)
	}
}

var placeholderRE = regexp.MustCompile(`\$[0-9]`)

func FuzzRewritePlaceholders(f *testing.F) {
	for _, s := range []string{"a = $1", "'$1' $2", `"$1" -- $2` + "\n$3", "/* $1 */ $2", "x$1 $$1", "''''$1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := rewritePlaceholders(q)
		if len(out) != len(q) {
			t.Fatalf("length changed: %q → %q", q, out)
		}
		for i := range len(q) {
			if q[i] != out[i] && !(q[i] == '$' && out[i] == '?') {
				t.Fatalf("byte %d changed from %q to %q", i, q[i], out[i])
			}
		}
		if again := rewritePlaceholders(out); again != out {
			t.Fatalf("not idempotent: %q → %q", out, again)
		}
		// Without quotes or comments every $N is rewritten.
		if !strings.ContainsAny(q, `'"-/`) && placeholderRE.MatchString(out) {
			for i := 0; i+1 < len(out); i++ {
				if out[i] == '$' && out[i+1] >= '0' && out[i+1] <= '9' && (i == 0 || !isIdentByte(out[i-1])) {
					t.Fatalf("placeholder left at %d in %q", i, out)
				}
			}
		}
	})
}

func TestClassifyPostgres(t *testing.T) {
	cases := []struct {
		code string
		want errClass
	}{
		{"23505", errUnique},
		{"23503", errForeignKey},
		{"40001", errRetry},
		{"40P01", errRetry},
		{"53100", errStorage},
		{"25006", errStorage},
		{"22P02", errOther},
		{"42P01", errOther},
	}
	for _, c := range cases {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: c.code})
		if got := classifyPostgres(err); got != c.want {
			t.Errorf("classifyPostgres(%s) = %v, want %v", c.code, got, c.want)
		}
	}
	if classifyPostgres(errors.New("plain")) != errOther || classifyPostgres(nil) != errOther {
		t.Error("a non-PostgreSQL error is not errOther")
	}
}

// TestClassifySQLite provokes real SQLite errors and sorts them.
func TestClassifySQLite(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "c.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	for _, q := range []string{
		`CREATE TABLE p (id TEXT PRIMARY KEY, u TEXT UNIQUE) STRICT`,
		`CREATE TABLE c (id TEXT PRIMARY KEY, p TEXT REFERENCES p (id)) STRICT`,
		`INSERT INTO p VALUES ('a', 'x')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cases := []struct {
		q    string
		want errClass
	}{
		{`INSERT INTO p VALUES ('b', 'x')`, errUnique},
		{`INSERT INTO p VALUES ('a', 'y')`, errUnique},
		{`INSERT INTO c VALUES ('1', 'nope')`, errForeignKey},
		{`SELECT * FROM missing`, errOther},
		{`INSERT INTO p VALUES ('c', X'00')`, errOther}, // STRICT type check
	}
	for _, c := range cases {
		_, err := db.ExecContext(ctx, c.q)
		if err == nil {
			t.Fatalf("%s succeeded", c.q)
		}
		if got := classifySQLite(fmt.Errorf("wrapped: %w", err)); got != c.want {
			t.Errorf("%s: %v classified %v, want %v", c.q, err, got, c.want)
		}
	}
	if classifySQLite(errors.New("plain")) != errOther {
		t.Error("a non-SQLite error is not errOther")
	}
}

func TestDialectsDiffer(t *testing.T) {
	if sqliteDialect.skipLocked != "" || postgresDialect.skipLocked != "FOR UPDATE SKIP LOCKED" {
		t.Error("skipLocked hook")
	}
	if sqliteDialect.rebind("a = $1") != "a = ?1" || postgresDialect.rebind("a = $1") != "a = $1" {
		t.Error("rebind hook")
	}
	if sqliteDialect.lockMigrations != "" || !strings.Contains(postgresDialect.lockMigrations, "pg_advisory_xact_lock") {
		t.Error("lockMigrations hook")
	}
}
