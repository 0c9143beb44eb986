package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/store"
)

// TestAdminAuditEvents: every admin command that changes something records an operator audit
// event with the fields it set or changed, and never a key's secret; credit add records a
// top-up, or an adjustment when it removes credit or is told so.
func TestAdminAuditEvents(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL="}
	run := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, code := runCLI(t, env, append(append([]string{"admin"}, args...), "--json")...)
		var v map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("admin %v: %d %s %s", args, code, out, errOut)
		}
		return v
	}
	org := run("orgs", "create", "--name", "Acme")["id"].(string)
	run("orgs", "freeze", org)
	run("orgs", "unfreeze", org)
	project := run("projects", "create", "--org", org, "--name", "Web")["id"].(string)
	run("projects", "freeze", project)
	key := run("keys", "create", "--org", org, "--project", project, "--scopes", "agents:read")
	run("keys", "revoke", key["id"].(string))
	run("credit", "add", "--org", org, "--amount", "25")
	run("credit", "add", "--org", org, "--amount", "-2.5", "--reason", "refund of a test")
	if got := run("credit", "add", "--org", org, "--amount", "1", "--adjustment"); got["credit_usd"] != "23.500000" {
		t.Fatalf("credit now %v", got)
	}

	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, err := st.ListAudit(ctx, store.AuditFilter{OrgID: store.OrgID(org)})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		if e.ActorType != store.ActorOperator || e.ActorID != "parley admin" {
			t.Errorf("%s by %s %s", e.Action, e.ActorType, e.ActorID)
		}
		if strings.Contains(string(e.Data), key["secret"].(string)) || strings.Contains(string(e.Data), "secret") {
			t.Errorf("%s records a secret: %s", e.Action, e.Data)
		}
		actions = append(actions, e.Action)
	}
	want := "organization.created organization.frozen organization.unfrozen project.created project.frozen " +
		"api_key.created api_key.revoked credit.added credit.adjusted credit.adjusted"
	if strings.Join(actions, " ") != want {
		t.Fatalf("actions %v\nwant %s", actions, want)
	}
	if d := string(events[4].Data); !strings.Contains(d, `"frozen":{"from":false,"to":true}`) {
		t.Errorf("project.frozen data %s", d)
	}
	if d := string(events[5].Data); !strings.Contains(d, `"scopes":["agents:read"]`) || !strings.Contains(d, project) {
		t.Errorf("api_key.created data %s", d)
	}
	txs, err := st.ListCreditTransactions(ctx, store.CreditFilter{OrgID: store.OrgID(org)})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, tx := range txs {
		kinds = append(kinds, string(tx.Kind))
	}
	if strings.Join(kinds, " ") != "top_up adjustment adjustment" || txs[1].Reason != "refund of a test" {
		t.Fatalf("ledger %+v", txs)
	}
}
