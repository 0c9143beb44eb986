package session

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// chunker cuts streamed LLM text into sentence or clause chunks for TTS, so speech can start
// before the LLM finishes. The first chunk is cut early (at a clause) to speak sooner; later
// chunks are whole sentences unless they grow long.
type chunker struct {
	buf     strings.Builder
	emitted int // chunks emitted so far
	// MinFirst is the fewest characters of a first chunk cut at a clause (comma, colon…).
	MinFirst int
	// MaxLen forces a cut at the last space once a chunk is this long.
	MaxLen int
}

func newChunker() *chunker { return &chunker{MinFirst: 4, MaxLen: 220} }

// Push adds text and returns the chunks that are complete.
func (c *chunker) Push(s string) []string {
	c.buf.WriteString(s)
	var out []string
	for {
		text := c.buf.String()
		cut := c.findCut(text)
		if cut <= 0 {
			break
		}
		chunk := strings.TrimSpace(text[:cut])
		rest := text[cut:]
		c.buf.Reset()
		c.buf.WriteString(rest)
		if speakable(chunk) {
			out = append(out, chunk)
			c.emitted++
		}
	}
	return out
}

// Flush returns what is left.
func (c *chunker) Flush() string {
	s := strings.TrimSpace(c.buf.String())
	c.buf.Reset()
	if !speakable(s) {
		return ""
	}
	c.emitted++
	return s
}

// speakable reports whether s has anything to say (a letter or a digit).
func speakable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// findCut returns the byte index just after a chunk boundary in text, or 0.
func (c *chunker) findCut(text string) int {
	for i, r := range text {
		switch r {
		case '.', '!', '?', '…', '。', '！', '？':
			end := i + utf8.RuneLen(r)
			if end >= len(text) {
				// At the end of what has arrived: cut now unless the period may be part of a
				// number ("3.5") or an abbreviation ("Dr."); waiting for the next token would
				// delay speech by a token's time.
				if r != '.' {
					return end
				}
				prev, _ := utf8.DecodeLastRuneInString(text[:i])
				if unicode.IsLetter(prev) && !abbreviation(text[:i]) {
					return end
				}
				return 0
			}
			next, _ := utf8.DecodeRuneInString(text[end:])
			if unicode.IsSpace(next) && !abbreviation(text[:i]) {
				return end
			}
		case ',', ';', ':', '—':
			if c.emitted == 0 && i >= c.MinFirst {
				end := i + utf8.RuneLen(r)
				if end < len(text) {
					if next, _ := utf8.DecodeRuneInString(text[end:]); unicode.IsSpace(next) {
						return end
					}
				}
			}
		case '\n':
			if strings.TrimSpace(text[:i]) != "" {
				return i + 1
			}
		}
	}
	if len(text) >= c.MaxLen {
		if sp := strings.LastIndexByte(text[:c.MaxLen], ' '); sp > 0 {
			return sp + 1
		}
	}
	return 0
}

var abbreviations = []string{"mr", "mrs", "ms", "dr", "st", "vs", "etc", "e.g", "i.e", "no", "jr", "sr", "prof", "inc", "ltd"}

// abbreviation reports whether the word before a period is a common abbreviation or an initial.
func abbreviation(before string) bool {
	i := strings.LastIndexFunc(before, unicode.IsSpace)
	w := strings.ToLower(before[i+1:])
	if utf8.RuneCountInString(w) == 1 && w != "i" {
		return true // an initial: "J. Smith"
	}
	for _, a := range abbreviations {
		if w == a {
			return true
		}
	}
	return false
}
