// Package embeddings is the adapter of an OpenAI-compatible embeddings endpoint
// (POST {base}/v1/embeddings, as OpenAI, Ollama, llama.cpp, vLLM and TEI serve it) for the
// knowledge bases' optional vectors (issue 16). The endpoint is the operator's, not a
// customer's, so it is reached with an ordinary client; the API key never appears in errors or
// logs.
package embeddings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client embeds texts.
type Client struct {
	// BaseURL is the server, without /v1 (e.g. http://127.0.0.1:11434 for Ollama).
	BaseURL string
	APIKey  string
	Model   string
	HTTP    *http.Client // nil: a client with a 30 s timeout
}

type request struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type response struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Embed returns one vector per text, in order.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	body, _ := json.Marshal(request{Model: c.Model, Input: texts})
	u := strings.TrimSuffix(c.BaseURL, "/")
	u = strings.TrimSuffix(u, "/v1") + "/v1/embeddings"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("embeddings: read the answer: %w", err)
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if r.Error != nil && r.Error.Message != "" {
			msg += ": " + r.Error.Message
		}
		return nil, fmt.Errorf("embeddings: the server answered %s", msg)
	}
	out := make([][]float32, len(texts))
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= len(out) {
			return nil, fmt.Errorf("embeddings: the server answered index %d for %d texts", d.Index, len(texts))
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("embeddings: the server answered no vector for text %d", i)
		}
	}
	return out, nil
}
