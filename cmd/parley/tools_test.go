package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/tools/mcptest"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestToolsInPhoneCallThroughServe (issue 17): a phone call into `parley serve` whose agent
// calls, in one turn and in parallel, an HTTP tool (a local service that checks the header the
// vault sends, and answers slowly: the tool's filler is spoken first) and an MCP tool of
// @modelcontextprotocol/server-everything; the answer is spoken and the transcript has both tool
// lines. Then the "no value anywhere" check: the secret's value is in no API answer of the run,
// no log line of the server (stdout and stderr), and not in the SQLite files.
func TestToolsInPhoneCallThroughServe(t *testing.T) {
	everything := mcptest.Everything(t)
	const value = "VAULT-PHONE-VALUE-5521"
	var authorized, refused atomic.Int32
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+value {
			refused.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		time.Sleep(1500 * time.Millisecond) // slow: the filler is heard first
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order":%q,"status":"shipped"}`, strings.TrimPrefix(r.URL.Path, "/orders/"))
	}))
	defer svc.Close()
	fk := fakes.NewServer(fakes.ServerOptions{STTScript: []string{"where is my order a seven"},
		Script: fakes.NewScript(
			fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{
				{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-7"}`)},
				{Name: "echo", Args: json.RawMessage(`{"message":"checked by mcp"}`)},
			}},
			fakes.ScriptTurn{Text: "Your order A-7 has shipped."},
		), TTSFirstByte: 20 * time.Millisecond})
	fsrv := httptest.NewServer(fk)
	t.Cleanup(fsrv.Close)
	t.Cleanup(fk.Close)

	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_FAKES_URL=" + fsrv.URL,
		"PARLEY_OUTBOUND_ALLOW_PRIVATE=true", "PARLEY_LOG_LEVEL=debug"}
	s := startServer(t, env)
	m := keyRe.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no keys printed:\n%s", s.stdout)
	}
	live := m[1]
	sipAddr := sipAddrRe.FindStringSubmatch(s.stderr.String())[1]
	var answers []string
	must := func(want int, method, path string, body any) map[string]any {
		t.Helper()
		out := s.must(t, want, method, path, live, body, nil)
		answers = append(answers, jsonString(out))
		return out
	}
	me := must(200, "GET", "/v1/me", nil)
	org := me["organization"].(map[string]any)["id"].(string)
	project := must(200, "GET", "/v1/projects", nil)["data"].([]any)[0].(map[string]any)["id"].(string)
	for _, args := range [][]string{
		{"admin", "credit", "add", "--org", org, "--amount", "10"},
		{"admin", "trunks", "add", "--name", "local", "--uri", "sip:127.0.0.1:5099", "--allow", "127.0.0.1"},
	} {
		if _, errOut, code := runCLI(t, env, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	secret := must(201, "POST", "/v1/vault/secrets", map[string]any{"project_id": project, "name": "orders", "type": "bearer", "value": value})["id"].(string)
	must(201, "POST", "/v1/tools", map[string]any{"project_id": project, "name": "lookup_order", "description": "Find an order.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}},
		"request":    map[string]any{"method": "GET", "url": svc.URL + "/orders/{{order_id}}"}, "secret_id": secret,
		"filler": "One moment, I am checking your order."})
	srv := must(201, "POST", "/v1/mcp-servers", map[string]any{"project_id": project, "name": "everything", "url": everything, "allowed_tools": []any{"echo"}})
	if srv["last_error"] != nil {
		t.Fatalf("MCP discovery: %v", srv)
	}
	def := map[string]any{"format": "service.agent/1", "references": map[string]any{"tools": []any{"lookup_order", "everything"}}, "agent": map[string]any{
		"name": "Orders", "kind": "faq", "direction": "inbound", "channels": []any{"phone"},
		"system_prompt": "You look up orders.", "first_message": "Hello, orders desk."}}
	agentID := must(201, "POST", "/v1/agents", map[string]any{"project_id": project, "definition": def})["id"].(string)
	must(201, "POST", "/v1/agents/"+agentID+"/publish", nil)
	if _, errOut, code := runCLI(t, env, "admin", "numbers", "add", "--project", project, "--number", "+14155550188", "--trunk", "local", "--agent", agentID); code != 0 {
		t.Fatalf("numbers add: %s", errOut)
	}

	speech := mediatest.Speech(t, "Where is my order A seven", media.PipelineRate)
	phone := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call, err := phone.Call(ctx, "sip:+14155550188@"+sipAddr, siptest.CallOptions{From: "+14155550124"})
	if err != nil {
		t.Fatalf("call: %v (status %d)", err, call.Status())
	}
	waitUntil(t, "the greeting", func() bool {
		h := call.Heard()
		return len(h) > 3200 && mediatest.DetectTone(h[len(h)-3200:], media.PipelineRate, 440) > -30
	})
	var pos int
	call.SetSource(func(dst []int16) {
		for i := range dst {
			if pos < len(speech) {
				dst[i] = speech[pos]
				pos++
			} else {
				dst[i] = 0
			}
		}
	})
	var conv map[string]any
	waitUntil(t, "the answer after the tools", func() bool {
		list := s.must(t, 200, "GET", "/v1/conversations?limit=5", live, nil, nil)
		data := list["data"].([]any)
		if len(data) == 0 {
			return false
		}
		id := data[0].(map[string]any)["id"].(string)
		conv = s.must(t, 200, "GET", "/v1/conversations/"+id+"?include=transcript", live, nil, nil)
		return strings.Contains(jsonString(conv), "Your order A-7 has shipped.")
	})
	answers = append(answers, jsonString(conv))
	js := jsonString(conv)
	if !strings.Contains(js, `lookup_order({\"order_id\":\"A-7\"}) → {\"order\":\"A-7\",\"status\":\"shipped\"}`) || !strings.Contains(js, "checked by mcp") {
		t.Fatalf("tool lines missing: %s", js)
	}
	if authorized.Load() != 1 || refused.Load() != 0 {
		t.Fatalf("the service saw %d authorized and %d refused requests", authorized.Load(), refused.Load())
	}
	// The filler was spoken while the slow tool ran, before the answer.
	var said []string
	for _, q := range fk.ElevenLabs.Requests() {
		if s, _ := q.Body["text"].(string); s != "" {
			said = append(said, s)
		}
	}
	joined := strings.Join(said, " ") // the speaker sends sentences and clauses as they come
	if i, j := strings.Index(joined, "One moment, I am checking your order."), strings.Index(joined, "Your order A-7 has shipped."); i < 0 || j < i {
		t.Fatalf("filler then answer not spoken in order: %q", joined)
	}
	if err := call.Bye(ctx); err != nil {
		t.Fatalf("BYE: %v", err)
	}
	id := conv["id"].(string)
	waitUntil(t, "the call ended", func() bool {
		return s.must(t, 200, "GET", "/v1/conversations/"+id, live, nil, nil)["status"] == "ended"
	})
	// The secret is used: its last_used_at is set, and deleting it names the tool.
	sec := must(200, "GET", "/v1/vault/secrets/"+secret, nil)
	if sec["last_used_at"] == nil {
		t.Fatalf("last_used_at: %v", sec)
	}
	code, out := s.call(t, "DELETE", "/v1/vault/secrets/"+secret, live, nil, nil)
	answers = append(answers, jsonString(out))
	if code != 409 || !strings.Contains(jsonString(out), "lookup_order") {
		t.Fatalf("delete used secret: %d %v", code, out)
	}

	// No value anywhere: API answers, every log line of the run, the SQLite files.
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not stop")
	}
	haystacks := map[string]string{"answers": strings.Join(answers, "\n"), "stdout": s.stdout.String(), "stderr": s.stderr.String()}
	files, _ := filepath.Glob(filepath.Join(dataDir, "parley.db*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		haystacks[f] = string(b)
	}
	if len(files) == 0 || !strings.Contains(s.stderr.String(), "/v1/tools") {
		t.Fatalf("nothing to grep: files %v", files)
	}
	for where, h := range haystacks {
		if strings.Contains(h, value) {
			t.Fatalf("the secret's value is in %s", where)
		}
	}
}
