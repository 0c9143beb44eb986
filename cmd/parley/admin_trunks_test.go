package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// TestAdminTrunks drives `parley admin trunks add|list|remove` on an embedded store: the
// password is sealed with the data directory's master key and never printed.
func TestAdminTrunks(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_MASTER_KEY=", "TRUNK_PW=hunter2-secret"}
	out, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "carrier-a", "--uri", "sip:sip.carrier.example:5060",
		"--transport", "tcp", "--username", "acct1", "--password-env", "TRUNK_PW", "--allow", "203.0.113.0/24,198.51.100.7",
		"--allow", "2001:db8::/32", "--inbound-auth", "--json")
	if code != 0 {
		t.Fatalf("trunks add: %d %s", code, errOut)
	}
	if strings.Contains(out, "hunter2") {
		t.Fatalf("the password was printed: %s", out)
	}
	var tr map[string]any
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	if tr["name"] != "carrier-a" || tr["transport"] != "tcp" || tr["password_set"] != true || tr["inbound_auth"] != true {
		t.Fatalf("trunks add printed %s", out)
	}
	if src := tr["allowed_sources"].([]any); len(src) != 3 || src[1] != "198.51.100.7/32" {
		t.Fatalf("sources %v", src)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "carrier-a", "--uri", "sip:x"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("duplicate: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "b", "--uri", "sip:x", "--transport", "sctp"); code != 2 || !strings.Contains(errOut, "transport") {
		t.Fatalf("bad transport: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "b", "--uri", "sip:x", "--allow", "10.0.0.0/99"); code != 2 {
		t.Fatalf("bad CIDR: %d %s", code, errOut)
	}
	if _, _, code := runCLI(t, env, "admin", "trunks", "add", "--name", "pbx", "--uri", "sip:10.1.2.3"); code != 0 {
		t.Fatal("plain trunk")
	}
	out, errOut, code = runCLI(t, env, "admin", "trunks", "list")
	if code != 0 || !strings.Contains(out, "carrier-a") || !strings.Contains(out, "set") || !strings.Contains(out, "pbx") || strings.Contains(out, "hunter2") {
		t.Fatalf("list: %d %s %s", code, out, errOut)
	}
	// What the store holds is sealed, and opens with the data directory's master key.
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.FindTrunkByName(ctx, "carrier-a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.PasswordSealed, "hunter2") || !strings.HasPrefix(got.PasswordSealed, "v1:") {
		t.Fatalf("stored password %q", got.PasswordSealed)
	}
	key, _, err := secrets.LoadKey("", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secrets.NewBox(key)
	if pw, err := got.Password(box); err != nil || pw != "hunter2-secret" {
		t.Fatalf("password %q %v", pw, err)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "remove", "carrier-a"); code != 0 {
		t.Fatalf("remove: %d %s", code, errOut)
	}
	if _, _, code := runCLI(t, env, "admin", "trunks", "remove", string(got.ID)); code != 1 {
		t.Fatal("removed twice")
	}
	out, _, _ = runCLI(t, env, "admin", "trunks", "list", "--json")
	var list []map[string]any
	json.Unmarshal([]byte(out), &list)
	if len(list) != 1 || list[0]["name"] != "pbx" {
		t.Fatalf("after remove: %s", out)
	}
}
