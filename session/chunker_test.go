package session

import (
	"reflect"
	"testing"
)

func TestChunker(t *testing.T) {
	cases := []struct {
		name   string
		pieces []string
		want   []string
	}{
		{"sentences", []string{"Hello there. How", " are you? I am", " fine."}, []string{"Hello there.", "How are you?", "I am fine."}},
		{"first clause early", []string{"Sure, I can help with that, ", "just a moment."}, []string{"Sure,", "I can help with that, just a moment."}},
		{"very short first clause waits", []string{"Ok, ", "it is. Next"}, []string{"Ok, it is.", "Next"}},
		{"sentence end cut at once", []string{"Sure."}, []string{"Sure."}},
		{"question cut at once", []string{"Really?", "!"}, []string{"Really?"}},
		{"decimal", []string{"It costs 3.", "50 dollars. Ok"}, []string{"It costs 3.50 dollars.", "Ok"}},
		{"abbreviation", []string{"Ask Dr. Smith. Then"}, []string{"Ask Dr. Smith.", "Then"}},
		{"newline", []string{"Line one\nLine two"}, []string{"Line one", "Line two"}},
		{"unicode", []string{"Très bien… Merci! "}, []string{"Très bien…", "Merci!"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newChunker()
			var got []string
			for _, p := range tc.pieces {
				got = append(got, c.Push(p)...)
			}
			if rest := c.Flush(); rest != "" {
				got = append(got, rest)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestChunkerForcesLongCut(t *testing.T) {
	c := newChunker()
	c.MaxLen = 30
	got := c.Push("one two three four five six seven eight nine ten eleven")
	if len(got) == 0 || len(got[0]) > 30 {
		t.Fatalf("long text not cut: %q", got)
	}
}
