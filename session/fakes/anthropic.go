package fakes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// AnthropicFake is an http.Handler that speaks the Anthropic Messages API (POST /v1/messages)
// with replies taken from a [Script]. It checks the x-api-key and anthropic-version headers and
// validates the body as the API does (answering with {"type":"error","error":{...}}), then streams
// the real event sequence: message_start, ping, content_block_start / content_block_delta
// (text_delta, input_json_delta in pieces) / content_block_stop per block, message_delta with the
// stop reason and output tokens, message_stop. Non-streamed requests get a Message object.
// Latency and failures can be set at any time (SetLatency, FailNext, DropNext, StallNext); every
// request is recorded (Requests).
type AnthropicFake struct {
	*scriptServer
}

// NewAnthropicFake returns a fake Anthropic Messages server.
func NewAnthropicFake(o ScriptOptions) *AnthropicFake {
	return &AnthropicFake{scriptServer: newScriptServer(o)}
}

// anthropicError is an answer in the API's error shape.
type anthropicError struct {
	status  int
	typ     string
	message string
}

func (e *anthropicError) write(w http.ResponseWriter) {
	scriptWriteJSON(w, e.status, map[string]any{"type": "error", "error": map[string]any{"type": e.typ, "message": e.message}})
}

func anthropicInvalid(format string, a ...any) *anthropicError {
	return &anthropicError{status: http.StatusBadRequest, typ: "invalid_request_error", message: fmt.Sprintf(format, a...)}
}

// anthropicErrorType maps an HTTP status to the API's error type.
func anthropicErrorType(status int) (typ, msg string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", "Invalid request"
	case http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		return "not_found_error", "Not found"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", http.StatusText(status)
}

// ServeHTTP implements http.Handler.
func (f *AnthropicFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	idx, raw, body, rerr := f.record(r)
	w.Header().Set("Request-Id", "req_fake_"+strconv.Itoa(idx+1))
	if e := f.check(r, body, rerr); e != nil {
		f.setStatus(idx, e.status)
		e.write(w)
		return
	}
	fault, first, tps, seq := f.take()
	if fault.kind == scriptFaultFail {
		f.setStatus(idx, fault.status)
		scriptRetryAfter(w.Header(), fault.retryAfter)
		typ, msg := anthropicErrorType(fault.status)
		(&anthropicError{status: fault.status, typ: typ, message: msg}).write(w)
		return
	}
	f.setStatus(idx, http.StatusOK)
	turn := f.script.Next(anthropicLastUserText(body))
	model, _ := scriptStr(body, "model")
	p := newScriptPacer(r.Context(), f.done, w, first, tps, fault)
	defer p.stop()
	reply := anthropicReply{id: "msg_fake" + strconv.FormatUint(seq, 10), model: model, turn: turn,
		inputTokens: scriptInputTokens(raw), seq: seq}
	if stream, _ := body["stream"].(bool); !stream {
		if p.waitFirst() != nil {
			return
		}
		scriptWriteJSON(w, http.StatusOK, reply.message())
		return
	}
	scriptStartSSE(w)
	_ = reply.stream(p, f.argChunk)
}

