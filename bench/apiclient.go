package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// APIError is a problem document (RFC 9457) answered by the API.
type APIError struct {
	Status int
	Code   string
	Detail string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("API answered %d %s: %s", e.Status, e.Code, e.Detail)
}

// APIClient calls Parley's /v1 API on loopback with a bearer key.
type APIClient struct {
	base string
	key  string
	hc   *http.Client
}

// NewAPIClient returns a client of the API at base (http://127.0.0.1:PORT).
func NewAPIClient(base, key string) (*APIClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("bench: base URL: %w", err)
	}
	if ip := net.ParseIP(u.Hostname()); (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		return nil, fmt.Errorf("bench: base URL host %q is not loopback", u.Hostname())
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &APIClient{base: base, key: key, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// Close releases idle connections.
func (c *APIClient) Close() { c.hc.CloseIdleConnections() }

func (c *APIClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(raw, &p)
		if p.Detail == "" {
			p.Detail = string(bytes.TrimSpace(raw[:min(len(raw), 300)]))
		}
		return &APIError{Status: res.StatusCode, Code: p.Code, Detail: p.Detail}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("bench: %s %s: %w", method, path, err)
		}
	}
	return nil
}

// Get fetches path (outside /v1 too, such as /debug/pprof/…) and returns its body.
func (c *APIClient) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	hc := *c.hc
	hc.Timeout = 2 * time.Minute
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: HTTP %d", path, res.StatusCode)
	}
	return b, err
}

// CreateAgent creates an agent from a definition document in project and returns its id.
func (c *APIClient) CreateAgent(ctx context.Context, project string, definition json.RawMessage) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/agents", map[string]any{"project_id": project, "definition": definition}, &out)
	if err == nil && out.ID == "" {
		err = errors.New("bench: the created agent has no id")
	}
	return out.ID, err
}

// PublishAgent publishes the agent's current definition as its next version.
func (c *APIClient) PublishAgent(ctx context.Context, agent string) error {
	return c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/publish", map[string]any{"note": "parley-bench"}, nil)
}

// AssignNumber finds the phone number (E.164) and assigns it to agent.
func (c *APIClient) AssignNumber(ctx context.Context, number, agent string) error {
	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Number string `json:"number"`
		} `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/phone-numbers?limit=100", nil, &list); err != nil {
		return err
	}
	for _, n := range list.Data {
		if n.Number == number {
			return c.do(ctx, http.MethodPatch, "/v1/phone-numbers/"+url.PathEscape(n.ID), map[string]any{"agent_id": agent}, nil)
		}
	}
	return fmt.Errorf("bench: the number %s is not among the project's numbers", number)
}

// WebCall is the answer of POST /v1/web-calls.
type WebCall struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	URL            string `json:"url"`
	Token          string `json:"token"`
}

// CreateWebCall starts a browser call with agent for participant.
func (c *APIClient) CreateWebCall(ctx context.Context, agent, participant string) (WebCall, error) {
	var wc WebCall
	err := c.do(ctx, http.MethodPost, "/v1/web-calls", map[string]any{"agent_id": agent, "participant_name": participant}, &wc)
	if err == nil && (wc.URL == "" || wc.Token == "") {
		err = errors.New("bench: the web call has no url or token")
	}
	return wc, err
}

// APITurn is one turn's metrics as the conversation reports them (session.TurnMetrics).
type APITurn struct {
	Turn            int        `json:"turn"`
	Endpointing     string     `json:"endpointing"`
	Interrupted     bool       `json:"interrupted"`
	SpeechEnd       *time.Time `json:"speech_end"`
	STTFinal        *time.Time `json:"stt_final"`
	EndOfTurn       *time.Time `json:"end_of_turn"`
	LLMRequestSent  *time.Time `json:"llm_request_sent"`
	LLMFirstToken   *time.Time `json:"llm_first_token"`
	LLMFirstChunk   *time.Time `json:"llm_first_chunk"`
	TTSFirstRequest *time.Time `json:"tts_first_request"`
	TTSFirstByte    *time.Time `json:"tts_first_byte"`
	FirstAudioOut   *time.Time `json:"first_audio_out"`
	LatencyMS       struct {
		ParleyShare *float64 `json:"parley_share"`
	} `json:"latency_ms"`
}

// Span returns b-a of two reported times, and whether both were reported.
func Span(a, b *time.Time) (time.Duration, bool) {
	if a == nil || b == nil || a.IsZero() || b.IsZero() {
		return 0, false
	}
	return b.Sub(*a), true
}

// Conversation is what the harness reads of a conversation.
type Conversation struct {
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	Channel    string    `json:"channel"`
	EndReason  *string   `json:"end_reason"`
	FromNumber *string   `json:"from_number"`
	CreatedAt  time.Time `json:"created_at"`
	Turns      []APITurn `json:"turns"`
}

// ListConversations returns the agent's conversations created at or after since, newest
// first, at most max of them.
func (c *APIClient) ListConversations(ctx context.Context, agent string, since time.Time, max int) ([]Conversation, error) {
	var out []Conversation
	cursor := ""
	for pages := 0; pages < 1000 && len(out) < max; pages++ {
		q := url.Values{"agent_id": {agent}, "created_after": {since.UTC().Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(100)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Data       []Conversation `json:"data"`
			HasMore    bool           `json:"has_more"`
			NextCursor *string        `json:"next_cursor"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/conversations?"+q.Encode(), nil, &page); err != nil {
			return out, err
		}
		out = append(out, page.Data...)
		if !page.HasMore || page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
	}
	return out, nil
}

// GetConversation reads one conversation.
func (c *APIClient) GetConversation(ctx context.Context, id string) (Conversation, error) {
	var cv Conversation
	err := c.do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(id), nil, &cv)
	return cv, err
}
