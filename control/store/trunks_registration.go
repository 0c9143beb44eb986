package store

// issue 21: a trunk's registration settings and each node's registration state.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TrunkRegistration is where and as what a trunk registers (empty Registrar: it does not).
// The digest credentials are the trunk's.
type TrunkRegistration struct {
	Registrar string // "sip:registrar[:port]"
	Backup    string // a second registrar for failover
	AOR       string // the address of record, "sip:user@domain"
	Proxy     string // an outbound proxy REGISTERs go through
	Expires   int    // seconds asked for; 0 means the default (300)
}

const trunkRegistrationCols = `reg_registrar, reg_backup, reg_aor, reg_proxy, reg_expires`

func checkTrunkRegistration(nt NewTrunk) error {
	r := nt.TrunkRegistration
	if r.Registrar == "" {
		if r.Backup != "" || r.AOR != "" || r.Proxy != "" || r.Expires != 0 {
			return fmt.Errorf("store: %w: registration settings without a registrar", ErrInvalid)
		}
		return nil
	}
	for name, u := range map[string]string{"registrar": r.Registrar, "backup registrar": r.Backup, "AOR": r.AOR, "proxy": r.Proxy} {
		if u == "" && name != "AOR" {
			continue
		}
		l := strings.ToLower(u)
		if !strings.HasPrefix(l, "sip:") && !strings.HasPrefix(l, "sips:") || strings.ContainsAny(u, " \t\r\n<>\"") || len(u) > 512 {
			return fmt.Errorf("store: %w: registration %s %q must be a sip: or sips: URI", ErrInvalid, name, u)
		}
	}
	if !strings.Contains(r.AOR, "@") {
		return fmt.Errorf("store: %w: registration AOR %q needs a user (sip:user@domain)", ErrInvalid, r.AOR)
	}
	if r.Expires < 0 || r.Expires > 86400 {
		return fmt.Errorf("store: %w: registration expiry %d s out of 0–86400", ErrInvalid, r.Expires)
	}
	return nil
}

// Registration states of a node's binding.
const (
	RegRegistering  = "registering"
	RegRegistered   = "registered"
	RegFailed       = "failed"
	RegUnregistered = "unregistered"
)

// RegistrationState is one node's binding for one trunk.
type RegistrationState struct {
	TrunkID   TrunkID
	NodeID    string
	State     string
	Registrar string
	Error     string // never a credential
	ExpiresAt *time.Time
	UpdatedAt time.Time
}

// SetRegistrationState records a node's registration state for a trunk (replacing the last).
func (q *Queries) SetRegistrationState(ctx context.Context, st RegistrationState) error {
	switch st.State {
	case RegRegistering, RegRegistered, RegFailed, RegUnregistered:
	default:
		return fmt.Errorf("store: %w: registration state %q", ErrInvalid, st.State)
	}
	if !validID(st.TrunkID) || st.NodeID == "" {
		return fmt.Errorf("store: %w: registration state needs a trunk and a node", ErrInvalid)
	}
	if len(st.Error) > 512 {
		st.Error = st.Error[:512]
	}
	now := q.s.timeNow()
	_, err := q.exec(ctx, "set registration state",
		`INSERT INTO sip_registrations (trunk_id, node_id, state, registrar, error, expires_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
		 ON CONFLICT (trunk_id, node_id) DO UPDATE SET state = excluded.state, registrar = excluded.registrar, error = excluded.error,
		 expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
		string(st.TrunkID), st.NodeID, st.State, st.Registrar, st.Error, nullTS(st.ExpiresAt), ts(now))
	return err
}

// ListRegistrationStates returns every node's registration state, by trunk then node.
func (q *Queries) ListRegistrationStates(ctx context.Context) ([]RegistrationState, error) {
	return list(ctx, q, "list registration states",
		`SELECT trunk_id, node_id, state, registrar, error, expires_at, updated_at FROM sip_registrations ORDER BY trunk_id, node_id`, nil,
		func(r rowScanner) (RegistrationState, error) {
			var st RegistrationState
			err := r.Scan(&st.TrunkID, &st.NodeID, &st.State, &st.Registrar, &st.Error, nullTimeCol{&st.ExpiresAt}, timeCol{&st.UpdatedAt})
			return st, err
		})
}

// RecordRegistrationState sets a node's registration state for trunk and, when the state or
// the registrar changed, inserts a trunk.registration event for every project with numbers on
// the trunk (events belong to an organization; trunks do not), in one transaction. It reports
// whether the state changed.
func (s *Store) RecordRegistrationState(ctx context.Context, trunk Trunk, st RegistrationState) (bool, error) {
	st.TrunkID = trunk.ID
	changed := false
	err := s.Tx(ctx, func(tx *Tx) error {
		var prevState, prevRegistrar string
		err := tx.get(ctx, "get registration state",
			`SELECT state, registrar FROM sip_registrations WHERE trunk_id = $1 AND node_id = $2`,
			[]any{string(trunk.ID), st.NodeID}, func(r rowScanner) error { return r.Scan(&prevState, &prevRegistrar) })
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		changed = prevState != st.State || prevRegistrar != st.Registrar
		if err := tx.SetRegistrationState(ctx, st); err != nil || !changed {
			return err
		}
		type target struct {
			org     OrgID
			project ProjectID
		}
		targets, err := list(ctx, tx.Queries, "projects of a trunk",
			`SELECT DISTINCT org_id, project_id FROM phone_numbers WHERE trunk = $1 ORDER BY org_id, project_id`, []any{trunk.Name},
			func(r rowScanner) (target, error) {
				var t target
				err := r.Scan(&t.org, &t.project)
				return t, err
			})
		if err != nil {
			return err
		}
		d := map[string]any{"trunk": trunk.Name, "trunk_id": trunk.ID, "node": st.NodeID, "state": st.State, "registrar": st.Registrar}
		if st.Error != "" {
			d["error"] = st.Error
		}
		if st.ExpiresAt != nil {
			d["expires_at"] = ts(*st.ExpiresAt) // six fractional digits, as every instant of the API
		}
		data, _ := json.Marshal(d)
		for _, t := range targets {
			if _, err := tx.InsertEvent(ctx, Event{OrgID: t.org, ProjectID: t.project, Mode: ModeLive, Type: "trunk.registration", Data: data}); err != nil {
				return err
			}
		}
		return nil
	})
	return changed, err
}
