package tts

import (
	"strings"
	"testing"
	"time"
)

func chars(s string) []string {
	var out []string
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

func times(n int, from, step float64) (starts, ends []float64) {
	for i := range n {
		starts = append(starts, from+float64(i)*step)
		ends = append(ends, from+float64(i+1)*step)
	}
	return
}

func TestAlignerWordsAcrossChunks(t *testing.T) {
	text := "Héllo, big  world!"
	a := newAligner(text)
	cs := chars(text)
	st, en := times(len(cs), 0, 0.05)
	// Split mid-word; absolute times.
	a.add(cs[:8], st[:8], en[:8], 0)
	if got := a.snapshot(); len(got) != 1 || got[0].Text != "Héllo," {
		t.Fatalf("after chunk 1: %+v", got)
	}
	snap := a.snapshot()
	a.add(cs[8:], st[8:], en[8:], 400*time.Millisecond)
	a.finish()
	got := a.snapshot()
	want := []Mark{
		{Text: "Héllo,", Start: 0, End: 300 * time.Millisecond, CharOffset: 0},
		{Text: "big", Start: 350 * time.Millisecond, End: 500 * time.Millisecond, CharOffset: 8},
		{Text: "world!", Start: 600 * time.Millisecond, End: 900 * time.Millisecond, CharOffset: 13},
	}
	if len(got) != len(want) {
		t.Fatalf("marks %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mark %d = %+v, want %+v", i, got[i], want[i])
		}
		if text[got[i].CharOffset:got[i].CharOffset+len(got[i].Text)] != got[i].Text {
			t.Errorf("mark %d offset wrong", i)
		}
	}
	if snap[0] != got[0] || len(snap) != 1 {
		t.Error("earlier snapshot changed")
	}
}

// TestAlignerRelativeChunks: chunk-relative timings (restarting at 0) are shifted by the
// chunk's position in the audio.
func TestAlignerRelativeChunks(t *testing.T) {
	a := newAligner("ab cd")
	a.add([]string{"a", "b", " "}, []float64{0, 0.1, 0.2}, []float64{0.1, 0.2, 0.3}, 0)
	a.add([]string{"c", "d"}, []float64{0, 0.1}, []float64{0.1, 0.2}, 300*time.Millisecond)
	a.finish()
	got := a.snapshot()
	if len(got) != 2 || got[1].Start != 300*time.Millisecond || got[1].End != 500*time.Millisecond || got[1].CharOffset != 3 {
		t.Errorf("marks %+v", got)
	}
}

// TestAlignerNormalisedText: characters that are not in the text (provider normalisation) do
// not derail the offsets of later words.
func TestAlignerNormalisedText(t *testing.T) {
	text := "call 911 now"
	a := newAligner(text)
	cs := chars("call nine one one now")
	st, en := times(len(cs), 0, 0.01)
	a.add(cs, st, en, 0)
	a.finish()
	got := a.snapshot()
	last := got[len(got)-1]
	if last.Text != "now" || last.CharOffset != strings.Index(text, "now") {
		t.Errorf("last mark %+v", last)
	}
	a2 := newAligner("x")
	a2.add([]string{"x"}, []float64{-1}, []float64{1e300}, 0) // nonsense times are clamped
	a2.finish()
	if m := a2.snapshot(); len(m) != 1 || m[0].Start != 0 || m[0].End != 0 {
		t.Errorf("clamped %+v", m)
	}
	if newAligner("").snapshot() != nil {
		t.Error("empty aligner has marks")
	}
}