// check validates a request the way the API does.
func (f *AnthropicFake) check(r *http.Request, body map[string]any, readErr error) *anthropicError {
	if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		return &anthropicError{status: http.StatusNotFound, typ: "not_found_error", message: "Not Found"}
	}
	if f.apiKey != "" {
		key := r.Header.Get("X-Api-Key")
		if key == "" {
			return &anthropicError{status: http.StatusUnauthorized, typ: "authentication_error", message: "x-api-key header is required"}
		}
		if key != f.apiKey {
			return &anthropicError{status: http.StatusUnauthorized, typ: "authentication_error", message: "invalid x-api-key"}
		}
	}
	if r.Method != http.MethodPost {
		return &anthropicError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", message: "Method Not Allowed"}
	}
	switch v := r.Header.Get("Anthropic-Version"); v {
	case "":
		return anthropicInvalid("anthropic-version: header is required")
	case "2023-06-01", "2023-01-01":
	default:
		return anthropicInvalid("anthropic-version: %q is not a valid version", v)
	}
	if readErr != nil || body == nil {
		return anthropicInvalid("There was an error parsing the body of your request: expected a JSON object")
	}
	if m, ok := body["model"].(string); !ok || m == "" {
		return anthropicInvalid("model: Field required")
	}
	mt, has := body["max_tokens"]
	if !has {
		return anthropicInvalid("max_tokens: Field required")
	}
	if !scriptPositiveInt(mt) {
		return anthropicInvalid("max_tokens: Input should be greater than or equal to 1")
	}
	if s, has := body["stream"]; has {
		if _, ok := s.(bool); !ok {
			return anthropicInvalid("stream: Input should be a valid boolean")
		}
	}
	if t, has := body["temperature"]; has {
		v, ok := t.(float64)
		if !ok || v < 0 || v > 1 {
			return anthropicInvalid("temperature: Input should be less than or equal to 1")
		}
	}
	if sys, has := body["system"]; has {
		if !anthropicTextBlocks(sys) {
			return anthropicInvalid("system: Input should be a valid string or a list of text blocks")
		}
	}
	msgs, ok := body["messages"].([]any)
	if !ok {
		return anthropicInvalid("messages: Field required")
	}
	if len(msgs) == 0 {
		return anthropicInvalid("messages: at least one message is required")
	}
	if e := anthropicCheckMessages(msgs); e != nil {
		return e
	}
	tools, _ := body["tools"].([]any)
	for i, tv := range tools {
		t, _ := tv.(map[string]any)
		name, _ := scriptStr(t, "name")
		if !scriptToolNameOK(name) {
			return anthropicInvalid("tools.%d.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		schema, ok := t["input_schema"].(map[string]any)
		if !ok {
			return anthropicInvalid("tools.%d.custom.input_schema: Field required", i)
		}
		if schema["type"] != "object" {
			return anthropicInvalid("tools.%d.custom.input_schema.type: Input should be 'object'", i)
		}
		if d, has := t["description"]; has {
			if _, ok := d.(string); !ok {
				return anthropicInvalid("tools.%d.custom.description: Input should be a valid string", i)
			}
		}
	}
	if tc, has := body["tool_choice"]; has {
		c, ok := tc.(map[string]any)
		if !ok {
			return anthropicInvalid("tool_choice: Input should be a valid dictionary")
		}
		switch c["type"] {
		case "auto", "any", "none":
		case "tool":
			if n, _ := scriptStr(c, "name"); n == "" {
				return anthropicInvalid("tool_choice.tool.name: Field required")
			}
		default:
			return anthropicInvalid("tool_choice: Input tag '%v' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", c["type"])
		}
		if len(tools) == 0 && c["type"] != "none" {
			return anthropicInvalid("tool_choice: tool_choice may only be specified while providing tools")
		}
	}
	return nil
}

// anthropicTextBlocks: a string or a non-empty list of text blocks.
func anthropicTextBlocks(v any) bool {
	switch c := v.(type) {
	case string:
		return true
	case []any:
		for _, bv := range c {
			b, _ := bv.(map[string]any)
			if t, ok := b["text"].(string); !ok || b["type"] != "text" || t == "" {
				return false
			}
		}
		return len(c) > 0
	}
	return false
}

// anthropicCheckMessages checks roles, blocks, and that tool_use and tool_result pair up across
// consecutive messages.
func anthropicCheckMessages(msgs []any) *anthropicError {
	var pending []string // tool_use ids of the previous assistant message
	for i, mv := range msgs {
		m, _ := mv.(map[string]any)
		role, _ := scriptStr(m, "role")
		if role != "user" && role != "assistant" {
			return anthropicInvalid("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		var blocks []map[string]any
		switch c := m["content"].(type) {
		case string:
			if c == "" && !(role == "assistant" && i == len(msgs)-1) {
				return anthropicInvalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
			}
		case []any:
			if len(c) == 0 && !(role == "assistant" && i == len(msgs)-1) {
				return anthropicInvalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
			}
			for _, bv := range c {
				b, ok := bv.(map[string]any)
				if !ok {
					return anthropicInvalid("messages.%d.content: Input should be a valid list of content blocks", i)
				}
				blocks = append(blocks, b)
			}
		default:
			return anthropicInvalid("messages.%d.content: Input should be a valid string or list", i)
		}
		var uses, results []string
		seenOther := false
		for j, b := range blocks {
			if e := anthropicCheckBlock(i, j, role, b); e != nil {
				return e
			}
			switch b["type"] {
			case "tool_use":
				id, _ := scriptStr(b, "id")
				uses = append(uses, id)
			case "tool_result":
				if seenOther {
					return anthropicInvalid("messages.%d: tool_result blocks must come first in the content, before any other block", i)
				}
				id, _ := scriptStr(b, "tool_use_id")
				if !slices.Contains(pending, id) {
					return anthropicInvalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id)
				}
				results = append(results, id)
			default:
				seenOther = true
			}
		}
		if len(pending) > 0 {
			var missing []string
			for _, id := range pending {
				if !slices.Contains(results, id) {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return anthropicInvalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", "))
			}
		}
		pending = uses
	}
	return nil
}

func anthropicCheckBlock(i, j int, role string, b map[string]any) *anthropicError {
	at := fmt.Sprintf("messages.%d.content.%d", i, j)
	switch b["type"] {
	case "text":
		if t, ok := b["text"].(string); !ok || t == "" {
			return anthropicInvalid("%s.text: text content blocks must be non-empty", at)
		}
	case "image":
		if role != "user" {
			return anthropicInvalid("%s: image blocks are only allowed in user messages", at)
		}
		if e := anthropicCheckImage(at, b); e != nil {
			return e
		}
	case "tool_use":
		if role != "assistant" {
			return anthropicInvalid("%s: tool_use blocks are only allowed in assistant messages", at)
		}
		id, _ := scriptStr(b, "id")
		name, _ := scriptStr(b, "name")
		if id == "" || !scriptToolNameOK(name) {
			return anthropicInvalid("%s.tool_use: id and name are required", at)
		}
		if !scriptIsObject(b["input"]) {
			return anthropicInvalid("%s.tool_use.input: Input should be a valid dictionary", at)
		}
	case "tool_result":
		if role != "user" {
			return anthropicInvalid("%s: tool_result blocks are only allowed in user messages", at)
		}
		if id, _ := scriptStr(b, "tool_use_id"); id == "" {
			return anthropicInvalid("%s.tool_result.tool_use_id: Field required", at)
		}
		switch c := b["content"].(type) {
		case nil, string:
		case []any:
			for k, iv := range c {
				ib, _ := iv.(map[string]any)
				sub := fmt.Sprintf("%s.tool_result.content.%d", at, k)
				switch ib["type"] {
				case "text":
					if t, ok := ib["text"].(string); !ok || t == "" {
						return anthropicInvalid("%s.text: text content blocks must be non-empty", sub)
					}
				case "image":
					if e := anthropicCheckImage(sub, ib); e != nil {
						return e
					}
				default:
					return anthropicInvalid("%s: Input tag '%v' does not match 'text' or 'image'", sub, ib["type"])
				}
			}
		default:
			return anthropicInvalid("%s.tool_result.content: Input should be a valid string or list", at)
		}
	default:
		return anthropicInvalid("%s: Input tag '%v' found using 'type' does not match any of the expected tags", at, b["type"])
	}
	return nil
}

func anthropicCheckImage(at string, b map[string]any) *anthropicError {
	src, _ := b["source"].(map[string]any)
	switch src["type"] {
	case "base64":
		mt, _ := scriptStr(src, "media_type")
		switch mt {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return anthropicInvalid("%s.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", at)
		}
		if d, _ := scriptStr(src, "data"); !scriptBase64OK(d) {
			return anthropicInvalid("%s.image.source.base64.data: invalid base64 data", at)
		}
	case "url":
		if u, _ := scriptStr(src, "url"); !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return anthropicInvalid("%s.image.source.url.url: invalid URL", at)
		}
	default:
		return anthropicInvalid("%s.image.source: Input tag '%v' found using 'type' does not match any of the expected tags: 'base64', 'url'", at, src["type"])
	}
	return nil
}

