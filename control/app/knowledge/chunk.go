package knowledge

import (
	"strings"

	"github.com/parley-voice/parley/control/store"
)

// Chunking. A document is cut where its headings are, and a section longer than MaxWords into
// pieces of about MaxWords with OverlapWords repeated from the end of the previous piece, so a
// fact that straddles a cut is whole in one of them. Every chunk keeps its heading path (the
// headings above it, " > " between levels) and its page.

// ChunkOptions size the chunks.
type ChunkOptions struct {
	MaxWords     int // default 180
	OverlapWords int // default 30
}

func (o ChunkOptions) withDefaults() ChunkOptions {
	if o.MaxWords <= 0 {
		o.MaxWords = 180
	}
	if o.OverlapWords < 0 || o.OverlapWords >= o.MaxWords {
		o.OverlapWords = 0
	} else if o.OverlapWords == 0 {
		o.OverlapWords = 30
	}
	return o
}

// section is the text under one heading path on one page.
type section struct {
	heading string
	page    int
	paras   []string
}

// Split cuts pages into chunks.
func Split(pages []Page, o ChunkOptions) []store.KnowledgeChunk {
	o = o.withDefaults()
	var secs []section
	var path []string // path[i] is the heading of level i+1
	cur := section{}
	var para strings.Builder
	flushPara := func() {
		if t := strings.TrimSpace(para.String()); t != "" {
			cur.paras = append(cur.paras, t)
		}
		para.Reset()
	}
	flushSec := func() {
		flushPara()
		if len(cur.paras) > 0 {
			secs = append(secs, cur)
		}
		cur = section{heading: strings.Join(nonEmpty(path), " > "), page: cur.page}
	}
	for _, p := range pages {
		flushSec()
		cur.page = p.N
		fence := false
		for line := range strings.SplitSeq(p.Text, "\n") {
			trim := strings.TrimSpace(line)
			if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
				fence = !fence
			}
			if !fence {
				if lvl, title := heading(trim); lvl > 0 {
					flushSec()
					for len(path) < lvl {
						path = append(path, "")
					}
					path = append(path[:lvl-1], title)
					cur.heading = strings.Join(nonEmpty(path), " > ")
					continue
				}
			}
			if trim == "" && !fence {
				flushPara()
				continue
			}
			if para.Len() > 0 {
				para.WriteByte('\n')
			}
			para.WriteString(strings.TrimRight(line, " \t\r"))
		}
	}
	flushSec()

	var out []store.KnowledgeChunk
	for _, s := range secs {
		for _, body := range pack(s.paras, o) {
			w := len(strings.Fields(body))
			out = append(out, store.KnowledgeChunk{Seq: len(out), Heading: s.heading, Page: s.page, Body: body, Tokens: (w*4 + 2) / 3})
		}
	}
	return out
}

var headingMarks = strings.NewReplacer("`", "", "**", "", "__", "")

// heading reads a Markdown ATX heading ("## Title"), giving its level and title.
func heading(line string) (int, string) {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(line) || line[n] != ' ' {
		return 0, ""
	}
	t := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#"))
	t = strings.TrimSpace(headingMarks.Replace(t)) // Markdown's code and emphasis marks are not the heading's words
	if t == "" {
		return 0, ""
	}
	return n, t
}

// pack puts paragraphs into pieces of at most o.MaxWords words, cutting inside a paragraph only
// when it alone is longer, with o.OverlapWords of the previous piece's end repeated.
func pack(paras []string, o ChunkOptions) []string {
	var out []string
	var words []string // the piece being filled
	fresh := 0         // words of words that are not overlap
	emit := func() {
		if fresh > 0 {
			out = append(out, strings.Join(words, " "))
		}
		keep := min(o.OverlapWords, len(words))
		words = append([]string(nil), words[len(words)-keep:]...)
		fresh = 0
	}
	for _, p := range paras {
		pw := strings.Fields(p)
		if fresh > 0 && len(words)+len(pw) > o.MaxWords {
			emit()
		}
		for len(pw) > 0 {
			room := o.MaxWords - len(words)
			if room <= 0 {
				emit()
				continue
			}
			take := min(room, len(pw))
			words = append(words, pw[:take]...)
			fresh += take
			pw = pw[take:]
			if len(pw) > 0 {
				emit()
			}
		}
	}
	emit()
	return out
}

func nonEmpty(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
