package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/store"
)

// TestAdminOrgTransferAllow drives `parley admin orgs transfer-allow` (issue 22 item 7): set
// (canonical), show, a bad CIDR refused with a usage error and the list kept, an unknown
// organization, clear; each change is in the audit log.
func TestAdminOrgTransferAllow(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_MASTER_KEY="}
	out, errOut, code := runCLI(t, env, "admin", "orgs", "create", "--name", "Acme", "--json")
	if code != 0 {
		t.Fatal(errOut)
	}
	var org struct {
		ID            string   `json:"id"`
		TransferAllow []string `json:"transfer_allow"`
	}
	if err := json.Unmarshal([]byte(out), &org); err != nil {
		t.Fatal(err)
	}
	show := func(args ...string) (string, []string) {
		t.Helper()
		out, errOut, code := runCLI(t, env, append([]string{"admin", "orgs", "transfer-allow", org.ID, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("transfer-allow %v: %d %s", args, code, errOut)
		}
		var got struct {
			TransferAllow []string `json:"transfer_allow"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		return out, got.TransferAllow
	}
	if _, got := show("--allow", "192.168.7.7,10.1.2.3/16", "--allow", "10.1.0.0/16"); strings.Join(got, " ") != "192.168.7.7/32 10.1.0.0/16" {
		t.Fatalf("set: %v", got)
	}
	if _, got := show(); strings.Join(got, " ") != "192.168.7.7/32 10.1.0.0/16" {
		t.Fatalf("show: %v", got)
	}
	if _, errOut, code := runCLI(t, env, "admin", "orgs", "transfer-allow", org.ID, "--allow", "10.0.0.0/99"); code != 2 || !strings.Contains(errOut, "not a CIDR") {
		t.Fatalf("bad CIDR: %d %s", code, errOut)
	}
	if _, got := show(); len(got) != 2 {
		t.Fatalf("a refused change altered the list: %v", got)
	}
	if _, errOut, code := runCLI(t, env, "admin", "orgs", "transfer-allow", "0190a6f0-0000-7000-8000-000000000000"); code != 1 || !strings.Contains(errOut, "no organization") {
		t.Fatalf("unknown organization: %d %s", code, errOut)
	}
	if out, got := show("--clear"); len(got) != 0 || !strings.Contains(out, "[]") {
		t.Fatalf("clear: %s", out)
	}
	st, err := store.Open(context.Background(), store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, err := st.ListAudit(context.Background(), store.AuditFilter{OrgID: store.OrgID(org.ID)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Action == "organization.transfer_allow_changed" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d transfer_allow_changed events, want 2 (set, clear)", n)
	}
}
