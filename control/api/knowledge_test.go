package api

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/crawler"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

var _ = register(scenario{"Knowledge", testKnowledge}, scenario{"KnowledgeInTheTurn", testKnowledgeInTheTurn})

// multipartFile is a multipart/form-data body with one part named file.
func multipartFile(name, ctype string, data []byte) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename=%q`, name)}
	h["Content-Type"] = []string{ctype}
	p, _ := mw.CreatePart(h)
	p.Write(data)
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

// uploadDoc uploads a document as multipart and indexes it as the job would.
func (w *world) uploadDoc(t *testing.T, kb, name, ctype string, data []byte) string {
	t.Helper()
	body, ct := multipartFile(name, ctype, data)
	id := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/knowledge-bases/" + kb + "/documents", key: kLive, body: body,
		header: map[string]string{"Content-Type": ct}}).Str("id")
	if err := w.api.Knowledge.Index(context.Background(), store.KnowledgeDocumentID(id)); err != nil {
		t.Fatalf("index: %v", err)
	}
	return id
}

const manual = "# Espresso machine manual\n\n## Descaling\n\nDescale the machine every 200 cups with citric acid: fill the tank, run the steam wand for two minutes, then rinse twice.\n\n## Warranty\n\nThe warranty lasts three years from the date of purchase.\n"

func testKnowledge(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	p := string(w.p1.ID)
	kbs := "/v1/knowledge-bases"
	kb := w.must(t, 201, req{method: "POST", path: kbs, key: kLive, body: map[string]any{"project_id": p, "name": "Manual", "description": "The machine's manual"}}).Str("id")
	w.fails(t, 409, fault.CodeKnowledgeBaseNameTaken, req{method: "POST", path: kbs, key: kLive, body: map[string]any{"project_id": p, "name": "manual"}})
	if r := w.must(t, 200, req{method: "GET", path: kbs + "?project_id=" + p, key: kLive}); len(r.data()) != 1 {
		t.Fatalf("list %s", r)
	}
	w.must(t, 200, req{method: "GET", path: kbs + "/" + kb, key: kLive})

	// Documents: multipart and raw; a type Parley does not read is 415.
	doc := w.uploadDoc(t, kb, "manual.md", "text/markdown", []byte(manual))
	d := w.must(t, 200, req{method: "GET", path: kbs + "/" + kb + "/documents/" + doc, key: kLive})
	if d.Str("status") != "ready" || d.Str("source") != "upload" || d.Str("content_type") != "text/markdown" || d.JSON["chunks"].(float64) != 2 {
		t.Fatalf("document %s", d)
	}
	if txt := w.must(t, 200, req{method: "GET", path: kbs + "/" + kb + "/documents/" + doc + "/text", key: kLive}); !strings.Contains(txt.Str("text"), "citric acid") {
		t.Fatalf("text %s", txt)
	}
	raw := w.must(t, 201, req{method: "POST", path: kbs + "/" + kb + "/documents?name=notes.txt", key: kLive, body: "Returns are accepted within 30 days.",
		header: map[string]string{"Content-Type": "text/plain"}})
	if raw.Str("status") != "processing" || raw.Str("name") != "notes.txt" {
		t.Fatalf("raw upload %s", raw)
	}
	w.fails(t, 415, fault.CodeUnsupportedDocumentType, req{method: "POST", path: kbs + "/" + kb + "/documents", key: kLive,
		body: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), header: map[string]string{"Content-Type": "image/png"}})
	if r := w.must(t, 200, req{method: "GET", path: kbs + "/" + kb + "/documents?status=processing", key: kLive}); len(r.data()) != 1 {
		t.Fatalf("processing documents %s", r)
	}

	// Search answers the chunk with its heading, best first, scores relative to the best.
	s := w.must(t, 200, req{method: "POST", path: kbs + "/" + kb + "/search", key: kLive, body: map[string]any{"query": "How often should I descale it?", "limit": 3}})
	hits := s.data()
	if len(hits) == 0 || hits[0]["heading"] != "Espresso machine manual > Descaling" || hits[0]["score"].(float64) != 1 {
		t.Fatalf("search %s", s)
	}

	// Replace: the old chunks serve until the new ones are indexed.
	body, ct := multipartFile("manual-v2.md", "text/markdown", []byte(strings.ReplaceAll(manual, "three years", "five years")))
	rep := w.must(t, 200, req{method: "PUT", path: kbs + "/" + kb + "/documents/" + doc, key: kLive, body: body, header: map[string]string{"Content-Type": ct}})
	if rep.Str("status") != "processing" || rep.Str("name") != "manual-v2.md" {
		t.Fatalf("replace %s", rep)
	}
	search := func(q string) string {
		return string(w.must(t, 200, req{method: "POST", path: kbs + "/" + kb + "/search", key: kLive, body: map[string]any{"query": q}}).Body)
	}
	if got := search("warranty years"); !strings.Contains(got, "three years") {
		t.Fatalf("the old chunks do not serve while the replacement is processed: %s", got)
	}
	w.api.Knowledge.Index(context.Background(), store.KnowledgeDocumentID(doc))
	if got := search("warranty years"); !strings.Contains(got, "five years") || strings.Contains(got, "three years") {
		t.Fatalf("after the replacement: %s", got)
	}

	// Crawls: a bad address is 422; a crawl of a local site runs; a refresh while queued is 409.
	w.fails(t, 422, fault.CodeCrawlURLRefused, req{method: "POST", path: kbs + "/" + kb + "/crawls", key: kLive, body: map[string]any{"start_url": "ftp://example.com/"}})
	var hits304 atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			if r.Header.Get("If-None-Match") == `"v1"` {
				hits304.Add(1)
				rw.WriteHeader(304)
				return
			}
			rw.Header().Set("ETag", `"v1"`)
			rw.Header().Set("Content-Type", "text/html")
			fmt.Fprint(rw, `<html><body><h1>Support</h1><p>Our support line is open from eight to six on weekdays.</p></body></html>`)
		default:
			http.NotFound(rw, r)
		}
	}))
	defer site.Close()
	cr := w.must(t, 201, req{method: "POST", path: kbs + "/" + kb + "/crawls", key: kLive, body: map[string]any{"start_url": site.URL + "/", "max_pages": 5}})
	crawl := kbs + "/" + kb + "/crawls/" + cr.Str("id")
	if cr.Str("status") != "queued" || cr.JSON["refresh_every_hours"].(float64) != 24 {
		t.Fatalf("crawl %s", cr)
	}
	w.fails(t, 409, fault.CodeCrawlInProgress, req{method: "POST", path: crawl + "/refresh", key: kLive})
	c := &crawler.Crawler{Client: netguard.MustNew(netguard.Options{AllowPrivate: true}).Client(0)}
	if err := w.api.Knowledge.RunCrawl(context.Background(), c, store.KnowledgeCrawlID(cr.Str("id"))); err != nil {
		t.Fatal(err)
	}
	if g := w.must(t, 200, req{method: "GET", path: crawl, key: kLive}); g.Str("status") != "done" || g.JSON["pages"].(map[string]any)["indexed"].(float64) != 1 {
		t.Fatalf("crawl after its run %s", g)
	}
	pages := w.must(t, 200, req{method: "GET", path: crawl + "/pages", key: kLive}).data()
	if len(pages) != 1 || pages[0]["url"] != site.URL+"/" || pages[0]["status"] != "ready" {
		t.Fatalf("pages %v", pages)
	}
	if len(w.must(t, 200, req{method: "GET", path: kbs + "/" + kb + "/crawls", key: kLive}).data()) != 1 {
		t.Fatal("crawls not listed")
	}
	body, ct = multipartFile("x.txt", "text/plain", []byte("x"))
	w.fails(t, 409, fault.CodeCrawlPageNotReplaceable, req{method: "PUT", path: kbs + "/" + kb + "/documents/" + pages[0]["id"].(string), key: kLive, body: body, header: map[string]string{"Content-Type": ct}})
	w.must(t, 202, req{method: "POST", path: crawl + "/refresh", key: kLive})
	if err := w.api.Knowledge.RunCrawl(context.Background(), c, store.KnowledgeCrawlID(cr.Str("id"))); err != nil {
		t.Fatal(err)
	}
	if hits304.Load() != 1 {
		t.Fatalf("the refresh did not ask with If-None-Match (%d 304s)", hits304.Load())
	}
	w.must(t, 200, req{method: "DELETE", path: crawl, key: kLive})

	// A base that an agent names cannot be deleted or renamed (409 naming the agent).
	def := definition("Barista", "faq", "inbound")
	def["references"] = map[string]any{"knowledge_bases": []any{"Manual"}}
	w.must(t, 201, req{method: "POST", path: "/v1/agents", key: kLive, body: map[string]any{"project_id": p, "definition": def}})
	in := w.fails(t, 409, fault.CodeKnowledgeBaseInUse, req{method: "DELETE", path: kbs + "/" + kb, key: kLive})
	if !strings.Contains(in.Str("detail"), `"Barista"`) || fmt.Sprint(in.JSON["agents"]) != "[Barista]" {
		t.Fatalf("in use %s", in)
	}
	w.fails(t, 409, fault.CodeKnowledgeBaseInUse, req{method: "PATCH", path: kbs + "/" + kb, key: kLive, body: map[string]any{"name": "Handbook"}})
	w.must(t, 200, req{method: "PATCH", path: kbs + "/" + kb, key: kLive, body: map[string]any{"description": "v2"}})
	w.must(t, 200, req{method: "DELETE", path: kbs + "/" + kb + "/documents/" + doc, key: kLive})
	w.fails(t, 404, fault.CodeKnowledgeDocNotFound, req{method: "GET", path: kbs + "/" + kb + "/documents/" + doc, key: kLive})
	other := w.must(t, 201, req{method: "POST", path: kbs, key: kLive, body: map[string]any{"project_id": p, "name": "Unused"}}).Str("id")
	w.must(t, 200, req{method: "DELETE", path: kbs + "/" + other, key: kLive})
	w.fails(t, 404, fault.CodeKnowledgeBaseNotFound, req{method: "GET", path: kbs + "/" + other, key: kLive})
	w.fails(t, 404, fault.CodeKnowledgeCrawlNotFound, req{method: "GET", path: crawl, key: kLive})
}

// testKnowledgeInTheTurn: a chat through the fakes with an agent whose knowledge mode is auto:
// the LLM request holds the retrieved chunk and the transcript records it.
func testKnowledgeInTheTurn(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	kb := w.must(t, 201, req{method: "POST", path: "/v1/knowledge-bases", key: kLive, body: map[string]any{"project_id": string(w.p1.ID), "name": "Manual"}}).Str("id")
	w.uploadDoc(t, kb, "manual.md", "text/markdown", []byte(manual))
	def := definition("Barista", "faq", "inbound", channels("chat"), func(a map[string]any) {
		a["knowledge"] = map[string]any{"mode": "auto", "max_results": 2, "min_score": 0.2}
	})
	def["references"] = map[string]any{"knowledge_bases": []any{"Manual"}}
	agent := w.must(t, 201, req{method: "POST", path: "/v1/agents", key: kLive, body: map[string]any{"project_id": string(w.p1.ID), "definition": def}}).Str("id")
	w.must(t, 201, req{method: "POST", path: "/v1/agents/" + agent + "/publish", key: kLive})
	id := w.must(t, 201, req{method: "POST", path: "/v1/chats", key: kTest, body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	w.must(t, 200, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "How often do I descale the machine?"}})
	reqs := w.tp.Fakes.Chat.Requests()
	last := string(reqs[len(reqs)-1].Raw)
	if !strings.Contains(last, "every 200 cups with citric acid") || !strings.Contains(last, "knowledge_lookup") {
		t.Fatalf("the LLM request lacks the chunk or the tool: %s", last)
	}
	// The transcript keeps a tool line naming the chunks, their scores and the time taken
	// (lines are stored by the persister shortly after the turn).
	var tr *resp
	waitFor(t, 5*time.Second, "the retrieval in the transcript", func() bool {
		tr = w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/transcript", key: kTest})
		return strings.Contains(string(tr.Body), "knowledge_lookup(auto)")
	})
	if !strings.Contains(string(tr.Body), "Descaling") || !strings.Contains(string(tr.Body), `"took_ms"`) || !strings.Contains(string(tr.Body), `"score":1`) {
		t.Fatalf("the transcript does not show what was retrieved: %s", tr.Body)
	}
}
