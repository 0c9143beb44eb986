// Package tools holds the rules of HTTP tools and MCP servers: what a tool's request, schema,
// timeout, filler and mock result may be, that URLs point at public addresses when saved, that
// an MCP server's tool list is discovered when it is saved (never inside a turn), and how an
// agent definition's references.tools resolve by name.
//
// It must never put a vault secret's value in an answer, a log line or an audit event, and never
// reach a URL a customer gave except through the guarded client of the Discoverer.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// Defaults and limits.
const (
	DefaultTimeout = 8 * time.Second // a voice tool's default timeout
	DefaultTTL     = time.Hour       // how long an MCP tool list is kept
	maxHeaders     = 32
)

// DefaultMock is the mock result of a tool that declares none.
var DefaultMock = json.RawMessage(`{"mock":true}`)

// Spec is what is stored of an HTTP tool besides its name and secret.
type Spec struct {
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Request     ToolRequest     `json:"request"`
	TimeoutMS   int             `json:"timeout_ms"`
	Filler      string          `json:"filler,omitempty"`
	Apology     string          `json:"apology,omitempty"`
	ResultMode  string          `json:"result_mode"`
	TestSafe    bool            `json:"test_safe"`
	MockResult  json.RawMessage `json:"mock_result"`
}

// ServerSpec is what is stored of an MCP server besides its name, secret and discovery.
type ServerSpec struct {
	URL          string   `json:"url"`
	TimeoutMS    int      `json:"timeout_ms"`
	TTLMS        int      `json:"ttl_ms"`
	AllowedTools []string `json:"allowed_tools"` // nil: all
	TestSafe     bool     `json:"test_safe"`
	ResultMode   string   `json:"result_mode,omitempty"` // llm (""), or speak
}

// Allows reports whether the server's allow-list lets agents call tool.
func (s ServerSpec) Allows(tool string) bool {
	return s.AllowedTools == nil || slices.Contains(s.AllowedTools, tool)
}

// DiscoveredTool is one tool an MCP server listed.
type DiscoveredTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// URLGuard checks a URL a customer gave before it is saved (netguard.Guard is one).
type URLGuard interface {
	CheckURL(ctx context.Context, raw string, schemes netguard.Schemes) error
}

// Discoverer lists the tools of an MCP server (the control plane's MCP client). It reports what
// went wrong in Discovery.LastError rather than failing: a server that cannot be reached is
// saved, with its error, and conversations go on without its tools.
type Discoverer interface {
	Discover(ctx context.Context, url string, timeout time.Duration, cred *vault.Credential) store.Discovery
}

