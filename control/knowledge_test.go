package control

import (
	"net/http/httptest"
	"testing"
)

// TestDocumentUploadPaths: only a knowledge document's upload or replacement gets the 25 MB body limit.
func TestDocumentUploadPaths(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/v1/knowledge-bases/0190a6f0-0000-7000-8000-000000000000/documents", true},
		{"PUT", "/v1/knowledge-bases/0190a6f0-0000-7000-8000-000000000000/documents/0190a6f0-0000-7000-8000-000000000001", true},
		{"POST", "/v1/knowledge-bases/0190a6f0-0000-7000-8000-000000000000/search", false},
		{"GET", "/v1/knowledge-bases/0190a6f0-0000-7000-8000-000000000000/documents", false},
		{"POST", "/v1/knowledge-bases", false},
		{"POST", "/v1/agents/x/documents", false},
		{"PUT", "/v1/knowledge-bases/a/documents/b/text", false},
	} {
		if got := isDocumentUpload(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: %v", c.method, c.path, got)
		}
	}
}
