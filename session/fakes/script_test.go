package fakes

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseScriptText(t *testing.T) {
	src := `# greet, then look two things up in parallel, then answer
Hello! How can I help you today?
---
call get_weather {"city": "Paris"}
call get_time
---

It is sunny in Paris.
\call me maybe
\# not a comment
\---

---
---
`
	s, err := ParseScript([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.Remaining() != 3 {
		t.Fatalf("%d turns", s.Remaining())
	}
	t1 := s.Next("")
	if t1.Text != "Hello! How can I help you today?" || len(t1.ToolCalls) != 0 {
		t.Fatalf("turn 1 %+v", t1)
	}
	t2 := s.Next("")
	if t2.Text != "" || len(t2.ToolCalls) != 2 || t2.ToolCalls[0].Name != "get_weather" || string(t2.ToolCalls[0].Args) != `{"city": "Paris"}` ||
		t2.ToolCalls[1].Name != "get_time" || t2.ToolCalls[1].argsJSON() != "{}" {
		t.Fatalf("turn 2 %+v", t2)
	}
	t3 := s.Next("")
	if t3.Text != "It is sunny in Paris.\ncall me maybe\n# not a comment\n---" {
		t.Fatalf("turn 3 %q", t3.Text)
	}
	if got := s.Next("bye"); got.Text != "You said: bye" {
		t.Fatalf("fallback %+v", got)
	}
	s.Rewind()
	if s.Remaining() != 3 {
		t.Fatal("Rewind")
	}
}

func TestParseScriptJSON(t *testing.T) {
	for _, src := range []string{
		`[{"text":"hi"},{"tool_calls":[{"name":"f","args":{"a":1},"id":"call_x"}]}]`,
		` {"turns":[{"text":"hi"},{"tool_calls":[{"name":"f","args":{"a":1},"id":"call_x"}]}]}`,
	} {
		s, err := ParseScript([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if s.Next("").Text != "hi" {
			t.Fatal("turn 1")
		}
		tc := s.Next("").ToolCalls[0]
		if tc.Name != "f" || tc.ID != "call_x" || tc.argsJSON() != `{"a":1}` {
			t.Fatalf("%+v", tc)
		}
	}
}

func TestParseScriptErrors(t *testing.T) {
	for src, want := range map[string]string{
		`call get weather {"a":1}`:           "args must be a JSON object",
		`call bad.name`:                      "must match",
		"call {}":                            "must match",
		"call ":                              "without a tool name",
		`call f [1,2]`:                       "args must be a JSON object",
		`[{"text":""}]`:                      "needs text or tool calls",
		`{"turns":[{"text":"x"}],"extra":1}`: "unknown field",
		`[{"text":`:                          "script JSON",
	} {
		_, err := ParseScript([]byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: err %v, want %q", src, err, want)
		}
	}
}

func TestLoadScript(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(p, []byte("one\n---\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(p)
	if err != nil || s.Remaining() != 2 {
		t.Fatalf("%v", err)
	}
	if _, err := LoadScript(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("no error for a missing file")
	}
}

func TestScriptFallbackAndAdd(t *testing.T) {
	s := NewScript()
	s.SetFallback(func(last string) ScriptTurn { return ScriptTurn{Text: strings.ToUpper(last)} })
	if s.Next("hey").Text != "HEY" {
		t.Fatal("fallback")
	}
	s.Add(ScriptTurn{Text: "scripted"})
	if s.Next("x").Text != "scripted" || s.Remaining() != 0 {
		t.Fatal("Add")
	}
	s.SetFallback(nil)
	if s.Next("x").Text != "You said: x" {
		t.Fatal("default fallback")
	}
}

func TestScriptTokens(t *testing.T) {
	cases := map[string][]string{
		"":                   nil,
		"Hello":              {"Hello"},
		"Hello there, you.":  {"Hello", " there,", " you."},
		"  lead  and trail ": {"  lead", "  and", " trail", " "},
	}
	for in, want := range cases {
		got := scriptTokens(in)
		if strings.Join(got, "|") != strings.Join(want, "|") || strings.Join(got, "") != in {
			t.Fatalf("%q: %q", in, got)
		}
	}
}

func TestScriptChunks(t *testing.T) {
	in := `{"city":"Zürich","emoji":"🙂🙂"}`
	for n := 1; n < 12; n++ {
		parts := scriptChunks(in, n)
		if strings.Join(parts, "") != in {
			t.Fatalf("n=%d: %q", n, parts)
		}
		for _, p := range parts {
			if !utf8.ValidString(p) {
				t.Fatalf("n=%d: piece %q splits a character", n, p)
			}
		}
		if n < 8 && len(parts) < 3 {
			t.Fatalf("n=%d: only %d pieces", n, len(parts))
		}
	}
}

func FuzzParseScript(f *testing.F) {
	f.Add([]byte("hi\n---\ncall f {\"a\":1}\n"))
	f.Add([]byte(`{"turns":[{"text":"x","tool_calls":[{"name":"g"}]}]}`))
	f.Add([]byte(`[{"tool_calls":[{"name":"f","args":{"b":[1,2]}}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScript(data)
		if err != nil {
			return
		}
		for s.Remaining() > 0 {
			turn := s.Next("")
			if err := turn.validate(); err != nil {
				t.Fatalf("accepted an invalid turn: %v", err)
			}
			for _, tc := range turn.ToolCalls {
				if !json.Valid([]byte(tc.argsJSON())) {
					t.Fatalf("args %q", tc.argsJSON())
				}
			}
		}
	})
}
