package knowledge_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

func testdata(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDocumentTypes uploads a document of every type (fixtures made by LibreOffice, Ghostscript
// and qpdf; see testdata/README.md) and the bad ones, on both engines.
func TestDocumentTypes(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		f := newFixture(t, st)
		kb := f.base(t, "Kettle")
		good := []struct {
			file, ctype, query, want, heading string
			page                              int
		}{
			{"manual.pdf", "application/pdf", "how often descale vinegar", "white vinegar", "", 1},
			{"manual.docx", "", "warranty heating element", "two-year warranty", "Kettle K2 manual > Warranty", 0},
			{"manual.html", "text/html", "blue light blinks", "switched on empty", "Kettle K2 manual > Troubleshooting", 0},
			{"manual.md", "", "fill marks litres", "MIN and MAX", "Kettle K2 quick start > Filling", 0},
			{"prices.csv", "text/csv", "toaster price", "product: Toaster T4; price: 54.00", "", 0},
		}
		types := map[string]string{}
		for _, g := range good {
			d := f.upload(t, kb, g.file, testdata(t, g.file))
			if d.Status != "ready" || d.Chunks == 0 || d.Pages < 1 {
				t.Errorf("%s: %+v (%v)", g.file, d, d.FailureReason)
				continue
			}
			types[g.file] = d.ContentType
			// The same manual comes in several types: the document's own best chunk is checked.
			r, err := f.svc.Search(t.Context(), f.act, kb.ID, knowledge.KnowledgeSearch{Query: g.query, Limit: 5})
			if err != nil {
				t.Fatalf("%s: search %q: %v", g.file, g.query, err)
			}
			var c knowledge.KnowledgeChunk
			for _, h := range r.Data {
				if h.DocumentID == d.ID {
					c = h
					break
				}
			}
			if !strings.Contains(strings.Join(strings.Fields(c.Text), " "), g.want) {
				t.Errorf("%s: search %q found %q in %s", g.file, g.query, c.Text, c.DocumentName)
			}
			if g.heading != "" && c.Heading != g.heading {
				t.Errorf("%s: heading %q, want %q", g.file, c.Heading, g.heading)
			}
			if g.page > 0 && (c.Page == nil || *c.Page != g.page) {
				t.Errorf("%s: page %v, want %d", g.file, c.Page, g.page)
			}
		}
		if types["manual.pdf"] != knowledge.TypePDF || types["manual.docx"] != knowledge.TypeDOCX || types["prices.csv"] != knowledge.TypeCSV || types["manual.md"] != knowledge.TypeMarkdown {
			t.Errorf("types %v", types)
		}
		txt, err := f.svc.Text(t.Context(), f.act, kb.ID, mustDoc(t, f, kb, "manual.docx").ID)
		if err != nil || !strings.Contains(txt.Text, "## Descaling") {
			t.Errorf("DOCX text %q %v", txt.Text, err)
		}

		// Files that cannot be read: the document is failed with a clear reason.
		bad := map[string]string{
			"scanned.pdf":   "no text layer",
			"encrypted.pdf": "encrypted",
			"damaged.pdf":   "cannot be read",
			"empty.txt":     "empty",
		}
		for file, reason := range bad {
			d := f.upload(t, kb, file, testdata(t, file))
			if d.Status != "failed" || d.FailureReason == nil || !strings.Contains(*d.FailureReason, reason) || d.Chunks != 0 {
				t.Errorf("%s: status %s, reason %v; want failed with %q", file, d.Status, d.FailureReason, reason)
			}
		}
		// A type Parley does not read is 415, one over 25 MB 413; nothing is stored.
		_, err = f.svc.Upload(t.Context(), f.act, kb.ID, knowledge.Upload{Name: "random.bin", Data: testdata(t, "random.bin")})
		wantFault(t, err, 415, fault.CodeUnsupportedDocumentType)
		_, err = f.svc.Upload(t.Context(), f.act, kb.ID, knowledge.Upload{Name: "big.txt", Data: bytes.Repeat([]byte("a"), knowledge.MaxDocumentBytes+1)})
		wantFault(t, err, 413, fault.CodeBodyTooLarge)
		docs, _ := f.svc.ListDocuments(t.Context(), f.act, kb.ID, store.DocumentFilter{}, store.Page{Limit: 100})
		if len(docs) != len(good)+len(bad) {
			t.Errorf("%d documents stored, want %d", len(docs), len(good)+len(bad))
		}
	})
}

// TestReplaceKeepsServing: a replacement that cannot be read leaves the old chunks serving
// (the document failed, with the reason); a good one swaps them.
func TestReplaceKeepsServing(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		f := newFixture(t, st)
		kb := f.base(t, "Kettle")
		d := f.upload(t, kb, "manual.md", testdata(t, "manual.md"))
		if _, err := f.svc.Replace(t.Context(), f.act, kb.ID, d.ID, knowledge.Upload{Name: "scan.pdf", Data: testdata(t, "scanned.pdf")}); err != nil {
			t.Fatal(err)
		}
		if got := search(t, f, kb, "kettle switches off boils"); !strings.Contains(got, "switches itself off") {
			t.Fatalf("old chunks not serving while processing: %q", got)
		}
		f.svc.Index(t.Context(), store.KnowledgeDocumentID(d.ID))
		d2, _ := f.svc.GetDocument(t.Context(), f.act, kb.ID, d.ID)
		if d2.Status != "failed" || !strings.Contains(*d2.FailureReason, "no text layer") {
			t.Fatalf("after a bad replacement %+v", d2)
		}
		if got := search(t, f, kb, "kettle switches off boils"); !strings.Contains(got, "switches itself off") {
			t.Fatalf("a failed replacement dropped the old chunks: %q", got)
		}
		if _, err := f.svc.Replace(t.Context(), f.act, kb.ID, d.ID, knowledge.Upload{Name: "manual.pdf", Data: testdata(t, "manual.pdf")}); err != nil {
			t.Fatal(err)
		}
		f.svc.Index(t.Context(), store.KnowledgeDocumentID(d.ID))
		if got := search(t, f, kb, "kettle switches off boils"); strings.Contains(got, "switches itself off") {
			t.Fatalf("the replaced text is still found: %q", got)
		}
		// Deleted while its indexing waits: the job finds nothing to do.
		d3, _ := f.svc.Upload(t.Context(), f.act, kb.ID, knowledge.Upload{Name: "n.txt", Data: []byte("note")})
		if _, err := f.svc.DeleteDocument(t.Context(), f.act, kb.ID, d3.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Index(t.Context(), store.KnowledgeDocumentID(d3.ID)); err != nil {
			t.Fatalf("indexing a deleted document: %v", err)
		}
	})
}

