package fakes

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OpenAIChatFake is an http.Handler that speaks the OpenAI Chat Completions API
// (POST /v1/chat/completions) with replies taken from a [Script]. It validates requests as OpenAI
// does (answering 400/401/404/405 with OpenAI's error JSON), streams real "chat.completion.chunk"
// server-sent events ending in "data: [DONE]" (with a usage chunk when stream_options.include_usage
// is set), streams tool-call arguments in pieces, and also answers non-streamed requests. Latency
// and failures can be set at any time (SetLatency, FailNext, DropNext, StallNext); every request is
// recorded (Requests).
type OpenAIChatFake struct {
	*scriptServer
}

// NewOpenAIChatFake returns a fake OpenAI-compatible server.
func NewOpenAIChatFake(o ScriptOptions) *OpenAIChatFake {
	return &OpenAIChatFake{scriptServer: newScriptServer(o)}
}

// openaiChatError is an answer in OpenAI's error shape:
// {"error": {"message", "type", "param", "code"}}.
type openaiChatError struct {
	status  int
	message string
	typ     string
	param   any
	code    any
}

func (e *openaiChatError) write(w http.ResponseWriter) {
	scriptWriteJSON(w, e.status, map[string]any{"error": map[string]any{
		"message": e.message, "type": e.typ, "param": e.param, "code": e.code}})
}

func openaiChatInvalid(msg string, param any, code any) *openaiChatError {
	return &openaiChatError{status: http.StatusBadRequest, message: msg, typ: "invalid_request_error", param: param, code: code}
}

// ServeHTTP implements http.Handler.
func (f *OpenAIChatFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	idx, raw, body, rerr := f.record(r)
	w.Header().Set("X-Request-Id", "req_fake_"+strconv.Itoa(idx+1))
	if e := f.check(r, body, rerr); e != nil {
		f.setStatus(idx, e.status)
		e.write(w)
		return
	}
	fault, first, tps, seq := f.take()
	if fault.kind == scriptFaultFail {
		f.setStatus(idx, fault.status)
		scriptRetryAfter(w.Header(), fault.retryAfter)
		typ, msg := "server_error", "The server had an error while processing your request. Sorry about that!"
		switch {
		case fault.status == http.StatusTooManyRequests:
			typ, msg = "requests", "Rate limit reached for requests. Please try again later."
		case fault.status == http.StatusServiceUnavailable:
			msg = "The engine is currently overloaded, please try again later."
		case fault.status < 500:
			typ, msg = "invalid_request_error", http.StatusText(fault.status)
		}
		code := any(nil)
		if fault.status == http.StatusTooManyRequests {
			code = "rate_limit_exceeded"
		}
		(&openaiChatError{status: fault.status, message: msg, typ: typ, code: code}).write(w)
		return
	}
	f.setStatus(idx, http.StatusOK)
	turn := f.script.Next(openaiChatLastUserText(body))
	model, _ := scriptStr(body, "model")
	p := newScriptPacer(r.Context(), f.done, w, first, tps, fault)
	defer p.stop()
	reply := openaiChatReply{id: "chatcmpl-fake" + strconv.FormatUint(seq, 10), created: time.Now().Unix(),
		model: model, turn: turn, inputTokens: scriptInputTokens(raw), seq: seq}
	if stream, _ := body["stream"].(bool); !stream {
		if p.waitFirst() != nil {
			return
		}
		scriptWriteJSON(w, http.StatusOK, reply.completion())
		return
	}
	so, _ := body["stream_options"].(map[string]any)
	reply.includeUsage, _ = so["include_usage"].(bool)
	scriptStartSSE(w)
	_ = reply.stream(p, f.argChunk)
}