// Service serves tools and MCP servers.
type Service struct {
	Store *store.Store
	Vault *vault.Service
	Guard URLGuard
	MCP   Discoverer
	Now   func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ParseSpec reads a stored tool's spec.
func ParseSpec(t store.Tool) (Spec, error) {
	var sp Spec
	err := json.Unmarshal(t.Spec, &sp)
	return sp, err
}

// ParseServerSpec reads a stored server's spec and discovered tools.
func ParseServerSpec(m store.MCPServer) (ServerSpec, []DiscoveredTool, error) {
	var sp ServerSpec
	if err := json.Unmarshal(m.Spec, &sp); err != nil {
		return sp, nil, err
	}
	var ts []DiscoveredTool
	if len(m.Discovered) > 0 {
		if err := json.Unmarshal(m.Discovered, &ts); err != nil {
			return sp, nil, err
		}
	}
	return sp, ts, nil
}

// ViewTool is the interface's form of a stored tool.
func ViewTool(t store.Tool) Tool {
	sp, _ := ParseSpec(t)
	v := Tool{Object: "tool", ID: string(t.ID), ProjectID: string(t.ProjectID), Name: t.Name, Description: sp.Description,
		Parameters: sp.Parameters, Request: sp.Request, TimeoutMS: sp.TimeoutMS, ResultMode: sp.ResultMode, TestSafe: sp.TestSafe,
		MockResult: sp.MockResult, CreatedAt: app.T(t.CreatedAt), UpdatedAt: app.T(t.UpdatedAt)}
	if t.SecretID != "" {
		id := string(t.SecretID)
		v.SecretID = &id
	}
	if sp.Filler != "" {
		f := sp.Filler
		v.Filler = &f
	}
	if sp.Apology != "" {
		a := sp.Apology
		v.Apology = &a
	}
	if v.Request.Headers == nil {
		v.Request.Headers = map[string]string{}
	}
	return v
}

// ViewServer is the interface's form of a stored server.
func ViewServer(m store.MCPServer) McpServer {
	sp, ts, _ := ParseServerSpec(m)
	v := McpServer{Object: "mcp_server", ID: string(m.ID), ProjectID: string(m.ProjectID), Name: m.Name, URL: sp.URL,
		TimeoutMS: sp.TimeoutMS, TTLMS: sp.TTLMS, AllowedTools: sp.AllowedTools, TestSafe: sp.TestSafe, ResultMode: sp.ResultMode, Tools: make([]McpTool, len(ts)),
		RefreshedAt: app.TP(m.RefreshedAt), CreatedAt: app.T(m.CreatedAt), UpdatedAt: app.T(m.UpdatedAt)}
	for i, t := range ts {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		v.Tools[i] = McpTool{Name: t.Name, Description: t.Description, InputSchema: schema, Allowed: sp.Allows(t.Name)}
	}
	if v.ResultMode == "" {
		v.ResultMode = "llm"
	}
	if m.SecretID != "" {
		id := string(m.SecretID)
		v.SecretID = &id
	}
	if m.ProtocolVersion != "" {
		pv := m.ProtocolVersion
		v.ProtocolVersion = &pv
	}
	if m.LastError != "" {
		e := m.LastError
		v.LastError = &e
	}
	return v
}

// placeholder matches a {{…}} marker of a template.
var placeholder = regexp.MustCompile(`\{\{\s*([a-zA-Z0-9_.-]+)\s*\}\}`)

// bad is a 422 naming one place.
func bad(code, pointer, detail string, args ...any) error {
	return fault.Invalid(code, []fault.FieldError{{Pointer: pointer, Code: "invalid", Detail: fmt.Sprintf(detail, args...)}})
}

// checkParameters checks that p is an object JSON Schema (draft 2020-12) that compiles; the
// error points into it.
func checkParameters(p json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(p))
	if err != nil {
		return bad(fault.CodeInvalidToolSchema, "/parameters", "parameters is not JSON.")
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return bad(fault.CodeInvalidToolSchema, "/parameters", "parameters must be a JSON Schema object.")
	}
	if t, ok := m["type"]; ok && t != "object" {
		return bad(fault.CodeInvalidToolSchema, "/parameters/type", "The arguments are an object: parameters.type must be \"object\".")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource("parley:tool-parameters", doc); err != nil {
		return bad(fault.CodeInvalidToolSchema, "/parameters", "parameters is not a JSON Schema: %v", err)
	}
	if _, err := c.Compile("parley:tool-parameters"); err != nil {
		ptr := "/parameters"
		msg := err.Error()
		var se *jsonschema.SchemaValidationError
		if errors.As(err, &se) {
			var ve *jsonschema.ValidationError
			if errors.As(se.Err, &ve) {
				for len(ve.Causes) > 0 {
					ve = ve.Causes[0]
				}
				for _, s := range ve.InstanceLocation {
					ptr += "/" + strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
				}
				msg = ve.Error()
				if i := strings.LastIndex(msg, ": "); i >= 0 {
					msg = msg[i+2:]
				}
			}
		}
		return bad(fault.CodeInvalidToolSchema, ptr, "parameters is not a valid JSON Schema at %s: %s.", ptr, msg)
	}
	return nil
}

// noLoader refuses every remote $ref: a schema saved by a customer never makes Parley fetch.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("schemas are not loaded from %s: put every definition in $defs", u)
}

