package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// TestAdminMasterKeyRotate: `parley admin master-key rotate` with the key file makes a new
// key, keeps the old one accepted, re-wraps every vault data key (the values are not
// re-encrypted) and re-seals the trunk passwords; forget-previous then drops the old key, and
// everything opens with the new key alone. With PARLEY_MASTER_KEY it re-wraps under the key
// set there, opening with PARLEY_MASTER_KEY_PREVIOUS. No key or value is ever printed.
func TestAdminMasterKeyRotate(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_MASTER_KEY=", "PARLEY_MASTER_KEY_PREVIOUS=", "TRUNK_PW=trunk-pw-VALUE"}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "carrier", "--uri", "sip:127.0.0.1:5099", "--username", "u", "--password-env", "TRUNK_PW"); code != 0 {
		t.Fatalf("trunk: %s", errOut)
	}
	oldKey, _, err := secrets.LoadKey("", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	oldBox, _ := secrets.NewBox(oldKey)
	// Two secrets sealed under the old key.
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	org, _ := st.CreateOrg(ctx, "Acme")
	p, _ := st.CreateProject(ctx, org.ID, "One")
	sc := store.OrgScope(org.ID)
	var ids []store.SecretID
	for _, v := range []string{"vault-VALUE-1", "vault-VALUE-2"} {
		s, err := st.Vault().Create(ctx, sc, oldBox, store.NewSecret{ProjectID: p.ID, Name: v, Type: store.SecretBearer, Value: v})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	before, _ := st.Vault().Get(ctx, sc, ids[0])
	st.Close()

	out, errOut, code := runCLI(t, env, "admin", "master-key", "rotate", "--json")
	if code != 0 {
		t.Fatalf("rotate: %d %s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res["data_keys_rewrapped"] != 2.0 || res["values_resealed"] != 1.0 || res["key_id"] == oldBox.KeyID() {
		t.Fatalf("rotate printed %s", out)
	}
	raw, _ := os.ReadFile(filepath.Join(dataDir, secrets.KeyFile))
	lines := strings.Fields(string(raw))
	if len(lines) != 2 || lines[1] != hex.EncodeToString(oldKey) {
		t.Fatalf("the key file does not hold the new key then the old one: %d lines", len(lines))
	}
	for _, l := range lines {
		if strings.Contains(out+errOut, l) {
			t.Fatal("a key was printed")
		}
	}
	newKey, _ := secrets.DecodeKey(lines[0])
	newBox, _ := secrets.NewBox(newKey)
	if res["key_id"] != newBox.KeyID() {
		t.Fatalf("key id %v, want %s", res["key_id"], newBox.KeyID())
	}
	st, err = store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := st.Vault().Get(ctx, sc, ids[0])
	if after.Sealed.Ciphertext != before.Sealed.Ciphertext || after.Sealed.KeyID != newBox.KeyID() {
		t.Fatal("the value was re-encrypted, or its data key not re-wrapped")
	}
	if v, err := after.Open(newBox); err != nil || string(v) != "vault-VALUE-1" {
		t.Fatalf("open with the new key: %q %v", v, err)
	}
	tr, _ := st.FindTrunkByName(ctx, "carrier")
	if pw, err := tr.Password(newBox); err != nil || pw != "trunk-pw-VALUE" {
		t.Fatalf("trunk password with the new key: %v", err)
	}
	st.Close()

	out, errOut, code = runCLI(t, env, "admin", "master-key", "status")
	if code != 0 || !strings.Contains(out, "data keys wrapped by "+newBox.KeyID()) || !strings.Contains(out, oldBox.KeyID()) {
		t.Fatalf("status: %d %s %s", code, out, errOut)
	}
	if out, errOut, code = runCLI(t, env, "admin", "master-key", "forget-previous"); code != 0 {
		t.Fatalf("forget: %d %s %s", code, out, errOut)
	}
	raw, _ = os.ReadFile(filepath.Join(dataDir, secrets.KeyFile))
	if strings.TrimSpace(string(raw)) != lines[0] {
		t.Fatal("forget-previous did not leave the new key alone")
	}
	if fi, _ := os.Stat(filepath.Join(dataDir, secrets.KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}

	// PARLEY_MASTER_KEY: the operator sets the new key and keeps the old as previous.
	third := strings.Repeat("7e", 32)
	envKey := append(env[:len(env):len(env)], "PARLEY_MASTER_KEY="+third)
	if _, errOut, code := runCLI(t, envKey, "admin", "master-key", "rotate"); code != 2 || !strings.Contains(errOut, "PARLEY_MASTER_KEY_PREVIOUS") {
		t.Fatalf("rotate without a previous key: %d %s", code, errOut)
	}
	envKey = append(envKey, "PARLEY_MASTER_KEY_PREVIOUS="+lines[0])
	out, errOut, code = runCLI(t, envKey, "admin", "master-key", "rotate", "--json")
	if code != 0 || !strings.Contains(out, `"data_keys_rewrapped": 2`) {
		t.Fatalf("rotate with PARLEY_MASTER_KEY: %d %s %s", code, out, errOut)
	}
	thirdKey, _ := secrets.DecodeKey(third)
	thirdBox, _ := secrets.NewBox(thirdKey)
	st, err = store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range ids {
		s, _ := st.Vault().Get(ctx, sc, id)
		if _, err := s.Open(thirdBox); err != nil {
			t.Fatalf("after the second rotation: %v", err)
		}
	}
}
