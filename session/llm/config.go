package llm

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config configures an adapter ([NewOpenAI], [NewAnthropic]).
type Config struct {
	// BaseURL is the server's root, without the /v1 path (a trailing "/v1" is tolerated):
	// "https://api.openai.com", "https://api.groq.com/openai", "http://localhost:11434" (Ollama),
	// "http://localhost:8080" (llama.cpp, vLLM). Empty: the vendor's public endpoint.
	BaseURL string
	// APIKey goes in "Authorization: Bearer" (OpenAI-compatible) or "x-api-key" (Anthropic).
	// Empty: no key is sent (local servers).
	APIKey string
	// Model is used when Request.Model is empty.
	Model string
	// ConnectTimeout bounds dialling and the TLS handshake. Default 5 s.
	ConnectTimeout time.Duration
	// FirstTokenTimeout bounds the time from sending the request to the first event of the reply.
	// 0: none.
	FirstTokenTimeout time.Duration
	// IdleTimeout bounds silence inside a reply (between server-sent events). 0: none.
	IdleTimeout time.Duration
	// Headers are added to every request and may override the adapter's own (for example
	// "OpenAI-Organization", "anthropic-beta", or Azure's "api-key" with APIKey left empty).
	Headers map[string]string
	// MaxTokens is used when Request.MaxTokens is 0. Anthropic requires a value: default 1024.
	MaxTokens int
	// UseMaxCompletionTokens makes the OpenAI adapter send "max_completion_tokens" (required by
	// OpenAI's reasoning models) instead of "max_tokens" (understood by every compatible server).
	UseMaxCompletionTokens bool
	// HTTPClient replaces the adapter's own client. By default adapters share, per connect
	// timeout, one transport tuned for latency: keep-alive, HTTP/2 when the server offers it, no
	// compression. ConnectTimeout is then the caller's business.
	HTTPClient *http.Client
}

// endpoint is what both adapters share: the resolved URL, the HTTP client and the timeouts.
type endpoint struct {
	cfg       Config
	url       string
	hc        *http.Client
	transport *http.Transport // ours, when we built it
}

func newEndpoint(cfg Config, defaultBase, path string) (*endpoint, error) {
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = defaultBase
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("llm: bad base URL %q: %w", cfg.BaseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("llm: base URL %q must be http or https", cfg.BaseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("llm: base URL %q has no host", cfg.BaseURL)
	}
	if cfg.ConnectTimeout < 0 || cfg.FirstTokenTimeout < 0 || cfg.IdleTimeout < 0 || cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("llm: timeouts and MaxTokens must not be negative")
	}
	p := strings.TrimSuffix(u.Path, "/")
	p = strings.TrimSuffix(p, "/v1")
	u.Path = p + path
	u.RawPath = ""
	e := &endpoint{cfg: cfg, url: u.String(), hc: cfg.HTTPClient}
	if e.hc == nil {
		ct := cfg.ConnectTimeout
		if ct == 0 {
			ct = 5 * time.Second
		}
		e.transport = sharedTransport(ct)
		e.hc = &http.Client{Transport: e.transport}
	}
	return e, nil
}

// transports holds one transport per connect timeout, shared by every adapter of the process, so
// that adapters made per agent or per conversation still reuse warm connections to a vendor.
var transports struct {
	sync.Mutex
	m map[time.Duration]*http.Transport
}

func sharedTransport(connect time.Duration) *http.Transport {
	transports.Lock()
	defer transports.Unlock()
	if t, ok := transports.m[connect]; ok {
		return t
	}
	if transports.m == nil {
		transports.m = make(map[time.Duration]*http.Transport)
	}
	t := newTransport(connect)
	transports.m[connect] = t
	return t
}

// newTransport returns a transport tuned for many short, latency-sensitive streams to a few hosts:
// connections are kept alive and reused (the request of a turn should never pay for a TCP and TLS
// handshake), HTTP/2 is used when the server offers it, and compression is off so that no gzip
// reader sits between the socket and the SSE parser. Go sets TCP_NODELAY on every connection.
func newTransport(connect time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: connect,
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// closeIdle closes kept-alive connections (used by tests and at shutdown). The transport is
// shared, so idle connections of other adapters with the same connect timeout close too.
func (e *endpoint) closeIdle() {
	e.hc.CloseIdleConnections()
}

// model returns the request's model or the configured one.
func (e *endpoint) model(r *Request) string {
	if r.Model != "" {
		return r.Model
	}
	return e.cfg.Model
}
