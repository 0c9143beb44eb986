package llm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/session/fakes"
)

func f64(v float64) *float64 { return &v }

func TestOpenAIEncode(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		cfg  Config
		want string
	}{
		{
			name: "text",
			req:  Request{Model: "gpt", System: "sys", Messages: []Message{{Role: RoleUser, Content: "hi", Name: "ann"}}, Temperature: f64(0.5), MaxTokens: 50},
			want: `{"model":"gpt","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi","name":"ann"}],"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"max_tokens":50}`,
		},
		{
			name: "config model and max_completion_tokens",
			req:  Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}},
			cfg:  Config{Model: "o4", MaxTokens: 7, UseMaxCompletionTokens: true},
			want: `{"model":"o4","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7}`,
		},
		{
			name: "tools, calls and results",
			req: Request{Model: "m", ToolChoice: ToolChoiceRequired,
				Tools: []Tool{{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "g"}},
				Messages: []Message{
					{Role: RoleUser, Content: "x"},
					{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}, {ID: "c2", Name: "g"}}},
					{Role: RoleTool, ToolCallID: "c1", Content: "r1"},
					{Role: RoleTool, ToolCallID: "c2", Content: ""},
				}},
			want: `{"model":"m","messages":[{"role":"user","content":"x"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
				`{"role":"tool","content":"r1","tool_call_id":"c1"},{"role":"tool","content":"","tool_call_id":"c2"}],` +
				`"stream":true,"stream_options":{"include_usage":true},` +
				`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}},{"type":"function","function":{"name":"g"}}],"tool_choice":"required"}`,
		},
		{
			name: "named tool choice",
			req:  Request{Model: "m", ToolChoice: "f", Tools: []Tool{{Name: "f"}}, Messages: []Message{{Role: RoleUser, Content: "x"}}},
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "tool choice without tools is left out",
			req:  Request{Model: "m", ToolChoice: ToolChoiceAuto, Messages: []Message{{Role: RoleUser, Content: "x"}}},
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "image parts",
			req:  Request{Model: "m", Messages: []Message{{Role: RoleUser, Images: []Image{{MIME: "image/gif", Data: []byte("GIF")}, {URL: "https://x/y.png"}}}}},
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lG"}},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		},
	}
	for _, c := range cases {
		model := c.req.Model
		if model == "" {
			model = c.cfg.Model
		}
		got, err := encodeOpenAI(&c.req, model, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !jsonEqual(t, got, []byte(c.want)) {
			t.Fatalf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestOpenAIEncodeErrors(t *testing.T) {
	u := Message{Role: RoleUser, Content: "x"}
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"no model", Request{Messages: []Message{u}}, "no model"},
		{"no messages", Request{Model: "m"}, "no messages"},
		{"tool without id", Request{Model: "m", Messages: []Message{u, {Role: RoleTool, Content: "r"}}}, "ToolCallID"},
		{"assistant image", Request{Model: "m", Messages: []Message{{Role: RoleAssistant, Images: []Image{{MIME: "image/png", Data: []byte{1}}}}}}, "images"},
		{"tool image", Request{Model: "m", Messages: []Message{{Role: RoleTool, ToolCallID: "c", Images: []Image{{MIME: "image/png", Data: []byte{1}}}}}}, "images"},
		{"image without mime", Request{Model: "m", Messages: []Message{{Role: RoleUser, Images: []Image{{Data: []byte{1}}}}}}, "MIME"},
		{"empty image", Request{Model: "m", Messages: []Message{{Role: RoleUser, Images: []Image{{}}}}}, "neither"},
		{"unknown role", Request{Model: "m", Messages: []Message{{Role: "robot"}}}, "unknown role"},
		{"call without id", Request{Model: "m", Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f"}}}}}, "ID"},
		{"bad tool name", Request{Model: "m", Messages: []Message{u}, Tools: []Tool{{Name: "get weather"}}}, "must match"},
		{"bad parameters", Request{Model: "m", Messages: []Message{u}, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`[1]`)}}}, "JSON Schema object"},
		{"negative max tokens", Request{Model: "m", Messages: []Message{u}, MaxTokens: -1}, "negative"},
	}
	for _, c := range cases {
		_, err := encodeOpenAI(&c.req, c.req.Model, Config{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Through Stream: an *Error, not sent.
	c, _ := NewOpenAI(Config{BaseURL: "http://127.0.0.1:1"})
	_, err := c.Stream(context.Background(), Request{Messages: []Message{u}})
	if e := asError(t, err); e.Code != CodeInvalidRequest || e.Retryable {
		t.Fatalf("%+v", e)
	}
}

// TestOpenAIConformance checks what the adapter puts on the wire, as recorded by the fake.
func TestOpenAIConformance(t *testing.T) {
	r := newRig(t, vendors[0], fakes.ScriptOptions{}, Config{Headers: map[string]string{"OpenAI-Organization": "org-1"}})
	req := Request{Model: "gpt-x", System: "sys", Messages: []Message{{Role: RoleUser, Content: "hi"}},
		Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}, ToolChoice: ToolChoiceAuto, MaxTokens: 99}
	if _, err := run(t, r.client, req); err != nil {
		t.Fatal(err)
	}
	rec := r.fake.Requests()[0]
	if rec.Method != "POST" || rec.Path != "/v1/chat/completions" {
		t.Fatalf("%s %s", rec.Method, rec.Path)
	}
	for k, want := range map[string]string{
		"Authorization":       "Bearer " + testKey,
		"Content-Type":        "application/json",
		"Accept":              "text/event-stream",
		"Openai-Organization": "org-1",
	} {
		if got := rec.Header.Get(k); got != want {
			t.Fatalf("header %s = %q, want %q", k, got, want)
		}
	}
	if ae := rec.Header.Get("Accept-Encoding"); ae != "" {
		t.Fatalf("Accept-Encoding %q: compression must stay off", ae)
	}
	b := rec.Body
	if b["model"] != "gpt-x" || b["stream"] != true || b["max_tokens"] != float64(99) || b["tool_choice"] != "auto" {
		t.Fatalf("body %v", b)
	}
	if so := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options %v", so)
	}
	tool := b["tools"].([]any)[0].(map[string]any)
	if tool["type"] != "function" || tool["function"].(map[string]any)["name"] != "f" {
		t.Fatalf("tool %v", tool)
	}
	if m := b["messages"].([]any)[0].(map[string]any); m["role"] != "system" || m["content"] != "sys" {
		t.Fatalf("system message %v", m)
	}
}

// TestOpenAIVendorErrors: what the fake refuses, and how the adapter reports it.
func TestOpenAIVendorErrors(t *testing.T) {
	r := newRig(t, vendors[0], fakes.ScriptOptions{}, Config{})
	bad, _ := NewOpenAI(Config{BaseURL: r.srv.URL, APIKey: "sk-wrong-key-000000", Model: "m"})
	_, err := bad.Stream(context.Background(), userSays("hi"))
	e := asError(t, err)
	if e.Status != 401 || e.Code != "invalid_api_key" || e.Retryable || !e.BeforeFirstByte {
		t.Fatalf("%+v", e)
	}
	// A tool result that answers no call: the fake refuses it as OpenAI does.
	_, err = r.client.Stream(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "x"}, {Role: RoleTool, ToolCallID: "nope", Content: "r"}}})
	e = asError(t, err)
	if e.Status != 400 || e.Code != "invalid_request_error" || e.Retryable || !strings.Contains(e.Message, "tool_calls") {
		t.Fatalf("%+v", e)
	}
}

const oaHead = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`

