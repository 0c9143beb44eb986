package tools

import (
	"context"
	"strings"

	"github.com/parley-voice/parley/control/store"
)

// Resolved is what an agent definition's references.tools name in a project: HTTP tools and
// MCP tools (with their server).
type Resolved struct {
	Tools []store.Tool
	MCP   []MCPTool
	// Unknown are the indexes of the names that resolve to nothing.
	Unknown []int
}

// MCPTool is one tool of an MCP server an agent may call.
type MCPTool struct {
	Server store.MCPServer
	Spec   ServerSpec
	Tool   DiscoveredTool
}

// Resolve resolves names in project p (of organization org): each is an HTTP tool's name, an MCP
// server's name (all its allowed, discovered tools), or "server.tool", or a tool name one of the
// project's servers lists and allows. Names compare ignoring case. A name that resolves to
// nothing is in Unknown. It reads the tool lists discovered when the servers were saved: it
// never reaches a server.
func Resolve(ctx context.Context, q *store.Queries, org store.OrgID, p store.ProjectID, names []string) (Resolved, error) {
	var out Resolved
	if len(names) == 0 {
		return out, nil
	}
	sc := store.Scope{Org: org, Projects: []store.ProjectID{p}}
	ts, err := q.Tools().List(ctx, sc, store.ToolFilter{ProjectID: p}, store.Page{Limit: 1000})
	if err != nil {
		return out, err
	}
	ms, err := q.MCPServers().List(ctx, sc, store.ToolFilter{ProjectID: p}, store.Page{Limit: 1000})
	if err != nil {
		return out, err
	}
	type server struct {
		m     store.MCPServer
		spec  ServerSpec
		tools []DiscoveredTool
	}
	servers := make([]server, 0, len(ms))
	for _, m := range ms {
		sp, dt, err := ParseServerSpec(m)
		if err != nil {
			continue
		}
		servers = append(servers, server{m, sp, dt})
	}
	seenTool := map[store.ToolID]bool{}
	seenMCP := map[string]bool{}
	addMCP := func(s server, t DiscoveredTool) {
		k := string(s.m.ID) + "\x00" + t.Name
		if !seenMCP[k] {
			seenMCP[k] = true
			out.MCP = append(out.MCP, MCPTool{Server: s.m, Spec: s.spec, Tool: t})
		}
	}
	for i, n := range names {
		found := false
		for _, t := range ts {
			if strings.EqualFold(t.Name, n) {
				found = true
				if !seenTool[t.ID] {
					seenTool[t.ID] = true
					out.Tools = append(out.Tools, t)
				}
			}
		}
		srv, tool, dotted := strings.Cut(n, ".")
		for _, s := range servers {
			switch {
			case !dotted && strings.EqualFold(s.m.Name, n):
				// The whole server: its allowed tools (none yet when it could not be reached;
				// the name still resolves, and the conversation goes on without them).
				found = true
				for _, t := range s.tools {
					if s.spec.Allows(t.Name) {
						addMCP(s, t)
					}
				}
			case dotted && strings.EqualFold(s.m.Name, srv):
				for _, t := range s.tools {
					if t.Name == tool && s.spec.Allows(t.Name) {
						found = true
						addMCP(s, t)
					}
				}
			case !dotted && !found:
				for _, t := range s.tools {
					if t.Name == n && s.spec.Allows(t.Name) {
						found = true
						addMCP(s, t)
					}
				}
			}
		}
		if !found {
			out.Unknown = append(out.Unknown, i)
		}
	}
	return out, nil
}
