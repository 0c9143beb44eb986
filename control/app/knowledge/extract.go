package knowledge

import (
	"archive/zip"
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"codeberg.org/readeck/go-readability/v2"
	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/ledongthuc/pdf"
	"golang.org/x/net/html"
)

// Content types a document may have. They are read from the content (and, for text types that
// look alike, from the name or the declared type), never trusted from the client alone.
const (
	TypePDF      = "application/pdf"
	TypeHTML     = "text/html"
	TypeMarkdown = "text/markdown"
	TypeText     = "text/plain"
	TypeCSV      = "text/csv"
	TypeDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)

// Page is the text of one page of a document (a PDF page; the whole document otherwise), in
// Markdown-like form: lines starting with # are headings.
type Page struct {
	N    int // 1-based; 0 for an unpaged document
	Text string
}

// ErrUnsupported is wrapped when a document's type cannot be read (answered 415).
var ErrUnsupported = errors.New("knowledge: unsupported document type")

// extractError is a reason a document cannot be indexed, written for the customer.
type extractError struct{ reason string }

func (e *extractError) Error() string { return e.reason }

func failf(format string, args ...any) error { return &extractError{fmt.Sprintf(format, args...)} }

// DetectType reads a document's type from its content, its name and the type the client
// declared. It returns "" when the type is none Parley reads.
func DetectType(data []byte, name, declared string) string {
	declared = strings.ToLower(strings.TrimSpace(strings.Split(declared, ";")[0]))
	ext := strings.ToLower(path.Ext(name))
	switch {
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return TypePDF
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		if ext == ".docx" || declared == TypeDOCX || isDOCX(data) {
			return TypeDOCX
		}
		return ""
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "" // binary, or text in an encoding other than UTF-8
	}
	head := strings.ToLower(strings.TrimSpace(string(data[:min(len(data), 512)])))
	looksHTML := strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") || strings.HasPrefix(head, "<head") ||
		strings.HasPrefix(head, "<body") || strings.HasPrefix(head, "<!--") && strings.Contains(head, "<html")
	switch {
	case ext == ".md" || ext == ".markdown" || declared == TypeMarkdown || declared == "text/x-markdown":
		return TypeMarkdown
	case ext == ".csv" || declared == TypeCSV:
		return TypeCSV
	case ext == ".html" || ext == ".htm" || declared == TypeHTML || looksHTML:
		return TypeHTML
	}
	return TypeText
}

func isDOCX(data []byte) bool {
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return false
	}
	for _, f := range z.File {
		if f.Name == "word/document.xml" {
			return true
		}
	}
	return false
}

// Extract returns the text of a document of type typ, page by page. A document that cannot be
// read gives an error whose message is the reason shown to the customer. It never panics: a
// parser's panic on a malformed file is a failed document.
func Extract(data []byte, typ, pageURL string) (pages []Page, err error) {
	defer func() {
		if p := recover(); p != nil {
			pages, err = nil, failf("The file cannot be read: it is damaged or malformed (%v).", p)
		}
	}()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, failf("The file is empty.")
	}
	switch typ {
	case TypePDF:
		pages, err = extractPDF(data)
	case TypeHTML:
		var t string
		t, err = extractHTML(data, pageURL)
		pages = []Page{{Text: t}}
	case TypeMarkdown, TypeText:
		pages = []Page{{Text: strings.ReplaceAll(string(data), "\r\n", "\n")}}
	case TypeCSV:
		var t string
		t, err = extractCSV(data)
		pages = []Page{{Text: t}}
	case TypeDOCX:
		var t string
		t, err = extractDOCX(data)
		pages = []Page{{Text: t}}
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, typ)
	}
	if err != nil {
		return nil, err
	}
	n := 0
	for _, p := range pages {
		n += len(strings.TrimSpace(p.Text))
	}
	if n == 0 {
		if typ == TypePDF {
			return nil, failf("The PDF has no text layer (a scanned document?): there is no text to index.")
		}
		return nil, failf("The document holds no text.")
	}
	return pages, nil
}

