package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// MCP is Parley's MCP client: the official Go SDK over Streamable HTTP, through the SSRF guard.
// It discovers a server's tools when the server is saved (Discover) and keeps one warm session
// per server for calls, so a call inside a turn never lists tools or initializes when a session
// is warm. Sessions whose server announces tools/list_changed trigger a refresh of the stored list
// (OnListChanged), outside any turn.
type MCP struct {
	Guard *netguard.Guard
	Log   *slog.Logger
	// OnListChanged is called (on its own goroutine) when a warm session's server says its tool
	// list changed.
	OnListChanged func(server store.MCPServerID)

	mu       sync.Mutex
	sessions map[string]*mcpConn // by server id and updated_at
	closed   bool
}

type mcpConn struct {
	once sync.Once
	cs   *mcp.ClientSession
	err  error
}

// authTransport adds the vault credential to every request of a session.
type authTransport struct {
	base http.RoundTripper
	cred *vault.Credential
}

func (t authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.cred == nil {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	if name, v, ok := t.cred.Header(); ok {
		r.Header.Set(name, v)
	}
	if name, v, ok := t.cred.Query(); ok {
		q := r.URL.Query()
		q.Set(name, v)
		r.URL.RawQuery = q.Encode()
	}
	return t.base.RoundTrip(r)
}

func (m *MCP) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// connect opens a session to url.
func (m *MCP) connect(ctx context.Context, url string, timeout time.Duration, cred *vault.Credential, onChange func()) (*mcp.ClientSession, error) {
	if m.Guard == nil {
		return nil, errors.New("no outbound guard")
	}
	hc := &http.Client{Transport: authTransport{base: m.Guard.Transport(), cred: cred},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	if onChange != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { go onChange() }
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "parley", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: 2, DisableStandaloneSSE: onChange == nil}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		return nil, cleanErr(err, cred)
	}
	return cs, nil
}

// cleanErr makes a short, secret-free message of an SDK error.
func cleanErr(err error, cred *vault.Credential) error {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timed out"
	case errors.Is(err, netguard.ErrBlocked):
		msg = "the server's address is not allowed (private or otherwise non-public)"
	case strings.Contains(msg, "protocol version") && !strings.HasPrefix(msg, "unsupported protocol version"):
		msg = "unsupported protocol version: " + msg
	}
	if cred != nil {
		msg = cred.Redact(msg)
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return errors.New(msg)
}

// Discover connects to the server, lists its tools and closes the session. It never fails: what
// went wrong is the Discovery's LastError.
func (m *MCP) Discover(ctx context.Context, url string, timeout time.Duration, cred *vault.Credential) store.Discovery {
	d := store.Discovery{Tools: json.RawMessage(`[]`), At: time.Now()}
	if timeout <= 0 {
		timeout = apptools.DefaultTimeout
	}
	cs, err := m.connect(ctx, url, timeout, cred, nil)
	if err != nil {
		d.LastError = "connect: " + err.Error()
		return d
	}
	defer cs.Close()
	if ir := cs.InitializeResult(); ir != nil {
		d.ProtocolVersion = ir.ProtocolVersion
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []apptools.DiscoveredTool
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			d.LastError = "tools/list: " + cleanErr(err, cred).Error()
			return d
		}
		if len(out) >= 512 {
			break
		}
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, apptools.DiscoveredTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if out == nil {
		out = []apptools.DiscoveredTool{}
	}
	d.Tools, _ = json.Marshal(out)
	d.At = time.Now()
	return d
}

// ErrMCPClosed says the client was closed.
var ErrMCPClosed = errors.New("tools: the MCP client is closed")

// session returns the warm session of a server, connecting once.
func (m *MCP) session(ctx context.Context, srv store.MCPServer, spec apptools.ServerSpec, cred *vault.Credential) (*mcp.ClientSession, string, error) {
	key := string(srv.ID) + "@" + srv.UpdatedAt.Format(time.RFC3339Nano)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, key, ErrMCPClosed
	}
	if m.sessions == nil {
		m.sessions = map[string]*mcpConn{}
	}
	c := m.sessions[key]
	var stale []*mcpConn
	if c == nil {
		c = &mcpConn{}
		m.sessions[key] = c
		// The server was saved again since its sessions opened: they go.
		for k, old := range m.sessions {
			if k != key && strings.HasPrefix(k, string(srv.ID)+"@") {
				delete(m.sessions, k)
				stale = append(stale, old)
			}
		}
	}
	m.mu.Unlock()
	for _, old := range stale {
		go func() {
			old.once.Do(func() {}) // wait for a connect in progress
			if old.cs != nil {
				old.cs.Close()
			}
		}()
	}
	c.once.Do(func() {
		var onChange func()
		if m.OnListChanged != nil {
			id := srv.ID
			onChange = func() { m.OnListChanged(id) }
		}
		// The session outlives the call that opened it: it is not bound to the turn's context.
		c.cs, c.err = m.connect(context.WithoutCancel(ctx), spec.URL, time.Duration(spec.TimeoutMS)*time.Millisecond, cred, onChange)
	})
	if c.err != nil {
		m.drop(key, c)
		return nil, key, c.err
	}
	return c.cs, key, nil
}

func (m *MCP) drop(key string, c *mcpConn) {
	m.mu.Lock()
	if m.sessions[key] == c {
		delete(m.sessions, key)
	}
	m.mu.Unlock()
	if c.cs != nil {
		c.cs.Close()
	}
}

// Call calls one tool of the server on its warm session (opening it when there is none, and
// once more when the session broke) and returns its text content.
func (m *MCP) Call(ctx context.Context, srv store.MCPServer, spec apptools.ServerSpec, cred *vault.Credential, tool string, args json.RawMessage) (string, error) {
	var arguments any = map[string]any{}
	if len(args) > 0 {
		arguments = args
	}
	for attempt := 0; ; attempt++ {
		cs, key, err := m.session(ctx, srv, spec, cred)
		if err != nil {
			return "", err
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
		if err != nil {
			if ctx.Err() == nil && attempt == 0 && !isToolError(err) {
				m.mu.Lock()
				c := m.sessions[key]
				m.mu.Unlock()
				if c != nil {
					m.drop(key, c)
				}
				continue
			}
			return "", cleanErr(err, cred)
		}
		text := resultText(res)
		if cred != nil {
			text = cred.Redact(text)
		}
		if res.IsError {
			return "", fmt.Errorf("the tool answered an error: %s", clip(text, 300))
		}
		return text, nil
	}
}

// isToolError reports a JSON-RPC error the server answered (the session is fine).
func isToolError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	return strings.Join(parts, "\n")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Close closes every warm session. Safe to call twice.
func (m *MCP) Close() {
	m.mu.Lock()
	m.closed = true
	conns := m.sessions
	m.sessions = nil
	m.mu.Unlock()
	for _, c := range conns {
		if c.cs != nil {
			c.cs.Close()
		}
	}
}
