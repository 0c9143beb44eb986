package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// issue 16: the knowledge repository on both engines.

// testKnowledgeScope: bases, documents and crawls are reached only through the scope; knowledge
// bases belong to a project, not to a key mode, so both modes of the project see them.
func testKnowledgeScope(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	p1 := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p1.ID}, Mode: store.ModeLive}
	kq := w.s.Knowledge()
	kb := must[store.KnowledgeBase](t, "create base")(kq.CreateBase(ctx, p1, store.KnowledgeBase{ProjectID: w.p1.ID, Name: "Manual"}))
	_, err := kq.CreateBase(ctx, p1, store.KnowledgeBase{ProjectID: w.p1.ID, Name: "MANUAL"})
	wantErr(t, "a name taken ignoring case", err, store.ErrConflict)
	d := must[store.KnowledgeDocument](t, "create document")(kq.CreateDocument(ctx, p1, kb.ID, "a.txt", store.KnowledgeUpload{Data: []byte("x"), ContentType: "text/plain", Name: "a.txt"}))
	c := must[store.KnowledgeCrawl](t, "create crawl")(kq.CreateCrawl(ctx, p1, store.KnowledgeCrawl{KBID: kb.ID, StartURL: "https://example.com/", MaxDepth: 1, MaxPages: 5}))
	test := p1
	test.Mode = store.ModeTest
	if _, err := kq.GetBase(ctx, test, kb.ID); err != nil {
		t.Fatalf("the test mode of the project does not see its base: %v", err)
	}
	other := newOrg(t, w.s, "Other")
	for name, sc := range map[string]store.Scope{
		"another organization": {Org: other.ID, AllProjects: true},
		"another project":      {Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}},
		"no project":           {Org: w.org.ID},
	} {
		_, err := kq.GetBase(ctx, sc, kb.ID)
		wantErr(t, "get base from "+name, err, store.ErrNotFound)
		if l := must[[]store.KnowledgeBase](t, "list")(kq.ListBases(ctx, sc, "", store.Page{Limit: 10})); len(l) != 0 {
			t.Errorf("%s lists %d bases", name, len(l))
		}
		_, err = kq.GetDocument(ctx, sc, kb.ID, d.ID)
		wantErr(t, "get document from "+name, err, store.ErrNotFound)
		_, err = kq.CreateDocument(ctx, sc, kb.ID, "b.txt", store.KnowledgeUpload{Data: []byte("y"), ContentType: "text/plain"})
		wantErr(t, "add a document from "+name, err, store.ErrNotFound)
		_, err = kq.DeleteDocument(ctx, sc, kb.ID, d.ID)
		wantErr(t, "delete a document from "+name, err, store.ErrNotFound)
		_, err = kq.GetCrawl(ctx, sc, kb.ID, c.ID)
		wantErr(t, "get crawl from "+name, err, store.ErrNotFound)
		wantErr(t, "delete crawl from "+name, kq.DeleteCrawl(ctx, sc, kb.ID, c.ID), store.ErrNotFound)
		wantErr(t, "delete base from "+name, kq.DeleteBase(ctx, sc, kb.ID), store.ErrNotFound)
		if ks := must[[]store.KnowledgeBase](t, "by name")(kq.BasesByName(ctx, sc, w.p1.ID, []string{"manual"})); len(ks) != 0 {
			t.Errorf("%s resolves the name", name)
		}
	}
	// The document of another base is not this base's.
	kb2 := must[store.KnowledgeBase](t, "second base")(kq.CreateBase(ctx, p1, store.KnowledgeBase{ProjectID: w.p1.ID, Name: "Second"}))
	_, err = kq.GetDocument(ctx, p1, kb2.ID, d.ID)
	wantErr(t, "a document through another base", err, store.ErrNotFound)
	if ks := must[[]store.KnowledgeBase](t, "by name")(kq.BasesByName(ctx, p1, w.p1.ID, []string{"second", "manual", "missing"})); len(ks) != 2 || ks[0].ID != kb2.ID || ks[1].ID != kb.ID {
		t.Fatalf("by name %+v", ks)
	}
}

