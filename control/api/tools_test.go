package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/tools"
	"github.com/parley-voice/parley/control/tools/mcptest"
	"github.com/parley-voice/parley/internal/netguard"
	"github.com/parley-voice/parley/session/fakes"
)

var _ = register(scenario{"ToolsAndMCPServers", testToolsAndMCPServers})

// toolServer is a local service a tool calls: it checks the vault's header and answers per path.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []string // method path?query of every authorized request
	auth  string   // the X-Api-Key it wants
	unaut int      // requests without it
}

func newToolServer(t *testing.T, auth string) *toolServer {
	ts := &toolServer{auth: auth}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		if r.Header.Get("X-Api-Key") != ts.auth {
			ts.unaut++
			ts.mu.Unlock()
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		ts.seen = append(ts.seen, r.Method+" "+r.URL.RequestURI())
		ts.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/orders/"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"order":%q,"status":"shipped","echo_key":%q}`, strings.TrimPrefix(r.URL.Path, "/orders/"), r.Header.Get("X-Api-Key"))
		case r.URL.Path == "/fail":
			http.Error(w, "boom", http.StatusInternalServerError)
		case r.URL.Path == "/big":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`"`))
			chunk := strings.Repeat("x", 64<<10)
			for i := 0; i < 160 && r.Context().Err() == nil; i++ { // 10 MB
				w.Write([]byte(chunk))
			}
		case r.URL.Path == "/hang":
			<-r.Context().Done()
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) requests() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.seen...)
}

