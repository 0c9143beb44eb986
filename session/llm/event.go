package llm

import "strconv"

// EventKind says what an [Event] carries.
type EventKind int

// The kinds of [Event]. The zero value is not a valid kind.
const (
	// TextDelta carries the next piece of the reply's text in Event.Text.
	TextDelta EventKind = iota + 1
	// ToolCallEvent carries one completed tool call in Event.ToolCall, its arguments fully
	// assembled. Parallel calls arrive as several events, in the model's order.
	ToolCallEvent
	// Done ends the reply; Event.Usage and Event.FinishReason are set. Recv returns io.EOF next.
	Done
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case TextDelta:
		return "TextDelta"
	case ToolCallEvent:
		return "ToolCall"
	case Done:
		return "Done"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Finish reasons, in the OpenAI vocabulary. Anthropic's stop reasons are mapped onto these
// (end_turn and stop_sequence → stop, max_tokens → length, tool_use → tool_calls, refusal →
// content_filter); a reason with no equivalent is passed through unchanged.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// Event is one item of a streamed reply.
type Event struct {
	Kind         EventKind
	Text         string   // TextDelta
	ToolCall     ToolCall // ToolCallEvent
	Usage        Usage    // Done (zero when the server reported none)
	FinishReason string   // Done; see the Finish constants
}

// Usage counts the tokens a call consumed, as the vendor reported them.
type Usage struct {
	InputTokens       int // all prompt tokens, cached ones included
	OutputTokens      int
	CachedInputTokens int // the part of InputTokens read from the vendor's prompt cache
}