// check validates a request the way the API does.
func (f *OpenAIChatFake) check(r *http.Request, body map[string]any, readErr error) *openaiChatError {
	if !strings.HasSuffix(r.URL.Path, "/v1/chat/completions") {
		return &openaiChatError{status: http.StatusNotFound, typ: "invalid_request_error",
			message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}
	}
	if f.apiKey != "" {
		auth := r.Header.Get("Authorization")
		key, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || key == "" {
			return &openaiChatError{status: http.StatusUnauthorized, typ: "invalid_request_error",
				message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
		}
		if key != f.apiKey {
			return &openaiChatError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
				message: "Incorrect API key provided: " + openaiChatRedactKey(key) + "."}
		}
	}
	if r.Method != http.MethodPost {
		return &openaiChatError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
			message: fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path)}
	}
	if readErr != nil {
		return openaiChatInvalid("We could not read the body of your request.", nil, nil)
	}
	if body == nil {
		return openaiChatInvalid("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)", nil, nil)
	}
	if m, ok := body["model"].(string); !ok || m == "" {
		return openaiChatInvalid("you must provide a model parameter", nil, nil)
	}
	msgs, ok := body["messages"].([]any)
	if !ok {
		return openaiChatInvalid("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
	}
	if len(msgs) == 0 {
		return openaiChatInvalid("[] is too short - 'messages'", "messages", nil)
	}
	if e := openaiChatCheckMessages(msgs); e != nil {
		return e
	}
	stream, hasStream := body["stream"]
	if hasStream {
		if _, ok := stream.(bool); !ok && stream != nil {
			return openaiChatInvalid(fmt.Sprintf("Invalid type for 'stream': expected a boolean, but got %T instead.", stream), "stream", "invalid_type")
		}
	}
	if so, has := body["stream_options"]; has && so != nil {
		if s, _ := stream.(bool); !s {
			return openaiChatInvalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", nil)
		}
		m, ok := so.(map[string]any)
		if !ok {
			return openaiChatInvalid("Invalid type for 'stream_options': expected an object.", "stream_options", "invalid_type")
		}
		if iu, has := m["include_usage"]; has {
			if _, ok := iu.(bool); !ok {
				return openaiChatInvalid("Invalid type for 'stream_options.include_usage': expected a boolean.", "stream_options.include_usage", "invalid_type")
			}
		}
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if v, has := body[k]; has && v != nil && !scriptPositiveInt(v) {
			return openaiChatInvalid(fmt.Sprintf("Invalid '%s': integer below minimum value. Expected a value >= 1.", k), k, "integer_below_min_value")
		}
	}
	if v, has := body["temperature"]; has && v != nil {
		t, ok := v.(float64)
		if !ok || t < 0 || t > 2 {
			return openaiChatInvalid("Invalid 'temperature': expected a number between 0 and 2.", "temperature", "invalid_value")
		}
	}
	tools, hasTools := body["tools"].([]any)
	for i, t := range tools {
		if e := openaiChatCheckTool(i, t); e != nil {
			return e
		}
	}
	if tc, has := body["tool_choice"]; has && tc != nil {
		if !hasTools || len(tools) == 0 {
			return openaiChatInvalid("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", "tool_choice", nil)
		}
		switch v := tc.(type) {
		case string:
			if v != "auto" && v != "none" && v != "required" {
				return openaiChatInvalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", v), "tool_choice", "invalid_value")
			}
		case map[string]any:
			fn, _ := v["function"].(map[string]any)
			name, _ := scriptStr(fn, "name")
			if v["type"] != "function" || name == "" {
				return openaiChatInvalid("Invalid 'tool_choice': expected {\"type\": \"function\", \"function\": {\"name\": ...}}.", "tool_choice", "invalid_value")
			}
		default:
			return openaiChatInvalid("Invalid type for 'tool_choice'.", "tool_choice", "invalid_type")
		}
	}
	return nil
}

