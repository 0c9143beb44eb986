package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

const providerAnthropic = "anthropic"

// AnthropicVersion is the anthropic-version header the adapter sends.
const AnthropicVersion = "2023-06-01"

// defaultAnthropicMaxTokens is used when neither the request nor the config sets max_tokens,
// which the Messages API requires.
const defaultAnthropicMaxTokens = 1024

// Anthropic is a [Client] for the Anthropic Messages API (POST {base}/v1/messages with
// "stream": true).
//
// The conversation is mapped onto the API's rules: the system prompt (and any RoleSystem message)
// goes in the top-level "system"; tool results become "tool_result" blocks of a user message;
// consecutive messages of the same role are merged into one message; messages with no content are
// left out (the API refuses them); images become base64 "image" blocks (or "url" sources).
type Anthropic struct {
	e *endpoint
}

// NewAnthropic returns an adapter for the Anthropic Messages API. The default base URL is
// https://api.anthropic.com.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	e, err := newEndpoint(cfg, "https://api.anthropic.com", "/v1/messages")
	if err != nil {
		return nil, err
	}
	return &Anthropic{e: e}, nil
}

// URL returns the endpoint requests are sent to.
func (c *Anthropic) URL() string { return c.e.url }

// CloseIdleConnections closes kept-alive connections.
func (c *Anthropic) CloseIdleConnections() { c.e.closeIdle() }

// Stream implements Client.
func (c *Anthropic) Stream(ctx context.Context, r Request) (Stream, error) {
	body, err := encodeAnthropic(&r, c.e.model(&r), c.e.cfg)
	if err != nil {
		return nil, &Error{Provider: providerAnthropic, Code: CodeInvalidRequest, Message: err.Error(), BeforeFirstByte: true, Err: err}
	}
	key := c.e.cfg.APIKey
	return startStream(ctx, c.e, providerAnthropic, body, func(h http.Header) {
		if key != "" {
			h.Set("X-Api-Key", key)
		}
		h.Set("Anthropic-Version", AnthropicVersion)
	}, &anthropicDecoder{})
}

// Wire types of the request (https://docs.anthropic.com/en/api/messages).
type anRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      string        `json:"system,omitempty"`
	Messages    []anMessage   `json:"messages"`
	Stream      bool          `json:"stream"`
	Tools       []anTool      `json:"tools,omitempty"`
	ToolChoice  *anToolChoice `json:"tool_choice,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`        // text
	Source    *anImageSource  `json:"source,omitempty"`      // image
	ID        string          `json:"id,omitempty"`          // tool_use
	Name      string          `json:"name,omitempty"`        // tool_use
	Input     json.RawMessage `json:"input,omitempty"`       // tool_use
	ToolUseID string          `json:"tool_use_id,omitempty"` // tool_result
	Content   any             `json:"content,omitempty"`     // tool_result: string or []anBlock
}

type anImageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type string `json:"type"` // auto, any, tool, none
	Name string `json:"name,omitempty"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encodeAnthropic builds the request body.
func encodeAnthropic(r *Request, model string, cfg Config) ([]byte, error) {
	if model == "" {
		return nil, fmt.Errorf("no model: set Request.Model or Config.Model")
	}
	req := anRequest{Model: model, Stream: true, Temperature: r.Temperature, MaxTokens: r.MaxTokens}
	if req.MaxTokens == 0 {
		req.MaxTokens = cfg.MaxTokens
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = defaultAnthropicMaxTokens
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("MaxTokens must not be negative")
	}
	system := []string{}
	if r.System != "" {
		system = append(system, r.System)
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		if m.Role == RoleSystem {
			if len(m.Images) > 0 {
				return nil, fmt.Errorf("message %d: images are not allowed in the system prompt", i)
			}
			if m.Content != "" {
				system = append(system, m.Content)
			}
			continue
		}
		role, blocks, err := encodeAnthropicMessage(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
			continue
		}
		req.Messages = append(req.Messages, anMessage{Role: role, Content: blocks})
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("no messages with content")
	}
	for i := range req.Messages {
		if req.Messages[i].Role == "user" {
			toolResultsFirst(req.Messages[i].Content)
		}
	}
	req.System = strings.Join(system, "\n\n")
	for i, t := range r.Tools {
		if err := checkTool(t); err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptySchema
		}
		req.Tools = append(req.Tools, anTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if len(r.Tools) > 0 {
		switch r.ToolChoice {
		case "":
		case ToolChoiceAuto:
			req.ToolChoice = &anToolChoice{Type: "auto"}
		case ToolChoiceNone:
			req.ToolChoice = &anToolChoice{Type: "none"}
		case ToolChoiceRequired:
			req.ToolChoice = &anToolChoice{Type: "any"}
		default:
			req.ToolChoice = &anToolChoice{Type: "tool", Name: r.ToolChoice}
		}
	}
	return json.Marshal(&req)
}

// encodeAnthropicMessage returns the API role and content blocks of one message.
func encodeAnthropicMessage(m *Message) (string, []anBlock, error) {
	switch m.Role {
	case RoleUser:
		blocks, err := anthropicImages(m.Images, nil)
		if err != nil {
			return "", nil, err
		}
		if m.Content != "" {
			blocks = append(blocks, anBlock{Type: "text", Text: m.Content})
		}
		return "user", blocks, nil
	case RoleAssistant:
		if len(m.Images) > 0 {
			return "", nil, fmt.Errorf("images are only allowed on user and tool messages")
		}
		var blocks []anBlock
		if m.Content != "" {
			blocks = append(blocks, anBlock{Type: "text", Text: m.Content})
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return "", nil, fmt.Errorf("tool call %d needs an ID and a name", j)
			}
			blocks = append(blocks, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: anthropicInput(tc.Arguments)})
		}
		return "assistant", blocks, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return "", nil, fmt.Errorf("a tool message needs ToolCallID")
		}
		b := anBlock{Type: "tool_result", ToolUseID: m.ToolCallID}
		if len(m.Images) == 0 {
			if m.Content != "" {
				b.Content = m.Content
			}
		} else {
			var inner []anBlock
			if m.Content != "" {
				inner = append(inner, anBlock{Type: "text", Text: m.Content})
			}
			inner, err := anthropicImages(m.Images, inner)
			if err != nil {
				return "", nil, err
			}
			b.Content = inner
		}
		return "user", []anBlock{b}, nil
	}
	return "", nil, fmt.Errorf("unknown role %q", m.Role)
}

// toolResultsFirst moves tool_result blocks to the front of a user message, keeping their order,
// as the API requires when a message merges tool results with the user's next words.
func toolResultsFirst(blocks []anBlock) {
	slices.SortStableFunc(blocks, func(a, b anBlock) int {
		ar, br := a.Type == "tool_result", b.Type == "tool_result"
		switch {
		case ar && !br:
			return -1
		case br && !ar:
			return 1
		}
		return 0
	})
}

func anthropicImages(images []Image, out []anBlock) ([]anBlock, error) {
	for j, im := range images {
		mt, data, ok, err := im.base64Source()
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", j, err)
		}
		if ok {
			out = append(out, anBlock{Type: "image", Source: &anImageSource{Type: "base64", MediaType: mt, Data: data}})
		} else {
			out = append(out, anBlock{Type: "image", Source: &anImageSource{Type: "url", URL: im.URL}})
		}
	}
	return out, nil
}

// anthropicInput returns tool-call arguments as the JSON object tool_use.input must be; arguments
// that are not an object (a model's broken JSON) are sent as {}.
func anthropicInput(args json.RawMessage) json.RawMessage {
	a := bytes.TrimSpace(args)
	if len(a) == 0 || a[0] != '{' || !json.Valid(a) {
		return json.RawMessage("{}")
	}
	return a
}

// Wire types of a stream event.
type anEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      *anStartMessage `json:"message"`
	ContentBlock *anStartBlock   `json:"content_block"`
	Delta        *anDelta        `json:"delta"`
	Usage        *anUsage        `json:"usage"`
	Error        *errorObject    `json:"error"`
}

type anStartMessage struct {
	Usage anUsage `json:"usage"`
}

type anStartBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Text  string          `json:"text"`
	Input json.RawMessage `json:"input"`
}

type anDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// anthropicDecoder follows the Messages streaming flow: message_start, then for each content block
// content_block_start, content_block_delta…, content_block_stop, then message_delta (stop reason,
// final usage) and message_stop. ping is ignored; error ends the stream; unknown event types are
// ignored, as the API's versioning policy asks.
type anthropicDecoder struct {
	ev         anEvent
	blocks     []anBlockState
	in         anUsage
	out        int
	stopReason string
	sawStop    bool
}

type anBlockState struct {
	kind     string
	id, name string
	args     []byte
	input    json.RawMessage
}

// maxContentBlocks bounds the blocks of one reply.
const maxContentBlocks = 1024

func (d *anthropicDecoder) event(sev sseEvent, out []Event) ([]Event, bool, error) {
	data := bytes.TrimSpace(sev.Data)
	if len(data) == 0 {
		return out, false, nil
	}
	e := &d.ev
	*e = anEvent{}
	if err := json.Unmarshal(data, e); err != nil {
		return out, false, &Error{Provider: providerAnthropic, Code: CodeBadStream, Message: "undecodable event: " + err.Error(), Err: err}
	}
	if e.Type == "" {
		e.Type = string(sev.Type)
	}
	switch e.Type {
	case "content_block_delta":
		if e.Delta == nil {
			return out, false, nil
		}
		switch e.Delta.Type {
		case "text_delta":
			if e.Delta.Text != "" {
				out = append(out, Event{Kind: TextDelta, Text: e.Delta.Text})
			}
		case "input_json_delta":
			b, err := d.block(e.Index)
			if err != nil {
				return out, false, err
			}
			b.args = append(b.args, e.Delta.PartialJSON...)
		}
	case "message_start":
		if e.Message != nil {
			d.addUsage(&e.Message.Usage)
		}
	case "content_block_start":
		if e.ContentBlock == nil {
			return out, false, nil
		}
		b, err := d.block(e.Index)
		if err != nil {
			return out, false, err
		}
		*b = anBlockState{kind: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name, input: e.ContentBlock.Input}
		if b.kind == "text" && e.ContentBlock.Text != "" {
			out = append(out, Event{Kind: TextDelta, Text: e.ContentBlock.Text})
		}
	case "content_block_stop":
		if e.Index < 0 || e.Index >= len(d.blocks) {
			return out, false, nil
		}
		b := &d.blocks[e.Index]
		if b.kind == "tool_use" {
			out = append(out, Event{Kind: ToolCallEvent, ToolCall: ToolCall{ID: b.id, Name: b.name, Arguments: b.arguments()}})
			b.kind = "" // emitted
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			d.stopReason = normalizeAnthropicStop(e.Delta.StopReason)
			d.sawStop = true
		}
		if e.Usage != nil {
			d.addUsage(e.Usage)
		}
	case "message_stop":
		return append(out, d.done()), true, nil
	case "error":
		if e.Error == nil {
			e.Error = &errorObject{Type: "error", Message: string(data)}
		}
		return out, false, streamError(providerAnthropic, e.Error)
	}
	return out, false, nil
}

func (d *anthropicDecoder) eof(out []Event) ([]Event, error) {
	if !d.sawStop {
		return out, &Error{Provider: providerAnthropic, Code: CodeIncomplete, Message: "the stream ended without message_stop", Retryable: true}
	}
	return append(out, d.done()), nil
}

func (d *anthropicDecoder) done() Event {
	u := Usage{
		InputTokens:       d.in.InputTokens + d.in.CacheCreationInputTokens + d.in.CacheReadInputTokens,
		OutputTokens:      d.out,
		CachedInputTokens: d.in.CacheReadInputTokens,
	}
	return Event{Kind: Done, Usage: u, FinishReason: d.stopReason}
}

// addUsage merges a usage report; the API's counts are cumulative, so the largest wins.
func (d *anthropicDecoder) addUsage(u *anUsage) {
	d.in.InputTokens = max(d.in.InputTokens, u.InputTokens)
	d.in.CacheCreationInputTokens = max(d.in.CacheCreationInputTokens, u.CacheCreationInputTokens)
	d.in.CacheReadInputTokens = max(d.in.CacheReadInputTokens, u.CacheReadInputTokens)
	d.out = max(d.out, u.OutputTokens)
}

func (d *anthropicDecoder) block(i int) (*anBlockState, error) {
	if i < 0 || i >= maxContentBlocks {
		return nil, &Error{Provider: providerAnthropic, Code: CodeBadStream, Message: fmt.Sprintf("content block index %d out of range", i)}
	}
	for len(d.blocks) <= i {
		d.blocks = append(d.blocks, anBlockState{})
	}
	return &d.blocks[i], nil
}

// arguments returns the assembled input: the streamed partial_json pieces, else the start
// block's input, else {}.
func (b *anBlockState) arguments() json.RawMessage {
	if a := bytes.TrimSpace(b.args); len(a) > 0 {
		return json.RawMessage(bytes.Clone(a))
	}
	if in := bytes.TrimSpace(b.input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
		return json.RawMessage(bytes.Clone(in))
	}
	return json.RawMessage("{}")
}

// normalizeAnthropicStop maps a stop_reason onto the OpenAI finish-reason vocabulary.
func normalizeAnthropicStop(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return FinishStop
	case "max_tokens":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "refusal":
		return FinishContentFilter
	}
	return r
}
