package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mode says whether a key acts for real (live) or in rehearsal (test): a test key places no real
// call and reaches nobody.
type Mode string

// Key modes.
const (
	ModeLive Mode = "live"
	ModeTest Mode = "test"
)

// ScopeAll grants every scope.
const ScopeAll = "*"

// Key is an API key. Its secret is never stored: only the SHA-256 hash of it, next to Prefix, the
// short visible start of the secret that lists show so that people can tell keys apart.
type Key struct {
	ID          KeyID
	OrgID       OrgID
	Name        string
	Mode        Mode
	Prefix      string   // e.g. "sk_live_AbCd1234"
	Scopes      []string // permissions such as "agents:read"; "*" grants all
	AllProjects bool     // reaches every project of the organization, now and later
	ProjectIDs  []ProjectID
	ExpiresAt   *time.Time
	RevokedAt   *time.Time
	LastUsedAt  *time.Time // updated at most once a minute by TouchKey
	CreatedAt   time.Time
}

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return k.RevokedAt != nil }

// Expired reports whether the key has expired at now.
func (k Key) Expired(now time.Time) bool { return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) }

// Reaches reports whether the key may act on project p.
func (k Key) Reaches(p ProjectID) bool { return k.AllProjects || slices.Contains(k.ProjectIDs, p) }

// HasScope reports whether the key holds the permission scope (or "*").
func (k Key) HasScope(scope string) bool {
	return slices.Contains(k.Scopes, scope) || slices.Contains(k.Scopes, ScopeAll)
}

// NewKey describes a key to create.
type NewKey struct {
	OrgID       OrgID
	Name        string
	Test        bool // a test key rather than a live one
	Scopes      []string
	AllProjects bool        // reach every project; then ProjectIDs must be empty
	ProjectIDs  []ProjectID // the projects reached when AllProjects is false; at least one
	ExpiresAt   *time.Time  // nil never expires; otherwise in the future
}

// Secret format: "sk_live_" or "sk_test_", then secretLen base62 characters chosen uniformly by
// crypto/rand: 43 × log2(62) ≈ 256.03 bits, as strong as 32 random bytes.
const (
	secretLen     = 43
	visibleLen    = 8 // characters of the random part kept in Key.Prefix
	base62        = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	keyPrefixLive = "sk_live_"
	keyPrefixTest = "sk_test_"
)

// newSecret returns a fresh secret for mode.
func newSecret(m Mode) string {
	var b strings.Builder
	b.WriteString("sk_" + string(m) + "_")
	buf := make([]byte, 64)
	for n := 0; n < secretLen; {
		rand.Read(buf) // never fails (Go 1.24+)
		for _, c := range buf {
			// 248 = 4×62: dropping bytes ≥ 248 keeps every character equally likely.
			if c < 248 && n < secretLen {
				b.WriteByte(base62[c%62])
				n++
			}
		}
	}
	return b.String()
}

// parseSecret reports the mode of a well-formed secret.
func parseSecret(s string) (Mode, bool) {
	var m Mode
	switch {
	case strings.HasPrefix(s, keyPrefixLive):
		m = ModeLive
	case strings.HasPrefix(s, keyPrefixTest):
		m = ModeTest
	default:
		return "", false
	}
	body := s[len(keyPrefixLive):]
	if len(body) != secretLen {
		return "", false
	}
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(base62, body[i]) < 0 {
			return "", false
		}
	}
	return m, true
}

// hashSecret is what the store keeps of a secret: its SHA-256, in hex. The secret carries 256
// random bits, so a fast unsalted hash is enough; no password-style stretching is needed.
func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

const keyCols = `id, org_id, name, mode, prefix, scopes, all_projects, project_ids, expires_at, revoked_at, last_used_at, created_at`

func scanKey(r rowScanner) (Key, error) {
	var k Key
	err := r.Scan(&k.ID, &k.OrgID, &k.Name, &k.Mode, &k.Prefix, jsonCol{&k.Scopes}, &k.AllProjects, jsonCol{&k.ProjectIDs},
		nullTimeCol{&k.ExpiresAt}, nullTimeCol{&k.RevokedAt}, nullTimeCol{&k.LastUsedAt}, timeCol{&k.CreatedAt})
	return k, err
}