// testKnowledgeIndex: chunks are swapped in one transaction, searched by full text within the
// organization and bases given, and forgotten with their document, crawl or base.
func testKnowledgeIndex(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	sc := store.OrgScope(w.org.ID)
	kq := w.s.Knowledge()
	kb := must[store.KnowledgeBase](t, "base")(kq.CreateBase(ctx, sc, store.KnowledgeBase{ProjectID: w.p1.ID, Name: "Manual"}))
	d := must[store.KnowledgeDocument](t, "document")(kq.CreateDocument(ctx, sc, kb.ID, "m.md", store.KnowledgeUpload{Data: []byte("m"), ContentType: "text/markdown"}))
	if ids := must[[]store.KnowledgeDocumentID](t, "pending")(kq.PendingUploads(ctx, 10)); len(ids) != 1 || ids[0] != d.ID {
		t.Fatalf("pending %v", ids)
	}
	chunks := []store.KnowledgeChunk{
		{Heading: "Manual > Descaling", Body: "Descale the machine every two hundred cups with citric acid.", Tokens: 12, Page: 3, Embedding: []float32{1, 0}},
		{Heading: "Manual > Warranty", Body: "The warranty lasts three years.", Tokens: 6},
	}
	if err := kq.FinishIndex(ctx, d.ID, store.Indexed{Text: "text", Pages: 3, ContentHash: "h1", Chunks: chunks}); err != nil {
		t.Fatal(err)
	}
	if ids := must[[]store.KnowledgeDocumentID](t, "pending")(kq.PendingUploads(ctx, 10)); len(ids) != 0 {
		t.Fatalf("still pending %v", ids)
	}
	got := must[store.KnowledgeDocument](t, "get")(kq.GetDocument(ctx, sc, kb.ID, d.ID))
	if got.Status != store.DocReady || got.Chunks != 2 || got.Pages != 3 || got.IndexedAt == nil {
		t.Fatalf("document %+v", got)
	}
	hits := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, []store.KnowledgeBaseID{kb.ID}, []string{"descaling", "cups"}, 5))
	if len(hits) != 1 || hits[0].Chunk.Page != 3 || hits[0].DocumentName != "m.md" || hits[0].Score <= 0 || len(hits[0].Chunk.Embedding) != 2 {
		t.Fatalf("hits %+v", hits)
	}
	other := newOrg(t, w.s, "Other")
	if h := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, other.ID, []store.KnowledgeBaseID{kb.ID}, []string{"warranty"}, 5)); len(h) != 0 {
		t.Fatal("another organization finds the chunks")
	}
	if e := must[[]store.KnowledgeHit](t, "embedded")(kq.Embedded(ctx, w.org.ID, []store.KnowledgeBaseID{kb.ID})); len(e) != 1 {
		t.Fatalf("embedded %d", len(e))
	}
	// A replacement swaps the chunks: the old text is no longer found.
	must[store.KnowledgeDocument](t, "replace")(kq.ReplaceDocument(ctx, sc, kb.ID, d.ID, "m2.md", store.KnowledgeUpload{Data: []byte("n"), ContentType: "text/markdown"}))
	if h := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, []store.KnowledgeBaseID{kb.ID}, []string{"warranty"}, 5)); len(h) != 1 {
		t.Fatal("the old chunks do not serve while the replacement waits")
	}
	if err := kq.FinishIndex(ctx, d.ID, store.Indexed{Text: "t2", Pages: 1, ContentHash: "h2", Chunks: []store.KnowledgeChunk{{Body: "Guarantee: five years."}}}); err != nil {
		t.Fatal(err)
	}
	if h := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, []store.KnowledgeBaseID{kb.ID}, []string{"warranty"}, 5)); len(h) != 0 {
		t.Fatalf("replaced chunks still found: %+v", h)
	}
	// Crawl pages: made once per URL, touched, removed when gone.
	c := must[store.KnowledgeCrawl](t, "crawl")(kq.CreateCrawl(ctx, sc, store.KnowledgeCrawl{KBID: kb.ID, StartURL: "https://example.com/", MaxDepth: 1, MaxPages: 5, RefreshHours: 24}))
	p := must[store.KnowledgeDocument](t, "page")(kq.EnsureCrawlPage(ctx, c, "https://example.com/a", "text/html"))
	if again := must[store.KnowledgeDocument](t, "page again")(kq.EnsureCrawlPage(ctx, c, "https://example.com/a", "text/html")); again.ID != p.ID {
		t.Fatal("a second page for the same URL")
	}
	must[store.KnowledgeDocument](t, "page b")(kq.EnsureCrawlPage(ctx, c, "https://example.com/b", "text/html"))
	if err := kq.FinishIndex(ctx, p.ID, store.Indexed{Text: "a", ContentHash: "ha", ETag: `"e"`, Chunks: []store.KnowledgeChunk{{Body: "Page about croissants."}}}); err != nil {
		t.Fatal(err)
	}
	if n := must[int](t, "remove")(kq.RemoveCrawlPages(ctx, c.ID, map[string]bool{"https://example.com/a": true})); n != 1 {
		t.Fatalf("removed %d pages", n)
	}
	// Due crawls are queued once.
	next := time.Now().Add(-time.Minute)
	if err := kq.FinishCrawl(ctx, c.ID, store.CrawlResult{OK: 1, NextRefresh: &next}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if due := must[[]store.KnowledgeCrawl](t, "due")(kq.DueCrawls(ctx, time.Now(), 10)); len(due) != 1 || due[0].ID != c.ID {
		t.Fatalf("due %+v", due)
	}
	if due := must[[]store.KnowledgeCrawl](t, "due again")(kq.DueCrawls(ctx, time.Now(), 10)); len(due) != 0 {
		t.Fatalf("queued twice: %+v", due)
	}
	// Deleting the crawl forgets its pages' chunks; deleting the base, everything.
	if err := kq.DeleteCrawl(ctx, sc, kb.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if h := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, []store.KnowledgeBaseID{kb.ID}, []string{"croissants"}, 5)); len(h) != 0 {
		t.Fatal("a deleted crawl's chunks are found")
	}
	if err := kq.DeleteBase(ctx, sc, kb.ID); err != nil {
		t.Fatal(err)
	}
	if h := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, []store.KnowledgeBaseID{kb.ID}, []string{"guarantee"}, 5)); len(h) != 0 {
		t.Fatal("a deleted base's chunks are found")
	}
	_, err := kq.DocumentByID(ctx, d.ID)
	wantErr(t, "a deleted base's document", err, store.ErrNotFound)
}