// checkURL checks a tool or server URL (template): http or https, a literal host, public
// addresses only.
func (s *Service) checkURL(ctx context.Context, raw, pointer string) error {
	lower := strings.ToLower(raw)
	rest, ok := strings.CutPrefix(lower, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(lower, "http://"); !ok {
			return bad(fault.CodeToolURLNotAllowed, pointer, "The URL must start with http:// or https://.")
		}
	}
	host := rest
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if host == "" || strings.Contains(host, "{{") || strings.ContainsAny(raw, " \t\r\n") {
		return bad(fault.CodeToolURLNotAllowed, pointer, "The URL's host must be written out (no {{…}} in it) and the URL holds no spaces.")
	}
	filled := placeholder.ReplaceAllString(raw, "x")
	if strings.Contains(filled, "{{") || strings.Contains(filled, "}}") {
		return bad(fault.CodeToolURLNotAllowed, pointer, "The URL holds a malformed {{…}} marker.")
	}
	if _, err := url.Parse(filled); err != nil {
		return bad(fault.CodeToolURLNotAllowed, pointer, "The URL cannot be read: %v.", err)
	}
	if s.Guard != nil {
		if err := s.Guard.CheckURL(ctx, filled, netguard.HTTPOrHTTPS); err != nil {
			switch {
			case errors.Is(err, netguard.ErrBlocked):
				return bad(fault.CodeToolURLNotAllowed, pointer, "The URL resolves to a private or otherwise non-public address, which tools may not reach.")
			case errors.Is(err, netguard.ErrUnresolvable):
				return bad(fault.CodeToolURLNotAllowed, pointer, "The URL's host does not resolve.")
			default:
				return bad(fault.CodeToolURLNotAllowed, pointer, "The URL is not allowed: %v.", err)
			}
		}
	}
	return nil
}

// checkSpec validates a tool's spec and fills its defaults.
func (s *Service) checkSpec(ctx context.Context, sp *Spec) error {
	if len(sp.Parameters) == 0 || string(sp.Parameters) == "null" {
		sp.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if err := checkParameters(sp.Parameters); err != nil {
		return err
	}
	if sp.TimeoutMS == 0 {
		sp.TimeoutMS = int(DefaultTimeout / time.Millisecond)
	}
	if sp.ResultMode == "" {
		sp.ResultMode = "llm"
	}
	if len(sp.MockResult) == 0 || string(sp.MockResult) == "null" {
		sp.MockResult = DefaultMock
	}
	r := &sp.Request
	r.Method = strings.ToUpper(r.Method)
	if err := s.checkURL(ctx, r.URL, "/request/url"); err != nil {
		return err
	}
	if len(r.Headers) > maxHeaders {
		return bad(fault.CodeValidationFailed, "/request/headers", "At most %d headers.", maxHeaders)
	}
	for k, v := range r.Headers {
		if !validToken(k) || strings.ContainsAny(v, "\r\n\x00") || len(v) > 4096 {
			return bad(fault.CodeValidationFailed, "/request/headers/"+k, "Header names are HTTP tokens and values hold no line breaks (at most 4096 bytes).")
		}
		switch strings.ToLower(k) {
		case "authorization", "proxy-authorization", "cookie":
			// Credentials pasted into a definition leak with it: they belong in the vault.
			return bad(fault.CodeValidationFailed, "/request/headers/"+k, "Put credentials in the vault (POST /v1/vault/secrets) and name the secret in secret_id; the %s header is not taken here.", k)
		}
	}
	if len(r.Body) > 0 && string(r.Body) != "null" && !json.Valid(r.Body) {
		return bad(fault.CodeValidationFailed, "/request/body", "The body template is not JSON.")
	}
	return nil
}

func validToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, r := range s {
		if r > 126 || r <= 32 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

func nameError(err error, code, what, name string) error {
	if errors.Is(err, store.ErrConflict) {
		return fault.E(code, "The project already has a %s named %q.", what, name)
	}
	return err
}

func secretOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// ListTools returns a page of the actor's tools, oldest first.
func (s *Service) ListTools(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]Tool, error) {
	var sf store.ToolFilter
	var err error
	if sf.ProjectID, err = app.FilterProject(ctx, s.Store.Queries, act, f.ProjectID); err != nil {
		return nil, err
	}
	ts, err := s.Store.Tools().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Tool, len(ts))
	for i, t := range ts {
		out[i] = ViewTool(t)
	}
	return out, nil
}

