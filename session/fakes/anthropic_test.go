package fakes

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const anKey = "sk-ant-fake-0123456789"

func TestAnthropicFakeValidation(t *testing.T) {
	srv := httptest.NewServer(NewAnthropicFake(ScriptOptions{APIKey: anKey}))
	defer srv.Close()
	ok := map[string]string{"x-api-key": anKey, "anthropic-version": "2023-06-01"}
	user := `"messages":[{"role":"user","content":"x"}]`
	base := `"model":"m","max_tokens":10,`
	toolUse := `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}`
	cases := []struct {
		name   string
		path   string
		hdr    map[string]string
		body   string
		status int
		typ    string
		msg    string
	}{
		{"wrong path", "/v1/complete", ok, `{}`, 404, "not_found_error", "Not Found"},
		{"no key", "", map[string]string{"anthropic-version": "2023-06-01"}, `{}`, 401, "authentication_error", "x-api-key header is required"},
		{"wrong key", "", map[string]string{"x-api-key": "nope", "anthropic-version": "2023-06-01"}, `{}`, 401, "authentication_error", "invalid x-api-key"},
		{"no version", "", map[string]string{"x-api-key": anKey}, `{}`, 400, "invalid_request_error", "anthropic-version: header is required"},
		{"bad version", "", map[string]string{"x-api-key": anKey, "anthropic-version": "2099-01-01"}, `{}`, 400, "invalid_request_error", "not a valid version"},
		{"bad json", "", ok, `{`, 400, "invalid_request_error", "parsing the body"},
		{"no model", "", ok, `{"max_tokens":1,` + user + `}`, 400, "invalid_request_error", "model: Field required"},
		{"no max_tokens", "", ok, `{"model":"m",` + user + `}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"zero max_tokens", "", ok, `{"model":"m","max_tokens":0,` + user + `}`, 400, "invalid_request_error", "greater than or equal to 1"},
		{"no messages", "", ok, `{"model":"m","max_tokens":1}`, 400, "invalid_request_error", "messages: Field required"},
		{"system role", "", ok, `{` + base + `"messages":[{"role":"system","content":"x"}]}`, 400, "invalid_request_error", "Input should be 'user' or 'assistant'"},
		{"empty content", "", ok, `{` + base + `"messages":[{"role":"user","content":""}]}`, 400, "invalid_request_error", "non-empty content"},
		{"empty text block", "", ok, `{` + base + `"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, 400, "invalid_request_error", "must be non-empty"},
		{"tool_use unanswered", "", ok, `{` + base + `"messages":[{"role":"user","content":"x"},` + toolUse + `,{"role":"user","content":"y"}]}`, 400, "invalid_request_error", "without `tool_result` blocks immediately after: t1"},
		{"tool_result unknown", "", ok, `{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"zz","content":"r"}]}]}`, 400, "invalid_request_error", "unexpected `tool_use_id`"},
		{"tool_result after text", "", ok, `{` + base + `"messages":[{"role":"user","content":"x"},` + toolUse + `,{"role":"user","content":[{"type":"text","text":"y"},{"type":"tool_result","tool_use_id":"t1"}]}]}`, 400, "invalid_request_error", "must come first"},
		{"tool_use in user", "", ok, `{` + base + `"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, 400, "invalid_request_error", "only allowed in assistant"},
		{"tool_use input not object", "", ok, `{` + base + `"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]}]}`, 400, "invalid_request_error", "valid dictionary"},
		{"bad image type", "", ok, `{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]}]}`, 400, "invalid_request_error", "media_type"},
		{"bad image data", "", ok, `{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"data:image/png;base64,AAAA"}}]}]}`, 400, "invalid_request_error", "invalid base64"},
		{"tool without schema", "", ok, `{` + base + user + `,"tools":[{"name":"f"}]}`, 400, "invalid_request_error", "input_schema: Field required"},
		{"tool schema not object type", "", ok, `{` + base + user + `,"tools":[{"name":"f","input_schema":{"type":"string"}}]}`, 400, "invalid_request_error", "Input should be 'object'"},
		{"tool_choice without tools", "", ok, `{` + base + user + `,"tool_choice":{"type":"any"}}`, 400, "invalid_request_error", "while providing tools"},
		{"tool_choice bad type", "", ok, `{` + base + user + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"required"}}`, 400, "invalid_request_error", "does not match"},
		{"temperature", "", ok, `{` + base + user + `,"temperature":1.5}`, 400, "invalid_request_error", "temperature"},
		{"system not text", "", ok, `{` + base + user + `,"system":[{"type":"image"}]}`, 400, "invalid_request_error", "system"},
	}
	for _, c := range cases {
		path := c.path
		if path == "" {
			path = "/v1/messages"
		}
		resp := scriptPost(t, srv.URL+path, c.hdr, c.body)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
		m := scriptDecode(t, resp.Body)
		e, isObj := m["error"].(map[string]any)
		if m["type"] != "error" || !isObj {
			t.Fatalf("%s: body %v is not Anthropic's error shape", c.name, m)
		}
		if e["type"] != c.typ || !strings.Contains(e["message"].(string), c.msg) {
			t.Fatalf("%s: error %v", c.name, e)
		}
		if resp.Header.Get("Request-Id") == "" {
			t.Fatalf("%s: no request-id header", c.name)
		}
	}
}

// TestAnthropicFakeStreamShape checks the event sequence against the Messages streaming format.
func TestAnthropicFakeStreamShape(t *testing.T) {
	args0 := `{"query":"weather in Paris","limit":3}`
	script := NewScript(ScriptTurn{Text: "Looking that up.", ToolCalls: []ScriptToolCall{
		{Name: "search", Args: json.RawMessage(args0)},
		{Name: "clock"},
	}})
	f := NewAnthropicFake(ScriptOptions{Script: script, ArgChunkBytes: 6})
	srv := httptest.NewServer(f)
	defer srv.Close()
	resp := scriptPost(t, srv.URL+"/v1/messages", map[string]string{"anthropic-version": "2023-06-01"},
		`{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"search","input_schema":{"type":"object"}},{"name":"clock","input_schema":{"type":"object"}}]}`)
	evs := scriptReadSSE(t, resp.Body, time.Now())
	var seq []string
	type block struct {
		typ, id, name, text, json string
		pieces                    int
		stopped                   bool
	}
	var blocks []*block
	var stopReason string
	var outTokens float64
	for _, ev := range evs {
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatal(err)
		}
		if m["type"] != ev.event {
			t.Fatalf("event field %q but data type %v", ev.event, m["type"])
		}
		seq = append(seq, ev.event)
		switch ev.event {
		case "message_start":
			msg := m["message"].(map[string]any)
			if msg["model"] != "claude-test" || msg["role"] != "assistant" || msg["usage"].(map[string]any)["input_tokens"].(float64) < 1 {
				t.Fatalf("message_start %v", msg)
			}
		case "content_block_start":
			if int(m["index"].(float64)) != len(blocks) {
				t.Fatalf("block index %v", m["index"])
			}
			cb := m["content_block"].(map[string]any)
			b := &block{typ: cb["type"].(string)}
			if b.typ == "tool_use" {
				b.id, b.name = cb["id"].(string), cb["name"].(string)
				if !scriptIsObject(cb["input"]) {
					t.Fatalf("tool_use start input %v", cb["input"])
				}
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			b := blocks[int(m["index"].(float64))]
			d := m["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				b.text += d["text"].(string)
			case "input_json_delta":
				b.json += d["partial_json"].(string)
				b.pieces++
			}
			if b.stopped {
				t.Fatal("delta after stop")
			}
		case "content_block_stop":
			blocks[int(m["index"].(float64))].stopped = true
		case "message_delta":
			stopReason = m["delta"].(map[string]any)["stop_reason"].(string)
			outTokens = m["usage"].(map[string]any)["output_tokens"].(float64)
		}
	}
	want := "message_start ping content_block_start"
	if got := strings.Join(seq[:3], " "); got != want {
		t.Fatalf("sequence starts %q", got)
	}
	if seq[len(seq)-2] != "message_delta" || seq[len(seq)-1] != "message_stop" {
		t.Fatalf("sequence ends %v", seq[len(seq)-2:])
	}
	if len(blocks) != 3 || blocks[0].typ != "text" || blocks[0].text != "Looking that up." {
		t.Fatalf("blocks %+v", blocks)
	}
	if b := blocks[1]; b.typ != "tool_use" || b.name != "search" || b.json != args0 || b.pieces < 5 || !strings.HasPrefix(b.id, "toolu_") {
		t.Fatalf("tool block %+v", b)
	}
	if b := blocks[2]; b.name != "clock" || b.json != "{}" || !b.stopped {
		t.Fatalf("tool block %+v", b)
	}
	if stopReason != "tool_use" || outTokens < 5 {
		t.Fatalf("stop %q tokens %v", stopReason, outTokens)
	}
}

func TestAnthropicFakeNonStreamedAndEcho(t *testing.T) {
	f := NewAnthropicFake(ScriptOptions{})
	srv := httptest.NewServer(f)
	defer srv.Close()
	resp := scriptPost(t, srv.URL+"/v1/messages", map[string]string{"anthropic-version": "2023-06-01"},
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"what is it"}]}]}`)
	m := scriptDecode(t, resp.Body)
	c := m["content"].([]any)[0].(map[string]any)
	if m["type"] != "message" || m["stop_reason"] != "end_turn" || c["text"] != "You said: what is it" {
		t.Fatalf("%v", m)
	}
	f.FailNext(1, 529, 0)
	resp = scriptPost(t, srv.URL+"/v1/messages", map[string]string{"anthropic-version": "2023-06-01"},
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`)
	m = scriptDecode(t, resp.Body)
	if resp.StatusCode != 529 || m["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
}
