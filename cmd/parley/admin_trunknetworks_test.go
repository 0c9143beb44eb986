package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAdminTrunkNetworks drives `parley admin trunks networks` (issue 22 item 7): set, show,
// a bad CIDR refused with a usage error, clear.
func TestAdminTrunkNetworks(t *testing.T) {
	env := []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_MASTER_KEY="}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "add", "--name", "pbx", "--uri", "sip:10.1.2.3"); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := runCLI(t, env, "admin", "trunks", "networks", "pbx", "--transfer-allow", "10.1.0.0/16,192.168.7.7", "--media", "198.51.100.0/24", "--json")
	if code != 0 {
		t.Fatalf("set: %d %s", code, errOut)
	}
	var got struct {
		TransferAllow []string `json:"transfer_allow"`
		MediaCIDRs    []string `json:"media_cidrs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.TransferAllow, " ") != "10.1.0.0/16 192.168.7.7/32" || strings.Join(got.MediaCIDRs, " ") != "198.51.100.0/24" {
		t.Fatalf("networks %s", out)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "networks", "pbx", "--media", "10.0.0.0/99"); code != 2 || !strings.Contains(errOut, "not a CIDR") {
		t.Fatalf("bad CIDR: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "admin", "trunks", "networks", "nope"); code != 1 || !strings.Contains(errOut, "no trunk") {
		t.Fatalf("unknown trunk: %d %s", code, errOut)
	}
	out, _, code = runCLI(t, env, "admin", "trunks", "networks", "pbx", "--clear", "--json")
	if code != 0 || !strings.Contains(out, `"transfer_allow":[]`) && !strings.Contains(out, `"transfer_allow": []`) {
		t.Fatalf("clear: %d %s", code, out)
	}
}