// TestOpenAICanned runs the adapter against recorded-style byte streams, split into small writes.
func TestOpenAICanned(t *testing.T) {
	type want struct {
		text     string
		calls    []ToolCall
		finish   string
		usage    Usage
		errCode  string
		errFirst bool // BeforeFirstByte of the error
	}
	cases := []struct {
		name string
		body string
		want want
	}{
		{
			name: "crlf comments multiline usage",
			body: ": OPENROUTER PROCESSING\r\n\r\n" +
				"data: " + oaHead + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\r\n\r\n" +
				"data: " + oaHead + `{"content":"Hel"},"finish_reason":null}]}` + "\r\n\r\n" +
				"data: " + oaHead + "\r\ndata: " + `{"content":"lo"},"finish_reason":null}]}` + "\r\n\r\n" +
				"data: " + oaHead + `{},"finish_reason":"stop"}]}` + "\r\n\r\n" +
				`data: {"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":8}}}` + "\r\n\r\n" +
				"data: [DONE]\r\n\r\n",
			want: want{text: "Hello", finish: "stop", usage: Usage{InputTokens: 12, OutputTokens: 2, CachedInputTokens: 8}},
		},
		{
			name: "parallel calls interleaved by index",
			body: "data: " + oaHead + `{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"fa","arguments":""}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"fb","arguments":"{\"y\""}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{"tool_calls":[{"index":1,"function":{"arguments":":2}"}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{},"finish_reason":"tool_calls"}]}` + "\n\n" +
				"data: [DONE]\n\n",
			want: want{finish: "tool_calls", calls: []ToolCall{{ID: "call_a", Name: "fa", Arguments: json.RawMessage(`{"x":1}`)}, {ID: "call_b", Name: "fb", Arguments: json.RawMessage(`{"y":2}`)}}},
		},
		{
			name: "llama.cpp style: no ids, no usage, no arguments",
			body: "data: " + oaHead + `{"tool_calls":[{"index":0,"function":{"name":"ping"}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{},"finish_reason":"tool_calls"}]}` + "\n\n" +
				"data: [DONE]\n\n",
			want: want{finish: "tool_calls", calls: []ToolCall{{ID: "*", Name: "ping", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name: "ollama style: whole calls, no index, arguments as object",
			body: "data: " + oaHead + `{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"name":"fa","arguments":{"q":"a b"}}},{"function":{"name":"fb","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{"content":""},"finish_reason":"stop"}]}` + "\n\n" +
				"data: [DONE]\n\n",
			want: want{finish: "stop", calls: []ToolCall{{ID: "call_1", Name: "fa", Arguments: json.RawMessage(`{"q":"a b"}`)}, {ID: "*", Name: "fb", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name: "end without [DONE] after finish",
			body: "data: " + oaHead + `{"content":"ok"},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{},"finish_reason":"length"}]}` + "\n\n",
			want: want{text: "ok", finish: "length"},
		},
		{
			name: "end before finish",
			body: "data: " + oaHead + `{"content":"par"},"finish_reason":null}]}` + "\n\n",
			want: want{text: "par", errCode: CodeIncomplete},
		},
		{
			name: "empty body",
			body: ": nothing\n\n",
			want: want{errCode: CodeIncomplete, errFirst: true},
		},
		{
			name: "error object before content",
			body: `data: {"error":{"message":"overloaded","type":"server_error","code":null}}` + "\n\n",
			want: want{errCode: "server_error", errFirst: true},
		},
		{
			name: "bad json",
			body: "data: " + oaHead + `{"content":"a"},"finish_reason":null}]}` + "\n\ndata: {nope\n\n",
			want: want{text: "a", errCode: CodeBadStream},
		},
		{
			name: "bad arguments piece",
			body: "data: " + oaHead + `{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"\"}}]},"finish_reason":null}]}` + "\n\n",
			want: want{errCode: CodeBadStream, errFirst: true},
		},
		{
			name: "groq usage in x_groq",
			body: "data: " + oaHead + `{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
				"data: " + oaHead + `{},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"prompt_tokens":9,"completion_tokens":1}}}` + "\n\n" +
				"data: [DONE]\n\n",
			want: want{text: "hi", finish: "stop", usage: Usage{InputTokens: 9, OutputTokens: 1}},
		},
		{
			name: "other choices ignored",
			body: `data: {"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
			want: want{text: "yes", finish: "stop"},
		},
	}
	for _, c := range cases {
		for _, split := range []int{1 << 20, 7, 1} {
			srv := cannedServer(t, "text/event-stream", c.body, split)
			cl, _ := NewOpenAI(Config{BaseURL: srv.URL, Model: "m"})
			got, err := run(t, cl, userSays("x"))
			if got.text != c.want.text {
				t.Fatalf("%s/%d: text %q, want %q", c.name, split, got.text, c.want.text)
			}
			if c.want.errCode != "" {
				e := asError(t, err)
				if e.Code != c.want.errCode || e.BeforeFirstByte != c.want.errFirst || (e.Retryable && !e.BeforeFirstByte) {
					t.Fatalf("%s/%d: error %+v", c.name, split, e)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s/%d: %v", c.name, split, err)
			}
			if got.done.FinishReason != c.want.finish || got.done.Usage != c.want.usage {
				t.Fatalf("%s/%d: done %+v", c.name, split, got.done)
			}
			if len(got.calls) != len(c.want.calls) {
				t.Fatalf("%s/%d: calls %+v", c.name, split, got.calls)
			}
			for i, wc := range c.want.calls {
				gc := got.calls[i]
				if (wc.ID == "*" && !strings.HasPrefix(gc.ID, "call_")) || (wc.ID != "*" && gc.ID != wc.ID) || gc.Name != wc.Name || !jsonEqual(t, gc.Arguments, wc.Arguments) {
					t.Fatalf("%s/%d: call %d = %+v (%s)", c.name, split, i, gc, gc.Arguments)
				}
			}
		}
	}
}

// BenchmarkOpenAIDecode measures one text chunk through SSE parsing and chunk decoding.
func BenchmarkOpenAIDecode(b *testing.B) {
	ev := "data: " + oaHead + `{"content":" hello"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	s := newSSEReader(&loopReader{b: []byte(strings.Repeat(ev, 64))})
	d := &openaiDecoder{}
	out := make([]Event, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		e, err := s.next()
		if err != nil {
			b.Fatal(err)
		}
		out, _, err = d.event(e, out[:0])
		if err != nil || len(out) != 1 {
			b.Fatal(err)
		}
	}
}
