package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAPIClient(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sk_live_x" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(401)
			w.Write([]byte(`{"code":"unauthenticated","detail":"bad key"}`))
			return
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/agents":
			w.WriteHeader(201)
			w.Write([]byte(`{"object":"agent","id":"ag-1"}`))
		case r.Method == "POST" && r.URL.Path == "/v1/agents/ag-1/publish":
			w.WriteHeader(201)
			w.Write([]byte(`{"object":"agent_version"}`))
		case r.Method == "GET" && r.URL.Path == "/v1/phone-numbers":
			w.Write([]byte(`{"object":"list","data":[{"id":"pn-0","number":"+1999"},{"id":"pn-1","number":"+15550100"}],"has_more":false}`))
		case r.Method == "PATCH" && r.URL.Path == "/v1/phone-numbers/pn-1":
			w.Write([]byte(`{"id":"pn-1"}`))
		case r.Method == "POST" && r.URL.Path == "/v1/web-calls":
			w.WriteHeader(201)
			w.Write([]byte(`{"id":"wc","conversation_id":"cv","url":"http://127.0.0.1:1/call/wc","token":"tok"}`))
		case r.Method == "GET" && r.URL.Path == "/v1/conversations":
			if r.URL.Query().Get("agent_id") != "ag-1" || r.URL.Query().Get("created_after") == "" {
				w.WriteHeader(422)
				w.Write([]byte(`{"code":"invalid","detail":"query"}`))
				return
			}
			if r.URL.Query().Get("cursor") == "" {
				w.Write([]byte(`{"object":"list","data":[{"id":"c2","status":"ended","from_number":"+1","turns":[{"turn":1,"speech_end":"2025-01-01T00:00:00Z","first_audio_out":"2025-01-01T00:00:01.2Z","latency_ms":{"parley_share":1.5}}]}],"has_more":true,"next_cursor":"k1"}`))
				return
			}
			w.Write([]byte(`{"object":"list","data":[{"id":"c1","status":"in_progress"}],"has_more":false,"next_cursor":null}`))
		case r.Method == "GET" && r.URL.Path == "/v1/conversations/c1":
			w.Write([]byte(`{"id":"c1","status":"ended"}`))
		default:
			w.WriteHeader(404)
			w.Write([]byte(`not json`))
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewAPIClient(srv.URL, "sk_live_x")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.CreateAgent(ctx, "pr-1", BenchAgentDefinition("Hello.", 600*time.Millisecond))
	if err != nil || id != "ag-1" {
		t.Fatalf("create: %q %v", id, err)
	}
	if err := c.PublishAgent(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.AssignNumber(ctx, "+15550100", id); err != nil {
		t.Fatal(err)
	}
	if err := c.AssignNumber(ctx, "+1000", id); err == nil {
		t.Error("no error for a number the project lacks")
	}
	wc, err := c.CreateWebCall(ctx, id, "bench-1")
	if err != nil || wc.Token != "tok" || wc.ConversationID != "cv" {
		t.Fatalf("web call %+v %v", wc, err)
	}
	cs, err := c.ListConversations(ctx, id, time.Now(), 100)
	if err != nil || len(cs) != 2 || cs[0].ID != "c2" || cs[1].ID != "c1" {
		t.Fatalf("list %+v %v", cs, err)
	}
	if d, ok := Span(cs[0].Turns[0].SpeechEnd, cs[0].Turns[0].FirstAudioOut); !ok || d != 1200*time.Millisecond || *cs[0].Turns[0].LatencyMS.ParleyShare != 1.5 {
		t.Errorf("turn %+v", cs[0].Turns[0])
	}
	if cv, err := c.GetConversation(ctx, "c1"); err != nil || cv.Status != "ended" {
		t.Errorf("get %+v %v", cv, err)
	}
	var ae *APIError
	if _, err := c.GetConversation(ctx, "nope"); !errors.As(err, &ae) || ae.Status != 404 || ae.Detail != "not json" {
		t.Errorf("404: %v", err)
	}
	bad, _ := NewAPIClient(srv.URL, "wrong")
	if err := bad.PublishAgent(ctx, "ag-1"); !errors.As(err, &ae) || ae.Status != 401 || ae.Code != "unauthenticated" {
		t.Errorf("401: %v", err)
	}
	// The agent definition sent is a valid definition document.
	mu.Lock()
	first := seen[0]
	mu.Unlock()
	var body struct {
		ProjectID  string `json:"project_id"`
		Definition struct {
			Format string         `json:"format"`
			Agent  map[string]any `json:"agent"`
		} `json:"definition"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(first, "POST /v1/agents ")), &body); err != nil || body.ProjectID != "pr-1" ||
		body.Definition.Format != "service.agent/1" || body.Definition.Agent["direction"] != "inbound" {
		t.Errorf("create body %q: %v", first, err)
	}
	if _, err := NewAPIClient("http://example.com", "k"); err == nil {
		t.Error("a non-loopback API was accepted")
	}
}
