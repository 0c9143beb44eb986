package store

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ToolID names an HTTP tool; MCPServerID an MCP server.
type (
	ToolID      string
	MCPServerID string
)

// ToolNamePattern is what tool and MCP server names look like: the function names LLM
// providers accept.
var ToolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Tool is an HTTP function tool of a project. Its definition (request template, schema,
// timeout, filler, mode, mock result) is kept as one JSON document the domain reads; the store
// keeps the name unique in the project and the vault secret it uses.
type Tool struct {
	ID        ToolID
	OrgID     OrgID
	ProjectID ProjectID
	Name      string
	Spec      json.RawMessage
	SecretID  SecretID // "" when none
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MCPServer is an MCP server of a project, with the tools discovered when it was saved or
// last refreshed.
type MCPServer struct {
	ID              MCPServerID
	OrgID           OrgID
	ProjectID       ProjectID
	Name            string
	Spec            json.RawMessage
	SecretID        SecretID
	Discovered      json.RawMessage // the tool list (a JSON array)
	ProtocolVersion string
	LastError       string
	RefreshedAt     *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// ToolWrite is what a tool or server is saved with (all of it: updates replace).
type ToolWrite struct {
	ProjectID ProjectID // on create
	Name      string
	Spec      json.RawMessage
	SecretID  SecretID
}

// Discovery is the outcome of listing an MCP server's tools.
type Discovery struct {
	Tools           json.RawMessage
	ProtocolVersion string
	LastError       string // "" when the listing worked
	At              time.Time
}

// ToolFilter narrows a list of tools or servers.
type ToolFilter struct {
	ProjectID ProjectID
	Names     []string // only these names (compared ignoring case)
}

func checkToolWrite(what string, w ToolWrite) error {
	if !ToolNamePattern.MatchString(w.Name) {
		return fmt.Errorf("store: %w: a %s name is 1 to 64 letters, digits, _ or -", ErrInvalid, what)
	}
	if !json.Valid(w.Spec) {
		return fmt.Errorf("store: %w: the %s's definition is not JSON", ErrInvalid, what)
	}
	return nil
}

const toolCols = `id, org_id, project_id, name, spec, secret_id, created_at, updated_at`

func scanTool(r rowScanner) (Tool, error) {
	var t Tool
	err := r.Scan(&t.ID, &t.OrgID, &t.ProjectID, &t.Name, jsonCol{&t.Spec}, nullTextCol[SecretID]{&t.SecretID}, timeCol{&t.CreatedAt}, timeCol{&t.UpdatedAt})
	return t, err
}

const mcpCols = `id, org_id, project_id, name, spec, secret_id, discovered, protocol_version, last_error, refreshed_at, created_at, updated_at`

func scanMCP(r rowScanner) (MCPServer, error) {
	var m MCPServer
	err := r.Scan(&m.ID, &m.OrgID, &m.ProjectID, &m.Name, jsonCol{&m.Spec}, nullTextCol[SecretID]{&m.SecretID}, jsonCol{&m.Discovered},
		&m.ProtocolVersion, &m.LastError, nullTimeCol{&m.RefreshedAt}, timeCol{&m.CreatedAt}, timeCol{&m.UpdatedAt})
	return m, err
}

// names adds a filter on name_key.
func (b *sel) names(names []string) *sel {
	if names == nil {
		return b
	}
	if len(names) == 0 {
		b.empty = true
		return b
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = nameKey(n)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	return b.oneOf("name_key", keys)
}

// Tools is the repository of HTTP tools.
type Tools struct{ q *Queries }

// Tools returns the tool repository.
func (q *Queries) Tools() Tools { return Tools{q} }

func scopedTools(sc Scope) *sel {
	return newSel(`SELECT `+toolCols+` FROM tools`).scope(sc, "org_id", "project_id", "")
}

// Get returns the scope's tool with id, or ErrNotFound.
func (r Tools) Get(ctx context.Context, sc Scope, id ToolID) (Tool, error) {
	return one(ctx, r.q, "get tool", scopedTools(sc).id("id", string(id)), scanTool)
}

// List returns the scope's tools that f selects, oldest first, with one more when another page follows.
func (r Tools) List(ctx context.Context, sc Scope, f ToolFilter, pg Page) ([]Tool, error) {
	b := scopedTools(sc).optID("project_id", string(f.ProjectID)).names(f.Names)
	return many(ctx, r.q, "list tools", b, b.page("id", pg, false), scanTool)
}

// Create stores a tool in a project the scope reaches (ErrNotFound otherwise); a name the
// project's tools have is ErrConflict.
func (r Tools) Create(ctx context.Context, sc Scope, w ToolWrite) (Tool, error) {
	if err := checkToolWrite("tool", w); err != nil {
		return Tool{}, err
	}
	var t Tool
	err := r.q.atomic(ctx, func(q *Queries) error {
		p, err := q.Projects().Get(ctx, sc, w.ProjectID)
		if err != nil {
			return err
		}
		now := q.s.timeNow()
		t = Tool{ID: newID[ToolID](), OrgID: p.OrgID, ProjectID: p.ID, Name: w.Name, Spec: slices.Clone(w.Spec), SecretID: w.SecretID, CreatedAt: now, UpdatedAt: now}
		_, err = q.exec(ctx, "create tool",
			`INSERT INTO tools (id, org_id, project_id, name, name_key, spec, secret_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			string(t.ID), string(t.OrgID), string(t.ProjectID), t.Name, nameKey(t.Name), string(t.Spec), nullText(t.SecretID), ts(now), ts(now))
		return err
	})
	return t, err
}

// Replace saves w as the scope's tool id and returns it.
func (r Tools) Replace(ctx context.Context, sc Scope, id ToolID, w ToolWrite) (Tool, error) {
	if err := checkToolWrite("tool", w); err != nil {
		return Tool{}, err
	}
	var t Tool
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if t, err = q.Tools().Get(ctx, sc, id); err != nil {
			return err
		}
		t.Name, t.Spec, t.SecretID, t.UpdatedAt = w.Name, slices.Clone(w.Spec), w.SecretID, q.s.timeNow()
		res, err := q.exec(ctx, "change tool", `UPDATE tools SET name = $2, name_key = $3, spec = $4, secret_id = $5, updated_at = $6 WHERE id = $1`,
			string(t.ID), t.Name, nameKey(t.Name), string(t.Spec), nullText(t.SecretID), ts(t.UpdatedAt))
		return affectedOne(res, err, "tool", id)
	})
	return t, err
}

// Delete removes the scope's tool and returns it.
func (r Tools) Delete(ctx context.Context, sc Scope, id ToolID) (Tool, error) {
	var t Tool
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if t, err = q.Tools().Get(ctx, sc, id); err != nil {
			return err
		}
		res, err := q.exec(ctx, "delete tool", `DELETE FROM tools WHERE id = $1`, string(id))
		return affectedOne(res, err, "tool", id)
	})
	return t, err
}

// MCPServers is the repository of MCP servers.
type MCPServers struct{ q *Queries }

// MCPServers returns the MCP server repository.
func (q *Queries) MCPServers() MCPServers { return MCPServers{q} }

func scopedMCP(sc Scope) *sel {
	return newSel(`SELECT `+mcpCols+` FROM mcp_servers`).scope(sc, "org_id", "project_id", "")
}

// Get returns the scope's server with id, or ErrNotFound.
func (r MCPServers) Get(ctx context.Context, sc Scope, id MCPServerID) (MCPServer, error) {
	return one(ctx, r.q, "get MCP server", scopedMCP(sc).id("id", string(id)), scanMCP)
}

// List returns the scope's servers that f selects, oldest first, with one more when another page follows.
func (r MCPServers) List(ctx context.Context, sc Scope, f ToolFilter, pg Page) ([]MCPServer, error) {
	b := scopedMCP(sc).optID("project_id", string(f.ProjectID)).names(f.Names)
	return many(ctx, r.q, "list MCP servers", b, b.page("id", pg, false), scanMCP)
}

func discoveredJSON(d Discovery) string {
	if len(d.Tools) == 0 || !json.Valid(d.Tools) {
		return "[]"
	}
	return string(d.Tools)
}

// Create stores a server with its first discovery in a project the scope reaches.
func (r MCPServers) Create(ctx context.Context, sc Scope, w ToolWrite, d Discovery) (MCPServer, error) {
	if err := checkToolWrite("MCP server", w); err != nil {
		return MCPServer{}, err
	}
	var m MCPServer
	err := r.q.atomic(ctx, func(q *Queries) error {
		p, err := q.Projects().Get(ctx, sc, w.ProjectID)
		if err != nil {
			return err
		}
		now := q.s.timeNow()
		at := normTime(d.At)
		m = MCPServer{ID: newID[MCPServerID](), OrgID: p.OrgID, ProjectID: p.ID, Name: w.Name, Spec: slices.Clone(w.Spec), SecretID: w.SecretID,
			Discovered: json.RawMessage(discoveredJSON(d)), ProtocolVersion: d.ProtocolVersion, LastError: d.LastError, RefreshedAt: &at, CreatedAt: now, UpdatedAt: now}
		_, err = q.exec(ctx, "create MCP server",
			`INSERT INTO mcp_servers (id, org_id, project_id, name, name_key, spec, secret_id, discovered, protocol_version, last_error, refreshed_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			string(m.ID), string(m.OrgID), string(m.ProjectID), m.Name, nameKey(m.Name), string(m.Spec), nullText(m.SecretID),
			string(m.Discovered), m.ProtocolVersion, m.LastError, ts(at), ts(now), ts(now))
		return err
	})
	return m, err
}

// Replace saves w (and, when d is not nil, a new discovery) as the scope's server id.
func (r MCPServers) Replace(ctx context.Context, sc Scope, id MCPServerID, w ToolWrite, d *Discovery) (MCPServer, error) {
	if err := checkToolWrite("MCP server", w); err != nil {
		return MCPServer{}, err
	}
	var m MCPServer
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if m, err = q.MCPServers().Get(ctx, sc, id); err != nil {
			return err
		}
		m.Name, m.Spec, m.SecretID, m.UpdatedAt = w.Name, slices.Clone(w.Spec), w.SecretID, q.s.timeNow()
		if d != nil {
			at := normTime(d.At)
			m.Discovered, m.ProtocolVersion, m.LastError, m.RefreshedAt = json.RawMessage(discoveredJSON(*d)), d.ProtocolVersion, d.LastError, &at
		}
		res, err := q.exec(ctx, "change MCP server",
			`UPDATE mcp_servers SET name = $2, name_key = $3, spec = $4, secret_id = $5, discovered = $6, protocol_version = $7, last_error = $8, refreshed_at = $9, updated_at = $10 WHERE id = $1`,
			string(m.ID), m.Name, nameKey(m.Name), string(m.Spec), nullText(m.SecretID), string(m.Discovered), m.ProtocolVersion, m.LastError,
			nullTS(m.RefreshedAt), ts(m.UpdatedAt))
		return affectedOne(res, err, "MCP server", id)
	})
	return m, err
}

// Delete removes the scope's server and returns it.
func (r MCPServers) Delete(ctx context.Context, sc Scope, id MCPServerID) (MCPServer, error) {
	var m MCPServer
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if m, err = q.MCPServers().Get(ctx, sc, id); err != nil {
			return err
		}
		res, err := q.exec(ctx, "delete MCP server", `DELETE FROM mcp_servers WHERE id = $1`, string(id))
		return affectedOne(res, err, "MCP server", id)
	})
	return m, err
}

// SetDiscovery records a refresh of the server's tool list (the system's: any organization).
// A server changed since (updatedAt differs) is left alone: its own save discovered anew.
func (q *Queries) SetDiscovery(ctx context.Context, id MCPServerID, updatedAt time.Time, d Discovery) error {
	_, err := q.exec(ctx, "refresh MCP server",
		`UPDATE mcp_servers SET discovered = $2, protocol_version = $3, last_error = $4, refreshed_at = $5 WHERE id = $1 AND updated_at = $6`,
		string(id), discoveredJSON(d), d.ProtocolVersion, d.LastError, ts(normTime(d.At)), ts(updatedAt))
	return err
}

// MCPServersRefreshedBefore lists up to limit servers (of any organization) last refreshed
// before t, the stalest first.
func (q *Queries) MCPServersRefreshedBefore(ctx context.Context, t time.Time, limit int) ([]MCPServer, error) {
	return list(ctx, q, "list stale MCP servers",
		`SELECT `+mcpCols+` FROM mcp_servers WHERE refreshed_at IS NULL OR refreshed_at < $1 ORDER BY refreshed_at LIMIT $2`,
		[]any{ts(t), clampLimit(limit)}, scanMCP)
}

// ToolCall is the record of one tool call of a conversation.
type ToolCall struct {
	OrgID          OrgID
	ConversationID ConversationID
	ToolName       string
	Kind           string          // http or mcp
	Arguments      json.RawMessage // secrets redacted
	Status         string          // ok, error, timeout, cancelled, mock
	Duration       time.Duration
	ResultBytes    int
	Error          string
	At             time.Time
}

// InsertToolCall records a tool call.
func (q *Queries) InsertToolCall(ctx context.Context, c ToolCall) error {
	args := "{}"
	if len(c.Arguments) > 0 && json.Valid(c.Arguments) {
		args = string(c.Arguments)
	}
	kind := c.Kind
	if kind != "mcp" {
		kind = "http"
	}
	if len(c.Error) > 1000 {
		c.Error = c.Error[:1000]
	}
	_, err := q.exec(ctx, "record tool call",
		`INSERT INTO tool_calls (id, org_id, conversation_id, tool_name, kind, arguments, status, duration_ms, result_bytes, error, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		string(newID[ToolID]()), string(c.OrgID), string(c.ConversationID), c.ToolName, kind, args, c.Status,
		c.Duration.Milliseconds(), c.ResultBytes, strings.ToValidUTF8(c.Error, ""), ts(c.At))
	return err
}

// ToolCalls returns the tool calls of a conversation of the scope, oldest first.
func (q *Queries) ToolCalls(ctx context.Context, org OrgID, conv ConversationID) ([]ToolCall, error) {
	return list(ctx, q, "list tool calls",
		`SELECT org_id, conversation_id, tool_name, kind, arguments, status, duration_ms, result_bytes, error, created_at FROM tool_calls
		WHERE org_id = $1 AND conversation_id = $2 ORDER BY id`, []any{string(org), string(conv)},
		func(r rowScanner) (ToolCall, error) {
			var c ToolCall
			var ms int64
			err := r.Scan(&c.OrgID, &c.ConversationID, &c.ToolName, &c.Kind, jsonCol{&c.Arguments}, &c.Status, &ms, &c.ResultBytes, &c.Error, timeCol{&c.At})
			c.Duration = time.Duration(ms) * time.Millisecond
			return c, err
		})
}

// MCPServersByID returns the server with id in any organization (the system's refresher), or ErrNotFound.
func (q *Queries) MCPServersByID(ctx context.Context, id MCPServerID) (MCPServer, error) {
	if !validID(id) {
		return MCPServer{}, notFound("MCP server", id)
	}
	var m MCPServer
	err := q.get(ctx, "get MCP server", `SELECT `+mcpCols+` FROM mcp_servers WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { m, err = scanMCP(r); return err })
	return m, err
}
