package fakes

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const oacKey = "sk-fake-0123456789"

func TestOpenAIChatFakeValidation(t *testing.T) {
	srv := httptest.NewServer(NewOpenAIChatFake(ScriptOptions{APIKey: oacKey}))
	defer srv.Close()
	auth := map[string]string{"Authorization": "Bearer " + oacKey}
	user := `"messages":[{"role":"user","content":"x"}]`
	cases := []struct {
		name   string
		path   string
		hdr    map[string]string
		body   string
		status int
		code   any
		msg    string
	}{
		{"wrong path", "/v1/completions", auth, `{}`, 404, nil, "Invalid URL"},
		{"no key", "", nil, `{}`, 401, nil, "didn't provide an API key"},
		{"wrong key", "", map[string]string{"Authorization": "Bearer sk-nope-99999999"}, `{}`, 401, "invalid_api_key", "Incorrect API key"},
		{"bad json", "", auth, `{"model":`, 400, nil, "could not parse the JSON"},
		{"no model", "", auth, `{` + user + `}`, 400, nil, "you must provide a model parameter"},
		{"no messages", "", auth, `{"model":"m"}`, 400, "missing_required_parameter", "'messages'"},
		{"empty messages", "", auth, `{"model":"m","messages":[]}`, 400, nil, "too short"},
		{"bad role", "", auth, `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, 400, "invalid_value", "Invalid value: 'robot'"},
		{"orphan tool result", "", auth, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c","content":"r"}]}`, 400, nil, "preceeding message with 'tool_calls'"},
		{"unanswered tool call", "", auth, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"y"}]}`, 400, nil, "did not have response messages: c1"},
		{"arguments not a string", "", auth, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, 400, "invalid_value", "tool_calls"},
		{"assistant null content without calls", "", auth, `{"model":"m","messages":[{"role":"assistant","content":null}]}`, 400, "invalid_value", "got null"},
		{"stream_options without stream", "", auth, `{"model":"m",` + user + `,"stream_options":{"include_usage":true}}`, 400, nil, "only allowed when 'stream' is enabled"},
		{"tool_choice without tools", "", auth, `{"model":"m",` + user + `,"tool_choice":"auto"}`, 400, nil, "only allowed when 'tools' are specified"},
		{"bad tool name", "", auth, `{"model":"m",` + user + `,"tools":[{"type":"function","function":{"name":"a b"}}]}`, 400, "invalid_value", "pattern"},
		{"tool parameters not an object", "", auth, `{"model":"m",` + user + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, 400, "invalid_type", "parameters"},
		{"bad image url", "", auth, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,AAAA"}}]}]}`, 400, "invalid_value", "image"},
		{"bad part type", "", auth, `{"model":"m","messages":[{"role":"user","content":[{"type":"video"}]}]}`, 400, "invalid_value", "'video'"},
		{"temperature", "", auth, `{"model":"m",` + user + `,"temperature":3}`, 400, "invalid_value", "temperature"},
		{"max_tokens", "", auth, `{"model":"m",` + user + `,"max_tokens":0}`, 400, "integer_below_min_value", "max_tokens"},
		{"stream not bool", "", auth, `{"model":"m",` + user + `,"stream":"yes"}`, 400, "invalid_type", "stream"},
	}
	for _, c := range cases {
		path := c.path
		if path == "" {
			path = "/v1/chat/completions"
		}
		resp := scriptPost(t, srv.URL+path, c.hdr, c.body)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: content type %q", c.name, ct)
		}
		m := scriptDecode(t, resp.Body)
		e, ok := m["error"].(map[string]any)
		if !ok {
			t.Fatalf("%s: body %v is not OpenAI's error shape", c.name, m)
		}
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, has := e[k]; !has {
				t.Fatalf("%s: error lacks %q: %v", c.name, k, e)
			}
		}
		if e["type"] != "invalid_request_error" || e["code"] != c.code || !strings.Contains(e["message"].(string), c.msg) {
			t.Fatalf("%s: error %v", c.name, e)
		}
	}
	// GET with a good key.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer "+oacKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatal(resp.StatusCode)
	}
}

