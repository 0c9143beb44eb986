package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestReadmeCampaignFromCSV runs the README's "campaign from a CSV file in five commands" as
// written (bash, curl and python3 as the user has them) against the API on a loopback port,
// and checks they made what they say: two contacts imported (one with a quoted comma in its
// name) and a running campaign calling both, with the calling hours given.
func TestReadmeCampaignFromCSV(t *testing.T) {
	for _, c := range []string{"bash", "curl", "python3"} {
		testenv.NeedCommand(t, c)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i := strings.Index(text, "## Campaigns, contacts and the do-not-call list")
	if i < 0 {
		t.Fatal("the README has no campaigns section")
	}
	block := text[i:]
	start := strings.Index(block, "```sh\n")
	end := strings.Index(block[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the campaigns section has no sh block")
	}
	script := block[start+6 : start+6+end]
	commands := 0
	for _, l := range strings.Split(script, "\n") {
		if l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#") {
			commands++ // a continued line (the campaign's body) starts with spaces
		}
	}
	if commands != 5 {
		t.Fatalf("the README's campaign from a CSV file takes %d commands, not 5:\n%s", commands, script)
	}

	w := newWorld(t, migrate(t, storeOptions(t)), worldOpts{conv: &convOpts{maxCalls: 5}})
	w.credit(t, 100)
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	w.number(t, w.p1.ID, agent, "+14155550001")
	srv := httptest.NewServer(w.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "B="+srv.URL, "LK="+w.keys[kLive], "P="+string(w.p1.ID), "A="+agent)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's commands: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"created":2`) || !strings.Contains(string(out), `"refused":0`) {
		t.Errorf("the import did not create both people:\n%s", out)
	}
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns", key: kLive})
	data := l.JSON["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("%d campaigns", len(data))
	}
	c := data[0].(map[string]any)
	if c["status"] != "running" || c["contacts"].(map[string]any)["total"] != 2.0 || c["calling_hours"].(map[string]any)["start_hour"] != 9.0 {
		t.Errorf("the campaign: %v", c)
	}
	cl := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + c["id"].(string) + "/contacts", key: kLive})
	if !strings.Contains(string(cl.Body), `"name":"Lovelace, Bob"`) || !strings.Contains(string(cl.Body), `"timezone":"Europe/London"`) {
		t.Errorf("the campaign's contacts: %s", cl.Body)
	}
}
