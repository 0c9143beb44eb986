package control

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// TestMasterKeyCheck: a start with a master key that does not open the store's secrets is
// refused with a one-line error, whether the store has a check value or only sealed secrets
// from before the check; the right key starts.
func TestMasterKeyCheck(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	open := func(cfg *config.Config) (*Node, error) { return NewNode(ctx, cfg, quietLog(), io.Discard) }
	n, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := secrets.LoadKey("", cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secrets.NewBox(key)
	if _, err := n.Store.CreateTrunk(ctx, box, store.NewTrunk{Name: "carrier", URI: "sip:127.0.0.1:5099", Username: "u", Password: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	n.Close()

	// The key file lost: a new key would be made; it opens nothing, so the start is refused and
	// the wrong key file is not left behind.
	keyFile := filepath.Join(cfg.DataDir, secrets.KeyFile)
	saved, _ := os.ReadFile(keyFile)
	os.Remove(keyFile)
	_, err = open(cfg)
	if !errors.Is(err, errWrongMasterKey) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("start with a lost key: %v", err)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Fatal("a wrong, new key file was left behind")
	}
	// Another key given in the environment: refused too.
	other := *cfg
	other.MasterKey = strings.Repeat("ab", 32)
	if _, err := open(&other); !errors.Is(err, errWrongMasterKey) {
		t.Fatalf("start with another key: %v", err)
	}
	// A store from before the check (sealed secrets, no check value) is judged by its secrets.
	os.WriteFile(keyFile, saved, 0o600)
	db, err := sql.Open("sqlite", filepath.Join(cfg.DataDir, "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM service_settings`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := open(&other); !errors.Is(err, errWrongMasterKey) {
		t.Fatalf("old store, another key: %v", err)
	}
	// The right key starts, and the trunk's password opens.
	n, err = open(cfg)
	if err != nil {
		t.Fatalf("start with the right key: %v", err)
	}
	defer n.Close()
	trunks, _ := n.Store.ListTrunks(ctx)
	if pw, err := trunks[0].Password(box); err != nil || pw != "s3cret" {
		t.Fatalf("password %q, %v", pw, err)
	}
}