func extractPDF(data []byte) ([]Page, error) {
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if errors.Is(err, pdf.ErrInvalidPassword) {
		return nil, failf("The PDF is encrypted with a password: upload it without the password.")
	}
	if err != nil {
		if strings.Contains(err.Error(), "encrypt") {
			return nil, failf("The PDF is encrypted in a way that cannot be read: upload it without encryption.")
		}
		return nil, failf("The PDF cannot be read: %v.", err)
	}
	var pages [][]pdfRow
	for i := 1; i <= r.NumPage(); i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			pages = append(pages, nil)
			continue
		}
		pages = append(pages, pdfRows(pdfGlyphs(p)))
	}
	level := pdfOutlineLevels(r.Outline())
	if level == nil {
		level = pdfFontLevels(pages)
	}
	var out []Page
	for i, rows := range pages {
		if rows == nil {
			continue
		}
		var sb strings.Builder
		for j := 0; j < len(rows); j++ {
			row := rows[j]
			if j > 0 && row.gapAbove > 1.6*rows[j-1].size {
				sb.WriteByte('\n') // a paragraph ends
			}
			lvl, n := level(rows, j)
			if lvl > 0 {
				title := row.text
				for k := j + 1; k < j+n; k++ {
					title += " " + rows[k].text
				}
				sb.WriteString("\n" + strings.Repeat("#", lvl) + " " + title + "\n\n")
				j += n - 1
				continue
			}
			if h, _ := heading(strings.TrimSpace(row.text)); h > 0 {
				sb.WriteByte('\\') // a body line that reads like a heading stays body text
			}
			sb.WriteString(row.text)
			sb.WriteByte('\n')
		}
		out = append(out, Page{N: i + 1, Text: sb.String()})
	}
	return out, nil
}

// pdfGlyphs returns the glyphs of a page with their fonts and positions. ledongthuc/pdf's
// Content also gives, after each TJ operator, the glyphs of a "\n" put through the font's
// encoding: in a subset font (LibreOffice's) that is a letter of the text ("guide" became
// "guidec"). Walking the content stream again and counting the glyphs each text operator
// shows finds those and leaves them out; when the counts do not agree, all are kept.
func pdfGlyphs(p pdf.Page) []pdf.Text {
	texts := p.Content().Text
	strm := p.V.Key("Contents")
	if strm.Kind() == pdf.Null || len(texts) == 0 {
		return texts
	}
	var enc pdf.TextEncoding
	runes := func(s string) int {
		if enc == nil {
			return utf8.RuneCountInString(s)
		}
		return utf8.RuneCountInString(enc.Decode(s))
	}
	fake := make([]bool, len(texts))
	i := 0
	pdf.Interpret(strm, func(stk *pdf.Stack, op string) {
		args := make([]pdf.Value, stk.Len())
		for j := len(args) - 1; j >= 0; j-- {
			args[j] = stk.Pop()
		}
		switch op {
		case "Tf":
			if len(args) == 2 {
				f := p.Font(args[0].Name())
				enc = f.Encoder()
			}
		case "Tj", "'", `"`:
			if len(args) > 0 {
				i += runes(args[len(args)-1].RawString())
			}
		case "TJ":
			if len(args) != 1 {
				return
			}
			for k := 0; k < args[0].Len(); k++ {
				if x := args[0].Index(k); x.Kind() == pdf.String {
					i += runes(x.RawString())
				}
			}
			for n := runes("\n"); n > 0; n-- {
				if i < len(fake) {
					fake[i] = true
				}
				i++
			}
		}
	})
	if i != len(texts) {
		return texts
	}
	out := texts[:0:0]
	for j, t := range texts {
		if !fake[j] {
			out = append(out, t)
		}
	}
	return out
}

// pdfRow is one line of a PDF page: its glyphs in the content's order, joined.
type pdfRow struct {
	text     string
	y        float64
	size     float64 // the largest font size of its glyphs
	chars    int     // glyphs other than spaces
	bold     int     // of which in a bold font
	gapAbove float64 // from the row before on the page (0 for the first)
}

// pdfRows groups a page's glyphs into rows: a glyph on another baseline starts a new row, and a
// gap wider than a small part of the font size between two glyphs is a space.
func pdfRows(texts []pdf.Text) []pdfRow {
	var rows []pdfRow
	var sb strings.Builder
	var cur *pdfRow
	var last pdf.Text
	flush := func() {
		if cur != nil {
			cur.text = strings.TrimSpace(sb.String())
			if cur.text != "" {
				if len(rows) > 0 {
					cur.gapAbove = math.Abs(rows[len(rows)-1].y - cur.y)
				}
				rows = append(rows, *cur)
			}
		}
		sb.Reset()
		cur = nil
	}
	for _, t := range texts {
		if t.S == "" {
			continue
		}
		if cur != nil && math.Abs(t.Y-cur.y) > max(2, 0.3*max(t.FontSize, cur.size)) {
			flush()
		}
		if cur == nil {
			cur = &pdfRow{y: t.Y}
		} else if !strings.HasSuffix(last.S, " ") && !strings.HasPrefix(t.S, " ") && needsSpace(last, t) {
			sb.WriteByte(' ')
		}
		sb.WriteString(t.S)
		if strings.TrimSpace(t.S) != "" {
			n := utf8.RuneCountInString(strings.TrimSpace(t.S))
			cur.chars += n
			cur.size = max(cur.size, t.FontSize)
			if f := strings.ToLower(t.Font); strings.Contains(f, "bold") || strings.Contains(f, "black") || strings.Contains(f, "heavy") {
				cur.bold += n
			}
		}
		last = t
	}
	flush()
	return rows
}