// GetTool returns the actor's tool with id.
func (s *Service) GetTool(ctx context.Context, act app.Actor, id string) (Tool, error) {
	t, err := s.Store.Tools().Get(ctx, act.Scope, store.ToolID(id))
	if err != nil {
		return Tool{}, app.NotFound(err, fault.CodeToolNotFound, "tool", id)
	}
	return ViewTool(t), nil
}

func toolUse(t store.Tool) store.SecretUse {
	return store.SecretUse{Type: "tool", ID: string(t.ID), Name: t.Name}
}

// CreateTool checks and stores a tool, recording tool.created.
func (s *Service) CreateTool(ctx context.Context, act app.Actor, c ToolCreate) (Tool, error) {
	sp := Spec{Description: c.Description, Parameters: c.Parameters, Request: c.Request, MockResult: c.MockResult}
	if c.TimeoutMS != nil {
		sp.TimeoutMS = *c.TimeoutMS
	}
	if c.Filler != nil {
		sp.Filler = *c.Filler
	}
	if c.Apology != nil {
		sp.Apology = *c.Apology
	}
	if c.ResultMode != nil {
		sp.ResultMode = *c.ResultMode
	}
	if c.TestSafe != nil {
		sp.TestSafe = *c.TestSafe
	}
	if err := s.checkSpec(ctx, &sp); err != nil {
		return Tool{}, err
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Tool{}, err
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Tool, error) {
		p, err := app.Project(ctx, tx.Queries, act, c.ProjectID)
		if err != nil {
			return Tool{}, err
		}
		if err := app.Writable(p); err != nil {
			return Tool{}, err
		}
		t, err := tx.Tools().Create(ctx, act.Scope, store.ToolWrite{ProjectID: p.ID, Name: c.Name, Spec: raw})
		if err != nil {
			return Tool{}, nameError(err, fault.CodeToolNameTaken, "tool", c.Name)
		}
		if sid := secretOf(c.SecretID); sid != "" {
			if err := vault.Link(ctx, tx, act, p.ID, toolUse(t), sid); err != nil {
				return Tool{}, err
			}
			if t, err = tx.Tools().Replace(ctx, act.Scope, t.ID, store.ToolWrite{Name: t.Name, Spec: raw, SecretID: store.SecretID(strings.ToLower(sid))}); err != nil {
				return Tool{}, err
			}
		}
		if err := au.Record("tool.created", "tool", string(t.ID), t.ProjectID, map[string]any{"name": t.Name, "url": sp.Request.URL}); err != nil {
			return Tool{}, err
		}
		return ViewTool(t), nil
	})
}

