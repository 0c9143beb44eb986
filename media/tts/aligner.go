package tts

import (
	"math"
	"strings"
	"sync"
	"time"
	"unicode"
)

// aligner turns a provider's per-character timings into word Marks (a word is a run of
// non-space characters) located in the request's text. Completed words are appended to marks and never modified, so snapshots can be handed
// out without copying.
type aligner struct {
	mu    sync.Mutex
	text  string
	pos   int // byte offset in text where the next character is expected
	marks []Mark

	word    strings.Builder
	cur     Mark
	inWord  bool
	seen    bool
	lastEnd time.Duration
}

func newAligner(text string) *aligner { return &aligner{text: text} }

// add takes one chunk's alignment. chunkStart is where the chunk's audio starts in the stream:
// if the chunk's times restart near zero (chunk-relative timings), they are shifted by it.
func (a *aligner) add(chars []string, starts, ends []float64, chunkStart time.Duration) {
	n := min(len(chars), len(starts), len(ends))
	if n == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	shift := time.Duration(0)
	if a.seen && chunkStart > 0 && seconds(starts[0])+time.Millisecond < a.lastEnd {
		shift = chunkStart
	}
	a.seen = true
	for i := range n {
		c := chars[i]
		st, en := seconds(starts[i])+shift, seconds(ends[i])+shift
		if en < st {
			en = st
		}
		if en > a.lastEnd {
			a.lastEnd = en
		}
		if c == "" || isSpace(c) {
			a.endWord()
			continue
		}
		if !a.inWord {
			a.inWord = true
			a.word.Reset()
			a.cur = Mark{Start: st}
		}
		a.word.WriteString(c)
		a.cur.End = en
	}
}

// locate finds a word at (or shortly after) the expected position in the text and returns
// its byte offset. Providers may normalise text ("911" spoken as "nine one one"): a word that
// is not found keeps the current position and does not advance it, so later words resync.
func (a *aligner) locate(word string) int {
	window := a.text[a.pos:min(len(a.text), a.pos+64+len(word))]
	if i := strings.Index(window, word); i >= 0 {
		off := a.pos + i
		a.pos = off + len(word)
		return off
	}
	return a.pos
}

func (a *aligner) endWord() {
	if a.inWord {
		a.cur.Text = a.word.String()
		a.cur.CharOffset = a.locate(a.cur.Text)
		if a.cur.End < a.cur.Start { // out-of-order timings from the provider
			a.cur.End = a.cur.Start
		}
		a.marks = append(a.marks, a.cur)
		a.inWord = false
	}
}

// finish completes the last word at the end of the stream.
func (a *aligner) finish() {
	a.mu.Lock()
	a.endWord()
	a.mu.Unlock()
}

// snapshot returns the completed marks; the slice is capped so appends never show through.
func (a *aligner) snapshot() []Mark {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.marks) == 0 {
		return nil
	}
	return a.marks[:len(a.marks):len(a.marks)]
}

func isSpace(c string) bool {
	for _, r := range c {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// seconds converts provider seconds to a duration, clamping nonsense to 0.
func seconds(s float64) time.Duration {
	if math.IsNaN(s) || s < 0 || s > 1e6 {
		return 0
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}
