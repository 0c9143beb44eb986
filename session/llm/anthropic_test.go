package llm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/session/fakes"
)

func TestAnthropicEncode(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		cfg  Config
		want string
	}{
		{
			name: "text with default max_tokens",
			req:  Request{Model: "claude", System: "sys", Messages: []Message{{Role: RoleUser, Content: "hi"}}, Temperature: f64(0.2)},
			want: `{"model":"claude","max_tokens":1024,"system":"sys","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"temperature":0.2}`,
		},
		{
			name: "config max tokens, system messages joined, empty messages dropped, same roles merged",
			req: Request{Model: "c", System: "a", Messages: []Message{
				{Role: RoleSystem, Content: "b"},
				{Role: RoleUser, Content: "one"},
				{Role: RoleAssistant, Content: ""},
				{Role: RoleUser, Content: "two"},
			}},
			cfg:  Config{MaxTokens: 300},
			want: `{"model":"c","max_tokens":300,"system":"a\n\nb","messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}],"stream":true}`,
		},
		{
			name: "tools, calls and results; results first in the merged user message",
			req: Request{Model: "c", ToolChoice: ToolChoiceRequired, MaxTokens: 10,
				Tools: []Tool{{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}, {Name: "g"}},
				Messages: []Message{
					{Role: RoleUser, Content: "x"},
					{Role: RoleAssistant, Content: "sure", ToolCalls: []ToolCall{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}, {ID: "t2", Name: "g", Arguments: json.RawMessage(`not json`)}}},
					{Role: RoleTool, ToolCallID: "t1", Content: "r1"},
					{Role: RoleUser, Content: "and?"},
					{Role: RoleTool, ToolCallID: "t2"},
				}},
			want: `{"model":"c","max_tokens":10,"messages":[` +
				`{"role":"user","content":[{"type":"text","text":"x"}]},` +
				`{"role":"assistant","content":[{"type":"text","text":"sure"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}},{"type":"tool_use","id":"t2","name":"g","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r1"},{"type":"tool_result","tool_use_id":"t2"},{"type":"text","text":"and?"}]}],` +
				`"stream":true,"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"integer"}}}},{"name":"g","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any"}}`,
		},
		{
			name: "tool choice none and named",
			req:  Request{Model: "c", ToolChoice: "g", Tools: []Tool{{Name: "g"}}, Messages: []Message{{Role: RoleUser, Content: "x"}}},
			want: `{"model":"c","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"tools":[{"name":"g","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"g"}}`,
		},
		{
			name: "images: bytes, data URL, remote URL; tool result with an image",
			req: Request{Model: "c", Messages: []Message{
				{Role: RoleUser, Content: "look", Images: []Image{{MIME: "image/png", Data: []byte("PNG")}, {URL: "data:image/webp;base64,UklG"}, {URL: "https://x/y.jpg"}}},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "t", Name: "snap"}}},
				{Role: RoleTool, ToolCallID: "t", Content: "here", Images: []Image{{MIME: "image/jpeg", Data: []byte{0xff, 0xd8}}}},
			}},
			want: `{"model":"c","max_tokens":1024,"messages":[` +
				`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"UE5H"}},{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"UklG"}},{"type":"image","source":{"type":"url","url":"https://x/y.jpg"}},{"type":"text","text":"look"}]},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"snap","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"here"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9g="}}]}]}],"stream":true}`,
		},
	}
	for _, c := range cases {
		got, err := encodeAnthropic(&c.req, c.req.Model, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !jsonEqual(t, got, []byte(c.want)) {
			t.Fatalf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestAnthropicEncodeErrors(t *testing.T) {
	u := Message{Role: RoleUser, Content: "x"}
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"no model", Request{Messages: []Message{u}}, "no model"},
		{"nothing to send", Request{Model: "m", Messages: []Message{{Role: RoleUser}}}, "no messages"},
		{"tool without id", Request{Model: "m", Messages: []Message{u, {Role: RoleTool, Content: "r"}}}, "ToolCallID"},
		{"assistant image", Request{Model: "m", Messages: []Message{{Role: RoleAssistant, Images: []Image{{MIME: "image/png", Data: []byte{1}}}}}}, "images"},
		{"system image", Request{Model: "m", Messages: []Message{{Role: RoleSystem, Images: []Image{{MIME: "image/png", Data: []byte{1}}}}}}, "images"},
		{"data URL not base64", Request{Model: "m", Messages: []Message{{Role: RoleUser, Images: []Image{{URL: "data:image/png,abc"}}}}}, "base64"},
		{"data URL without comma", Request{Model: "m", Messages: []Message{{Role: RoleUser, Images: []Image{{URL: "data:image/png;base64"}}}}}, "comma"},
		{"unknown role", Request{Model: "m", Messages: []Message{{Role: "robot", Content: "x"}}}, "unknown role"},
		{"bad tool", Request{Model: "m", Messages: []Message{u}, Tools: []Tool{{Name: ""}}}, "name"},
	}
	for _, c := range cases {
		_, err := encodeAnthropic(&c.req, c.req.Model, Config{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestAnthropicConformance(t *testing.T) {
	r := newRig(t, vendors[1], fakes.ScriptOptions{}, Config{Headers: map[string]string{"anthropic-beta": "x-2025"}})
	req := Request{Model: "claude-x", System: "sys", Messages: []Message{{Role: RoleUser, Content: "hi"}},
		Tools: []Tool{{Name: "f", Description: "does f"}}, ToolChoice: ToolChoiceAuto}
	if _, err := run(t, r.client, req); err != nil {
		t.Fatal(err)
	}
	rec := r.fake.Requests()[0]
	if rec.Method != "POST" || rec.Path != "/v1/messages" {
		t.Fatalf("%s %s", rec.Method, rec.Path)
	}
	for k, want := range map[string]string{
		"X-Api-Key":         testKey,
		"Anthropic-Version": "2023-06-01",
		"Anthropic-Beta":    "x-2025",
		"Content-Type":      "application/json",
		"Accept":            "text/event-stream",
		"Authorization":     "",
	} {
		if got := rec.Header.Get(k); got != want {
			t.Fatalf("header %s = %q, want %q", k, got, want)
		}
	}
	b := rec.Body
	if b["model"] != "claude-x" || b["stream"] != true || b["max_tokens"] != float64(1024) || b["system"] != "sys" {
		t.Fatalf("body %v", b)
	}
	if _, has := b["stream_options"]; has {
		t.Fatal("stream_options is an OpenAI field")
	}
	tool := b["tools"].([]any)[0].(map[string]any)
	if tool["name"] != "f" || tool["description"] != "does f" || tool["input_schema"].(map[string]any)["type"] != "object" {
		t.Fatalf("tool %v", tool)
	}
	if tc := b["tool_choice"].(map[string]any); tc["type"] != "auto" {
		t.Fatalf("tool_choice %v", tc)
	}
	for _, mv := range b["messages"].([]any) {
		if role := mv.(map[string]any)["role"]; role != "user" && role != "assistant" {
			t.Fatalf("role %v in messages", role)
		}
	}
}

func TestAnthropicVendorErrors(t *testing.T) {
	r := newRig(t, vendors[1], fakes.ScriptOptions{}, Config{})
	bad, _ := NewAnthropic(Config{BaseURL: r.srv.URL, APIKey: "wrong", Model: "m"})
	_, err := bad.Stream(context.Background(), userSays("hi"))
	e := asError(t, err)
	if e.Status != 401 || e.Code != "authentication_error" || e.Retryable || e.Provider != "anthropic" {
		t.Fatalf("%+v", e)
	}
	// A tool_use never answered: the fake refuses it as the API does.
	_, err = r.client.Stream(context.Background(), Request{Messages: []Message{
		{Role: RoleUser, Content: "x"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "t1", Name: "f"}}},
		{Role: RoleUser, Content: "y"},
	}})
	e = asError(t, err)
	if e.Status != 400 || e.Code != "invalid_request_error" || !strings.Contains(e.Message, "tool_result") {
		t.Fatalf("%+v", e)
	}
}

func anEv(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

const anStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}`

func TestAnthropicCanned(t *testing.T) {
	type want struct {
		text     string
		calls    []ToolCall
		finish   string
		usage    Usage
		errCode  string
		errFirst bool
		retry    bool
	}
	cases := []struct {
		name string
		body string
		want want
	}{
		{
			name: "text with ping and cache usage",
			body: anEv("message_start", anStart) +
				anEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
				anEv("ping", `{"type": "ping"}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}`) +
				anEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
				anEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`) +
				anEv("message_stop", `{"type":"message_stop"}`),
			want: want{text: "Hello!", finish: FinishStop, usage: Usage{InputTokens: 125, OutputTokens: 15, CachedInputTokens: 100}},
		},
		{
			name: "text then two tool_use blocks, crlf",
			body: strings.ReplaceAll(anEv("message_start", anStart)+
				anEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}`)+
				anEv("content_block_stop", `{"type":"content_block_stop","index":0}`)+
				anEv("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"fa","input":{}}}`)+
				anEv("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`)+
				anEv("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"San"}}`)+
				anEv("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" Francisco\"}"}}`)+
				anEv("content_block_stop", `{"type":"content_block_stop","index":1}`)+
				anEv("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_b","name":"fb","input":{}}}`)+
				anEv("content_block_stop", `{"type":"content_block_stop","index":2}`)+
				anEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`)+
				anEv("message_stop", `{"type":"message_stop"}`), "\n", "\r\n"),
			want: want{text: "Checking.", finish: FinishToolCalls, usage: Usage{InputTokens: 125, OutputTokens: 40, CachedInputTokens: 100},
				calls: []ToolCall{{ID: "toolu_a", Name: "fa", Arguments: json.RawMessage(`{"city":"San Francisco"}`)}, {ID: "toolu_b", Name: "fb", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name: "unknown events and deltas ignored",
			body: anEv("message_start", anStart) +
				anEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}`) +
				anEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
				anEv("future_event", `{"type":"future_event","x":1}`) +
				anEv("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}`) +
				anEv("content_block_stop", `{"type":"content_block_stop","index":1}`) +
				anEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":3}}`) +
				anEv("message_stop", `{"type":"message_stop"}`),
			want: want{text: "Hi", finish: FinishLength, usage: Usage{InputTokens: 125, OutputTokens: 3, CachedInputTokens: 100}},
		},
		{
			name: "overloaded before content",
			body: anEv("message_start", anStart) + anEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			want: want{errCode: "overloaded_error", errFirst: true, retry: true},
		},
		{
			name: "error after content",
			body: anEv("message_start", anStart) +
				anEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hal"}}`) +
				anEv("error", `{"type":"error","error":{"type":"api_error","message":"boom"}}`),
			want: want{text: "Hal", errCode: "api_error"},
		},
		{
			name: "end without message_stop after stop reason",
			body: anEv("message_start", anStart) +
				anEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`) +
				anEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"stop_sequence"},"usage":{"output_tokens":2}}`),
			want: want{text: "ok", finish: FinishStop, usage: Usage{InputTokens: 125, OutputTokens: 2, CachedInputTokens: 100}},
		},
		{
			name: "end mid-block",
			body: anEv("message_start", anStart) +
				anEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
				anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cut"}}`),
			want: want{text: "cut", errCode: CodeIncomplete},
		},
		{
			name: "only message_start",
			body: anEv("message_start", anStart),
			want: want{errCode: CodeIncomplete, errFirst: true, retry: true},
		},
		{
			name: "block index out of range",
			body: anEv("content_block_start", `{"type":"content_block_start","index":99999,"content_block":{"type":"tool_use","id":"t","name":"f"}}`),
			want: want{errCode: CodeBadStream, errFirst: true},
		},
	}
	for _, c := range cases {
		for _, split := range []int{1 << 20, 5, 1} {
			srv := cannedServer(t, "text/event-stream; charset=utf-8", c.body, split)
			cl, _ := NewAnthropic(Config{BaseURL: srv.URL, Model: "m"})
			got, err := run(t, cl, userSays("x"))
			if got.text != c.want.text {
				t.Fatalf("%s/%d: text %q, want %q", c.name, split, got.text, c.want.text)
			}
			if c.want.errCode != "" {
				e := asError(t, err)
				if e.Code != c.want.errCode || e.BeforeFirstByte != c.want.errFirst || e.Retryable != c.want.retry {
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
				if gc.ID != wc.ID || gc.Name != wc.Name || !jsonEqual(t, gc.Arguments, wc.Arguments) {
					t.Fatalf("%s/%d: call %d = %+v (%s)", c.name, split, i, gc, gc.Arguments)
				}
			}
		}
	}
}

func TestNormalizeAnthropicStop(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": FinishStop, "stop_sequence": FinishStop, "max_tokens": FinishLength,
		"tool_use": FinishToolCalls, "refusal": FinishContentFilter, "pause_turn": "pause_turn",
	} {
		if got := normalizeAnthropicStop(in); got != want {
			t.Fatalf("%s → %s, want %s", in, got, want)
		}
	}
}

// BenchmarkAnthropicDecode measures one text delta through SSE parsing and event decoding.
func BenchmarkAnthropicDecode(b *testing.B) {
	ev := anEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" hello"}}`)
	s := newSSEReader(&loopReader{b: []byte(strings.Repeat(ev, 64))})
	d := &anthropicDecoder{}
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
