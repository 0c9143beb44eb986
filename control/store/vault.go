package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parley-voice/parley/control/secrets"
)

// SecretID names a vault secret.
type SecretID string

// SecretType says how a secret is applied to an outbound request.
type SecretType string

// The types of secret.
const (
	SecretBearer SecretType = "bearer" // Authorization: Bearer <value>
	SecretHeader SecretType = "header" // <HeaderName>: <value>
	SecretBasic  SecretType = "basic"  // Authorization: Basic base64(<Username>:<value>)
	SecretQuery  SecretType = "query"  // ?<QueryName>=<value>
)

// Secret is a credential in the vault of a project. Its value is kept sealed (envelope
// encryption, see secrets.Envelope) and opens only with Secret.Open; nothing else of the store
// ever holds it in clear.
type Secret struct {
	ID          SecretID
	OrgID       OrgID
	ProjectID   ProjectID
	Name        string
	Description string
	Type        SecretType
	HeaderName  string // the header of a header secret
	QueryName   string // the query parameter of a query secret
	Username    string // the user name of a basic secret (the value is the password)
	Sealed      secrets.Envelope
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastUsedAt  *time.Time
	// UsedBy lists what references the secret (filled by Get and List).
	UsedBy []SecretUse
}

// SecretUse is one user of a secret: a tool, an MCP server, a messaging-app sender, …
type SecretUse struct {
	Type string // "tool", "mcp_server", "whatsapp_sender", …
	ID   string
	Name string
}

// NewSecret describes a secret to create.
type NewSecret struct {
	ProjectID   ProjectID
	Name        string
	Description string
	Type        SecretType
	HeaderName  string
	QueryName   string
	Username    string
	Value       string // sealed with the box given to Create; never stored in clear
}

// SecretChange changes a secret; nil members are left as they are.
type SecretChange struct {
	Name        *string
	Description *string
	Type        *SecretType
	HeaderName  *string
	QueryName   *string
	Username    *string
	Value       *string // a new value, sealed under a new data key
}

// SecretFilter narrows a list of secrets.
type SecretFilter struct {
	ProjectID ProjectID
}

// ErrInUse is wrapped by SecretInUseError: the secret is referenced and cannot be deleted.
var ErrInUse = errors.New("in use")

// SecretInUseError names the users of a secret that was to be deleted.
type SecretInUseError struct{ Uses []SecretUse }

func (e *SecretInUseError) Error() string {
	names := make([]string, len(e.Uses))
	for i, u := range e.Uses {
		names[i] = u.Type + " " + u.Name
	}
	return "store: the secret is used by " + strings.Join(names, ", ")
}

func (e *SecretInUseError) Unwrap() error { return ErrInUse }

// Limits of secrets.
const (
	MaxSecretValue = 8192 // bytes
	maxSecretField = 256  // header, query parameter and user names, in characters
	maxDescription = 500  // characters
)

// VaultAAD is the additional authenticated data of a secret's value and data key: it binds
// them to the organization and the secret, so a sealed value moved to another row or
// organization does not open.
func VaultAAD(org OrgID, id SecretID) []byte {
	return []byte("vault:" + string(org) + ":" + string(id))
}

// Open returns the secret's value in clear. The caller uses it for one outbound request and
// never logs or returns it.
func (s Secret) Open(box *secrets.Box) ([]byte, error) {
	if box == nil {
		return nil, fmt.Errorf("store: secret %s: no master key to open it", s.ID)
	}
	v, err := box.OpenEnvelope(s.Sealed, VaultAAD(s.OrgID, s.ID))
	if err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", s.ID, err)
	}
	return v, nil
}

const secretCols = `id, org_id, project_id, name, description, type, header_name, query_name, username, key_id, data_key_wrapped, value_sealed, created_at, updated_at, last_used_at`

func scanSecret(r rowScanner) (Secret, error) {
	var s Secret
	err := r.Scan(&s.ID, &s.OrgID, &s.ProjectID, &s.Name, &s.Description, &s.Type, &s.HeaderName, &s.QueryName, &s.Username,
		&s.Sealed.KeyID, &s.Sealed.WrappedKey, &s.Sealed.Ciphertext, timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt}, nullTimeCol{&s.LastUsedAt})
	return s, err
}

