package store

import "errors"

// Sentinel errors. Every error the store returns wraps one of these (or a driver error) with %w,
// so callers compare with errors.Is and map them to an HTTP status in one place.
var (
	// ErrNotFound means the row does not exist. A malformed ID is reported as not found too, so
	// both engines answer alike.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint was violated (SQLite SQLITE_CONSTRAINT_UNIQUE or
	// PRIMARYKEY; PostgreSQL SQLSTATE 23505): a duplicate name or key.
	ErrConflict = errors.New("conflict")
	// ErrInvalid means the input was refused before it reached the database: an empty name, a
	// malformed ID, an unknown actor type and the like.
	ErrInvalid = errors.New("invalid input")
	// ErrSchemaTooNew means the database was migrated by a newer binary than this one. The
	// message names both versions. Upgrade the binary; never run an older one against it.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrNotMigrated means the database lacks migrations this binary needs: run `parley migrate`
	// (serve migrates on start).
	ErrNotMigrated = errors.New("database schema is not migrated")
)
