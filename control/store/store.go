// Package store keeps Parley's durable state (organizations, projects, API keys, credit and the
// audit log) in SQLite or PostgreSQL behind one repository code path.
//
// Queries are written once, in PostgreSQL style with $1..$N placeholders, and run through
// database/sql on either engine: SQLite through the pure-Go modernc.org/sqlite driver (WAL mode,
// busy timeout, IMMEDIATE transactions) and PostgreSQL through pgx's database/sql driver. The few
// differences between the engines live in a small dialect hook. Migrations are SQL files embedded
// in the binary, one set per engine.
//
// The store must never store an API key's secret (only its SHA-256 hash), never migrate on Open
// (the caller runs Migrate), and never run against a schema newer than the binary knows.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/internal/private"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Options configure Open.
type Options struct {
	// URL names the database:
	//   ""                          the SQLite file parley.db in DataDir
	//   "sqlite:///abs/path.db"     a SQLite file ("sqlite://rel/path.db" is relative)
	//   "/abs/path.db", "rel.db"    a SQLite file
	//   "postgres://…", "postgresql://…"  a PostgreSQL database (runtime parameters such as
	//                               search_path may be given as query parameters)
	// In every SQLite form a "?" starts extra driver parameters, e.g. "?_pragma=synchronous(FULL)",
	// so a file name cannot hold one.
	URL string
	// DataDir holds parley.db when URL is empty; it is created if missing.
	DataDir string
	// Logger receives migration and retry messages; nil discards them.
	Logger *slog.Logger
	// MaxConns caps open connections; 0 means 4 for SQLite and 10 for PostgreSQL.
	MaxConns int
	// Now is the clock for created_at and friends; nil means time.Now.
	Now func() time.Time
}

// Store is a connection pool to one database. It is safe for concurrent use. Its repository
// methods come from the embedded *Queries.
type Store struct {
	*Queries

	db         *sql.DB
	d          *dialect
	where      string // the database, for error messages: a SQLite path or a redacted PG URL
	log        *slog.Logger
	now        func() time.Time
	migrations []migration
	migrated   atomic.Bool // the schema was found current once; later calls skip the check
	onEnqueue  func(kind string)
	onStmt     func(op string) // OnStatement's; nil: not counted
	stmts      stmtCache       // SQLite's prepared statements

	closeOnce sync.Once
	closeErr  error
}

// Open connects to the database named by o.URL and checks that it answers. It does not migrate:
// call Migrate (serve does on start; `parley migrate` on its own). Until the schema is current,
// repository calls fail with ErrNotMigrated.
func Open(ctx context.Context, o Options) (*Store, error) {
	s := &Store{log: o.Logger, now: o.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	var err error
	switch {
	case strings.HasPrefix(o.URL, "postgres://"), strings.HasPrefix(o.URL, "postgresql://"):
		err = s.openPostgres(o)
	default:
		err = s.openSQLite(o)
	}
	if err != nil {
		return nil, err
	}
	if s.migrations, err = loadMigrations(s.d.name); err != nil {
		s.db.Close()
		return nil, err
	}
	s.Queries = &Queries{db: s.db, s: s}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("store: open %s: %w", s.where, err)
	}
	return s, nil
}

// openPostgres sets up a pgx pool behind database/sql.
func (s *Store) openPostgres(o Options) error {
	cfg, err := pgx.ParseConfig(o.URL)
	if err != nil {
		// pgx's message never repeats the password.
		return fmt.Errorf("store: %w: bad PostgreSQL URL: %v", ErrInvalid, err)
	}
	s.d = postgresDialect
	s.where = "postgres " + redact(o.URL)
	s.db = stdlib.OpenDB(*cfg)
	s.setPool(o.MaxConns, 10)
	return nil
}

// sqliteParams are always on: WAL so readers never block the writer, a busy timeout so writers
// wait their turn instead of failing, foreign keys, and BEGIN IMMEDIATE so a transaction takes the
// write lock up front (never failing half way when it upgrades from reading to writing).
const sqliteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// openSQLite sets up a pool over one SQLite file.
func (s *Store) openSQLite(o Options) error {
	path, extra, err := sqlitePath(o.URL, o.DataDir)
	if err != nil {
		return err
	}
	if o.URL == "" {
		if err := private.MkdirAll(o.DataDir); err != nil {
			return fmt.Errorf("store: create data directory %q: %w", o.DataDir, err)
		}
	}
	if path, err = filepath.Abs(path); err != nil {
		return fmt.Errorf("store: sqlite path: %w", err)
	}
	// The database holds transcripts and phone numbers: only the service's user reads it.
	// SQLite gives its -wal and -shm files the database file's mode, so creating the file
	// private first keeps all three private whatever the umask; an older file is narrowed.
	if _, err := os.Stat(filepath.Dir(path)); err == nil {
		if err := private.Touch(path); err != nil {
			return fmt.Errorf("store: create %s: %w", path, err)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if err := private.Narrow(f, private.FileMode); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("store: make %s private: %w", f, err)
			}
		}
	}
	s.d = sqliteDialect
	s.where = "sqlite " + path
	dsn := (&url.URL{Scheme: "file", OmitHost: true, Path: path}).String() + "?" + sqliteParams
	if extra != "" {
		dsn += "&" + extra
	}
	if s.db, err = sql.Open("sqlite", dsn); err != nil {
		return fmt.Errorf("store: open %s: %w", s.where, err)
	}
	s.setPool(o.MaxConns, 4)
	return nil
}

