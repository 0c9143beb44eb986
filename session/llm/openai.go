package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
)

const providerOpenAI = "openai"

// OpenAI is a [Client] for the OpenAI Chat Completions API (POST {base}/v1/chat/completions with
// "stream": true) and the servers that speak it: OpenAI, Groq, vLLM, Ollama and the llama.cpp
// server. It tolerates their differences: missing usage, missing tool-call ids (it makes them up),
// missing tool-call indexes, arguments sent as an object instead of a string, and a finish reason
// that stays null until the last chunk.
type OpenAI struct {
	e *endpoint
}

// NewOpenAI returns an adapter for an OpenAI-compatible server. The default base URL is
// https://api.openai.com.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	e, err := newEndpoint(cfg, "https://api.openai.com", "/v1/chat/completions")
	if err != nil {
		return nil, err
	}
	return &OpenAI{e: e}, nil
}

// URL returns the endpoint requests are sent to.
func (c *OpenAI) URL() string { return c.e.url }

// CloseIdleConnections closes kept-alive connections.
func (c *OpenAI) CloseIdleConnections() { c.e.closeIdle() }

// Stream implements Client.
func (c *OpenAI) Stream(ctx context.Context, r Request) (Stream, error) {
	body, err := encodeOpenAI(&r, c.e.model(&r), c.e.cfg)
	if err != nil {
		return nil, &Error{Provider: providerOpenAI, Code: CodeInvalidRequest, Message: err.Error(), BeforeFirstByte: true, Err: err}
	}
	key := c.e.cfg.APIKey
	return startStream(ctx, c.e, providerOpenAI, body, func(h http.Header) {
		if key != "" {
			h.Set("Authorization", "Bearer "+key)
		}
	}, &openaiDecoder{})
}

// Wire types of the request (https://platform.openai.com/docs/api-reference/chat/create).
type oaRequest struct {
	Model               string           `json:"model"`
	Messages            []oaMessage      `json:"messages"`
	Stream              bool             `json:"stream"`
	StreamOptions       *oaStreamOptions `json:"stream_options,omitempty"`
	Tools               []oaTool         `json:"tools,omitempty"`
	ToolChoice          any              `json:"tool_choice,omitempty"`
	Temperature         *float64         `json:"temperature,omitempty"`
	MaxTokens           int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens int              `json:"max_completion_tokens,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessage struct {
	Role       string       `json:"role"`
	Content    any          `json:"content"` // string, []oaPart, or nil for an assistant message that only calls tools
	Name       string       `json:"name,omitempty"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaPart struct {
	Type     string      `json:"type"`
	Text     string      `json:"text,omitempty"`
	ImageURL *oaImageURL `json:"image_url,omitempty"`
}

type oaImageURL struct {
	URL string `json:"url"`
}

type oaToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON document encoded as a string
}

type oaTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type oaNamedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// encodeOpenAI builds the request body.
func encodeOpenAI(r *Request, model string, cfg Config) ([]byte, error) {
	if model == "" {
		return nil, fmt.Errorf("no model: set Request.Model or Config.Model")
	}
	req := oaRequest{
		Model:         model,
		Stream:        true,
		StreamOptions: &oaStreamOptions{IncludeUsage: true},
		Temperature:   r.Temperature,
	}
	maxTok := r.MaxTokens
	if maxTok == 0 {
		maxTok = cfg.MaxTokens
	}
	if maxTok < 0 {
		return nil, fmt.Errorf("MaxTokens must not be negative")
	}
	if cfg.UseMaxCompletionTokens {
		req.MaxCompletionTokens = maxTok
	} else {
		req.MaxTokens = maxTok
	}
	req.Messages = make([]oaMessage, 0, len(r.Messages)+1)
	if r.System != "" {
		req.Messages = append(req.Messages, oaMessage{Role: "system", Content: r.System})
	}
	for i := range r.Messages {
		m, err := encodeOpenAIMessage(&r.Messages[i])
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("no messages")
	}
	for i, t := range r.Tools {
		if err := checkTool(t); err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
		req.Tools = append(req.Tools, oaTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if len(r.Tools) > 0 {
		switch r.ToolChoice {
		case "":
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
			req.ToolChoice = r.ToolChoice
		default:
			nc := oaNamedChoice{Type: "function"}
			nc.Function.Name = r.ToolChoice
			req.ToolChoice = nc
		}
	}
	return json.Marshal(&req)
}

func encodeOpenAIMessage(m *Message) (oaMessage, error) {
	out := oaMessage{Role: string(m.Role), Name: m.Name}
	switch m.Role {
	case RoleUser, RoleSystem:
		if len(m.Images) == 0 {
			out.Content = m.Content
			break
		}
		if m.Role != RoleUser {
			return out, fmt.Errorf("images are only allowed on user messages")
		}
		parts := make([]oaPart, 0, len(m.Images)+1)
		if m.Content != "" {
			parts = append(parts, oaPart{Type: "text", Text: m.Content})
		}
		for j, im := range m.Images {
			u, err := im.dataURL()
			if err != nil {
				return out, fmt.Errorf("image %d: %w", j, err)
			}
			parts = append(parts, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: u}})
		}
		out.Content = parts
	case RoleAssistant:
		if len(m.Images) > 0 {
			return out, fmt.Errorf("images are only allowed on user messages")
		}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			out.Content = m.Content
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return out, fmt.Errorf("tool call %d needs an ID and a name", j)
			}
			out.ToolCalls = append(out.ToolCalls, oaToolCall{ID: tc.ID, Type: "function",
				Function: oaFunctionCall{Name: tc.Name, Arguments: string(tc.argumentsOrEmpty())}})
		}
	case RoleTool:
		if m.ToolCallID == "" {
			return out, fmt.Errorf("a tool message needs ToolCallID")
		}
		if len(m.Images) > 0 {
			return out, fmt.Errorf("the Chat Completions API takes no images in tool results")
		}
		out.Content = m.Content
		out.ToolCallID = m.ToolCallID
		out.Name = ""
	default:
		return out, fmt.Errorf("unknown role %q", m.Role)
	}
	return out, nil
}

// checkTool validates what both vendors require of a tool definition.
func checkTool(t Tool) error {
	if t.Name == "" {
		return fmt.Errorf("a tool needs a name")
	}
	for _, c := range t.Name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') || len(t.Name) > 64 {
			return fmt.Errorf("tool name %q must match ^[a-zA-Z0-9_-]{1,64}$", t.Name)
		}
	}
	if len(t.Parameters) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(t.Parameters, &obj); err != nil {
			return fmt.Errorf("tool %q: parameters must be a JSON Schema object: %w", t.Name, err)
		}
	}
	return nil
}

// Wire types of a stream chunk (object "chat.completion.chunk").
type oaChunk struct {
	Choices []oaChoice   `json:"choices"`
	Usage   *oaUsage     `json:"usage"`
	Error   *errorObject `json:"error"`
	XGroq   *struct {
		Usage *oaUsage `json:"usage"`
	} `json:"x_groq"` // Groq's place for usage when stream_options is not honoured
}

type oaChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	FinishReason string  `json:"finish_reason"`
}

type oaDelta struct {
	Content   string            `json:"content"`
	ToolCalls []oaToolCallDelta `json:"tool_calls"`
}

type oaToolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// openaiDecoder assembles chunks into Events. Tool calls are keyed by their index (parallel calls
// interleave by index); a call is complete when the choice's finish_reason arrives.
type openaiDecoder struct {
	chunk     oaChunk
	calls     []oaPendingCall
	finish    string
	sawFinish bool
	usage     Usage
}

type oaPendingCall struct {
	index    int
	hasIndex bool
	id, name string
	args     []byte
	emitted  bool
}

var doneMarker = []byte("[DONE]")