// UpdateTool changes a tool, recording tool.updated.
func (s *Service) UpdateTool(ctx context.Context, act app.Actor, id string, u ToolUpdate) (Tool, error) {
	old, err := s.Store.Tools().Get(ctx, act.Scope, store.ToolID(id))
	if err != nil {
		return Tool{}, app.NotFound(err, fault.CodeToolNotFound, "tool", id)
	}
	sp, err := ParseSpec(old)
	if err != nil {
		return Tool{}, err
	}
	name := old.Name
	if u.Name != nil {
		name = *u.Name
	}
	if u.Description != nil {
		sp.Description = *u.Description
	}
	if len(u.Parameters) > 0 {
		sp.Parameters = u.Parameters
	}
	if u.Request != nil {
		sp.Request = *u.Request
	}
	if u.TimeoutMS != nil {
		sp.TimeoutMS = *u.TimeoutMS
	}
	if u.Filler.Set {
		sp.Filler = u.Filler.Value
		if u.Filler.Null {
			sp.Filler = ""
		}
	}
	if u.ResultMode != nil {
		sp.ResultMode = *u.ResultMode
	}
	if u.Apology.Set {
		sp.Apology = u.Apology.Value
		if u.Apology.Null {
			sp.Apology = ""
		}
	}
	if u.TestSafe != nil {
		sp.TestSafe = *u.TestSafe
	}
	if len(u.MockResult) > 0 {
		sp.MockResult = u.MockResult
	}
	if err := s.checkSpec(ctx, &sp); err != nil {
		return Tool{}, err
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Tool{}, err
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Tool, error) {
		cur, err := tx.Tools().Get(ctx, act.Scope, old.ID)
		if err != nil {
			return Tool{}, app.NotFound(err, fault.CodeToolNotFound, "tool", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, cur.ProjectID); err != nil {
			return Tool{}, err
		}
		secret := cur.SecretID
		if u.SecretID.Set {
			secret = ""
			if !u.SecretID.Null {
				secret = store.SecretID(strings.ToLower(u.SecretID.Value))
			}
		}
		if err := vault.Link(ctx, tx, act, cur.ProjectID, store.SecretUse{Type: "tool", ID: string(cur.ID), Name: name}, string(secret)); err != nil {
			return Tool{}, err
		}
		t, err := tx.Tools().Replace(ctx, act.Scope, cur.ID, store.ToolWrite{Name: name, Spec: raw, SecretID: secret})
		if err != nil {
			return Tool{}, nameError(err, fault.CodeToolNameTaken, "tool", name)
		}
		if err := au.Record("tool.updated", "tool", string(t.ID), t.ProjectID, map[string]any{"name": t.Name}); err != nil {
			return Tool{}, err
		}
		return ViewTool(t), nil
	})
}

// DeleteTool removes a tool, recording tool.deleted. Definitions naming it are not changed: a
// conversation started after goes on without it (the definition is refused when next saved).
func (s *Service) DeleteTool(ctx context.Context, act app.Actor, id string) (ToolDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (ToolDeleted, error) {
		t, err := tx.Tools().Get(ctx, act.Scope, store.ToolID(id))
		if err != nil {
			return ToolDeleted{}, app.NotFound(err, fault.CodeToolNotFound, "tool", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, t.ProjectID); err != nil {
			return ToolDeleted{}, err
		}
		if err := vault.Unlink(ctx, tx, act, toolUse(t)); err != nil {
			return ToolDeleted{}, err
		}
		if _, err := tx.Tools().Delete(ctx, act.Scope, t.ID); err != nil {
			return ToolDeleted{}, err
		}
		if err := au.Record("tool.deleted", "tool", string(t.ID), t.ProjectID, map[string]any{"name": t.Name}); err != nil {
			return ToolDeleted{}, err
		}
		return ToolDeleted{Object: "tool", ID: string(t.ID), Deleted: true}, nil
	})
}

// ListServers returns a page of the actor's MCP servers, oldest first.
func (s *Service) ListServers(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]McpServer, error) {
	var sf store.ToolFilter
	var err error
	if sf.ProjectID, err = app.FilterProject(ctx, s.Store.Queries, act, f.ProjectID); err != nil {
		return nil, err
	}
	ms, err := s.Store.MCPServers().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]McpServer, len(ms))
	for i, m := range ms {
		out[i] = ViewServer(m)
	}
	return out, nil
}

// GetServer returns the actor's MCP server with id, with its discovered tools, negotiated
// protocol version and last error.
func (s *Service) GetServer(ctx context.Context, act app.Actor, id string) (McpServer, error) {
	m, err := s.Store.MCPServers().Get(ctx, act.Scope, store.MCPServerID(id))
	if err != nil {
		return McpServer{}, app.NotFound(err, fault.CodeMCPServerNotFound, "MCP server", id)
	}
	return ViewServer(m), nil
}

func serverUse(m store.MCPServer) store.SecretUse {
	return store.SecretUse{Type: "mcp_server", ID: string(m.ID), Name: m.Name}
}

