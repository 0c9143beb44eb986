package store

import (
	"context"
	"fmt"
)

// Service-wide settings the store keeps for the service itself (not for a customer): the
// master key's check value, say. Names are fixed by the code that uses them.

// SettingMasterKeyCheck holds a value sealed under the master key (secrets.Box.CheckValue).
const SettingMasterKeyCheck = "master_key_check"

// GetSetting returns a setting's value, or ErrNotFound.
func (q *Queries) GetSetting(ctx context.Context, name string) (string, error) {
	var v string
	err := q.get(ctx, "get setting", `SELECT value FROM service_settings WHERE name = $1`, []any{name},
		func(r rowScanner) error { return r.Scan(&v) })
	return v, err
}

// PutSettingOnce stores a setting unless it is set already, and returns the value it has
// afterwards (the one stored first when two nodes race).
func (q *Queries) PutSettingOnce(ctx context.Context, name, value string) (string, error) {
	if name == "" || value == "" {
		return "", fmt.Errorf("store: %w: a setting needs a name and a value", ErrInvalid)
	}
	if _, err := q.exec(ctx, "put setting",
		`INSERT INTO service_settings (name, value, updated_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
		name, value, ts(q.s.timeNow())); err != nil {
		return "", err
	}
	return q.GetSetting(ctx, name)
}

// PutSetting stores a setting, replacing its value (a master key rotation's new check value).
func (q *Queries) PutSetting(ctx context.Context, name, value string) error {
	if name == "" || value == "" {
		return fmt.Errorf("store: %w: a setting needs a name and a value", ErrInvalid)
	}
	_, err := q.exec(ctx, "put setting",
		`INSERT INTO service_settings (name, value, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		name, value, ts(q.s.timeNow()))
	return err
}
