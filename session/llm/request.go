package llm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Role says who wrote a [Message].
type Role string

// The roles a [Message] can have. System text normally goes in [Request.System]; a RoleSystem
// message is sent as a system message to OpenAI-compatible servers and appended to the top-level
// system prompt for Anthropic.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	RoleSystem    Role = "system"
)

// Tool choices understood by both adapters. Any other non-empty [Request.ToolChoice] is the name of
// the one tool the model must call.
const (
	ToolChoiceAuto     = "auto"     // the model decides (the vendors' default when tools are given)
	ToolChoiceNone     = "none"     // the model must not call tools
	ToolChoiceRequired = "required" // the model must call at least one tool (Anthropic "any")
)

// Request is one model call: the conversation so far and what the model may do next.
type Request struct {
	Model       string    // empty: the adapter's configured model
	System      string    // the system prompt
	Messages    []Message // oldest first
	Tools       []Tool
	ToolChoice  string   // "", ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired or a tool name
	Temperature *float64 // nil: the vendor's default
	MaxTokens   int      // 0: the vendor's default (Anthropic, which requires it: the adapter's, else 1024)
}

// Message is one entry of the conversation.
type Message struct {
	Role    Role
	Content string
	// Images go with a user message (or a tool result, for Anthropic).
	Images []Image
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string
	// Name is an optional participant name (OpenAI-compatible servers only).
	Name string
}

// Image is a picture sent to a vision model: either raw bytes with their MIME type, or a URL
// (https:// or a data: URL, RFC 2397).
type Image struct {
	MIME string // "image/jpeg", "image/png", "image/gif" or "image/webp"
	Data []byte // raw bytes (not base64); when empty, URL is used
	URL  string
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON Schema object; nil means no parameters
}

// ToolCall is one call the model made, with its arguments fully assembled.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON object the model produced ("{}" when it gave none), passed on as
	// received: a model that errs can produce invalid JSON, which the tool runner must reject.
	Arguments json.RawMessage
}

// dataURL returns the image as a data: URL (RFC 2397) for OpenAI's image_url content part.
func (im Image) dataURL() (string, error) {
	if len(im.Data) == 0 {
		if im.URL == "" {
			return "", fmt.Errorf("image has neither data nor URL")
		}
		return im.URL, nil
	}
	if im.MIME == "" {
		return "", fmt.Errorf("image data without a MIME type")
	}
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(im.MIME) + base64.StdEncoding.EncodedLen(len(im.Data)))
	b.WriteString("data:")
	b.WriteString(im.MIME)
	b.WriteString(";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	_, _ = enc.Write(im.Data)
	_ = enc.Close()
	return b.String(), nil
}

// base64Source returns the MIME type and base64 text of the image for Anthropic's base64 image
// source. ok is false when the image is only a remote (non-data) URL.
func (im Image) base64Source() (mime, data string, ok bool, err error) {
	if len(im.Data) > 0 {
		if im.MIME == "" {
			return "", "", false, fmt.Errorf("image data without a MIME type")
		}
		return im.MIME, base64.StdEncoding.EncodeToString(im.Data), true, nil
	}
	if im.URL == "" {
		return "", "", false, fmt.Errorf("image has neither data nor URL")
	}
	rest, isData := strings.CutPrefix(im.URL, "data:")
	if !isData {
		return "", "", false, nil
	}
	// RFC 2397: data:[<mediatype>][;base64],<data>
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false, fmt.Errorf("malformed data: URL (no comma)")
	}
	mt, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 {
		return "", "", false, fmt.Errorf("data: URL is not base64-encoded")
	}
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	if mt == "" {
		mt = im.MIME
	}
	if mt == "" {
		return "", "", false, fmt.Errorf("data: URL without a media type")
	}
	return mt, payload, true, nil
}

// argumentsOrEmpty returns the call's arguments, "{}" when empty.
func (tc ToolCall) argumentsOrEmpty() json.RawMessage {
	if len(strings.TrimSpace(string(tc.Arguments))) == 0 {
		return json.RawMessage("{}")
	}
	return tc.Arguments
}