// pdfLevel says whether rows[j] starts a heading: its level (0: body text) and how many rows
// it takes (a long heading wraps).
type pdfLevel func(rows []pdfRow, j int) (level, n int)

// pdfOutlineLevels finds headings by the PDF's outline (its bookmarks): a row, or two rows of a
// wrapped heading, whose words are an outline entry's title is a heading of the entry's depth.
// Nil when the PDF has no outline.
func pdfOutlineLevels(o pdf.Outline) pdfLevel {
	titles := map[string]int{}
	var walk func(o pdf.Outline, depth int)
	walk = func(o pdf.Outline, depth int) {
		for _, c := range o.Child {
			if k := outlineKey(c.Title); k != "" {
				if _, ok := titles[k]; !ok {
					titles[k] = min(depth, 6)
				}
			}
			walk(c, depth+1)
		}
	}
	walk(o, 1)
	if len(titles) == 0 {
		return nil
	}
	return func(rows []pdfRow, j int) (int, int) {
		if lvl, ok := titles[outlineKey(rows[j].text)]; ok {
			return lvl, 1
		}
		if j+1 < len(rows) {
			if lvl, ok := titles[outlineKey(rows[j].text+" "+rows[j+1].text)]; ok {
				return lvl, 2
			}
		}
		return 0, 0
	}
}

// outlineKey is a title's words in lower case.
func outlineKey(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// pdfFontLevels finds headings by the look of the text, for a PDF without an outline: the body
// size is the size most of the text is set in; a short row in a larger size is a heading, the
// largest size level 1 and so on; a short row all in bold at the body size is a heading below
// those. Consecutive heading rows of one size are one wrapped heading.
func pdfFontLevels(pages [][]pdfRow) pdfLevel {
	bySize := map[float64]int{} // size (to half a point) → glyphs
	for _, rows := range pages {
		for _, r := range rows {
			bySize[math.Round(r.size*2)/2] += r.chars
		}
	}
	body, most := 0.0, -1
	for s, n := range bySize {
		if n > most || n == most && s < body {
			body, most = s, n
		}
	}
	if body == 0 {
		return func([]pdfRow, int) (int, int) { return 0, 0 }
	}
	short := func(r pdfRow) bool {
		w := len(strings.Fields(r.text))
		return w >= 1 && w <= 16 && r.chars >= 2
	}
	larger := func(r pdfRow) bool { return short(r) && r.size >= body*1.15 }
	boldLine := func(r pdfRow) bool {
		return short(r) && r.bold == r.chars && r.size >= body*0.95 && len(strings.Fields(r.text)) <= 12 &&
			!strings.HasSuffix(r.text, ".") && !strings.HasSuffix(r.text, ":")
	}
	var sizes []float64
	seen := map[float64]bool{}
	for _, rows := range pages {
		for _, r := range rows {
			if s := math.Round(r.size*2) / 2; larger(r) && !seen[s] {
				seen[s] = true
				sizes = append(sizes, s)
			}
		}
	}
	slices.SortFunc(sizes, func(a, b float64) int { return cmp.Compare(b, a) })
	levelOf := func(r pdfRow) int {
		if larger(r) {
			return min(slices.Index(sizes, math.Round(r.size*2)/2)+1, 6)
		}
		if boldLine(r) {
			return min(len(sizes)+1, 6)
		}
		return 0
	}
	return func(rows []pdfRow, j int) (int, int) {
		lvl := levelOf(rows[j])
		if lvl == 0 {
			return 0, 0
		}
		n := 1
		for j+n < len(rows) && n < 3 && levelOf(rows[j+n]) == lvl && rows[j+n].size == rows[j].size && rows[j+n].gapAbove <= 1.6*rows[j].size {
			n++
		}
		return lvl, n
	}
}

// extractHTML keeps the page's main content (readability) as Markdown, headings included. A
// reference page that readability would cut to less than half its text keeps its whole body.
func extractHTML(data []byte, pageURL string) (string, error) {
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return "", failf("The HTML cannot be read: %v.", err)
	}
	whole := body(doc)
	u, _ := url.Parse(pageURL)
	if u == nil {
		u = &url.URL{}
	}
	art, err := readability.FromReader(bytes.NewReader(data), u)
	if err == nil && art.Node != nil && textLen(art.Node) > textLen(whole)/2 {
		if main, err := htmltomarkdown.ConvertNode(art.Node); err == nil {
			// Readability keeps the title apart: it heads the text again, so that the
			// sections' heading paths start with it.
			if t := strings.TrimSpace(art.Title()); t != "" && !bytes.Contains(main, []byte("# "+t)) {
				main = append([]byte("# "+t+"\n\n"), main...)
			}
			return string(main), nil
		}
	}
	full, err := htmltomarkdown.ConvertNode(whole)
	if err != nil {
		return "", failf("The HTML cannot be converted: %v.", err)
	}
	return string(full), nil
}

