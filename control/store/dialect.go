package store

import (
	"errors"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Engine names returned by (*Store).Dialect.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// errClass is what the store needs to know about a driver error.
type errClass int

const (
	errOther      errClass = iota
	errUnique              // unique or primary-key violation → ErrConflict
	errForeignKey          // a referenced row is missing → ErrNotFound
	errRetry               // SQLite busy/locked, PostgreSQL serialization failure or deadlock
	errStorage             // the file cannot be written: read-only, full disk, I/O error
)

// dialect is the small hook through which the two engines differ. Queries are written once in
// PostgreSQL style ($1..$N) and every difference lives here, never in a second repository.
type dialect struct {
	name string
	// rebind rewrites a query's placeholders for the engine.
	rebind func(query string) string
	// skipLocked ends a SELECT that leases work-queue rows: "FOR UPDATE SKIP LOCKED" on
	// PostgreSQL; empty on SQLite, where the IMMEDIATE transaction already holds the only write lock.
	skipLocked string
	// migrationsDDL creates schema_migrations if it is missing.
	migrationsDDL string
	// tableExists counts the tables named $1 in the current schema.
	tableExists string
	// lockMigrations runs first in every migration transaction so that two processes migrating
	// at once take turns; empty on SQLite, where BEGIN IMMEDIATE already takes the write lock.
	lockMigrations string
	// classify sorts a driver error.
	classify func(error) errClass
}

var sqliteDialect = &dialect{
	name:       SQLite,
	rebind:     (&rebinder{}).rebind,
	skipLocked: "",
	migrationsDDL: `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY,
	name TEXT NOT NULL,
	applied_at TEXT NOT NULL
) STRICT`,
	tableExists:    `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1`,
	lockMigrations: "",
	classify:       classifySQLite,
}

var postgresDialect = &dialect{
	name:       Postgres,
	rebind:     func(q string) string { return q },
	skipLocked: "FOR UPDATE SKIP LOCKED",
	migrationsDDL: `CREATE TABLE IF NOT EXISTS schema_migrations (
	version integer PRIMARY KEY,
	name text NOT NULL,
	applied_at timestamptz NOT NULL
)`,
	tableExists: `SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = $1`,
	// The two-key form scopes the lock to the current schema, so separate schemas (one per
	// test) migrate independently while two processes on one schema still take turns.
	lockMigrations: `SELECT pg_advisory_xact_lock(1886549113, hashtext(current_schema()))`,
	classify:       classifyPostgres,
}

func classifySQLite(err error) errClass {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return errOther
	}
	switch code := e.Code(); code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return errUnique
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return errForeignKey
	default:
		switch code & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return errRetry
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return errStorage
		}
	}
	return errOther
}

func classifyPostgres(err error) errClass {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return errOther
	}
	switch e.Code {
	case "23505": // unique_violation
		return errUnique
	case "23503": // foreign_key_violation
		return errForeignKey
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return errRetry
	case "53100", "25006": // disk_full, read_only_sql_transaction
		return errStorage
	}
	return errOther
}

// rebinder rewrites $N placeholders to SQLite's ?N and remembers each rewrite, since the
// store issues a small fixed set of queries over and over.
type rebinder struct{ cache sync.Map } // query string → rewritten string

func (r *rebinder) rebind(query string) string {
	if v, ok := r.cache.Load(query); ok {
		return v.(string)
	}
	out := rewritePlaceholders(query)
	r.cache.Store(query, out)
	return out
}

// rewritePlaceholders turns every $N outside string literals, quoted identifiers and comments
// into ?N. Both forms are one byte long, so the result has the same length as the input.
func rewritePlaceholders(q string) string {
	if !strings.Contains(q, "$") {
		return q
	}
	b := []byte(q)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\'' || c == '"':
			i = skipQuoted(b, i, c)
		case c == '-' && i+1 < len(b) && b[i+1] == '-':
			for i < len(b) && b[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				i = len(b)
			} else {
				i += 2 + end + 1
			}
		case c == '$' && i+1 < len(b) && b[i+1] >= '0' && b[i+1] <= '9' && (i == 0 || !isIdentByte(b[i-1])):
			b[i] = '?'
		}
	}
	return string(b)
}

// skipQuoted returns the index of the quote that closes the literal opened at b[i]; a doubled
// quote inside is an escaped quote.
func skipQuoted(b []byte, i int, quote byte) int {
	for i++; i < len(b); i++ {
		if b[i] == quote {
			if i+1 < len(b) && b[i+1] == quote {
				i++
				continue
			}
			return i
		}
	}
	return len(b)
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
