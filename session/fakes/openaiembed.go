package fakes

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// EmbeddingDims is the length of the fake's vectors.
const EmbeddingDims = 256

// OpenAIEmbeddingsFake is an http.Handler that speaks the OpenAI embeddings API
// (POST /v1/embeddings: model, input as a string or an array of strings; answer data[] with
// index and embedding, usage). Its vectors are deterministic: each word (lower case, a plural
// s dropped) is hashed into one of EmbeddingDims buckets, and the counts are L2-normalized, so
// texts that share words are close and the same text always gets the same vector (issue 16).
type OpenAIEmbeddingsFake struct{}

// ServeHTTP implements http.Handler.
func (OpenAIEmbeddingsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "use POST")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		fail(http.StatusUnauthorized, "You didn't provide an API key.")
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		fail(http.StatusBadRequest, "cannot read the body")
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		fail(http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	if req.Model == "" {
		fail(http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	var inputs []string
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		inputs = []string{one}
	} else if json.Unmarshal(req.Input, &inputs) != nil || len(inputs) == 0 {
		fail(http.StatusBadRequest, "'input' must be a string or a non-empty array of strings")
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]datum, len(inputs))
	tokens := 0
	for i, in := range inputs {
		if in == "" {
			fail(http.StatusBadRequest, "'input' cannot contain an empty string")
			return
		}
		data[i] = datum{Object: "embedding", Index: i, Embedding: FakeEmbedding(in)}
		tokens += len(strings.Fields(in))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// FakeEmbedding is the fake's vector of text.
func FakeEmbedding(text string) []float32 {
	v := make([]float32, EmbeddingDims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) > 3 {
			w = strings.TrimSuffix(w, "s")
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%EmbeddingDims]++
	}
	var n float64
	for _, f := range v {
		n += float64(f * f)
	}
	if n > 0 {
		inv := float32(1 / math.Sqrt(n))
		for i := range v {
			v[i] *= inv
		}
	}
	return v
}