// CreateKey creates an API key and returns it with its secret, which is shown once and never
// again. Every project the key reaches must belong to its organization.
func (q *Queries) CreateKey(ctx context.Context, nk NewKey) (Key, string, error) {
	if err := checkName("key", nk.Name); err != nil {
		return Key{}, "", err
	}
	if !validID(nk.OrgID) {
		return Key{}, "", notFound("organization", nk.OrgID)
	}
	scopes, err := checkScopes(nk.Scopes)
	if err != nil {
		return Key{}, "", err
	}
	now := q.s.timeNow()
	switch {
	case nk.AllProjects && len(nk.ProjectIDs) > 0:
		return Key{}, "", fmt.Errorf("store: %w: a key reaches all projects or the ones listed, not both", ErrInvalid)
	case !nk.AllProjects && len(nk.ProjectIDs) == 0:
		return Key{}, "", fmt.Errorf("store: %w: a key must reach all projects or at least one", ErrInvalid)
	case nk.ExpiresAt != nil && !nk.ExpiresAt.After(now):
		return Key{}, "", fmt.Errorf("store: %w: expiry %s is not in the future", ErrInvalid, nk.ExpiresAt.UTC().Format(time.RFC3339))
	}
	projects := make([]ProjectID, 0, len(nk.ProjectIDs))
	for _, p := range nk.ProjectIDs {
		if !validID(p) {
			return Key{}, "", notFound("project", p)
		}
		if !slices.Contains(projects, p) {
			projects = append(projects, p)
		}
	}
	mode := ModeLive
	if nk.Test {
		mode = ModeTest
	}
	secret := newSecret(mode)
	k := Key{
		ID: newID[KeyID](), OrgID: nk.OrgID, Name: nk.Name, Mode: mode,
		Prefix: secret[:len(keyPrefixLive)+visibleLen],
		Scopes: scopes, AllProjects: nk.AllProjects, ProjectIDs: projects, CreatedAt: now,
	}
	if nk.ExpiresAt != nil {
		t := normTime(*nk.ExpiresAt)
		k.ExpiresAt = &t
	}
	scopesJSON, err := jsonText(k.Scopes)
	if err != nil {
		return Key{}, "", err
	}
	projectsJSON, err := jsonText(k.ProjectIDs)
	if err != nil {
		return Key{}, "", err
	}
	err = q.atomic(ctx, func(q *Queries) error {
		if _, err := q.GetOrg(ctx, nk.OrgID); err != nil {
			return err
		}
		for _, id := range projects {
			p, err := q.GetProject(ctx, id)
			if err != nil {
				return err
			}
			if p.OrgID != nk.OrgID {
				return fmt.Errorf("store: project %s of organization %s: %w", id, nk.OrgID, ErrNotFound)
			}
		}
		_, err := q.exec(ctx, "create key",
			`INSERT INTO api_keys (id, org_id, name, mode, prefix, hash, scopes, all_projects, project_ids, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			string(k.ID), string(k.OrgID), k.Name, string(k.Mode), k.Prefix, hashSecret(secret), scopesJSON,
			k.AllProjects, projectsJSON, nullTS(k.ExpiresAt), ts(now))
		return err
	})
	if err != nil {
		return Key{}, "", err
	}
	return k, secret, nil
}

// checkScopes refuses malformed scopes and drops duplicates. Which scopes exist is the API's
// business, not the store's.
func checkScopes(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s == "" || len(s) > 64 || strings.IndexFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(":_.-*", r))
		}) >= 0 {
			return nil, fmt.Errorf("store: %w: scope %q (want lowercase letters, digits and :_.-*)", ErrInvalid, s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// LookupKey finds the key whose secret this is, or ErrNotFound. It does not judge the key: the
// caller checks Revoked, Expired, Reaches and HasScope.
func (q *Queries) LookupKey(ctx context.Context, secret string) (Key, error) {
	if _, ok := parseSecret(secret); !ok {
		return Key{}, fmt.Errorf("store: key: %w", ErrNotFound)
	}
	var k Key
	err := q.get(ctx, "look up key", `SELECT `+keyCols+` FROM api_keys WHERE hash = $1`, []any{hashSecret(secret)},
		func(r rowScanner) (err error) { k, err = scanKey(r); return err })
	return k, err
}

// GetKey returns the key with id, or ErrNotFound.
func (q *Queries) GetKey(ctx context.Context, id KeyID) (Key, error) {
	if !validID(id) {
		return Key{}, notFound("key", id)
	}
	var k Key
	err := q.get(ctx, "get key", `SELECT `+keyCols+` FROM api_keys WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { k, err = scanKey(r); return err })
	return k, err
}

// ListKeys returns an organization's keys, revoked ones included, oldest first.
func (q *Queries) ListKeys(ctx context.Context, org OrgID) ([]Key, error) {
	if !validID(org) {
		return nil, nil
	}
	return list(ctx, q, "list keys", `SELECT `+keyCols+` FROM api_keys WHERE org_id = $1 ORDER BY id`,
		[]any{string(org)}, scanKey)
}

// RevokeKey revokes a key. Revoking it again changes nothing and is not an error; an unknown key
// is ErrNotFound.
func (q *Queries) RevokeKey(ctx context.Context, id KeyID) error {
	if !validID(id) {
		return notFound("key", id)
	}
	res, err := q.exec(ctx, "revoke key", `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`,
		string(id), ts(q.s.timeNow()))
	return affectedOne(res, err, "key", id)
}

// touchEvery is how stale last_used_at must be before TouchKey writes it again, so that a busy
// key costs one write a minute, not one per request.
const touchEvery = time.Minute

// TouchKey records when the key was last used. It writes at most once a minute per key, so the
// auth path can call it on every request, and is silent about unknown keys.
func (q *Queries) TouchKey(ctx context.Context, id KeyID, at time.Time) error {
	if !validID(id) {
		return nil
	}
	_, err := q.exec(ctx, "touch key",
		`UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)`,
		string(id), ts(at), ts(at.Add(-touchEvery)))
	return err
}