// openaiChatCheckMessages checks roles, content shapes and the pairing of tool calls and results.
func openaiChatCheckMessages(msgs []any) *openaiChatError {
	var open []string // tool_call ids of the last assistant message still waiting for results
	for i, mv := range msgs {
		m, ok := mv.(map[string]any)
		param := fmt.Sprintf("messages.[%d]", i)
		if !ok {
			return openaiChatInvalid(fmt.Sprintf("Invalid type for '%s': expected an object.", param), param, "invalid_type")
		}
		role, _ := scriptStr(m, "role")
		if role != "tool" && len(open) > 0 {
			return openaiChatInvalid("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(open, ", "), "messages", nil)
		}
		content, hasContent := m["content"]
		switch role {
		case "system", "developer":
			if !openaiChatTextContent(content) {
				return openaiChatInvalid(fmt.Sprintf("Invalid '%s.content': expected a string or an array of text parts.", param), param+".content", "invalid_type")
			}
		case "user":
			if e := openaiChatCheckUserContent(param, content); e != nil {
				return e
			}
		case "assistant":
			calls, _ := m["tool_calls"].([]any)
			if content == nil && len(calls) == 0 {
				return openaiChatInvalid(fmt.Sprintf("Invalid value for '%s.content': expected a string, got null.", param), param+".content", "invalid_value")
			}
			if content != nil && !openaiChatTextContent(content) {
				return openaiChatInvalid(fmt.Sprintf("Invalid '%s.content': expected a string.", param), param+".content", "invalid_type")
			}
			open = open[:0]
			for j, cv := range calls {
				c, _ := cv.(map[string]any)
				id, _ := scriptStr(c, "id")
				fn, _ := c["function"].(map[string]any)
				name, _ := scriptStr(fn, "name")
				_, argsIsString := fn["arguments"].(string)
				if id == "" || c["type"] != "function" || name == "" || !argsIsString {
					return openaiChatInvalid(fmt.Sprintf("Invalid '%s.tool_calls.[%d]': expected {id, type: \"function\", function: {name, arguments: string}}.", param, j), fmt.Sprintf("%s.tool_calls.[%d]", param, j), "invalid_value")
				}
				open = append(open, id)
			}
		case "tool":
			id, _ := scriptStr(m, "tool_call_id")
			if id == "" {
				return openaiChatInvalid(fmt.Sprintf("Missing required parameter: '%s.tool_call_id'.", param), param+".tool_call_id", "missing_required_parameter")
			}
			k := slices.Index(open, id)
			if k < 0 {
				return openaiChatInvalid("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", param+".role", nil)
			}
			open = slices.Delete(open, k, k+1)
			if !hasContent || !openaiChatTextContent(content) {
				return openaiChatInvalid(fmt.Sprintf("Invalid '%s.content': expected a string.", param), param+".content", "invalid_type")
			}
		default:
			return openaiChatInvalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", role), param+".role", "invalid_value")
		}
	}
	if len(open) > 0 {
		return openaiChatInvalid("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(open, ", "), "messages", nil)
	}
	return nil
}

// openaiChatTextContent: a string, or an array of text parts.
func openaiChatTextContent(v any) bool {
	switch c := v.(type) {
	case string:
		return true
	case []any:
		for _, pv := range c {
			p, _ := pv.(map[string]any)
			if p["type"] != "text" {
				return false
			}
			if _, ok := p["text"].(string); !ok {
				return false
			}
		}
		return len(c) > 0
	}
	return false
}

func openaiChatCheckUserContent(param string, v any) *openaiChatError {
	switch c := v.(type) {
	case string:
		return nil
	case []any:
		if len(c) == 0 {
			return openaiChatInvalid(fmt.Sprintf("Invalid '%s.content': empty array. Expected an array with minimum length 1.", param), param+".content", "empty_array")
		}
		for j, pv := range c {
			pp := fmt.Sprintf("%s.content.[%d]", param, j)
			p, _ := pv.(map[string]any)
			switch p["type"] {
			case "text":
				if _, ok := p["text"].(string); !ok {
					return openaiChatInvalid(fmt.Sprintf("Missing required parameter: '%s.text'.", pp), pp+".text", "missing_required_parameter")
				}
			case "image_url":
				iu, _ := p["image_url"].(map[string]any)
				u, _ := scriptStr(iu, "url")
				if !openaiChatValidImageURL(u) {
					return openaiChatInvalid(fmt.Sprintf("Invalid '%s.image_url.url': expected an https URL or a base64 data URL of an image.", pp), pp+".image_url.url", "invalid_value")
				}
			default:
				return openaiChatInvalid(fmt.Sprintf("Invalid value: '%v'. Supported values are: 'text', 'image_url', 'input_audio', and 'file'.", p["type"]), pp+".type", "invalid_value")
			}
		}
		return nil
	}
	return openaiChatInvalid(fmt.Sprintf("Invalid type for '%s.content': expected one of a string or array of objects.", param), param+".content", "invalid_type")
}

func openaiChatValidImageURL(u string) bool {
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return true
	}
	rest, ok := strings.CutPrefix(u, "data:image/")
	if !ok {
		return false
	}
	meta, data, ok := strings.Cut(rest, ",")
	return ok && strings.HasSuffix(meta, ";base64") && scriptBase64OK(data)
}

func openaiChatCheckTool(i int, tv any) *openaiChatError {
	param := fmt.Sprintf("tools.[%d]", i)
	t, _ := tv.(map[string]any)
	if t["type"] != "function" {
		return openaiChatInvalid(fmt.Sprintf("Invalid value: '%v'. Supported values are: 'function' and 'custom'.", t["type"]), param+".type", "invalid_value")
	}
	fn, ok := t["function"].(map[string]any)
	if !ok {
		return openaiChatInvalid(fmt.Sprintf("Missing required parameter: '%s.function'.", param), param+".function", "missing_required_parameter")
	}
	name, _ := scriptStr(fn, "name")
	if !scriptToolNameOK(name) {
		return openaiChatInvalid(fmt.Sprintf("Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", param), param+".function.name", "invalid_value")
	}
	if d, has := fn["description"]; has {
		if _, ok := d.(string); !ok {
			return openaiChatInvalid(fmt.Sprintf("Invalid type for '%s.function.description': expected a string.", param), param+".function.description", "invalid_type")
		}
	}
	if ps, has := fn["parameters"]; has && !scriptIsObject(ps) {
		return openaiChatInvalid(fmt.Sprintf("Invalid type for '%s.function.parameters': expected an object.", param), param+".function.parameters", "invalid_type")
	}
	return nil
}

// openaiChatLastUserText returns the text of the last user message.
func openaiChatLastUserText(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "user" {
			continue
		}
		switch c := m["content"].(type) {
		case string:
			return c
		case []any:
			var parts []string
			for _, pv := range c {
				p, _ := pv.(map[string]any)
				if t, ok := p["text"].(string); ok && p["type"] == "text" {
					parts = append(parts, t)
				}
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

func openaiChatRedactKey(k string) string {
	if len(k) <= 8 {
		return "****"
	}
	return k[:3] + "*****" + k[len(k)-4:]
}

// openaiChatReply writes one scripted reply in the API's shapes.
type openaiChatReply struct {
	id           string
	created      int64
	model        string
	turn         ScriptTurn
	inputTokens  int
	outputTokens int
	includeUsage bool
	seq          uint64
}

type openaiChatChunkJSON struct {
	ID                string                `json:"id"`
	Object            string                `json:"object"`
	Created           int64                 `json:"created"`
	Model             string                `json:"model"`
	SystemFingerprint string                `json:"system_fingerprint"`
	Choices           []openaiChatChoiceOut `json:"choices"`
	Usage             *openaiChatUsageJSON  `json:"usage,omitempty"`
}

type openaiChatChoiceOut struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     any            `json:"logprobs"`
	FinishReason any            `json:"finish_reason"`
}

type openaiChatUsageJSON struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails map[string]int `json:"prompt_tokens_details"`
}

func (o *openaiChatReply) callID(i int) string {
	if id := o.turn.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("call_fake%d_%d", o.seq, i)
}

func (o *openaiChatReply) finishReason() string {
	if len(o.turn.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (o *openaiChatReply) usage() *openaiChatUsageJSON {
	return &openaiChatUsageJSON{PromptTokens: o.inputTokens, CompletionTokens: o.outputTokens,
		TotalTokens: o.inputTokens + o.outputTokens, PromptTokensDetails: map[string]int{"cached_tokens": 0}}
}

func (o *openaiChatReply) chunk(delta map[string]any, finish any) []byte {
	return scriptJSON(openaiChatChunkJSON{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model,
		SystemFingerprint: "fp_fake", Choices: []openaiChatChoiceOut{{Delta: delta, FinishReason: finish}}})
}

// stream writes the reply as chunks: role, text tokens, each tool call's header then its
// arguments in pieces, the finish chunk, the usage chunk, [DONE].
func (o *openaiChatReply) stream(p *scriptPacer, argChunk int) error {
	started := false
	start := func() error {
		if started {
			return nil
		}
		started = true
		role := map[string]any{"role": "assistant", "content": "", "refusal": nil}
		if o.turn.Text == "" {
			role["content"] = nil
		}
		return p.event("", o.chunk(role, nil))
	}
	send := func(delta map[string]any) error {
		if err := p.token(); err != nil {
			return err
		}
		if err := start(); err != nil {
			return err
		}
		o.outputTokens++
		return p.event("", o.chunk(delta, nil))
	}
	for _, tok := range scriptTokens(o.turn.Text) {
		if err := send(map[string]any{"content": tok}); err != nil {
			return err
		}
	}
	for i, tc := range o.turn.ToolCalls {
		head := map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": o.callID(i), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}
		if err := send(head); err != nil {
			return err
		}
		for _, piece := range scriptChunks(tc.argsJSON(), argChunk) {
			d := map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}
			if err := send(d); err != nil {
				return err
			}
		}
	}
	if err := p.end(); err != nil {
		return err
	}
	if err := start(); err != nil {
		return err
	}
	if err := p.event("", o.chunk(map[string]any{}, o.finishReason())); err != nil {
		return err
	}
	if o.includeUsage {
		b := scriptJSON(openaiChatChunkJSON{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model,
			SystemFingerprint: "fp_fake", Choices: []openaiChatChoiceOut{}, Usage: o.usage()})
		if err := p.event("", b); err != nil {
			return err
		}
	}
	return p.event("", []byte("[DONE]"))
}

// completion returns the non-streamed answer.
func (o *openaiChatReply) completion() map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if o.turn.Text != "" {
		msg["content"] = o.turn.Text
	}
	o.outputTokens = len(scriptTokens(o.turn.Text))
	if len(o.turn.ToolCalls) > 0 {
		var calls []any
		for i, tc := range o.turn.ToolCalls {
			calls = append(calls, map[string]any{"id": o.callID(i), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.argsJSON()}})
			o.outputTokens += 1 + len(tc.argsJSON())/4
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{"id": o.id, "object": "chat.completion", "created": o.created, "model": o.model,
		"system_fingerprint": "fp_fake",
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": o.finishReason()}},
		"usage":              o.usage()}
}