// testToolsAndMCPServers: the ten operations of tools and MCP servers on both stores, the
// refusals (schema with its pointer, private URL, unknown reference, secret in use), an MCP
// server nobody here wrote (server-everything) discovered at save time, and chats whose agent
// calls an HTTP tool with the vault's credential and an MCP tool, with every call recorded and no
// secret value anywhere.
func testToolsAndMCPServers(t *testing.T, e engine) {
	everything := mcptest.Everything(t)
	st := e.open(t)
	logs := &lockedBuffer{}
	open := netguard.MustNew(netguard.Options{AllowPrivate: true})
	strict := netguard.MustNew(netguard.Options{})
	mcpc := &tools.MCP{Guard: open}
	t.Cleanup(mcpc.Close)
	src := &tools.Source{Store: st, Vault: &vault.Service{Store: st, Box: testBox}, Guard: open, MCP: mcpc}
	t.Cleanup(src.Close)
	w := newWorld(t, st, worldOpts{logTo: logs, conv: &convOpts{tools: src}})
	w.api.Tools.Guard, w.api.Tools.MCP = open, mcpc
	w.credit(t, 100)
	ctx := context.Background()
	const value = "vault-VALUE-tools-7731"
	srv := newToolServer(t, value)
	var answers [][]byte
	keep := func(r *resp) *resp { answers = append(answers, r.Body); return r }

	secret := keep(w.must(t, 201, req{method: "POST", path: "/v1/vault/secrets", key: kLive,
		body: map[string]any{"project_id": string(w.p1.ID), "name": "orders-api", "type": "header", "header_name": "X-Api-Key", "value": value}})).Str("id")
	toolBody := func(name, url string, mods ...func(map[string]any)) map[string]any {
		b := map[string]any{"project_id": string(w.p1.ID), "name": name, "description": "Look up an order by its id.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []any{"order_id"}},
			"request":    map[string]any{"method": "GET", "url": url}, "secret_id": secret}
		for _, m := range mods {
			m(b)
		}
		return b
	}
	post := func(key string, body any) req { return req{method: "POST", path: "/v1/tools", key: key, body: body} }
	tool := keep(w.must(t, 201, post(kLive, toolBody("lookup_order", srv.URL+"/orders/{{order_id}}?customer={{customer}}"))))
	if tool.Str("object") != "tool" || tool.Str("result_mode") != "llm" || tool.JSON["timeout_ms"] != 8000.0 || tool.Str("secret_id") != secret || tool.JSON["test_safe"] != false {
		t.Fatalf("created: %s", tool)
	}
	toolID := tool.Str("id")
	// Refusals when saved.
	w.fails(t, 409, fault.CodeToolNameTaken, post(kLive, toolBody("LOOKUP_ORDER", srv.URL+"/x")))
	w.fails(t, 422, fault.CodeInvalidToolSchema, post(kLive, toolBody("bad_schema", srv.URL+"/x", func(b map[string]any) {
		b["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "strng"}}}
	}))).hasError(t, "/parameters/properties/order_id/type", "invalid")
	w.fails(t, 422, fault.CodeInvalidToolSchema, post(kLive, toolBody("bad_type", srv.URL+"/x", func(b map[string]any) {
		b["parameters"] = map[string]any{"type": "array"}
	}))).hasError(t, "/parameters/type", "invalid")
	w.fails(t, 422, fault.CodeToolURLNotAllowed, post(kLive, toolBody("templated_host", "http://{{host}}/x")))
	w.fails(t, 422, fault.CodeValidationFailed, post(kLive, toolBody("pasted_key", srv.URL+"/x", func(b map[string]any) {
		b["request"] = map[string]any{"method": "GET", "url": srv.URL + "/x", "headers": map[string]any{"Authorization": "Bearer pasted"}}
	}))).hasError(t, "/request/headers/Authorization", "invalid")
	w.fails(t, 422, fault.CodeToolURLNotAllowed, post(kLive, toolBody("not_http", "ftp://example.com/x")))
	w.api.Tools.Guard = strict
	w.fails(t, 422, fault.CodeToolURLNotAllowed, post(kLive, toolBody("private", srv.URL+"/orders/{{order_id}}"))).hasError(t, "/request/url", "invalid")
	w.api.Tools.Guard = open
	w.fails(t, 404, fault.CodeSecretNotFound, post(kLive, toolBody("other_secret", srv.URL+"/x", func(b map[string]any) { b["secret_id"] = "0190a6f0-0000-7000-8000-0000000000aa" })))
	w.fails(t, 403, fault.CodeMissingPermission, post(kReadOnly, toolBody("x", srv.URL+"/x")))
	w.fails(t, 404, fault.CodeProjectNotFound, post(kNarrow, toolBody("x", srv.URL+"/x", func(b map[string]any) { b["project_id"] = string(w.p2.ID) })))
	// Get, list, update.
	keep(w.must(t, 200, req{method: "GET", path: "/v1/tools/" + toolID, key: kLive}))
	if l := w.must(t, 200, req{method: "GET", path: "/v1/tools?project_id=" + string(w.p1.ID), key: kLive}); len(l.JSON["data"].([]any)) != 1 {
		t.Fatalf("list: %s", l)
	}
	slow := keep(w.must(t, 201, post(kLive, toolBody("slow_thing", srv.URL+"/hang", func(b map[string]any) {
		b["timeout_ms"], b["filler"] = 300, "One moment please."
	}))))
	up := keep(w.must(t, 200, req{method: "PATCH", path: "/v1/tools/" + slow.Str("id"), key: kLive, body: map[string]any{"description": "Hangs.", "filler": nil}}))
	if up.JSON["filler"] != nil || up.Str("description") != "Hangs." || up.JSON["timeout_ms"] != 300.0 {
		t.Fatalf("updated: %s", up)
	}
	w.fails(t, 404, fault.CodeToolNotFound, req{method: "GET", path: "/v1/tools/0190a6f0-0000-7000-8000-0000000000aa", key: kLive})
	big := keep(w.must(t, 201, post(kLive, toolBody("big_thing", srv.URL+"/big")))).Str("id")
	keep(w.must(t, 201, post(kLive, toolBody("failing_thing", srv.URL+"/fail", func(b map[string]any) { b["apology"] = "Sorry, the order system is down." }))))

	// MCP servers: discovered when saved; an unreachable one and a malformed one keep last_error.
	mpost := func(body map[string]any) req {
		return req{method: "POST", path: "/v1/mcp-servers", key: kLive, body: body}
	}
	m := keep(w.must(t, 201, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "everything", "url": everything, "allowed_tools": []any{"echo", "get-sum"}})))
	if m.JSON["last_error"] != nil || m.Str("protocol_version") == "" || len(m.JSON["tools"].([]any)) < 3 {
		t.Fatalf("discovered: %s", m)
	}
	allowed := 0
	for _, x := range m.JSON["tools"].([]any) {
		if x.(map[string]any)["allowed"] == true {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("allowed tools: %s", m)
	}
	speaker := keep(w.must(t, 201, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "speaker", "url": everything, "allowed_tools": []any{"get-sum"}, "result_mode": "speak"})))
	if speaker.Str("result_mode") != "speak" || speaker.JSON["last_error"] != nil {
		t.Fatalf("speak-mode server: %s", speaker)
	}
	down := keep(w.must(t, 201, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "down", "url": "http://127.0.0.1:1/mcp", "timeout_ms": 1000})))
	if down.Str("last_error") == "" || len(down.JSON["tools"].([]any)) != 0 {
		t.Fatalf("unreachable: %s", down)
	}
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc": "2.0", "id": `))
	}))
	defer garbage.Close()
	bad := keep(w.must(t, 201, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "garbage", "url": garbage.URL, "timeout_ms": 2000})))
	if bad.Str("last_error") == "" {
		t.Fatalf("malformed JSON-RPC: %s", bad)
	}
	oldVersion := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg map[string]any
		json.NewDecoder(r.Body).Decode(&msg)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%v,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"old","version":"1"}}}`, msg["id"])
	}))
	defer oldVersion.Close()
	ov := keep(w.must(t, 201, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "ancient", "url": oldVersion.URL, "timeout_ms": 2000})))
	if ov.Str("last_error") == "" {
		t.Fatalf("unknown version: %s", ov)
	}
	t.Logf("last errors: unreachable %q; malformed %q; unknown version %q", down.Str("last_error"), bad.Str("last_error"), ov.Str("last_error"))
	w.fails(t, 409, fault.CodeMCPServerNameTaken, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "Everything", "url": everything}))
	w.api.Tools.Guard = strict
	w.fails(t, 422, fault.CodeToolURLNotAllowed, mpost(map[string]any{"project_id": string(w.p1.ID), "name": "private", "url": everything}))
	w.api.Tools.Guard = open
	g := keep(w.must(t, 200, req{method: "GET", path: "/v1/mcp-servers/" + m.Str("id"), key: kLive}))
	if g.Str("name") != "everything" {
		t.Fatalf("get: %s", g)
	}
	keep(w.must(t, 200, req{method: "PATCH", path: "/v1/mcp-servers/" + down.Str("id"), key: kLive, body: map[string]any{"refresh": true, "ttl_ms": 60000}}))
	if l := w.must(t, 200, req{method: "GET", path: "/v1/mcp-servers", key: kLive}); len(l.JSON["data"].([]any)) != 5 {
		t.Fatalf("servers: %s", l)
	}
	w.must(t, 200, req{method: "DELETE", path: "/v1/mcp-servers/" + bad.Str("id"), key: kLive})
	w.fails(t, 404, fault.CodeMCPServerNotFound, req{method: "GET", path: "/v1/mcp-servers/" + bad.Str("id"), key: kLive})

	// The secret is in use: 409 naming the tools.
	d := w.fails(t, 409, fault.CodeSecretInUse, req{method: "DELETE", path: "/v1/vault/secrets/" + secret, key: kLive})
	if !strings.Contains(d.Str("detail"), "lookup_order") {
		t.Fatalf("in use: %s", d)
	}

	// Definitions: references.tools resolve by name; an unknown one is refused.
	def := func(refs ...any) map[string]any {
		d := definition("Tooled "+randHex(2), "custom", "inbound", channels("chat"))
		d["references"] = map[string]any{"tools": refs}
		return d
	}
	w.fails(t, 422, fault.CodeUnknownToolReference, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": string(w.p1.ID), "definition": def("lookup_order", "ghost_tool")}}).hasError(t, "/definition/references/tools/1", "unknown_reference")
	w.fails(t, 422, fault.CodeUnknownToolReference, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": string(w.p1.ID), "definition": def("everything.get-env")}}) // not allowed
	w.fails(t, 422, fault.CodeUnknownToolReference, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": string(w.p2.ID), "definition": def("lookup_order")}}) // another project's tool
	agent := w.must(t, 201, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": string(w.p1.ID), "definition": def("lookup_order", "everything.echo", "speaker.get-sum", "slow_thing", "big_thing", "failing_thing")}}).Str("id")
	w.must(t, 201, req{method: "POST", path: "/v1/agents/" + agent + "/publish", key: kLive})
	w.fails(t, 422, fault.CodeUnknownToolReference, req{method: "PUT", path: "/v1/agents/" + agent + "/definition", key: kLive,
		body: map[string]any{"definition": def("lookup_order", "nope")}})

	// A chat: the agent calls the HTTP tool (the vault's header reaches the service, the
	// variables fill the URL) and the MCP tool of server-everything.
	script := w.tp.Fakes.Chat.Script()
	script.Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-77"}`)}}},
		fakes.ScriptTurn{Text: "Your order A-77 has shipped."},
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "echo", Args: json.RawMessage(`{"message":"hello from parley"}`)}}},
		fakes.ScriptTurn{Text: "The server echoed."},
	)
	defer func() {
		if t.Failed() {
			t.Logf("logs: %s", logs.bytes())
		}
	}()
	conv := w.must(t, 201, req{method: "POST", path: "/v1/chats", key: kLive, body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada Lovelace"}}}).Str("id")
	say := func(msg string) *resp {
		return keep(w.must(t, 200, req{method: "POST", path: "/v1/conversations/" + conv + "/messages", key: kLive, body: map[string]any{"message": msg}}))
	}
	if r := say("Where is my order A-77?"); !strings.Contains(string(r.Body), "Your order A-77 has shipped.") {
		t.Fatalf("turn: %s", r)
	}
	if got := srv.requests(); len(got) != 1 || got[0] != "GET /orders/A-77?customer=Ada%20Lovelace" && got[0] != "GET /orders/A-77?customer=Ada+Lovelace" {
		t.Fatalf("the tool's service saw %v (unauthorized %d)", got, srv.unaut)
	}
	if r := say("Echo something"); !strings.Contains(string(r.Body), "The server echoed.") {
		t.Fatalf("turn: %s", r)
	}
	reqs := w.tp.Fakes.Chat.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Raw), "hello from parley") {
		t.Fatalf("the MCP result did not reach the LLM: %s", reqs[len(reqs)-1].Raw)
	}
	// A speak-mode MCP tool: the agent says the server's own words.
	script.Add(fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "get-sum", Args: json.RawMessage(`{"a":2,"b":40}`)}}})
	if r := say("What is two plus forty?"); !strings.Contains(r.Str("agent.text"), "42") {
		t.Fatalf("spoken MCP result: %s", r)
	}
	// A hanging tool (timeout), a 10 MB answer and a 500, all bounded: the caller gets the apology.
	script.Add(fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "slow_thing", Args: json.RawMessage(`{"order_id":"1"}`)}, {Name: "big_thing", Args: json.RawMessage(`{"order_id":"1"}`)}, {Name: "failing_thing", Args: json.RawMessage(`{"order_id":"1"}`)}}})
	start := time.Now()
	r := say("Do the three things")
	if time.Since(start) > 5*time.Second || r.Str("agent.text") != "Sorry, the order system is down." {
		t.Fatalf("failing tools: %s after %v", r, time.Since(start))
	}
	var toolLines []string
	waitFor(t, 5*time.Second, "six tool lines", func() bool {
		tr := keep(w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + conv + "/transcript", key: kLive}))
		toolLines = nil
		for _, l := range tr.JSON["lines"].([]any) {
			lm := l.(map[string]any)
			if lm["role"] == "tool" {
				toolLines = append(toolLines, lm["text"].(string))
			}
		}
		return len(toolLines) == 6
	})
	if len(toolLines) != 6 || !strings.Contains(toolLines[0], "shipped") || !strings.Contains(toolLines[1], "hello from parley") {
		t.Fatalf("tool lines: %q", toolLines)
	}
	// Every call is recorded with its status, duration and size.
	var calls []store.ToolCall
	waitFor(t, 5*time.Second, "six call records", func() bool {
		calls, _ = st.ToolCalls(ctx, w.org.ID, store.ConversationID(conv))
		return len(calls) == 6
	})
	status := map[string]string{}
	for _, c := range calls {
		status[c.ToolName] = c.Status
		if c.ToolName == "big_thing" && !strings.Contains(c.Error, "64 KB") {
			t.Fatalf("big: %+v", c)
		}
	}
	if status["lookup_order"] != "ok" || status["echo"] != "ok" || status["get-sum"] != "ok" || status["slow_thing"] != "timeout" || status["big_thing"] != "error" || status["failing_thing"] != "error" {
		t.Fatalf("statuses %v", status)
	}

	// A test-key chat gets the mock result of a tool that is not test-safe: the service is not called.
	before := len(srv.requests())
	script.Add(fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"T-1"}`)}}}, fakes.ScriptTurn{Text: "Mocked."})
	tconv := w.must(t, 201, req{method: "POST", path: "/v1/chats", key: kTest, body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Test"}}}).Str("id")
	keep(w.must(t, 200, req{method: "POST", path: "/v1/conversations/" + tconv + "/messages", key: kTest, body: map[string]any{"message": "order T-1?"}}))
	if len(srv.requests()) != before {
		t.Fatal("a test-key conversation called a tool that is not test-safe")
	}
	waitFor(t, 5*time.Second, "the mock record", func() bool {
		c, _ := st.ToolCalls(ctx, w.org.ID, store.ConversationID(tconv))
		return len(c) == 1 && c[0].Status == "mock"
	})

	// Deleting a tool frees its secret; the definition naming it is refused when next saved.
	w.must(t, 200, req{method: "DELETE", path: "/v1/tools/" + big, key: kLive})
	w.fails(t, 404, fault.CodeToolNotFound, req{method: "DELETE", path: "/v1/tools/" + big, key: kLive})

	// No answer, log line or call record carries the secret's value.
	recs, _ := json.Marshal(calls)
	for _, b := range append(answers, logs.bytes(), recs) {
		if strings.Contains(string(b), value) {
			t.Fatalf("the secret's value leaked: %s", b)
		}
	}
}
