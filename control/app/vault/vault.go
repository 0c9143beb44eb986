// Package vault holds the rules of the credential vault: secrets that tools, MCP servers and
// messaging-app senders use to reach their services. A secret's value is written once (create or
// update) and then only opened for an outbound request (Resolve).
//
// It must never return, log, audit or put in an event or an error a secret's value.
package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// Service serves the vault.
type Service struct {
	Store *store.Store
	// Box holds the master key (and, during a rotation, the previous ones).
	Box *secrets.Box
}

// View is the interface's form of a stored secret.
func View(s store.Secret) VaultSecret {
	v := VaultSecret{Object: "vault_secret", ID: string(s.ID), ProjectID: string(s.ProjectID), Name: s.Name, Description: s.Description,
		Type: string(s.Type), HeaderName: nullable(s.HeaderName), QueryName: nullable(s.QueryName), Username: nullable(s.Username),
		UsedBy: make([]VaultSecretUse, len(s.UsedBy)), CreatedAt: app.T(s.CreatedAt), UpdatedAt: app.T(s.UpdatedAt), LastUsedAt: app.TP(s.LastUsedAt)}
	for i, u := range s.UsedBy {
		v.UsedBy[i] = VaultSecretUse{Type: u.Type, ID: u.ID, Name: u.Name}
	}
	return v
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// notFound is the 404 of a secret.
func notFound(err error, id string) error {
	return app.NotFound(err, fault.CodeSecretNotFound, "vault secret", id)
}

// fieldError turns the store's refusal of a field into the 422 naming it.
func fieldError(err error, name string) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return fault.E(fault.CodeSecretNameTaken, "The project already has a vault secret named %q.", name)
	case errors.Is(err, store.ErrInvalid):
		msg := err.Error()
		if i := strings.LastIndex(msg, "invalid input: "); i >= 0 {
			msg = msg[i+len("invalid input: "):]
		}
		return fault.Invalid(fault.CodeValidationFailed, []fault.FieldError{{Pointer: "", Code: "invalid", Detail: "The secret does not fit: " + msg + "."}})
	}
	return err
}

// List returns a page of the actor's secrets, oldest first, with one more when another page follows.
func (s *Service) List(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]VaultSecret, error) {
	var sf store.SecretFilter
	var err error
	if sf.ProjectID, err = app.FilterProject(ctx, s.Store.Queries, act, f.ProjectID); err != nil {
		return nil, err
	}
	ss, err := s.Store.Vault().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]VaultSecret, len(ss))
	for i, x := range ss {
		out[i] = View(x)
	}
	return out, nil
}

// Get returns the actor's secret with id (never its value).
func (s *Service) Get(ctx context.Context, act app.Actor, id string) (VaultSecret, error) {
	x, err := s.Store.Vault().Get(ctx, act.Scope, store.SecretID(id))
	if err != nil {
		return VaultSecret{}, notFound(err, id)
	}
	return View(x), nil
}

// Create seals the value and stores the secret, recording vault_secret.created (without the value).
func (s *Service) Create(ctx context.Context, act app.Actor, c VaultSecretCreate) (VaultSecret, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (VaultSecret, error) {
		p, err := app.Project(ctx, tx.Queries, act, c.ProjectID)
		if err != nil {
			return VaultSecret{}, err
		}
		if err := app.Writable(p); err != nil {
			return VaultSecret{}, err
		}
		x, err := tx.Vault().Create(ctx, act.Scope, s.Box, store.NewSecret{ProjectID: p.ID, Name: c.Name, Description: c.Description,
			Type: store.SecretType(c.Type), HeaderName: deref(c.HeaderName), QueryName: deref(c.QueryName), Username: deref(c.Username), Value: c.Value})
		if err != nil {
			return VaultSecret{}, fieldError(err, c.Name)
		}
		if err := au.Record("vault_secret.created", "vault_secret", string(x.ID), x.ProjectID,
			map[string]any{"name": x.Name, "type": x.Type, "key_id": x.Sealed.KeyID}); err != nil {
			return VaultSecret{}, err
		}
		return View(x), nil
	})
}