// TestOpenAIChatFakeStreamShape checks the chunks the fake writes against the API's format.
func TestOpenAIChatFakeStreamShape(t *testing.T) {
	args0 := `{"city":"Paris","days":[1,2,3]}`
	script := NewScript(ScriptTurn{Text: "One moment.", ToolCalls: []ScriptToolCall{
		{Name: "get_weather", Args: json.RawMessage(args0)},
		{Name: "get_time", ID: "call_fixed"},
	}})
	f := NewOpenAIChatFake(ScriptOptions{Script: script, ArgChunkBytes: 4})
	srv := httptest.NewServer(f)
	defer srv.Close()
	resp := scriptPost(t, srv.URL+"/v1/chat/completions", nil,
		`{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	evs := scriptReadSSE(t, resp.Body, time.Now())
	if evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1].data)
	}
	var text strings.Builder
	args := map[int]string{}
	ids := map[int]string{}
	names := map[int]string{}
	pieces := map[int]int{}
	var finish string
	var usage map[string]any
	for i, ev := range evs[:len(evs)-1] {
		if ev.event != "" {
			t.Fatalf("OpenAI chunks have no event field: %q", ev.event)
		}
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string  `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "gpt-test" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Fatalf("chunk %d header: %s", i, ev.data)
		}
		if i == 0 && (len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant") {
			t.Fatalf("first chunk must carry the role: %s", ev.data)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 || i != len(evs)-2 {
				t.Fatalf("usage chunk must be last with no choices: %s", ev.data)
			}
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					if tc.Type != "function" || tc.Function.Name == "" || ids[tc.Index] != "" {
						t.Fatalf("tool call header %s", ev.data)
					}
					ids[tc.Index], names[tc.Index] = tc.ID, tc.Function.Name
				}
				if tc.Function.Arguments != nil && *tc.Function.Arguments != "" {
					args[tc.Index] += *tc.Function.Arguments
					pieces[tc.Index]++
				}
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text.String() != "One moment." || finish != "tool_calls" {
		t.Fatalf("text %q finish %q", text.String(), finish)
	}
	if names[0] != "get_weather" || args[0] != args0 || pieces[0] < 5 || !strings.HasPrefix(ids[0], "call_") {
		t.Fatalf("call 0: %q %q %q in %d pieces", ids[0], names[0], args[0], pieces[0])
	}
	if names[1] != "get_time" || args[1] != "{}" || ids[1] != "call_fixed" {
		t.Fatalf("call 1: %q %q %q", ids[1], names[1], args[1])
	}
	if usage["prompt_tokens"].(float64) < 1 || usage["completion_tokens"].(float64) < 3 ||
		usage["total_tokens"].(float64) != usage["prompt_tokens"].(float64)+usage["completion_tokens"].(float64) {
		t.Fatalf("usage %v", usage)
	}

	// Without include_usage there is no usage chunk.
	resp = scriptPost(t, srv.URL+"/v1/chat/completions", nil, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	for _, ev := range scriptReadSSE(t, resp.Body, time.Now()) {
		if strings.Contains(ev.data, `"usage"`) {
			t.Fatalf("unexpected usage: %s", ev.data)
		}
	}
}

func TestOpenAIChatFakeNonStreamed(t *testing.T) {
	f := NewOpenAIChatFake(ScriptOptions{Script: NewScript(ScriptTurn{ToolCalls: []ScriptToolCall{{Name: "f", Args: json.RawMessage(`{"a": 1}`)}}})})
	srv := httptest.NewServer(f)
	defer srv.Close()
	resp := scriptPost(t, srv.URL+"/v1/chat/completions", nil, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	m := scriptDecode(t, resp.Body)
	ch := m["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	call := msg["tool_calls"].([]any)[0].(map[string]any)
	if m["object"] != "chat.completion" || ch["finish_reason"] != "tool_calls" || msg["content"] != nil ||
		call["function"].(map[string]any)["arguments"] != `{"a":1}` {
		t.Fatalf("%v", m)
	}
	resp = scriptPost(t, srv.URL+"/v1/chat/completions", nil, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"pic"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`)
	m = scriptDecode(t, resp.Body)
	if got := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; got != "You said: pic" {
		t.Fatalf("echo %v", got)
	}
}
