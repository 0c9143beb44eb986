package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// TestAdminWhatsApp drives `parley admin whatsapp add|list|update|remove` on an embedded store:
// the verify token comes from the environment and is never printed; a phone-number id is
// connected once.
func TestAdminWhatsApp(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "WA_VERIFY=very-secret-verify"}
	out, errOut, code := runCLI(t, env, "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("bootstrap: %d %s", code, errOut)
	}
	var boot struct {
		OrganizationID string `json:"organization_id"`
		ProjectID      string `json:"project_id"`
	}
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatal(err)
	}
	// The token and app secret in the project's vault, sealed with the data directory's key.
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := secrets.LoadKey("", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secrets.NewBox(key)
	sc := store.OrgScope(store.OrgID(boot.OrganizationID))
	tok, err := st.Vault().Create(ctx, sc, box, store.NewSecret{ProjectID: store.ProjectID(boot.ProjectID), Name: "token", Type: store.SecretBearer, Value: "EAAG"})
	if err != nil {
		t.Fatal(err)
	}
	app, err := st.Vault().Create(ctx, sc, box, store.NewSecret{ProjectID: store.ProjectID(boot.ProjectID), Name: "app", Type: store.SecretBearer, Value: "app-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, env, "admin", "whatsapp", "add", "--project", boot.ProjectID, "--phone-number-id", "1", "--token-secret", "0190a6f0-0000-7000-8000-000000000001"); code != 1 || !strings.Contains(errOut, "vault_secret_not_found") {
		t.Fatalf("an unknown secret: %d %s", code, errOut)
	}
	out, errOut, code = runCLI(t, env, "admin", "whatsapp", "add", "--project", boot.ProjectID, "--phone-number-id", "106540352242922",
		"--business-account", "102290129340398", "--display", "+1 555 0100", "--token-secret", string(tok.ID), "--app-secret-secret", string(app.ID),
		"--verify-token-env", "WA_VERIFY", "--json")
	if code != 0 || strings.Contains(out, "very-secret-verify") {
		t.Fatalf("add: %d %s %s", code, out, errOut)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s["connected"] != true || s["verify_token_set"] != true || s["project_id"] != boot.ProjectID {
		t.Fatalf("added: %s", out)
	}
	id := s["id"].(string)
	if _, errOut, code := runCLI(t, env, "admin", "whatsapp", "add", "--project", boot.ProjectID, "--phone-number-id", "106540352242922"); code != 1 || !strings.Contains(errOut, "connected already") {
		t.Fatalf("twice: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "whatsapp", "add", "--project", boot.ProjectID, "--phone-number-id", "1 2"); code != 2 {
		t.Fatalf("a bad id: %d %s", code, errOut)
	}
	out, _, code = runCLI(t, env, "admin", "whatsapp", "update", id, "--token-secret", "", "--display", "Main", "--json")
	var u map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &u) != nil || u["connected"] != false || u["display_number"] != "Main" || u["access_token_secret_id"] != nil {
		t.Fatalf("update: %d %s", code, out)
	}
	out, _, code = runCLI(t, env, "admin", "whatsapp", "list", "--org", boot.OrganizationID)
	if code != 0 || !strings.Contains(out, "106540352242922") || !strings.Contains(out, "Main") {
		t.Fatalf("list: %d %s", code, out)
	}
	if _, errOut, code := runCLI(t, env, "admin", "whatsapp", "remove", id); code != 0 {
		t.Fatalf("remove: %d %s", code, errOut)
	}
	if _, _, code := runCLI(t, env, "admin", "whatsapp", "remove", id); code != 1 {
		t.Fatal("removed twice")
	}
	if _, err := st.Vault().Delete(ctx, sc, app.ID); err != nil {
		t.Fatalf("the app secret is still in use after the number was removed: %v", err)
	}
}
