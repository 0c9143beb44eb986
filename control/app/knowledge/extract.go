package knowledge

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
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
	fonts := map[string]*pdf.Font{}
	var out []Page
	for i := 1; i <= r.NumPage(); i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		for _, name := range p.Fonts() {
			if _, ok := fonts[name]; !ok {
				f := p.Font(name)
				fonts[name] = &f
			}
		}
		rows, err := p.GetTextByRow()
		if err != nil {
			return nil, failf("Page %d of the PDF cannot be read: %v.", i, err)
		}
		var sb strings.Builder
		for _, row := range rows {
			for j, w := range row.Content {
				if j > 0 && !strings.HasSuffix(w.S, " ") && !strings.HasPrefix(w.S, " ") && needsSpace(row.Content[j-1], w) {
					sb.WriteByte(' ')
				}
				sb.WriteString(w.S)
			}
			sb.WriteByte('\n')
		}
		out = append(out, Page{N: i, Text: sb.String()})
	}
	return out, nil
}

// needsSpace tells whether two text runs of a row are apart by more than a small gap.
func needsSpace(a, b pdf.Text) bool {
	end := a.X + a.W
	return b.X-end > a.FontSize*0.15
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
