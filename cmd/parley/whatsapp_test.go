package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWhatsAppKeyless is the keyless demo of the messaging-app channel with the real binaries:
// `parley fakes` stands in for Meta's Graph API, `parley serve` points at it with
// PARLEY_FAKES_URL; a number is connected through the API with its secrets in the vault, the
// fake posts a signed inbound message to /hooks/whatsapp, and the agent's reply reaches the fake.
func TestWhatsAppKeyless(t *testing.T) {
	fk := exec.Command(parleyBin(t), "fakes", "--addr", "127.0.0.1:0", "--llm-first-token", "0", "--llm-tps", "0")
	out, err := fk.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	fk.Stderr = os.Stderr
	if err := fk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fk.Process.Kill(); fk.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`PARLEY_FAKES_URL=(\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("fakes printed %q: %v", line, err)
	}
	fakesURL := m[1]
	s := startServer(t, []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_FAKES_URL=" + fakesURL})
	km := keyRe.FindStringSubmatch(s.stdout.String())
	if km == nil {
		t.Fatalf("no keys printed:\n%s", s.stdout)
	}
	live := km[1]
	call := func(method, url, key string, body any, want int) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %v, want %d", method, url, resp.StatusCode, v, want)
		}
		return v
	}
	_, projects := s.get(t, "/v1/projects", live)
	project := projects["data"].([]any)[0].(map[string]any)["id"].(string)
	agent := call("POST", s.base+"/v1/agents", live, map[string]any{"project_id": project, "definition": map[string]any{
		"format": "service.agent/1", "references": map[string]any{},
		"agent": map[string]any{"name": "Shop", "kind": "faq", "direction": "inbound", "channels": []any{"whatsapp"}, "system_prompt": "Help shoppers."}}}, 201)["id"].(string)
	call("POST", s.base+"/v1/agents/"+agent+"/publish", live, map[string]any{}, 201)
	secret := func(name, value string) string {
		return call("POST", s.base+"/v1/vault/secrets", live, map[string]any{"project_id": project, "name": name, "type": "bearer", "value": value}, 201)["id"].(string)
	}
	call("POST", s.base+"/v1/whatsapp/senders", live, map[string]any{"project_id": project, "agent_id": agent, "phone_number_id": "106540352242922",
		"business_account_id": "102290129340398", "access_token_secret_id": secret("token", "EAAG-demo"), "app_secret_secret_id": secret("app", "demo-app-secret"),
		"verify_token": "demo-verify-token"}, 201)
	tpls := call("GET", s.base+"/v1/whatsapp/senders/"+call("GET", s.base+"/v1/whatsapp/senders", live, nil, 200)["data"].([]any)[0].(map[string]any)["id"].(string)+"/templates", live, nil, 200)
	if n := len(tpls["data"].([]any)); n != 2 {
		t.Fatalf("templates through the fakes: %v", tpls)
	}
	got := call("POST", fakesURL+"/_fakes/whatsapp/inbound", "", map[string]any{"url": s.base + "/hooks/whatsapp", "app_secret": "demo-app-secret",
		"phone_number_id": "106540352242922", "from": "16505551234", "text": "Do you ship to Lyon?"}, 200)
	if got["parley_status"] != float64(200) {
		t.Fatalf("Parley answered the webhook %v", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fakesURL + "/_fakes/whatsapp/sent")
		if err != nil {
			t.Fatal(err)
		}
		var sent []map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&sent)
		resp.Body.Close()
		for _, m := range sent {
			if m["To"] == "16505551234" && strings.Contains(m["Text"].(string), "Do you ship to Lyon?") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply reached the fake: %v", sent)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
