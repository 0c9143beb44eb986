package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// TestAdminNumbersAndRestore drives `parley admin numbers add|list` and `parley admin agents
// restore` on an embedded store, then checks that a server on that store serves the number,
// the agent and the OpenAPI document.
func TestAdminNumbersAndRestore(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL="}
	out, errOut, code := runCLI(t, env, "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("bootstrap: %d %s", code, errOut)
	}
	var boot struct {
		OrganizationID string `json:"organization_id"`
		ProjectID      string `json:"project_id"`
		LiveKey        string `json:"live_key"`
	}
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ag, err := st.Agents().Create(ctx, store.OrgScope(store.OrgID(boot.OrganizationID)), store.NewAgent{ProjectID: store.ProjectID(boot.ProjectID),
		Name: "Support", Kind: "faq", Direction: "inbound", Channels: []string{"phone"},
		Definition: json.RawMessage(`{"agent": {"name": "Support", "kind": "faq", "direction": "inbound", "channels": ["phone"], "system_prompt": "Help."}, "references": {}}`)})
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, code = runCLI(t, env, "admin", "numbers", "add", "--project", boot.ProjectID, "--number", "+14155550100",
		"--trunk", "carrier-a", "--agent", string(ag.ID), "--label", "Main line", "--json")
	if code != 0 {
		t.Fatalf("numbers add: %d %s", code, errOut)
	}
	var num map[string]any
	json.Unmarshal([]byte(out), &num)
	if num["number"] != "+14155550100" || num["agent_id"] != string(ag.ID) || num["trunk"] != "carrier-a" || num["label"] != "Main line" {
		t.Fatalf("numbers add printed %s", out)
	}
	if _, errOut, code := runCLI(t, env, "admin", "numbers", "add", "--project", boot.ProjectID, "--number", "+14155550100"); code != 1 || !strings.Contains(errOut, "already added") {
		t.Fatalf("duplicate number: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "numbers", "add", "--project", boot.ProjectID, "--number", "555-0100"); code != 2 || !strings.Contains(errOut, "E.164") {
		t.Fatalf("bad number: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "numbers", "add", "--number", "+14155550101"); code != 2 {
		t.Fatalf("without --project: %d %s", code, errOut)
	}
	runCLI(t, env, "admin", "numbers", "add", "--project", boot.ProjectID, "--number", "+14155550101")
	for _, by := range [][]string{{"--project", boot.ProjectID}, {"--org", boot.OrganizationID}} {
		out, errOut, code = runCLI(t, env, append([]string{"admin", "numbers", "list", "--json"}, by...)...)
		var list []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0]["number"] != "+14155550100" || list[1]["agent_id"] != nil {
			t.Fatalf("numbers list %v: %d %s %s", by, code, out, errOut)
		}
	}
	if out, _, code := runCLI(t, env, "admin", "numbers", "list", "--org", boot.OrganizationID); code != 0 || !strings.Contains(out, "carrier-a") {
		t.Fatalf("numbers list (text): %d %s", code, out)
	}

	// Restore a deleted agent; restoring a live one is refused.
	if _, _, err := st.Agents().Delete(ctx, store.OrgScope(ag.OrgID), ag.ID, time.Now().Add(30*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, env, "admin", "agents", "restore", string(ag.ID), "--json")
	if code != 0 || !strings.Contains(out, `"status": "draft"`) {
		t.Fatalf("agents restore: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "agents", "restore", string(ag.ID)); code != 1 || !strings.Contains(errOut, "not deleted") {
		t.Fatalf("restore a live agent: %d %s", code, errOut)
	}
	if _, _, code := runCLI(t, env, "admin", "agents", "restore"); code != 2 {
		t.Fatalf("restore without an id: %d", code)
	}
	events, err := st.ListAudit(ctx, store.AuditFilter{OrgID: store.OrgID(boot.OrganizationID)})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		if e.ActorType == store.ActorOperator && e.ActorID == operatorName { // the bootstrap's own events aside
			actions = append(actions, e.Action)
		}
	}
	if strings.Join(actions, " ") != "phone_number.created phone_number.created agent.restored" {
		t.Fatalf("operator audit events: %v", actions)
	}

	// A server on the same store serves them, and the OpenAPI document without a key.
	s := startServer(t, env, "--roles", "api")
	if status, body := s.get(t, "/openapi.v1.json", ""); status != 200 || body["openapi"] != "3.1.0" {
		t.Fatalf("openapi.v1.json: %d %v", status, body["openapi"])
	}
	status, body := s.get(t, "/v1/agents/"+string(ag.ID), boot.LiveKey)
	nums, _ := body["phone_numbers"].([]any)
	if status != 200 || len(nums) != 0 {
		// The number was released when the agent was deleted.
		t.Fatalf("agent: %d %v", status, body)
	}
	if status, body := s.get(t, "/v1/phone-numbers", boot.LiveKey); status != 200 || len(body["data"].([]any)) != 2 {
		t.Fatalf("phone numbers: %d %v", status, body)
	}
	if status, body := s.get(t, "/v1/nothing", boot.LiveKey); status != 404 || body["code"] != "route_not_found" {
		t.Fatalf("unknown route: %d %v", status, body)
	}
}

// TestAdminAgentsCreate: `parley admin agents create` makes an agent from a definition file
// through the same rules as the API, publishes it when asked, records it in the audit log, and
// names each place of a definition that does not fit.
func TestAdminAgentsCreate(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL="}
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
	def := filepath.Join(t.TempDir(), "def.json")
	os.WriteFile(def, []byte(`{"agent": {"name": "Support", "kind": "faq", "direction": "inbound", "system_prompt": "You help callers."}}`), 0o600)
	out, errOut, code = runCLI(t, env, "admin", "agents", "create", "--project", boot.ProjectID, "--file", def, "--publish", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var made map[string]any
	if err := json.Unmarshal([]byte(out), &made); err != nil || made["status"] != "published" || made["name"] != "Support" {
		t.Fatalf("created %q: %v", out, err)
	}
	// The same name again is made unique, as the API does.
	out, _, code = runCLI(t, env, "admin", "agents", "create", "--project", boot.ProjectID, "--file", def, "--json")
	if code != 0 || !strings.Contains(out, `"Support (2)"`) || !strings.Contains(out, `"draft"`) {
		t.Fatalf("second create: %d %s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"agent": {"name": "Form", "kind": "form_filling", "direction": "inbound", "system_prompt": "x"}}`), 0o600)
	if _, errOut, code := runCLI(t, env, "admin", "agents", "create", "--project", boot.ProjectID, "--file", bad); code != 1 || !strings.Contains(errOut, "/agent/collected") {
		t.Fatalf("a definition without its collected fields: %d %s", code, errOut)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, err := st.ListAudit(ctx, store.AuditFilter{OrgID: store.OrgID(boot.OrganizationID)})
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, e := range events {
		if e.Action == "agent.created" && e.ActorType == store.ActorOperator {
			created++
		}
	}
	if created != 2 {
		t.Fatalf("%d agent.created events by the operator, want 2", created)
	}
}