// sqlitePath resolves the SQLite file and any extra driver parameters from the URL.
func sqlitePath(rawURL, dataDir string) (path, extra string, err error) {
	if rawURL == "" {
		if dataDir == "" {
			return "", "", fmt.Errorf("store: %w: neither a database URL nor a data directory is set", ErrInvalid)
		}
		return filepath.Join(dataDir, "parley.db"), "", nil
	}
	p := rawURL
	if rest, ok := strings.CutPrefix(p, "sqlite://"); ok {
		p = rest
	} else if rest, ok := strings.CutPrefix(p, "sqlite:"); ok {
		p = rest
	} else if i := strings.Index(p, "://"); i > 0 {
		return "", "", fmt.Errorf("store: %w: unknown database URL scheme %q (want sqlite:// or postgres://)", ErrInvalid, p[:i])
	}
	p, extra, _ = strings.Cut(p, "?")
	switch {
	case p == "":
		return "", "", fmt.Errorf("store: %w: database URL %q names no file", ErrInvalid, rawURL)
	case p == ":memory:" || strings.HasPrefix(p, "file:") || strings.Contains(p, "mode=memory"):
		return "", "", fmt.Errorf("store: %w: %q: in-memory or file: URI databases are not supported; name a file", ErrInvalid, rawURL)
	}
	params, err := url.ParseQuery(extra)
	if err != nil {
		return "", "", fmt.Errorf("store: %w: database URL parameters %q: %v", ErrInvalid, extra, err)
	}
	for k := range params {
		if !strings.HasPrefix(k, "_") && k != "vfs" {
			return "", "", fmt.Errorf("store: %w: %q is not a SQLite driver parameter (a file name cannot hold \"?\")", ErrInvalid, k)
		}
	}
	return p, extra, nil
}

func (s *Store) setPool(maxConns, def int) {
	if maxConns <= 0 {
		maxConns = def
	}
	s.db.SetMaxOpenConns(maxConns)
	s.db.SetMaxIdleConns(maxConns)
	s.db.SetConnMaxIdleTime(5 * time.Minute)
}

// redact hides the password of a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Dialect names the engine: "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// DB returns the connection pool, for its Stats (metrics) and for tests. Repository code never
// uses it directly.
func (s *Store) DB() *sql.DB { return s.db }

// Ping checks that the database answers (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping %s: %w", s.where, err)
	}
	return nil
}

// Close closes the pool. It is safe to call more than once; later calls return the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stmts.close()
		s.closeErr = s.db.Close()
		s.stmts.wg.Wait() // background prepares end once the pool is closed
	})
	return s.closeErr
}

// timeNow is the store's clock, normalized.
func (s *Store) timeNow() time.Time { return normTime(s.now()) }

// checkReady fails with ErrNotMigrated or ErrSchemaTooNew until the schema is current. Once it
// was current it is not read again: a repository call costs one atomic load, and a newer binary
// migrating the database under a running older one is caught at that one's next start.
func (s *Store) checkReady(ctx context.Context) error {
	if s.migrated.Load() {
		return nil
	}
	if err := s.CheckSchema(ctx); err != nil {
		return err
	}
	s.migrated.Store(true)
	return nil
}

// wrap turns a driver error into a store error: unique violations wrap ErrConflict, missing
// references wrap ErrNotFound, and storage failures (read-only file, full disk) name the database.
func (s *Store) wrap(op string, err error) error {
	switch s.d.classify(err) {
	case errUnique:
		return fmt.Errorf("store: %s: %w: %w", op, ErrConflict, err)
	case errForeignKey:
		return fmt.Errorf("store: %s: referenced row: %w: %w", op, ErrNotFound, err)
	case errStorage:
		return fmt.Errorf("store: %s: cannot write %s: %w", op, s.where, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return fmt.Errorf("store: %s (%s): %w", op, s.where, err)
}
