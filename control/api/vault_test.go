package api

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

var _ = register(scenario{"VaultSecrets", testVaultSecrets})

// testVaultSecrets: the five vault operations on both stores; values are write-only (no
// answer, log line or audit event carries one), a secret in use answers 409 naming its users,
// and Resolve opens the value for an outbound request and sets last_used_at.
func testVaultSecrets(t *testing.T, e engine) {
	st := e.open(t)
	logs := &lockedBuffer{}
	w := newWorld(t, st, worldOpts{logTo: logs})
	ctx := context.Background()
	const value, value2 = "sk-VAULT-VALUE-0001", "sk-VAULT-VALUE-0002"
	var answers [][]byte
	keep := func(r *resp) *resp { answers = append(answers, r.Body); return r }
	create := func(key string, body map[string]any) req {
		return req{method: "POST", path: "/v1/vault/secrets", key: key, body: body}
	}
	r := keep(w.must(t, 201, create(kLive, map[string]any{"project_id": string(w.p1.ID), "name": "CRM", "type": "header", "header_name": "X-Api-Key", "value": value, "description": "the CRM"})))
	id := r.Str("id")
	if r.Str("object") != "vault_secret" || r.Str("header_name") != "X-Api-Key" || r.JSON["last_used_at"] != nil || r.JSON["query_name"] != nil || len(r.JSON["used_by"].([]any)) != 0 {
		t.Fatalf("created: %s", r)
	}
	if _, ok := r.JSON["value"]; ok {
		t.Fatal("the answer has a value member")
	}
	keep(w.must(t, 201, create(kLive, map[string]any{"project_id": string(w.p2.ID), "name": "Other", "type": "basic", "username": "svc", "value": value2})))
	keep(w.fails(t, 409, fault.CodeSecretNameTaken, create(kLive, map[string]any{"project_id": string(w.p1.ID), "name": "crm", "type": "bearer", "value": value})))
	w.fails(t, 422, fault.CodeValidationFailed, create(kLive, map[string]any{"project_id": string(w.p1.ID), "name": "h", "type": "header", "value": value}))
	w.fails(t, 422, fault.CodeValidationFailed, create(kLive, map[string]any{"project_id": string(w.p1.ID), "name": "h", "type": "bearer", "value": ""})).hasError(t, "/value", "too_short")
	w.fails(t, 422, fault.CodeValidationFailed, create(kLive, map[string]any{"project_id": string(w.p1.ID), "name": "h", "type": "oauth", "value": value}))
	w.fails(t, 404, fault.CodeProjectNotFound, create(kNarrow, map[string]any{"project_id": string(w.p2.ID), "name": "h", "type": "bearer", "value": value}))
	w.fails(t, 403, fault.CodeMissingPermission, create(kReadOnly, map[string]any{"project_id": string(w.p1.ID), "name": "h", "type": "bearer", "value": value}))

	// Read, list, filter.
	keep(w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets/" + id, key: kLive}))
	if l := keep(w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets", key: kLive})); len(l.JSON["data"].([]any)) != 2 {
		t.Fatalf("list: %s", l)
	}
	if l := keep(w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets", key: kNarrow})); len(l.JSON["data"].([]any)) != 1 {
		t.Fatalf("narrow list: %s", l)
	}
	if l := keep(w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets?project_id=" + string(w.p2.ID) + "&limit=1", key: kLive})); l.JSON["data"].([]any)[0].(map[string]any)["name"] != "Other" {
		t.Fatalf("filtered: %s", l)
	}
	// A test key sees the same vault (secrets belong to the project, not to a key mode).
	keep(w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets/" + id, key: kTest}))

	// Update: a new value, then a new type.
	u := keep(w.must(t, 200, req{method: "PATCH", path: "/v1/vault/secrets/" + id, key: kLive, body: map[string]any{"value": value2}}))
	if u.Str("header_name") != "X-Api-Key" {
		t.Fatalf("updated: %s", u)
	}
	u = keep(w.must(t, 200, req{method: "PATCH", path: "/v1/vault/secrets/" + id, key: kLive, body: map[string]any{"type": "query", "query_name": "api_key"}}))
	if u.JSON["header_name"] != nil || u.Str("query_name") != "api_key" {
		t.Fatalf("type change: %s", u)
	}
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "PATCH", path: "/v1/vault/secrets/" + id, key: kLive, body: map[string]any{}})
	keep(w.must(t, 200, req{method: "PATCH", path: "/v1/vault/secrets/" + id, key: kLive, body: map[string]any{"name": "crm"}})) // its own name in another case
	keep(w.must(t, 201, create(kLive, map[string]any{"project_id": string(w.p1.ID), "name": "Billing", "type": "bearer", "value": value})))
	w.fails(t, 409, fault.CodeSecretNameTaken, req{method: "PATCH", path: "/v1/vault/secrets/" + id, key: kLive, body: map[string]any{"name": "billing"}})
	w.fails(t, 404, fault.CodeSecretNotFound, req{method: "PATCH", path: "/v1/vault/secrets/0190a6f0-0000-7000-8000-0000000000aa", key: kLive, body: map[string]any{"name": "x"}})

	// Resolve opens the value for an outbound request; the credential never prints it.
	cred, err := w.api.Vault.Resolve(ctx, store.OrgScope(w.org.ID), store.SecretID(id))
	if err != nil {
		t.Fatal(err)
	}
	if n, v, ok := cred.Query(); !ok || n != "api_key" || v != value2 {
		t.Fatalf("query credential %q %q %v", n, v, ok)
	}
	w.api.Log.Info("resolved", "credential", cred, "printed", cred.String())
	if g := keep(w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets/" + id, key: kLive})); g.JSON["last_used_at"] == nil {
		t.Fatalf("last_used_at not set: %s", g)
	}
	if _, err := w.api.Vault.Resolve(ctx, store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}}, store.SecretID(id)); err == nil {
		t.Fatal("resolved outside the scope")
	}

	// A secret in use cannot be deleted; the answer names the users.
	err = st.Tx(ctx, func(tx *store.Tx) error {
		return vault.Link(ctx, tx, app.OperatorActor(w.org, "test"), w.p1.ID, store.SecretUse{Type: "tool", ID: "0190a6f0-0000-7000-8000-0000000000bb", Name: "lookup_order"}, id)
	})
	if err != nil {
		t.Fatal(err)
	}
	d := w.fails(t, 409, fault.CodeSecretInUse, req{method: "DELETE", path: "/v1/vault/secrets/" + id, key: kLive})
	if !strings.Contains(d.Str("detail"), `tool "lookup_order"`) {
		t.Fatalf("in use: %s", d)
	}
	if g := w.must(t, 200, req{method: "GET", path: "/v1/vault/secrets/" + id, key: kLive}); g.JSON["used_by"].([]any)[0].(map[string]any)["name"] != "lookup_order" {
		t.Fatalf("used_by: %s", g)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		return vault.Unlink(ctx, tx, app.OperatorActor(w.org, "test"), store.SecretUse{Type: "tool", ID: "0190a6f0-0000-7000-8000-0000000000bb"})
	})
	if err != nil {
		t.Fatal(err)
	}
	keep(w.must(t, 200, req{method: "DELETE", path: "/v1/vault/secrets/" + id, key: kLive}))
	w.fails(t, 404, fault.CodeSecretNotFound, req{method: "GET", path: "/v1/vault/secrets/" + id, key: kLive})
	if err := st.SetProjectFrozen(ctx, w.p2.ID, true); err != nil {
		t.Fatal(err)
	}
	w.fails(t, 409, fault.CodeProjectFrozen, create(kLive, map[string]any{"project_id": string(w.p2.ID), "name": "z", "type": "bearer", "value": value}))

	// No answer, log line or audit event carries a value.
	events, err := st.ListAudit(ctx, store.AuditFilter{OrgID: w.org.ID})
	if err != nil {
		t.Fatal(err)
	}
	auditJSON, _ := json.Marshal(events)
	for _, b := range append(answers, logs.bytes(), auditJSON) {
		for _, v := range []string{value, value2} {
			if bytes.Contains(b, []byte(v)) {
				t.Fatalf("a value leaked: %s", b)
			}
		}
	}
	if !strings.Contains(string(auditJSON), "vault_secret.updated") || !strings.Contains(string(auditJSON), `"value":"changed"`) {
		t.Fatalf("no audit of the update: %s", auditJSON)
	}
}

// lockedBuffer is a log sink that several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}