// Update changes the secret, recording vault_secret.updated with the fields that changed (a
// new value is recorded as changed, never shown).
func (s *Service) Update(ctx context.Context, act app.Actor, id string, u VaultSecretUpdate) (VaultSecret, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (VaultSecret, error) {
		old, err := tx.Vault().Get(ctx, act.Scope, store.SecretID(id))
		if err != nil {
			return VaultSecret{}, notFound(err, id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, old.ProjectID); err != nil {
			return VaultSecret{}, err
		}
		c := store.SecretChange{Name: u.Name, Description: u.Description, Value: u.Value}
		if u.Type != nil {
			t := store.SecretType(*u.Type)
			c.Type = &t
		}
		patch := func(p app.Patch[string]) *string {
			if !p.Set {
				return nil
			}
			v := p.Value
			if p.Null {
				v = ""
			}
			return &v
		}
		c.HeaderName, c.QueryName, c.Username = patch(u.HeaderName), patch(u.QueryName), patch(u.Username)
		x, err := tx.Vault().Change(ctx, act.Scope, s.Box, old.ID, c)
		if err != nil {
			return VaultSecret{}, fieldError(err, deref(u.Name))
		}
		data := map[string]any{"name": x.Name}
		changed := func(field string, from, to any) {
			if from != to {
				data[field] = app.Changed(from, to)
			}
		}
		changed("name", old.Name, x.Name)
		changed("description", old.Description, x.Description)
		changed("type", string(old.Type), string(x.Type))
		changed("header_name", old.HeaderName, x.HeaderName)
		changed("query_name", old.QueryName, x.QueryName)
		changed("username", old.Username, x.Username)
		if u.Value != nil {
			data["value"] = "changed"
		}
		if err := au.Record("vault_secret.updated", "vault_secret", string(x.ID), x.ProjectID, data); err != nil {
			return VaultSecret{}, err
		}
		return View(x), nil
	})
}

// Delete removes the secret. One still in use is refused (409 vault_secret_in_use, naming its users).
func (s *Service) Delete(ctx context.Context, act app.Actor, id string) (VaultSecretDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (VaultSecretDeleted, error) {
		old, err := tx.Vault().Get(ctx, act.Scope, store.SecretID(id))
		if err != nil {
			return VaultSecretDeleted{}, notFound(err, id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, old.ProjectID); err != nil {
			return VaultSecretDeleted{}, err
		}
		x, err := tx.Vault().Delete(ctx, act.Scope, old.ID)
		var iu *store.SecretInUseError
		if errors.As(err, &iu) {
			names := make([]string, len(iu.Uses))
			users := make([]map[string]string, len(iu.Uses))
			for i, u := range iu.Uses {
				names[i] = fmt.Sprintf("%s %q", strings.ReplaceAll(u.Type, "_", " "), u.Name)
				users[i] = map[string]string{"type": u.Type, "id": u.ID, "name": u.Name}
			}
			e := fault.E(fault.CodeSecretInUse, "The vault secret %q is used by %s; change them to use another secret, or delete them, first.", old.Name, strings.Join(names, ", "))
			e.Extra = map[string]any{"used_by": users}
			return VaultSecretDeleted{}, e
		}
		if err != nil {
			return VaultSecretDeleted{}, notFound(err, id)
		}
		if err := au.Record("vault_secret.deleted", "vault_secret", string(x.ID), x.ProjectID, map[string]any{"name": x.Name}); err != nil {
			return VaultSecretDeleted{}, err
		}
		return VaultSecretDeleted{Object: "vault_secret", ID: string(x.ID), Deleted: true}, nil
	})
}

// Resolve opens the secret id of the scope for an outbound request and sets its last_used_at
// (at most once a minute). The Credential never prints its value (see Credential).
func (s *Service) Resolve(ctx context.Context, sc store.Scope, id store.SecretID) (Credential, error) {
	x, err := s.Store.Vault().Get(ctx, sc, id)
	if err != nil {
		return Credential{}, fmt.Errorf("vault: secret %s: %w", id, err)
	}
	v, err := x.Open(s.Box)
	if err != nil {
		return Credential{}, fmt.Errorf("vault: %w", err)
	}
	if err := s.Store.Vault().Touch(ctx, sc, id); err != nil {
		clear(v)
		return Credential{}, fmt.Errorf("vault: secret %s: %w", id, err)
	}
	return Credential{ID: x.ID, Name: x.Name, Type: x.Type, HeaderName: x.HeaderName, QueryName: x.QueryName, Username: x.Username, value: string(v)}, nil
}

// Link records, in the transaction tx that saves user (of project p), that it uses the secrets
// ids (replacing what it used before; none clears). A secret the actor does not reach in p is
// 404 vault_secret_not_found.
func Link(ctx context.Context, tx *store.Tx, act app.Actor, p store.ProjectID, user store.SecretUse, ids ...string) error {
	sids := make([]store.SecretID, 0, len(ids))
	for _, id := range ids {
		if id == "" {
			continue
		}
		sid, err := store.ParseID[store.SecretID](id)
		if err != nil {
			return fault.E(fault.CodeSecretNotFound, "No vault secret %s is reachable with this key in the project.", app.QuoteID(id))
		}
		sids = append(sids, sid)
	}
	err := tx.Vault().SetUses(ctx, act.Scope, p, user, sids)
	if errors.Is(err, store.ErrNotFound) {
		return fault.E(fault.CodeSecretNotFound, "A vault secret named by the %s is not reachable with this key in its project.", strings.ReplaceAll(user.Type, "_", " "))
	}
	return err
}

// Unlink records, in the transaction that deletes user, that it uses no secret any more.
func Unlink(ctx context.Context, tx *store.Tx, act app.Actor, user store.SecretUse) error {
	return tx.Vault().ClearUses(ctx, act.Scope, user)
}