// discover lists the server's tools with its secret (resolved in the actor's scope).
func (s *Service) discover(ctx context.Context, act app.Actor, sp ServerSpec, secret string) (store.Discovery, error) {
	var cred *vault.Credential
	if secret != "" {
		sid, err := store.ParseID[store.SecretID](secret)
		if err != nil {
			return store.Discovery{}, fault.E(fault.CodeSecretNotFound, "No vault secret %s is reachable with this key in the project.", app.QuoteID(secret))
		}
		c, err := s.Vault.Resolve(ctx, act.Scope, sid)
		if err != nil {
			return store.Discovery{}, fault.E(fault.CodeSecretNotFound, "No vault secret %s is reachable with this key in the project.", app.QuoteID(secret))
		}
		cred = &c
	}
	if s.MCP == nil {
		return store.Discovery{Tools: json.RawMessage(`[]`), LastError: "this node has no MCP client", At: s.now()}, nil
	}
	d := s.MCP.Discover(ctx, sp.URL, time.Duration(sp.TimeoutMS)*time.Millisecond, cred)
	if d.At.IsZero() {
		d.At = s.now()
	}
	return d, nil
}

func (s *Service) checkServer(ctx context.Context, sp *ServerSpec) error {
	if sp.TimeoutMS == 0 {
		sp.TimeoutMS = int(DefaultTimeout / time.Millisecond)
	}
	if sp.TTLMS == 0 {
		sp.TTLMS = int(DefaultTTL / time.Millisecond)
	}
	if sp.ResultMode == "" {
		sp.ResultMode = "llm"
	}
	if strings.Contains(sp.URL, "{{") {
		return bad(fault.CodeToolURLNotAllowed, "/url", "An MCP server's URL is not a template.")
	}
	for i, n := range sp.AllowedTools {
		if n == "" || len(n) > 128 {
			return bad(fault.CodeValidationFailed, fmt.Sprintf("/allowed_tools/%d", i), "A tool name is 1 to 128 characters.")
		}
	}
	return s.checkURL(ctx, sp.URL, "/url")
}

// CreateServer checks the server, discovers its tools (a failure is kept as last_error) and
// stores it, recording mcp_server.created.
func (s *Service) CreateServer(ctx context.Context, act app.Actor, c McpServerCreate) (McpServer, error) {
	sp := ServerSpec{URL: c.URL, AllowedTools: c.AllowedTools}
	if c.TimeoutMS != nil {
		sp.TimeoutMS = *c.TimeoutMS
	}
	if c.TTLMS != nil {
		sp.TTLMS = *c.TTLMS
	}
	if c.TestSafe != nil {
		sp.TestSafe = *c.TestSafe
	}
	if c.ResultMode != nil {
		sp.ResultMode = *c.ResultMode
	}
	if _, err := app.Project(ctx, s.Store.Queries, act, c.ProjectID); err != nil {
		return McpServer{}, err
	}
	if err := s.checkServer(ctx, &sp); err != nil {
		return McpServer{}, err
	}
	d, err := s.discover(ctx, act, sp, secretOf(c.SecretID))
	if err != nil {
		return McpServer{}, err
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return McpServer{}, err
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (McpServer, error) {
		p, err := app.Project(ctx, tx.Queries, act, c.ProjectID)
		if err != nil {
			return McpServer{}, err
		}
		if err := app.Writable(p); err != nil {
			return McpServer{}, err
		}
		w := store.ToolWrite{ProjectID: p.ID, Name: c.Name, Spec: raw}
		m, err := tx.MCPServers().Create(ctx, act.Scope, w, d)
		if err != nil {
			return McpServer{}, nameError(err, fault.CodeMCPServerNameTaken, "MCP server", c.Name)
		}
		if sid := secretOf(c.SecretID); sid != "" {
			if err := vault.Link(ctx, tx, act, p.ID, serverUse(m), sid); err != nil {
				return McpServer{}, err
			}
			w.SecretID = store.SecretID(strings.ToLower(sid))
			if m, err = tx.MCPServers().Replace(ctx, act.Scope, m.ID, w, nil); err != nil {
				return McpServer{}, err
			}
		}
		if err := au.Record("mcp_server.created", "mcp_server", string(m.ID), m.ProjectID, map[string]any{"name": m.Name, "url": sp.URL}); err != nil {
			return McpServer{}, err
		}
		return ViewServer(m), nil
	})
}