func (d *openaiDecoder) event(ev sseEvent, out []Event) ([]Event, bool, error) {
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneMarker) {
		out = d.flushCalls(out)
		return append(out, Event{Kind: Done, Usage: d.usage, FinishReason: d.finish}), true, nil
	}
	if len(data) == 0 {
		return out, false, nil
	}
	c := &d.chunk
	clear(c.Choices[:cap(c.Choices)])
	c.Choices, c.Usage, c.Error, c.XGroq = c.Choices[:0], nil, nil, nil
	if err := json.Unmarshal(data, c); err != nil {
		return out, false, &Error{Provider: providerOpenAI, Code: CodeBadStream, Message: "undecodable chunk: " + err.Error(), Err: err}
	}
	if c.Error != nil {
		return out, false, streamError(providerOpenAI, c.Error)
	}
	if c.Usage == nil && c.XGroq != nil {
		c.Usage = c.XGroq.Usage
	}
	if u := c.Usage; u != nil {
		d.usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			d.usage.CachedInputTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only the first choice is used (n is never set)
		}
		if ch.Delta.Content != "" {
			out = append(out, Event{Kind: TextDelta, Text: ch.Delta.Content})
		}
		for j := range ch.Delta.ToolCalls {
			if err := d.addToolDelta(&ch.Delta.ToolCalls[j]); err != nil {
				return out, false, err
			}
		}
		if ch.FinishReason != "" {
			d.sawFinish = true
			d.finish = normalizeOpenAIFinish(ch.FinishReason)
			out = d.flushCalls(out)
		}
	}
	return out, false, nil
}

func (d *openaiDecoder) eof(out []Event) ([]Event, error) {
	if !d.sawFinish {
		return out, &Error{Provider: providerOpenAI, Code: CodeIncomplete, Message: "the stream ended without a finish reason or [DONE]", Retryable: true}
	}
	out = d.flushCalls(out)
	return append(out, Event{Kind: Done, Usage: d.usage, FinishReason: d.finish}), nil
}

// maxToolCalls bounds the parallel calls one reply may make.
const maxToolCalls = 128

func (d *openaiDecoder) addToolDelta(td *oaToolCallDelta) error {
	var slot *oaPendingCall
	switch {
	case td.Index != nil:
		for i := range d.calls {
			if d.calls[i].hasIndex && d.calls[i].index == *td.Index && !d.calls[i].emitted {
				slot = &d.calls[i]
				break
			}
		}
	case td.ID != "":
		for i := range d.calls {
			if d.calls[i].id == td.ID && !d.calls[i].emitted {
				slot = &d.calls[i]
				break
			}
		}
	default:
		// Neither index nor id: a continuation of the last call, unless it names a new function.
		if n := len(d.calls); n > 0 && !d.calls[n-1].emitted && (td.Function.Name == "" || d.calls[n-1].name == "") {
			slot = &d.calls[n-1]
		}
	}
	if slot == nil {
		if len(d.calls) >= maxToolCalls {
			return &Error{Provider: providerOpenAI, Code: CodeBadStream, Message: "too many tool calls in one reply"}
		}
		d.calls = append(d.calls, oaPendingCall{})
		slot = &d.calls[len(d.calls)-1]
		if td.Index != nil {
			slot.index, slot.hasIndex = *td.Index, true
		}
	}
	if slot.id == "" {
		slot.id = td.ID
	}
	if slot.name == "" {
		slot.name = td.Function.Name
	}
	a := bytes.TrimSpace(td.Function.Arguments)
	switch {
	case len(a) == 0 || bytes.Equal(a, []byte("null")):
	case a[0] == '"':
		var piece string
		if err := json.Unmarshal(a, &piece); err != nil {
			return &Error{Provider: providerOpenAI, Code: CodeBadStream, Message: "bad tool-call arguments: " + err.Error(), Err: err}
		}
		slot.args = append(slot.args, piece...)
	default:
		slot.args = append(slot.args[:0], a...) // sent whole, as a JSON object
	}
	return nil
}

// flushCalls appends the assembled calls not yet emitted, in the order they started.
func (d *openaiDecoder) flushCalls(out []Event) []Event {
	for i := range d.calls {
		c := &d.calls[i]
		if c.emitted {
			continue
		}
		c.emitted = true
		id := c.id
		if id == "" {
			id = newCallID()
		}
		args := json.RawMessage("{}")
		if len(bytes.TrimSpace(c.args)) > 0 {
			args = json.RawMessage(bytes.Clone(c.args))
		}
		out = append(out, Event{Kind: ToolCallEvent, ToolCall: ToolCall{ID: id, Name: c.name, Arguments: args}})
	}
	return out
}

// newCallID makes up an id for a server that sent none.
func newCallID() string {
	return "call_" + strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64()&0xffffffff, 36)
}

func normalizeOpenAIFinish(r string) string {
	if r == "function_call" {
		return FinishToolCalls
	}
	return r
}
