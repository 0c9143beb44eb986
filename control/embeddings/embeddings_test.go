package embeddings_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/embeddings"
	"github.com/parley-voice/parley/session/fakes"
)

// TestAgainstTheFake: the adapter speaks the OpenAI embeddings API to the fake of `parley
// fakes`: one vector per text, in order, the same text the same vector; a refusal is an error
// that never carries the key.
func TestAgainstTheFake(t *testing.T) {
	srv := httptest.NewServer(fakes.OpenAIEmbeddingsFake{})
	defer srv.Close()
	c := &embeddings.Client{BaseURL: srv.URL + "/v1", APIKey: "sk-secret-123", Model: "text-embedding-3-small"}
	vs, err := c.Embed(t.Context(), []string{"descale the kettle", "warranty terms", "descale the kettle"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || len(vs[0]) != fakes.EmbeddingDims || vs[0][0] != vs[2][0] {
		t.Fatalf("vectors %d × %d", len(vs), len(vs[0]))
	}
	same := 0
	for i := range vs[0] {
		if vs[0][i] == vs[2][i] {
			same++
		}
	}
	if same != fakes.EmbeddingDims {
		t.Fatal("the same text got another vector")
	}
	bad := &embeddings.Client{BaseURL: srv.URL, APIKey: "sk-secret-123"} // no model
	_, err = bad.Embed(t.Context(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 400") || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("refusal: %v", err)
	}
}