// UpdateServer changes a server; a new URL or secret, or refresh, discovers its tools again.
func (s *Service) UpdateServer(ctx context.Context, act app.Actor, id string, u McpServerUpdate) (McpServer, error) {
	old, err := s.Store.MCPServers().Get(ctx, act.Scope, store.MCPServerID(id))
	if err != nil {
		return McpServer{}, app.NotFound(err, fault.CodeMCPServerNotFound, "MCP server", id)
	}
	sp, _, err := ParseServerSpec(old)
	if err != nil {
		return McpServer{}, err
	}
	name, secret := old.Name, old.SecretID
	refresh := u.Refresh
	if u.Name != nil {
		name = *u.Name
	}
	if u.URL != nil && *u.URL != sp.URL {
		sp.URL, refresh = *u.URL, true
	}
	if u.SecretID.Set {
		secret = ""
		if !u.SecretID.Null {
			secret = store.SecretID(strings.ToLower(u.SecretID.Value))
		}
		refresh = refresh || secret != old.SecretID
	}
	if u.TimeoutMS != nil {
		sp.TimeoutMS = *u.TimeoutMS
	}
	if u.TTLMS != nil {
		sp.TTLMS = *u.TTLMS
	}
	if u.AllowedTools.Set {
		sp.AllowedTools = u.AllowedTools.Value
		if u.AllowedTools.Null {
			sp.AllowedTools = nil
		}
	}
	if u.TestSafe != nil {
		sp.TestSafe = *u.TestSafe
	}
	if u.ResultMode != nil {
		sp.ResultMode = *u.ResultMode
	}
	if err := s.checkServer(ctx, &sp); err != nil {
		return McpServer{}, err
	}
	var d *store.Discovery
	if refresh {
		got, err := s.discover(ctx, act, sp, string(secret))
		if err != nil {
			return McpServer{}, err
		}
		d = &got
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return McpServer{}, err
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (McpServer, error) {
		cur, err := tx.MCPServers().Get(ctx, act.Scope, old.ID)
		if err != nil {
			return McpServer{}, app.NotFound(err, fault.CodeMCPServerNotFound, "MCP server", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, cur.ProjectID); err != nil {
			return McpServer{}, err
		}
		if err := vault.Link(ctx, tx, act, cur.ProjectID, store.SecretUse{Type: "mcp_server", ID: string(cur.ID), Name: name}, string(secret)); err != nil {
			return McpServer{}, err
		}
		m, err := tx.MCPServers().Replace(ctx, act.Scope, cur.ID, store.ToolWrite{Name: name, Spec: raw, SecretID: secret}, d)
		if err != nil {
			return McpServer{}, nameError(err, fault.CodeMCPServerNameTaken, "MCP server", name)
		}
		if err := au.Record("mcp_server.updated", "mcp_server", string(m.ID), m.ProjectID, map[string]any{"name": m.Name, "refreshed": d != nil}); err != nil {
			return McpServer{}, err
		}
		return ViewServer(m), nil
	})
}

// DeleteServer removes a server, recording mcp_server.deleted.
func (s *Service) DeleteServer(ctx context.Context, act app.Actor, id string) (McpServerDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (McpServerDeleted, error) {
		m, err := tx.MCPServers().Get(ctx, act.Scope, store.MCPServerID(id))
		if err != nil {
			return McpServerDeleted{}, app.NotFound(err, fault.CodeMCPServerNotFound, "MCP server", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, m.ProjectID); err != nil {
			return McpServerDeleted{}, err
		}
		if err := vault.Unlink(ctx, tx, act, serverUse(m)); err != nil {
			return McpServerDeleted{}, err
		}
		if _, err := tx.MCPServers().Delete(ctx, act.Scope, m.ID); err != nil {
			return McpServerDeleted{}, err
		}
		if err := au.Record("mcp_server.deleted", "mcp_server", string(m.ID), m.ProjectID, map[string]any{"name": m.Name}); err != nil {
			return McpServerDeleted{}, err
		}
		return McpServerDeleted{Object: "mcp_server", ID: string(m.ID), Deleted: true}, nil
	})
}
