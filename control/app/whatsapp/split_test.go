package whatsapp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Split cuts under the limit at a sentence end when one is in the last two thirds, else at a
// space, else inside the word; nothing is lost but the spaces at the cuts.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		max        int
		want       []string
	}{
		{"short", "Hello.", 10, []string{"Hello."}},
		{"sentences", "One two. Three four! Five six?", 20, []string{"One two. Three four!", "Five six?"}},
		{"no sentence end", "aaaa bbbb cccc dddd", 10, []string{"aaaa bbbb", "cccc dddd"}},
		{"one long word", "abcdefghijkl", 5, []string{"abcde", "fghij", "kl"}},
		{"runes", "ééééé. ààààà.", 7, []string{"ééééé.", "ààààà."}},
		{"sentence too early", "A. bbbbbbbbbbbb cccc", 16, []string{"A. bbbbbbbbbbbb", "cccc"}},
	} {
		got := Split(tc.text, tc.max)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: %q", tc.name, got)
		}
		for _, p := range got {
			if utf8.RuneCountInString(p) > tc.max {
				t.Errorf("%s: part %q over %d", tc.name, p, tc.max)
			}
		}
	}
	long := strings.Repeat("Word word word. ", 700)
	parts := Split(long, MaxText)
	if len(parts) != 3 || strings.Join(parts, " ") != strings.TrimSpace(long) {
		t.Fatalf("%d parts", len(parts))
	}
}

// A Graph template is read with its parameters and examples; rendering checks the parameters.
func TestTemplateRender(t *testing.T) {
	var g GraphTemplate
	if err := json.Unmarshal([]byte(`{"name":"order_update","language":"en_US","status":"APPROVED","category":"UTILITY","parameter_format":"POSITIONAL",
		"components":[{"type":"BODY","text":"Hi {{1}}, order {{2}} ({{1}}).","example":{"body_text":[["Ada","#1"]]}}]}`), &g); err != nil {
		t.Fatal(err)
	}
	tpl, ok := viewTemplate(g)
	if !ok || len(tpl.Parameters) != 2 || *tpl.Parameters[1].Example != "#1" {
		t.Fatalf("%+v", tpl)
	}
	if s, err := render(tpl, TemplateUse{Parameters: []string{"Bo", "#9"}}); err != nil || s != "Hi Bo, order #9 (Bo)." {
		t.Fatalf("%q %v", s, err)
	}
	for _, use := range []TemplateUse{{Parameters: []string{"Bo"}}, {Parameters: []string{"a", "b", "c"}}, {NamedParameters: map[string]string{"1": "x"}}} {
		if _, err := render(tpl, use); err == nil {
			t.Errorf("%+v fits", use)
		}
	}
	g.Status = "REJECTED"
	if _, ok := viewTemplate(g); ok {
		t.Fatal("a rejected template is listed")
	}
}

// BenchmarkSplit cuts a 10,000-character reply into messages (once per reply, not per frame).
func BenchmarkSplit(b *testing.B) {
	text := strings.Repeat("This sentence is part of a long answer. ", 250)
	b.ReportAllocs()
	for b.Loop() {
		if len(Split(text, MaxText)) != 3 {
			b.Fatal("parts")
		}
	}
}
