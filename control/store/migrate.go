package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"time"
)

// migrationFiles holds the schema, one directory per engine. A migration is a file
// NNNN_name.sql; versions start at 1 and have no gaps. Files are never edited once released: a
// change is a new file, added for both engines in the same issue. Each file runs in one
// transaction, so it cannot hold statements PostgreSQL refuses there (CREATE INDEX CONCURRENTLY).
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads the embedded migrations of one engine in version order.
func loadMigrations(engine string) ([]migration, error) {
	return readMigrations(migrationFiles, path.Join("migrations", engine))
}

func readMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("store: migrations %s: %w", dir, err)
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name, so by version
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("store: migration %s/%s: name is not NNNN_name.sql", dir, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v != len(ms)+1 {
			return nil, fmt.Errorf("store: migration %s/%s: want version %d (versions start at 1 without gaps)", dir, e.Name(), len(ms)+1)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("store: migration %s/%s: %w", dir, e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: m[2], sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("store: no migrations in %s", dir)
	}
	return ms, nil
}

// LatestVersion is the newest schema version this binary knows for the store's engine.
func (s *Store) LatestVersion() int { return len(s.migrations) }

// Migrate applies the pending migrations in order, each in its own transaction, and returns the
// versions it applied (none when the schema was current). Two processes may migrate at once:
// each migration runs under a lock (PostgreSQL: an advisory lock on the schema; SQLite: the write
// lock) and starts by re-reading the version. A database newer than the binary is refused with
// ErrSchemaTooNew and left untouched.
func (s *Store) Migrate(ctx context.Context) (applied []int, err error) {
	latest := s.LatestVersion()
	for {
		var did *migration
		txErr := s.tx(ctx, func(tx *Tx) error {
			did = nil
			if s.d.lockMigrations != "" {
				if _, err := tx.tx.ExecContext(ctx, s.d.lockMigrations); err != nil {
					return s.wrap("lock migrations", err)
				}
			}
			if _, err := tx.tx.ExecContext(ctx, s.d.migrationsDDL); err != nil {
				return s.wrap("create schema_migrations", err)
			}
			cur, err := tx.schemaVersion(ctx)
			if err != nil {
				return err
			}
			if cur > latest {
				return s.tooNew(cur)
			}
			if cur == latest {
				return nil
			}
			m := s.migrations[cur] // version cur+1
			if _, err := tx.tx.ExecContext(ctx, m.sql); err != nil {
				return s.wrap(fmt.Sprintf("migration %04d_%s", m.version, m.name), err)
			}
			if _, err := tx.tx.ExecContext(ctx, s.d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
				m.version, m.name, ts(s.timeNow())); err != nil {
				return s.wrap("record migration", err)
			}
			did = &m
			return nil
		})
		if txErr != nil {
			return applied, txErr
		}
		if did == nil {
			s.migrated.Store(true)
			return applied, nil
		}
		s.log.InfoContext(ctx, "store: applied migration", "engine", s.d.name, "version", did.version, "name", did.name)
		applied = append(applied, did.version)
	}
}

// SchemaVersion is the newest migration applied to the database, 0 when none is.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return s.Queries.schemaVersion(ctx)
}

func (q *Queries) schemaVersion(ctx context.Context) (int, error) {
	var n int
	if err := q.db.QueryRowContext(ctx, q.s.d.rebind(q.s.d.tableExists), "schema_migrations").Scan(&n); err != nil {
		return 0, q.s.wrap("read schema version", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := q.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, q.s.wrap("read schema version", err)
	}
	return v, nil
}

// CheckSchema reports whether the database's schema is the one this binary knows: nil, or an
// error wrapping ErrNotMigrated (older or empty) or ErrSchemaTooNew (newer).
func (s *Store) CheckSchema(ctx context.Context) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	switch latest := s.LatestVersion(); {
	case v > latest:
		return s.tooNew(v)
	case v == 0:
		return fmt.Errorf("store: %w: %s has no schema; run `parley migrate`", ErrNotMigrated, s.where)
	case v < latest:
		return fmt.Errorf("store: %w: %s is at schema version %d, this binary needs %d; run `parley migrate`", ErrNotMigrated, s.where, v, latest)
	}
	return nil
}

func (s *Store) tooNew(v int) error {
	return fmt.Errorf("store: %w: %s is at schema version %d but this binary knows only up to version %d; run a newer parley",
		ErrSchemaTooNew, s.where, v, s.LatestVersion())
}

// MigrationStatus is one schema version: known to this binary, applied to the database, or both.
type MigrationStatus struct {
	Version   int
	Name      string
	Known     bool       // this binary carries the migration
	AppliedAt *time.Time // nil when the database does not have it yet
}

// Migrations lists every version this binary knows or the database has applied, in order, for
// `parley migrate` to show.
func (s *Store) Migrations(ctx context.Context) ([]MigrationStatus, error) {
	out := make([]MigrationStatus, 0, len(s.migrations))
	for _, m := range s.migrations {
		out = append(out, MigrationStatus{Version: m.version, Name: m.name, Known: true})
	}
	var n int
	if err := s.db.QueryRowContext(ctx, s.d.rebind(s.d.tableExists), "schema_migrations").Scan(&n); err != nil {
		return nil, s.wrap("list migrations", err)
	}
	if n == 0 {
		return out, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, s.wrap("list migrations", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m MigrationStatus
		var at time.Time
		if err := rows.Scan(&m.Version, &m.Name, timeCol{&at}); err != nil {
			return nil, s.wrap("list migrations", err)
		}
		if m.Version >= 1 && m.Version <= len(out) {
			out[m.Version-1].AppliedAt = &at
			continue
		}
		m.AppliedAt = &at
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list migrations", err)
	}
	return out, nil
}
