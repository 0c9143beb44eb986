package api

import (
	"net/http"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/fault"
)

// knowledgeOperations are the operations of knowledge bases (issue 16): the specification's
// (list bases; list, upload, get, replace and delete documents; list and refresh crawls) and
// Parley's extensions, marked x-extension (create, get, update and delete a base; create, get
// and delete a crawl and list its pages; a document's extracted text; search).
func knowledgeOperations() []*operation {
	const tag = "Knowledge"
	kb := fault.CodeKnowledgeBaseNotFound
	doc := fault.CodeKnowledgeDocNotFound
	crawl := fault.CodeKnowledgeCrawlNotFound
	uploadDoc := "The document is multipart/form-data with one part named file, or the raw file as the body with its Content-Type (name it with ?name=). " +
		"PDF, HTML (main content kept with readability, as Markdown), Markdown, plain text, CSV and DOCX are read; the type is read from the content and the name. At most 25 MB (413 above; 415 for another type). " +
		"The answer is the document, processing: it is extracted, chunked along its headings and indexed on the job queue, then ready, or failed with failure_reason " +
		"(an empty file, a PDF with no text layer or with a password, a damaged file)."
	raw := []string{knowledge.TypePDF, knowledge.TypeHTML, knowledge.TypeMarkdown, knowledge.TypeText, knowledge.TypeCSV, knowledge.TypeDOCX, "application/octet-stream"}
	return []*operation{
		typed(operation{
			ID: "listKnowledgeBases", Method: http.MethodGet, Path: "/knowledge-bases", Tag: tag,
			Summary:    "List the knowledge bases the key reaches, oldest first",
			Permission: "knowledge:read",
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listKnowledgeBases),
		typed(operation{
			ID: "createKnowledgeBase", Method: http.MethodPost, Path: "/knowledge-bases", Tag: tag,
			Summary:     "Create a knowledge base in a project",
			Description: "Agents name it in their definition's references.knowledge_bases. Names are unique in a project, ignoring case.",
			Permission:  "knowledge:write", Changes: true, Extension: true,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeKnowledgeBaseNameTaken},
			Status: http.StatusCreated,
		}, (*API).createKnowledgeBase),
		typed(operation{
			ID: "getKnowledgeBase", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}", Tag: tag,
			Summary: "Get a knowledge base", Permission: "knowledge:read", Extension: true,
			Codes: []string{kb}, Status: http.StatusOK,
		}, (*API).getKnowledgeBase),
		typed(operation{
			ID: "updateKnowledgeBase", Method: http.MethodPatch, Path: "/knowledge-bases/{knowledge_base_id}", Tag: tag,
			Summary:     "Rename a knowledge base or change its description",
			Description: "A base that agents name cannot be renamed (409 knowledge_base_in_use, naming them): change their references first.",
			Permission:  "knowledge:write", Changes: true, Extension: true,
			Codes:  []string{kb, fault.CodeProjectFrozen, fault.CodeKnowledgeBaseNameTaken, fault.CodeKnowledgeBaseInUse},
			Status: http.StatusOK,
		}, (*API).updateKnowledgeBase),
		typed(operation{
			ID: "deleteKnowledgeBase", Method: http.MethodDelete, Path: "/knowledge-bases/{knowledge_base_id}", Tag: tag,
			Summary:     "Delete a knowledge base with its documents and crawls",
			Description: "Refused with 409 knowledge_base_in_use while agents name it in references.knowledge_bases; detail and the agents member name them.",
			Permission:  "knowledge:write", Changes: true, Extension: true,
			Codes:  []string{kb, fault.CodeProjectFrozen, fault.CodeKnowledgeBaseInUse},
			Status: http.StatusOK,
		}, (*API).deleteKnowledgeBase),
		typed(operation{
			ID: "searchKnowledgeBase", Method: http.MethodPost, Path: "/knowledge-bases/{knowledge_base_id}/search", Tag: tag,
			Summary: "Try a query: the chunks and scores an agent would get",
			Description: "Full text (SQLite FTS5 BM25; PostgreSQL tsvector with BM25 over its lexemes), fused by reciprocal rank with embeddings when an embeddings provider is configured. " +
				"score is relative to the best chunk (1), which is what an agent's knowledge.min_score compares with; raw_score is the engine's.",
			Permission: "knowledge:read", Extension: true,
			Codes:  []string{kb},
			Status: http.StatusOK,
		}, (*API).searchKnowledgeBase),
		typed(operation{
			ID: "listKnowledgeDocuments", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}/documents", Tag: tag,
			Summary:    "List the documents of a knowledge base (uploads and crawled pages), oldest first",
			Permission: "knowledge:read",
			Codes:      []string{kb},
			Status:     http.StatusOK,
		}, (*API).listKnowledgeDocuments),
		typedRaw[uploadKnowledgeDocumentIn, knowledge.KnowledgeDocument](operation{
			ID: "uploadKnowledgeDocument", Method: http.MethodPost, Path: "/knowledge-bases/{knowledge_base_id}/documents", Tag: tag,
			Summary: "Upload a document", Description: uploadDoc,
			Permission: "knowledge:write", Changes: true, Multipart: true, RawMedia: raw, MaxBody: MaxDocumentUpload,
			Codes:  []string{kb, fault.CodeProjectFrozen, fault.CodeUnsupportedDocumentType},
			Status: http.StatusCreated,
		}, (*API).uploadKnowledgeDocument),
		typed(operation{
			ID: "getKnowledgeDocument", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}/documents/{document_id}", Tag: tag,
			Summary: "Get a document: its status, pages and chunks", Permission: "knowledge:read",
			Codes: []string{kb, doc}, Status: http.StatusOK,
		}, (*API).getKnowledgeDocument),
		typedRaw[replaceKnowledgeDocumentIn, knowledge.KnowledgeDocument](operation{
			ID: "replaceKnowledgeDocument", Method: http.MethodPut, Path: "/knowledge-bases/{knowledge_base_id}/documents/{document_id}", Tag: tag,
			Summary: "Replace a document's file and re-index it",
			Description: "Its old chunks keep serving while the new file is processed; the new chunks replace them in one transaction. " +
				"A replacement that cannot be read leaves the document failed and its old content serving. A page of a crawl is refreshed by its crawl instead (409). " + uploadDoc,
			Permission: "knowledge:write", Changes: true, Multipart: true, RawMedia: raw, MaxBody: MaxDocumentUpload,
			Codes:  []string{kb, doc, fault.CodeProjectFrozen, fault.CodeUnsupportedDocumentType, fault.CodeCrawlPageNotReplaceable},
			Status: http.StatusOK,
		}, (*API).replaceKnowledgeDocument),
		typed(operation{
			ID: "deleteKnowledgeDocument", Method: http.MethodDelete, Path: "/knowledge-bases/{knowledge_base_id}/documents/{document_id}", Tag: tag,
			Summary: "Delete a document and its chunks", Permission: "knowledge:write", Changes: true,
			Codes: []string{kb, doc, fault.CodeProjectFrozen}, Status: http.StatusOK,
		}, (*API).deleteKnowledgeDocument),
		typed(operation{
			ID: "getKnowledgeDocumentText", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}/documents/{document_id}/text", Tag: tag,
			Summary: "The text extracted from a document, as it was chunked", Permission: "knowledge:read", Extension: true,
			Codes: []string{kb, doc}, Status: http.StatusOK,
		}, (*API).getKnowledgeDocumentText),
		typed(operation{
			ID: "listKnowledgeCrawls", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}/crawls", Tag: tag,
			Summary: "List the crawls of a knowledge base, oldest first", Permission: "knowledge:read",
			Codes: []string{kb}, Status: http.StatusOK,
		}, (*API).listKnowledgeCrawls),
		typed(operation{
			ID: "createKnowledgeCrawl", Method: http.MethodPost, Path: "/knowledge-bases/{knowledge_base_id}/crawls", Tag: tag,
			Summary: "Crawl a website into the knowledge base",
			Description: "The start address must be public http(s) and resolve (422 crawl_url_refused otherwise; every fetch is checked again at dial time). " +
				"The crawl follows links within allowed (the start host when left out) to max_depth, fetches at most max_pages (default 500), honours robots.txt and sitemaps, follows at most 5 redirects within bounds, and fails pages larger than 5 MB. " +
				"It runs on the job queue (queued, then running, then done or failed) and refreshes every refresh_every_hours (daily by default).",
			Permission: "knowledge:write", Changes: true, Extension: true,
			Codes:  []string{kb, fault.CodeProjectFrozen, fault.CodeCrawlURLRefused},
			Status: http.StatusCreated,
		}, (*API).createKnowledgeCrawl),
		typed(operation{
			ID: "getKnowledgeCrawl", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}/crawls/{crawl_id}", Tag: tag,
			Summary: "Get a crawl and what its last run did", Permission: "knowledge:read", Extension: true,
			Codes: []string{kb, crawl}, Status: http.StatusOK,
		}, (*API).getKnowledgeCrawl),
		typed(operation{
			ID: "deleteKnowledgeCrawl", Method: http.MethodDelete, Path: "/knowledge-bases/{knowledge_base_id}/crawls/{crawl_id}", Tag: tag,
			Summary: "Delete a crawl with its pages", Permission: "knowledge:write", Changes: true, Extension: true,
			Codes: []string{kb, crawl, fault.CodeProjectFrozen}, Status: http.StatusOK,
		}, (*API).deleteKnowledgeCrawl),
		typed(operation{
			ID: "refreshKnowledgeCrawl", Method: http.MethodPost, Path: "/knowledge-bases/{knowledge_base_id}/crawls/{crawl_id}/refresh", Tag: tag,
			Summary: "Refresh a crawl now",
			Description: "Queues a run: pages are fetched again with If-None-Match and If-Modified-Since; pages whose text changed (by content hash) are re-chunked, pages gone are removed. " +
				"Answers 202 with the crawl, queued; 409 crawl_in_progress while a run is queued or running.",
			Permission: "knowledge:write", Changes: true,
			Codes:  []string{kb, crawl, fault.CodeProjectFrozen, fault.CodeCrawlInProgress},
			Status: http.StatusAccepted,
		}, (*API).refreshKnowledgeCrawl),
		typed(operation{
			ID: "listKnowledgeCrawlPages", Method: http.MethodGet, Path: "/knowledge-bases/{knowledge_base_id}/crawls/{crawl_id}/pages", Tag: tag,
			Summary: "List a crawl's pages with their status, oldest first", Permission: "knowledge:read", Extension: true,
			Codes: []string{kb, crawl}, Status: http.StatusOK,
		}, (*API).listKnowledgeCrawlPages),
	}
}
