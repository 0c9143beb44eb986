package fakes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ScriptToolCall is one tool call of a scripted reply.
type ScriptToolCall struct {
	ID   string          `json:"id,omitempty"`   // empty: the fake makes one up
	Name string          `json:"name"`           // ^[a-zA-Z0-9_-]{1,64}$
	Args json.RawMessage `json:"args,omitempty"` // a JSON object; empty: {}
}

// ScriptTurn is one scripted reply of a fake LLM: text, tool calls (several are sent in
// parallel), or both, text first.
type ScriptTurn struct {
	Text      string           `json:"text,omitempty"`
	ToolCalls []ScriptToolCall `json:"tool_calls,omitempty"`
}

// Script is the list of replies a fake LLM gives, one per successful request, in order. When the
// turns run out it answers with its fallback, by default [ScriptEcho]. A Script is safe for
// concurrent use and may be shared by several fakes.
type Script struct {
	mu       sync.Mutex
	turns    []ScriptTurn
	next     int
	fallback func(lastUserText string) ScriptTurn
}

// NewScript returns a script holding turns.
func NewScript(turns ...ScriptTurn) *Script {
	return &Script{turns: append([]ScriptTurn(nil), turns...)}
}

// ScriptEcho is the default fallback: "You said: <last user text>".
func ScriptEcho(lastUserText string) ScriptTurn {
	return ScriptTurn{Text: "You said: " + lastUserText}
}

// Add appends turns.
func (s *Script) Add(turns ...ScriptTurn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// SetFallback sets the reply used once the turns run out; nil restores ScriptEcho.
func (s *Script) SetFallback(f func(lastUserText string) ScriptTurn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Next returns the next reply, given the text of the request's last user message.
func (s *Script) Next(lastUserText string) ScriptTurn {
	s.mu.Lock()
	if s.next < len(s.turns) {
		t := s.turns[s.next]
		s.next++
		s.mu.Unlock()
		return t
	}
	f := s.fallback
	s.mu.Unlock()
	if f == nil {
		f = ScriptEcho
	}
	return f(lastUserText)
}

// Remaining returns how many scripted turns are left.
func (s *Script) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// Rewind starts the script again from its first turn.
func (s *Script) Rewind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = 0
}

// LoadScript reads a script file (see [ParseScript]).
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fakes: read script: %w", err)
	}
	s, err := ParseScript(b)
	if err != nil {
		return nil, fmt.Errorf("fakes: %s: %w", path, err)
	}
	return s, nil
}

// ParseScript reads a script in one of two forms.
//
// JSON, when the first non-blank character is '{' or '[': either an array of turns or
// {"turns": [...]}, each turn {"text": "...", "tool_calls": [{"name": "...", "args": {...}, "id": "..."}]}.
//
// Text, otherwise: turns are separated by lines holding only "---"; in a turn, a line
// "call NAME {json args}" is a tool call (the arguments may be left out), any other line is text
// (lines are joined with "\n"); lines starting with "#" are comments; a leading "\" is removed
// and makes the rest of the line text (to write text starting with "call ", "#" or "---").
// Blank lines around a turn's text are dropped. Example:
//
//	# greet, then look two things up in parallel, then answer
//	Hello! How can I help you today?
//	---
//	call get_weather {"city": "Paris"}
//	call get_time {"timezone": "Europe/Paris"}
//	---
//	It is sunny in Paris and a quarter past ten.
func ParseScript(data []byte) (*Script, error) {
	t := bytes.TrimSpace(data)
	var turns []ScriptTurn
	var err error
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		turns, err = parseScriptJSON(t)
	} else {
		turns, err = parseScriptText(data)
	}
	if err != nil {
		return nil, err
	}
	for i, tu := range turns {
		if err := tu.validate(); err != nil {
			return nil, fmt.Errorf("turn %d: %w", i+1, err)
		}
	}
	return NewScript(turns...), nil
}

func parseScriptJSON(b []byte) ([]ScriptTurn, error) {
	var turns []ScriptTurn
	if b[0] == '[' {
		if err := json.Unmarshal(b, &turns); err != nil {
			return nil, fmt.Errorf("script JSON: %w", err)
		}
		return turns, nil
	}
	var doc struct {
		Turns []ScriptTurn `json:"turns"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("script JSON: %w", err)
	}
	return doc.Turns, nil
}

func parseScriptText(b []byte) ([]ScriptTurn, error) {
	var turns []ScriptTurn
	var cur ScriptTurn
	var text []string
	flush := func() {
		for len(text) > 0 && strings.TrimSpace(text[0]) == "" {
			text = text[1:]
		}
		for len(text) > 0 && strings.TrimSpace(text[len(text)-1]) == "" {
			text = text[:len(text)-1]
		}
		cur.Text = strings.Join(text, "\n")
		if cur.Text != "" || len(cur.ToolCalls) > 0 {
			turns = append(turns, cur)
		}
		cur, text = ScriptTurn{}, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, `\`):
			text = append(text, line[1:])
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "---":
			flush()
		case strings.HasPrefix(line, "call ") || line == "call":
			rest := strings.TrimSpace(strings.TrimPrefix(line, "call"))
			name, args, _ := strings.Cut(rest, " ")
			if name == "" {
				return nil, fmt.Errorf("line %d: call without a tool name", n)
			}
			tc := ScriptToolCall{Name: name}
			if a := strings.TrimSpace(args); a != "" {
				tc.Args = json.RawMessage(a)
			}
			cur.ToolCalls = append(cur.ToolCalls, tc)
		default:
			text = append(text, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	flush()
	return turns, nil
}

// validate checks a turn as a vendor would check a model's output.
func (t ScriptTurn) validate() error {
	if t.Text == "" && len(t.ToolCalls) == 0 {
		return fmt.Errorf("a turn needs text or tool calls")
	}
	for j, tc := range t.ToolCalls {
		if !scriptToolNameOK(tc.Name) {
			return fmt.Errorf("tool call %d: name %q must match ^[a-zA-Z0-9_-]{1,64}$", j+1, tc.Name)
		}
		if len(bytes.TrimSpace(tc.Args)) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(tc.Args, &obj); err != nil {
				return fmt.Errorf("tool call %d (%s): args must be a JSON object: %v", j+1, tc.Name, err)
			}
		}
	}
	return nil
}

// argsJSON returns the call's arguments compacted, {} when empty.
func (tc ScriptToolCall) argsJSON() string {
	if len(bytes.TrimSpace(tc.Args)) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, tc.Args) != nil {
		return "{}"
	}
	return b.String()
}

func scriptToolNameOK(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