// isToken reports whether s is an HTTP token (RFC 9110 section 5.6.2), as header names are.
func isToken(s string) bool {
	if s == "" || len(s) > maxSecretField {
		return false
	}
	for _, r := range s {
		if r > 126 || r <= 32 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

func printable(s string, max int) bool {
	return utf8.ValidString(s) && utf8.RuneCountInString(s) <= max && strings.IndexFunc(s, unicode.IsControl) < 0
}

// checkSecret validates a secret's fields (value: nil when it is left as it is).
func checkSecret(name, desc string, t SecretType, header, query, user string, value *string) error {
	if err := checkName("secret", name); err != nil {
		return err
	}
	if !printable(desc, maxDescription) {
		return fmt.Errorf("store: %w: a description is at most %d characters without control characters", ErrInvalid, maxDescription)
	}
	switch t {
	case SecretBearer, SecretBasic, SecretHeader, SecretQuery:
	default:
		return fmt.Errorf("store: %w: secret type %q (want bearer, header, basic or query)", ErrInvalid, t)
	}
	if (t == SecretHeader) != (header != "") || (header != "" && !isToken(header)) {
		return fmt.Errorf("store: %w: a header secret, and only it, names its header, an HTTP token", ErrInvalid)
	}
	if (t == SecretQuery) != (query != "") || !printable(query, maxSecretField) {
		return fmt.Errorf("store: %w: a query secret, and only it, names its query parameter", ErrInvalid)
	}
	if (t == SecretBasic) != (user != "") || !printable(user, maxSecretField) || strings.Contains(user, ":") {
		return fmt.Errorf("store: %w: a basic secret, and only it, has a user name, without a colon", ErrInvalid)
	}
	if value != nil {
		if *value == "" || len(*value) > MaxSecretValue || !utf8.ValidString(*value) || strings.IndexFunc(*value, unicode.IsControl) >= 0 {
			return fmt.Errorf("store: %w: a secret's value is 1 to %d bytes of UTF-8 without control characters", ErrInvalid, MaxSecretValue)
		}
	}
	return nil
}

// Vault is the repository of vault secrets.
type Vault struct{ q *Queries }

// Vault returns the vault repository.
func (q *Queries) Vault() Vault { return Vault{q} }

func scopedSecrets(sc Scope) *sel {
	return newSel(`SELECT `+secretCols+` FROM vault_secrets`).scope(sc, "org_id", "project_id", "")
}

// Get returns the scope's secret with id, with its users, or ErrNotFound.
func (r Vault) Get(ctx context.Context, sc Scope, id SecretID) (Secret, error) {
	s, err := one(ctx, r.q, "get secret", scopedSecrets(sc).id("id", string(id)), scanSecret)
	if err != nil {
		return Secret{}, err
	}
	err = r.fillUses(ctx, []*Secret{&s})
	return s, err
}

// List returns the scope's secrets that f selects, oldest first, with their users: a page of
// up to pg.Limit, and one more when another page follows.
func (r Vault) List(ctx context.Context, sc Scope, f SecretFilter, pg Page) ([]Secret, error) {
	b := scopedSecrets(sc).optID("project_id", string(f.ProjectID))
	ss, err := many(ctx, r.q, "list secrets", b, b.page("id", pg, false), scanSecret)
	if err != nil {
		return nil, err
	}
	ps := make([]*Secret, len(ss))
	for i := range ss {
		ps[i] = &ss[i]
	}
	return ss, r.fillUses(ctx, ps)
}

// fillUses loads the users of each secret.
func (r Vault) fillUses(ctx context.Context, ss []*Secret) error {
	if len(ss) == 0 {
		return nil
	}
	ph := make([]string, len(ss))
	args := make([]any, len(ss))
	byID := make(map[SecretID]*Secret, len(ss))
	for i, s := range ss {
		ph[i] = fmt.Sprintf("$%d", i+1)
		args[i] = string(s.ID)
		byID[s.ID] = s
		s.UsedBy = []SecretUse{}
	}
	type row struct {
		id SecretID
		u  SecretUse
	}
	rows, err := list(ctx, r.q, "list secret uses",
		`SELECT secret_id, user_type, user_id, user_name FROM vault_secret_uses WHERE secret_id IN (`+strings.Join(ph, ", ")+`) ORDER BY user_type, user_name, user_id`,
		args, func(rs rowScanner) (row, error) {
			var x row
			return x, rs.Scan(&x.id, &x.u.Type, &x.u.ID, &x.u.Name)
		})
	if err != nil {
		return err
	}
	for _, x := range rows {
		if s := byID[x.id]; s != nil {
			s.UsedBy = append(s.UsedBy, x.u)
		}
	}
	return nil
}

// Create seals the value with box under a new data key and stores the secret in a project the
// scope reaches. A name the project has is ErrConflict; a project outside the scope ErrNotFound.
func (r Vault) Create(ctx context.Context, sc Scope, box *secrets.Box, ns NewSecret) (Secret, error) {
	if err := checkSecret(ns.Name, ns.Description, ns.Type, ns.HeaderName, ns.QueryName, ns.Username, &ns.Value); err != nil {
		return Secret{}, err
	}
	if box == nil {
		return Secret{}, fmt.Errorf("store: %w: a secret needs the master key", ErrInvalid)
	}
	var s Secret
	err := r.q.atomic(ctx, func(q *Queries) error {
		p, err := q.Projects().Get(ctx, sc, ns.ProjectID)
		if err != nil {
			return err
		}
		now := q.s.timeNow()
		s = Secret{ID: newID[SecretID](), OrgID: p.OrgID, ProjectID: p.ID, Name: ns.Name, Description: ns.Description,
			Type: ns.Type, HeaderName: ns.HeaderName, QueryName: ns.QueryName, Username: ns.Username,
			CreatedAt: now, UpdatedAt: now, UsedBy: []SecretUse{}}
		if s.Sealed, err = box.SealEnvelope([]byte(ns.Value), VaultAAD(s.OrgID, s.ID)); err != nil {
			return fmt.Errorf("store: seal secret: %w", err)
		}
		_, err = q.exec(ctx, "create secret",
			`INSERT INTO vault_secrets (id, org_id, project_id, name, name_key, description, type, header_name, query_name, username, key_id, data_key_wrapped, value_sealed, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			string(s.ID), string(s.OrgID), string(s.ProjectID), s.Name, nameKey(s.Name), s.Description, string(s.Type),
			s.HeaderName, s.QueryName, s.Username, s.Sealed.KeyID, s.Sealed.WrappedKey, s.Sealed.Ciphertext, ts(now), ts(now))
		return err
	})
	if err != nil {
		return Secret{}, err
	}
	return s, nil
}

// Change changes the scope's secret and returns it as changed; a new value is sealed with box
// under a new data key. Changing the type clears the fields of the old type unless c sets them.
func (r Vault) Change(ctx context.Context, sc Scope, box *secrets.Box, id SecretID, c SecretChange) (Secret, error) {
	var s Secret
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if s, err = q.Vault().Get(ctx, sc, id); err != nil {
			return err
		}
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = *v
			}
		}
		set(&s.Name, c.Name)
		set(&s.Description, c.Description)
		if c.Type != nil && *c.Type != s.Type {
			s.Type = *c.Type
			s.HeaderName, s.QueryName, s.Username = "", "", ""
		}
		set(&s.HeaderName, c.HeaderName)
		set(&s.QueryName, c.QueryName)
		set(&s.Username, c.Username)
		if err := checkSecret(s.Name, s.Description, s.Type, s.HeaderName, s.QueryName, s.Username, c.Value); err != nil {
			return err
		}
		if c.Value != nil {
			if box == nil {
				return fmt.Errorf("store: %w: a secret needs the master key", ErrInvalid)
			}
			if s.Sealed, err = box.SealEnvelope([]byte(*c.Value), VaultAAD(s.OrgID, s.ID)); err != nil {
				return fmt.Errorf("store: seal secret: %w", err)
			}
		}
		s.UpdatedAt = q.s.timeNow()
		res, err := q.exec(ctx, "change secret",
			`UPDATE vault_secrets SET name = $2, name_key = $3, description = $4, type = $5, header_name = $6, query_name = $7, username = $8,
			key_id = $9, data_key_wrapped = $10, value_sealed = $11, updated_at = $12 WHERE id = $1`,
			string(s.ID), s.Name, nameKey(s.Name), s.Description, string(s.Type), s.HeaderName, s.QueryName, s.Username,
			s.Sealed.KeyID, s.Sealed.WrappedKey, s.Sealed.Ciphertext, ts(s.UpdatedAt))
		return affectedOne(res, err, "secret", id)
	})
	if err != nil {
		return Secret{}, err
	}
	return s, nil
}

// Delete removes the scope's secret and returns it. A secret something still uses is a
// *SecretInUseError (wrapping ErrInUse) naming the users.
func (r Vault) Delete(ctx context.Context, sc Scope, id SecretID) (Secret, error) {
	var s Secret
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if s, err = q.Vault().Get(ctx, sc, id); err != nil {
			return err
		}
		if len(s.UsedBy) > 0 {
			return &SecretInUseError{Uses: s.UsedBy}
		}
		res, err := q.exec(ctx, "delete secret", `DELETE FROM vault_secrets WHERE id = $1`, string(id))
		return affectedOne(res, err, "secret", id)
	})
	return s, err
}

// Touch sets the secret's last_used_at to now, unless it was set less than a minute before
// (a secret used by every turn of many calls is written once a minute at most).
func (r Vault) Touch(ctx context.Context, sc Scope, id SecretID) error {
	now := r.q.s.timeNow()
	b := newSel(`UPDATE vault_secrets SET last_used_at = $1`)
	b.arg(ts(now))
	b.scope(sc, "org_id", "project_id", "").id("id", string(id))
	if b.err != nil || b.empty {
		return b.err
	}
	b.cond("(last_used_at IS NULL OR last_used_at < ?)", ts(now.Add(-time.Minute)))
	_, err := r.q.exec(ctx, "touch secret", b.sql(), b.args...)
	return err
}

// SetUses makes ids the secrets that user (of project p) uses, replacing what it used before.
// Each secret must be one of the scope's, in project p: another is ErrNotFound. Call it in the
// transaction that saves the user.
func (r Vault) SetUses(ctx context.Context, sc Scope, p ProjectID, user SecretUse, ids []SecretID) error {
	if user.Type == "" || user.ID == "" {
		return fmt.Errorf("store: %w: a secret's user has a type and an id", ErrInvalid)
	}
	return r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.exec(ctx, "clear secret uses", `DELETE FROM vault_secret_uses WHERE user_type = $1 AND user_id = $2 AND org_id = $3`,
			user.Type, user.ID, string(sc.Org)); err != nil {
			return err
		}
		seen := map[SecretID]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			s, err := one(ctx, q, "get secret", scopedSecrets(sc).id("id", string(id)), scanSecret)
			if err != nil {
				return err
			}
			if s.ProjectID != p {
				return notFound("secret", id)
			}
			if _, err := q.exec(ctx, "add secret use",
				`INSERT INTO vault_secret_uses (secret_id, org_id, user_type, user_id, user_name) VALUES ($1, $2, $3, $4, $5)`,
				string(s.ID), string(s.OrgID), user.Type, user.ID, user.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// ClearUses removes every use of user (when it is deleted).
func (r Vault) ClearUses(ctx context.Context, sc Scope, user SecretUse) error {
	_, err := r.q.exec(ctx, "clear secret uses", `DELETE FROM vault_secret_uses WHERE user_type = $1 AND user_id = $2 AND org_id = $3`,
		user.Type, user.ID, string(sc.Org))
	return err
}

// RotateMasterKey re-wraps, in batches, every data key of the vault that box's primary key did
// not wrap, and re-seals the trunk passwords and the master key check under it. Values are not
// re-encrypted. It returns how many data keys and sealed values it changed. Every key that
// wrapped something must be in box (the new one first, the old ones after).
func (s *Store) RotateMasterKey(ctx context.Context, box *secrets.Box) (rewrapped, resealed int, err error) {
	primary := box.KeyID()
	for {
		var n int
		err := s.Tx(ctx, func(tx *Tx) error {
			n = 0
			ss, err := list(ctx, tx.Queries, "list secrets to rewrap",
				`SELECT `+secretCols+` FROM vault_secrets WHERE key_id <> $1 ORDER BY id LIMIT 200`, []any{primary}, scanSecret)
			if err != nil {
				return err
			}
			for _, sec := range ss {
				e, changed, err := box.Rewrap(sec.Sealed, VaultAAD(sec.OrgID, sec.ID))
				if err != nil {
					return fmt.Errorf("store: secret %s: %w", sec.ID, err)
				}
				if !changed {
					continue
				}
				if _, err := tx.exec(ctx, "rewrap secret", `UPDATE vault_secrets SET key_id = $2, data_key_wrapped = $3 WHERE id = $1`,
					string(sec.ID), e.KeyID, e.WrappedKey); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return rewrapped, resealed, err
		}
		rewrapped += n
		if n == 0 {
			break
		}
	}
	err = s.Tx(ctx, func(tx *Tx) error {
		resealed = 0
		trunks, err := tx.ListTrunks(ctx)
		if err != nil {
			return err
		}
		for _, t := range trunks {
			if !t.HasPassword() {
				continue
			}
			v, changed, err := box.Resealed(t.PasswordSealed, trunkAAD(t.ID))
			if err != nil {
				return fmt.Errorf("store: trunk %s password: %w", t.Name, err)
			}
			if changed {
				if _, err := tx.exec(ctx, "reseal trunk password", `UPDATE sip_trunks SET password_sealed = $2 WHERE id = $1`, string(t.ID), v); err != nil {
					return err
				}
				resealed++
			}
		}
		check, err := box.CheckValue()
		if err != nil {
			return err
		}
		return tx.PutSetting(ctx, SettingMasterKeyCheck, check)
	})
	return rewrapped, resealed, err
}

// DataKeysByMasterKey counts the vault's data keys by the id of the master key that wrapped them.
func (s *Store) DataKeysByMasterKey(ctx context.Context) (map[string]int, error) {
	type row struct {
		id string
		n  int
	}
	rows, err := list(ctx, s.Queries, "count data keys", `SELECT key_id, COUNT(*) FROM vault_secrets GROUP BY key_id`, nil,
		func(r rowScanner) (row, error) { var x row; return x, r.Scan(&x.id, &x.n) })
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, x := range rows {
		out[x.id] = x.n
	}
	return out, nil
}
