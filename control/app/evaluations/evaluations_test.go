package evaluations

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/session"
)

// TestSplitToolLine reads the engine's tool lines back into arguments and result.
func TestSplitToolLine(t *testing.T) {
	for _, c := range []struct{ text, args, res string }{
		{`lookup_order({"order_id":"A-1"}) → {"status":"shipped"}`, `{"order_id":"A-1"}`, `{"status":"shipped"}`},
		{`lookup_order({}) → not json`, `{}`, `"not json"`},
		{`lookup_order cancelled`, `{}`, `"lookup_order cancelled"`},
	} {
		a, r := splitToolLine("lookup_order", c.text)
		if string(a) != c.args || string(r) != c.res {
			t.Errorf("%q: %s %s", c.text, a, r)
		}
	}
}

// TestExpectedCall checks names, exact values and patterns without the LLM.
func TestExpectedCall(t *testing.T) {
	calls := []runtime.RehearsedCall{{Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"A-1","n":2}`)}}
	for _, c := range []struct {
		x    ExpectedToolCall
		want bool
		why  string
	}{
		{ExpectedToolCall{Name: "lookup_order"}, true, "was called with"},
		{ExpectedToolCall{Name: "lookup_order", Arguments: map[string]json.RawMessage{"n": json.RawMessage(`2.0`)}}, true, ""},
		{ExpectedToolCall{Name: "lookup_order", Arguments: map[string]json.RawMessage{"order_id": json.RawMessage(`"A-2"`)}}, false, `is "A-1", not "A-2"`},
		{ExpectedToolCall{Name: "lookup_order", Patterns: map[string]string{"order_id": "^A-[0-9]$"}}, true, ""},
		{ExpectedToolCall{Name: "lookup_order", Patterns: map[string]string{"order_id": "^B"}}, false, "does not match"},
		{ExpectedToolCall{Name: "refund"}, false, "was not called"},
	} {
		ok, why := expectedCall(c.x, calls)
		if ok != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%+v: %v %q", c.x, ok, why)
		}
	}
}

// TestDifferences: changed agent turns and tools called differently, counting repeats.
func TestDifferences(t *testing.T) {
	sp := spec{Transcript: []SavedLine{{Role: "agent", Text: "Hello."}, {Role: "user", Text: "A-1?"}, {Role: "agent", Text: "It shipped."}},
		ToolCalls: []SavedCall{{Name: "lookup_order"}, {Name: "lookup_order"}}}
	out := runtime.RehearsalResult{Lines: []session.Line{{Role: session.RoleAgent, Text: "hello. "}, {Role: session.RoleUser, Text: "A-1?"},
		{Role: session.RoleAgent, Text: "I don't know."}, {Role: session.RoleAgent, Text: "Bye."}},
		ToolCalls: []runtime.RehearsedCall{{Name: "lookup_order"}, {Name: "refund"}}}
	d := differences(sp, out)
	if len(d.Turns) != 2 || d.Turns[0].Index != 1 || d.Turns[0].Now != "I don't know." || d.Turns[1].Saved != "" || d.Turns[1].Now != "Bye." {
		t.Fatalf("turns %+v", d.Turns)
	}
	if strings.Join(d.ToolCallsMissing, ",") != "lookup_order" || strings.Join(d.ToolCallsAdded, ",") != "refund" {
		t.Fatalf("tools %+v", d)
	}
	if e := differences(spec{}, out); len(e.Turns)+len(e.ToolCallsMissing)+len(e.ToolCallsAdded) != 0 {
		t.Fatalf("a hand-written evaluation has nothing to differ from: %+v", e)
	}
}

// TestJudgeSchema: the verdict must have one must_not item per criterion and a rationale.
func TestJudgeSchema(t *testing.T) {
	v, err := jsoncheck.Compile(map[string]any{"https://parley.dev/j.json": judgeSchema(1)}, "https://parley.dev/j.json")
	if err != nil {
		t.Fatal(err)
	}
	for doc, fits := range map[string]bool{
		`{"success":{"met":true,"rationale":"r"},"must_not":[{"happened":false,"rationale":"r"}]}`:  true,
		`{"success":{"met":true,"rationale":"r"},"must_not":[]}`:                                    false,
		`{"success":{"met":"yes","rationale":"r"},"must_not":[{"happened":false,"rationale":"r"}]}`: false,
		`{"success":{"met":true},"must_not":[{"happened":false,"rationale":"r"}]}`:                  false,
	} {
		val, err := jsoncheck.Decode(json.RawMessage(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(v.Validate(val)) == 0; got != fits {
			t.Errorf("%s: fits %v, want %v", doc, got, fits)
		}
	}
}
