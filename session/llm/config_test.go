package llm

import (
	"strings"
	"testing"
	"time"
)

func TestEndpointURL(t *testing.T) {
	cases := []struct{ base, path, want string }{
		{"", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://api.groq.com/openai", "/v1/chat/completions", "https://api.groq.com/openai/v1/chat/completions"},
		{"https://api.groq.com/openai/v1/", "/v1/chat/completions", "https://api.groq.com/openai/v1/chat/completions"},
		{"http://localhost:11434/", "/v1/chat/completions", "http://localhost:11434/v1/chat/completions"},
		{"http://127.0.0.1:8080/v1", "/v1/messages", "http://127.0.0.1:8080/v1/messages"},
	}
	for _, c := range cases {
		e, err := newEndpoint(Config{BaseURL: c.base}, "https://api.openai.com", c.path)
		if err != nil {
			t.Fatal(err)
		}
		if e.url != c.want {
			t.Fatalf("%q: %q, want %q", c.base, e.url, c.want)
		}
	}
	a, _ := NewAnthropic(Config{})
	if a.URL() != "https://api.anthropic.com/v1/messages" {
		t.Fatal(a.URL())
	}
}

func TestEndpointBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BaseURL: "ftp://x"},
		{BaseURL: "http://"},
		{BaseURL: "://nope"},
		{BaseURL: "http://x", IdleTimeout: -time.Second},
		{BaseURL: "http://x", MaxTokens: -1},
	} {
		if _, err := NewOpenAI(cfg); err == nil || !strings.HasPrefix(err.Error(), "llm: ") {
			t.Fatalf("%+v: err %v", cfg, err)
		}
	}
}

func TestTransportTuning(t *testing.T) {
	e, err := newEndpoint(Config{ConnectTimeout: 2 * time.Second}, "https://x", "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	tr := e.transport
	if tr == nil || !tr.DisableCompression || !tr.ForceAttemptHTTP2 || tr.TLSHandshakeTimeout != 2*time.Second || tr.MaxIdleConnsPerHost < 8 {
		t.Fatalf("transport %+v", tr)
	}
}