// textLen is the length of the text under n, scripts and styles left out.
func textLen(n *html.Node) int {
	if n.Type == html.TextNode {
		return len(strings.TrimSpace(n.Data))
	}
	if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style") {
		return 0
	}
	total := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		total += textLen(c)
	}
	return total
}

// body returns the document's body element, or the document.
func body(n *html.Node) *html.Node {
	var find func(*html.Node) *html.Node
	find = func(n *html.Node) *html.Node {
		if n.Type == html.ElementNode && n.Data == "body" {
			return n
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if b := find(c); b != nil {
				return b
			}
		}
		return nil
	}
	if b := find(n); b != nil {
		return b
	}
	return n
}

// extractCSV turns each row into a line of "column: value" pairs, so that a row found by a
// search carries its own labels.
func extractCSV(data []byte) (string, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	head, err := r.Read()
	if err != nil {
		return "", failf("The CSV cannot be read: %v.", err)
	}
	var sb strings.Builder
	for n := 2; ; n++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", failf("Row %d of the CSV cannot be read: %v.", n, err)
		}
		for i, v := range rec {
			if i > 0 {
				sb.WriteString("; ")
			}
			if i < len(head) && head[i] != "" {
				sb.WriteString(head[i])
				sb.WriteString(": ")
			}
			sb.WriteString(v)
		}
		sb.WriteString("\n\n")
	}
	return sb.String(), nil
}

// extractDOCX reads word/document.xml with archive/zip and encoding/xml (see the README's
// dependency table for why no library): paragraphs in order (a table's cells one per line), a
// paragraph styled HeadingN (or Title) as a Markdown heading of level N.
func extractDOCX(data []byte) (string, error) {
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", failf("The DOCX cannot be read: %v.", err)
	}
	var f *zip.File
	for _, zf := range z.File {
		if zf.Name == "word/document.xml" {
			f = zf
		}
	}
	if f == nil {
		return "", failf("The DOCX has no word/document.xml: it is not a Word document.")
	}
	if f.UncompressedSize64 > 64<<20 {
		return "", failf("The DOCX's text part is larger than 64 MB.")
	}
	rc, err := f.Open()
	if err != nil {
		return "", failf("The DOCX cannot be read: %v.", err)
	}
	defer rc.Close()
	dec := xml.NewDecoder(io.LimitReader(rc, 64<<20))
	var sb, para strings.Builder
	level := 0
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", failf("The DOCX's text cannot be read: %v.", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "p":
				para.Reset()
				level = 0
			case "pStyle":
				for _, a := range t.Attr {
					if a.Name.Local == "val" {
						v := strings.ToLower(a.Value)
						switch {
						case v == "title":
							level = 1
						case strings.HasPrefix(v, "heading") && len(v) > 7:
							if n := int(v[7] - '0'); n >= 1 && n <= 6 {
								level = n
							}
						}
					}
				}
			case "t":
				inText = true
			case "tab":
				para.WriteByte('\t')
			case "br":
				para.WriteByte('\n')
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inText = false
			case "p":
				text := strings.TrimSpace(para.String())
				if text == "" {
					continue
				}
				if level > 0 {
					sb.WriteString(strings.Repeat("#", level) + " ")
				}
				sb.WriteString(text)
				sb.WriteString("\n\n")
			}
		case xml.CharData:
			if inText {
				para.Write(t)
			}
		}
	}
	return sb.String(), nil
}

// needsSpace tells whether two glyphs (or runs) of a row are apart by more than a small gap.
func needsSpace(a, b pdf.Text) bool {
	end := a.X + a.W
	return b.X-end > max(a.FontSize, b.FontSize)*0.15
}