func mustDoc(t *testing.T, f *fixture, kb knowledge.KnowledgeBase, name string) knowledge.KnowledgeDocument {
	ds, _ := f.svc.ListDocuments(t.Context(), f.act, kb.ID, store.DocumentFilter{}, store.Page{Limit: 100})
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no document %s", name)
	return knowledge.KnowledgeDocument{}
}

func wantFault(t *testing.T, err error, status int, code string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Status != status || fe.Code != code {
		t.Errorf("got %v, want %d %s", err, status, code)
	}
}

// FuzzExtract: no input makes extraction panic or hang, whatever type it claims.
func FuzzExtract(f *testing.F) {
	for _, n := range []string{"manual.pdf", "manual.docx", "manual.html", "prices.csv", "damaged.pdf"} {
		f.Add(testdata(f, n))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range []string{knowledge.TypePDF, knowledge.TypeDOCX, knowledge.TypeHTML, knowledge.TypeCSV, knowledge.TypeMarkdown} {
			pages, err := knowledge.Extract(data, typ, "")
			if err == nil {
				knowledge.Split(pages, knowledge.ChunkOptions{})
			}
		}
	})
}

// TestPDFHeadingPaths: chunks of a PDF carry heading paths, from the outline (bookmarks) when
// the PDF has one and from the font sizes of its text when it has none, and their pages; no
// stray letter of the PDF reader is left in the text (fixtures made with LibreOffice, see
// testdata/README.md).
func TestPDFHeadingPaths(t *testing.T) {
	type want struct {
		page    int
		heading string
		body    string // the start of the chunk's text
	}
	sections := []want{
		{1, "", "The E5 is a pump espresso machine with a steam wand and a 2-litre water tank."},
		{1, "Setting up", "Place the machine on a flat, dry surface at least ten centimetres from the wall."},
		{1, "Setting up > Filling the tank", "Lift the tank out from the back, fill it with cold filtered water up to the MAX line and slide it back until it clicks."},
		{1, "Setting up > Priming the pump", "Before the first use, run two full cups of water"},
		{2, "Cleaning", "Wipe the steam wand with a damp cloth"},
		{2, "Cleaning > Backflushing", "Once a week, insert the blind basket"},
		{2, "Cleaning > Descaling the boiler", "Every three months, dissolve one sachet of citric-acid descaler"},
		{2, "Error codes", "E1 means the tank is empty."},
	}
	for _, tc := range []struct {
		file  string
		title string // the path's first heading: the title is no bookmark, but it is the largest type
	}{{"guide-outline.pdf", ""}, {"guide-fonts.pdf", "Espresso machine E5 guide"}} {
		t.Run(tc.file, func(t *testing.T) {
			pages, err := knowledge.Extract(testdata(t, tc.file), knowledge.TypePDF, "")
			if err != nil {
				t.Fatal(err)
			}
			chunks := knowledge.Split(pages, knowledge.ChunkOptions{})
			if tc.title == "" { // the title line is body text of the first chunk
				sections[0].body = "Espresso machine E5 guide The E5 is a pump espresso machine"
			} else {
				sections[0].body = "The E5 is a pump espresso machine with a steam wand and a 2-litre water tank."
			}
			if len(chunks) != len(sections) {
				for _, c := range chunks {
					t.Logf("p%d %q %q", c.Page, c.Heading, c.Body)
				}
				t.Fatalf("%d chunks, want %d", len(chunks), len(sections))
			}
			for i, w := range sections {
				c := chunks[i]
				h := w.heading
				if tc.title != "" {
					h = strings.TrimSuffix(tc.title+" > "+h, " > ")
				}
				if c.Page != w.page || c.Heading != h || !strings.HasPrefix(c.Body, w.body) {
					t.Errorf("chunk %d: page %d, heading %q, text %q; want page %d, heading %q, text from %q", i, c.Page, c.Heading, c.Body, w.page, h, w.body)
				}
			}
		})
	}
	// The kettle manual's PDF (an outline too) gets its sections as well.
	pages, err := knowledge.Extract(testdata(t, "manual.pdf"), knowledge.TypePDF, "")
	if err != nil {
		t.Fatal(err)
	}
	var headings []string
	for _, c := range knowledge.Split(pages, knowledge.ChunkOptions{}) {
		headings = append(headings, c.Heading)
	}
	if got := strings.Join(headings, "|"); got != "|Safety|Descaling|Warranty|Troubleshooting" {
		t.Errorf("manual.pdf headings %q", got)
	}
}