// anthropicLastUserText returns the text of the last user message that has text.
func anthropicLastUserText(body map[string]any) string {
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
			for _, bv := range c {
				b, _ := bv.(map[string]any)
				if t, ok := b["text"].(string); ok && b["type"] == "text" {
					parts = append(parts, t)
				}
			}
			if len(parts) > 0 {
				return strings.Join(parts, " ")
			}
		}
	}
	return ""
}

// anthropicReply writes one scripted reply in the API's shapes.
type anthropicReply struct {
	id           string
	model        string
	turn         ScriptTurn
	inputTokens  int
	outputTokens int
	seq          uint64
}

func (a *anthropicReply) toolID(i int) string {
	if id := a.turn.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("toolu_fake%d_%d", a.seq, i)
}

func (a *anthropicReply) stopReason() string {
	if len(a.turn.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (a *anthropicReply) usage() map[string]any {
	return map[string]any{"input_tokens": a.inputTokens, "output_tokens": a.outputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

func (a *anthropicReply) send(p *scriptPacer, v map[string]any) error {
	return p.event(v["type"].(string), scriptJSON(v))
}

// stream writes the event sequence. message_start and a ping go out at once (as the API does);
// the first-token delay applies before the first content block.
func (a *anthropicReply) stream(p *scriptPacer, argChunk int) error {
	a.outputTokens = 1
	start := map[string]any{"type": "message_start", "message": map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": a.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": a.usage()}}
	if err := a.send(p, start); err != nil {
		return err
	}
	if err := a.send(p, map[string]any{"type": "ping"}); err != nil {
		return err
	}
	index := 0
	// block sends one tool_use block: its start (one token), then its deltas (one token each
	// after the first, which the API sends empty).
	block := func(cb map[string]any, deltas []map[string]any) error {
		if err := p.token(); err != nil {
			return err
		}
		a.outputTokens++
		if err := a.send(p, map[string]any{"type": "content_block_start", "index": index, "content_block": cb}); err != nil {
			return err
		}
		for k, d := range deltas {
			if k > 0 {
				if err := p.token(); err != nil {
					return err
				}
				a.outputTokens++
			}
			if err := a.send(p, map[string]any{"type": "content_block_delta", "index": index, "delta": d}); err != nil {
				return err
			}
		}
		err := a.send(p, map[string]any{"type": "content_block_stop", "index": index})
		index++
		return err
	}
	if a.turn.Text != "" {
		var deltas []map[string]any
		for _, tok := range scriptTokens(a.turn.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": tok})
		}
		// The first text token goes with the block start: no separate wait for it.
		if err := p.token(); err != nil {
			return err
		}
		if err := a.send(p, map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}}); err != nil {
			return err
		}
		for k, d := range deltas {
			if k > 0 {
				if err := p.token(); err != nil {
					return err
				}
			}
			a.outputTokens++
			if err := a.send(p, map[string]any{"type": "content_block_delta", "index": index, "delta": d}); err != nil {
				return err
			}
		}
		if err := a.send(p, map[string]any{"type": "content_block_stop", "index": index}); err != nil {
			return err
		}
		index++
	}
	for i, tc := range a.turn.ToolCalls {
		// The API's first input_json_delta of a block is empty; then the JSON comes in pieces.
		deltas := []map[string]any{{"type": "input_json_delta", "partial_json": ""}}
		for _, piece := range scriptChunks(tc.argsJSON(), argChunk) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
		}
		cb := map[string]any{"type": "tool_use", "id": a.toolID(i), "name": tc.Name, "input": map[string]any{}}
		if err := block(cb, deltas); err != nil {
			return err
		}
	}
	if err := p.end(); err != nil {
		return err
	}
	if err := a.send(p, map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": a.stopReason(), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.outputTokens}}); err != nil {
		return err
	}
	return a.send(p, map[string]any{"type": "message_stop"})
}

// message returns the non-streamed answer.
func (a *anthropicReply) message() map[string]any {
	var content []any
	if a.turn.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.turn.Text})
		a.outputTokens += len(scriptTokens(a.turn.Text))
	}
	for i, tc := range a.turn.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": a.toolID(i), "name": tc.Name,
			"input": json.RawMessage(tc.argsJSON())})
		a.outputTokens += 1 + len(tc.argsJSON())/4
	}
	return map[string]any{"id": a.id, "type": "message", "role": "assistant", "model": a.model, "content": content,
		"stop_reason": a.stopReason(), "stop_sequence": nil, "usage": a.usage()}
}
