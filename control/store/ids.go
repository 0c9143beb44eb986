package store

import (
	"fmt"

	"github.com/google/uuid"
)

// Typed IDs. Each holds a UUIDv7 in its canonical lowercase 36-character form, so IDs sort by
// creation time both as text (SQLite) and as uuid (PostgreSQL compares the bytes), which list
// pagination relies on.
type (
	OrgID      string // an organization
	ProjectID  string // a project inside an organization
	KeyID      string // an API key
	AuditID    string // an audit event
	CreditTxID string // a credit transaction
)

// ParseID checks that s is a UUID and returns it as a T in canonical lowercase form. Use it on
// every ID that comes from outside (URL paths, flags, JSON bodies): a repository method given a
// non-canonical ID reports ErrNotFound.
func ParseID[T ~string](s string) (T, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return "", fmt.Errorf("store: %w: %q is not a UUID", ErrInvalid, s)
	}
	return T(u.String()), nil
}

// newID returns a fresh UUIDv7. uuid.NewV7 only fails when crypto/rand fails, which since Go 1.24
// crashes the program instead of returning, so the error cannot happen.
func newID[T ~string]() T {
	return T(uuid.Must(uuid.NewV7()).String())
}

// validID reports whether s is a UUID in canonical lowercase form.
func validID[T ~string](s T) bool {
	if len(s) != 36 {
		return false
	}
	u, err := uuid.Parse(string(s))
	return err == nil && u.String() == string(s)
}