// testKnowledgeCommonTerms: a search whose every term is common (in more chunks than a term
// may rank) asks for chunks holding several of them, fewer while that finds too little, and at
// last for either of the two rarest: it still finds chunks when no chunk holds them together.
func testKnowledgeCommonTerms(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	sc := store.OrgScope(w.org.ID)
	kq := w.s.Knowledge()
	kb := must[store.KnowledgeBase](t, "base")(kq.CreateBase(ctx, sc, store.KnowledgeBase{ProjectID: w.p1.ID, Name: "Fruit"}))
	d := must[store.KnowledgeDocument](t, "document")(kq.CreateDocument(ctx, sc, kb.ID, "fruit.md", store.KnowledgeUpload{Data: []byte("f"), ContentType: "text/markdown"}))
	var chunks []store.KnowledgeChunk
	for i := range 270 {
		chunks = append(chunks,
			store.KnowledgeChunk{Heading: "Orchards", Body: fmt.Sprintf("Apple orchards grow in long rows, plot %d.", i), Tokens: 9},
			store.KnowledgeChunk{Heading: "Plantations", Body: fmt.Sprintf("Banana plantations need heat, field %d.", i), Tokens: 8})
	}
	chunks = append(chunks, store.KnowledgeChunk{Heading: "Recipes", Body: "An apple and banana smoothie.", Tokens: 6})
	if err := kq.FinishIndex(ctx, d.ID, store.Indexed{Text: "t", ContentHash: "h", Chunks: chunks}); err != nil {
		t.Fatal(err)
	}
	bases := []store.KnowledgeBaseID{kb.ID}
	// One chunk holds both: with a limit of 1 it is the answer.
	hits := must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, bases, []string{"apple", "banana"}, 1))
	if len(hits) != 1 || !strings.Contains(hits[0].Chunk.Body, "smoothie") {
		t.Fatalf("apple banana, 1: %+v", hits)
	}
	// Three are asked for and only one holds both: chunks holding either fill the answer, the
	// one holding both first.
	hits = must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, bases, []string{"apple", "banana"}, 3))
	if len(hits) != 3 || !strings.Contains(hits[0].Chunk.Body, "smoothie") {
		t.Fatalf("apple banana, 3: %+v", hits)
	}
	// Common words that chunks hold together: those chunks.
	hits = must[[]store.KnowledgeHit](t, "search")(kq.Search(ctx, w.org.ID, bases, []string{"banana", "plantations", "heat"}, 3))
	if len(hits) != 3 {
		t.Fatalf("banana plantations heat: %d hits", len(hits))
	}
	for _, h := range hits {
		if !strings.Contains(h.Chunk.Body, "Banana plantations need heat") {
			t.Fatalf("banana plantations heat found %q", h.Chunk.Body)
		}
	}
}
