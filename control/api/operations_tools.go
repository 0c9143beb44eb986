package api

import (
	"context"
	"net/http"

	"github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/fault"
)

// toolOperations are the operations of HTTP tools and MCP servers (issue 17).
func toolOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "listTools", Method: http.MethodGet, Path: "/tools", Tag: "Tools",
			Summary:    "List the HTTP tools of the projects the key reaches, oldest first",
			Permission: "tools:read",
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listTools),
		typed(operation{
			ID: "createTool", Method: http.MethodPost, Path: "/tools", Tag: "Tools",
			Summary: "Create an HTTP function tool",
			Description: "parameters must be a JSON Schema of an object (422 invalid_tool_parameters with the pointer); the URL must be http(s) with a literal host resolving to public addresses (422 tool_url_not_allowed), checked again at every call. " +
				"The secret (a vault secret of the same project) is applied as its type says. Test-key conversations call the real URL only when test_safe; otherwise they get mock_result. Takes an optional Idempotency-Key.",
			Permission: "tools:write", Changes: true, Idempotency: idemOptional,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeToolNameTaken, fault.CodeInvalidToolSchema, fault.CodeToolURLNotAllowed, fault.CodeSecretNotFound},
			Status: http.StatusCreated,
		}, (*API).createTool),
		typed(operation{
			ID: "getTool", Method: http.MethodGet, Path: "/tools/{tool_id}", Tag: "Tools",
			Summary:    "Get an HTTP tool",
			Permission: "tools:read",
			Codes:      []string{fault.CodeToolNotFound},
			Status:     http.StatusOK,
		}, (*API).getTool),
		typed(operation{
			ID: "updateTool", Method: http.MethodPatch, Path: "/tools/{tool_id}", Tag: "Tools",
			Summary:    "Change an HTTP tool",
			Permission: "tools:write", Changes: true,
			Codes:  []string{fault.CodeToolNotFound, fault.CodeProjectFrozen, fault.CodeToolNameTaken, fault.CodeInvalidToolSchema, fault.CodeToolURLNotAllowed, fault.CodeSecretNotFound},
			Status: http.StatusOK,
		}, (*API).updateTool),
		typed(operation{
			ID: "deleteTool", Method: http.MethodDelete, Path: "/tools/{tool_id}", Tag: "Tools",
			Summary:     "Delete an HTTP tool",
			Description: "Definitions that name it keep the name; conversations started afterwards go on without the tool, and the definition is refused (422 unknown_tool_reference) when next saved.",
			Permission:  "tools:write", Changes: true,
			Codes:  []string{fault.CodeToolNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteTool),
		typed(operation{
			ID: "listMcpServers", Method: http.MethodGet, Path: "/mcp-servers", Tag: "MCP servers",
			Summary:    "List the MCP servers of the projects the key reaches, oldest first",
			Permission: "mcp:read",
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listMcpServers),
		typed(operation{
			ID: "createMcpServer", Method: http.MethodPost, Path: "/mcp-servers", Tag: "MCP servers",
			Summary: "Add an MCP server; its tools are discovered before the answer",
			Description: "Parley connects over Streamable HTTP (the current stateless revision or the earlier session-based ones, as the server speaks), lists the tools and keeps them. " +
				"A server that cannot be reached, speaks an unknown version or answers malformed JSON-RPC is saved all the same with last_error; conversations go on without its tools. Takes an optional Idempotency-Key.",
			Permission: "mcp:write", Changes: true, Idempotency: idemOptional,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeMCPServerNameTaken, fault.CodeToolURLNotAllowed, fault.CodeSecretNotFound},
			Status: http.StatusCreated,
		}, (*API).createMcpServer),
		typed(operation{
			ID: "getMcpServer", Method: http.MethodGet, Path: "/mcp-servers/{server_id}", Tag: "MCP servers",
			Summary:    "Get an MCP server with its discovered tools, negotiated protocol version and last error",
			Permission: "mcp:read",
			Codes:      []string{fault.CodeMCPServerNotFound},
			Status:     http.StatusOK,
		}, (*API).getMcpServer),
		typed(operation{
			ID: "updateMcpServer", Method: http.MethodPatch, Path: "/mcp-servers/{server_id}", Tag: "MCP servers",
			Summary:    "Change an MCP server, or refresh its tool list",
			Permission: "mcp:write", Changes: true,
			Codes:  []string{fault.CodeMCPServerNotFound, fault.CodeProjectFrozen, fault.CodeMCPServerNameTaken, fault.CodeToolURLNotAllowed, fault.CodeSecretNotFound},
			Status: http.StatusOK,
		}, (*API).updateMcpServer),
		typed(operation{
			ID: "deleteMcpServer", Method: http.MethodDelete, Path: "/mcp-servers/{server_id}", Tag: "MCP servers",
			Summary:    "Delete an MCP server",
			Permission: "mcp:write", Changes: true,
			Codes:  []string{fault.CodeMCPServerNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteMcpServer),
	}
}

type listToolsIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid" doc:"Only this project's; 404 when the key reaches no such project."`
}

func (a *API) listTools(ctx context.Context, c *call, in *listToolsIn) (*list[tools.Tool], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ts, err := a.Tools.ListTools(ctx, c.actor(ctx), tools.Filter{ProjectID: in.ProjectID}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ts, func(t tools.Tool) string { return t.ID }), nil
}

type createToolIn struct {
	Body tools.ToolCreate `body:"required"`
}

func (a *API) createTool(ctx context.Context, c *call, in *createToolIn) (*tools.Tool, error) {
	t, err := a.Tools.CreateTool(ctx, c.actor(ctx), in.Body)
	return &t, err
}

type toolIn struct {
	ID string `path:"tool_id" format:"uuid" doc:"The tool."`
}

func (a *API) getTool(ctx context.Context, c *call, in *toolIn) (*tools.Tool, error) {
	t, err := a.Tools.GetTool(ctx, c.actor(ctx), in.ID)
	return &t, err
}

type updateToolIn struct {
	ID   string           `path:"tool_id" format:"uuid" doc:"The tool."`
	Body tools.ToolUpdate `body:"required"`
}

func (a *API) updateTool(ctx context.Context, c *call, in *updateToolIn) (*tools.Tool, error) {
	t, err := a.Tools.UpdateTool(ctx, c.actor(ctx), in.ID, in.Body)
	return &t, err
}

func (a *API) deleteTool(ctx context.Context, c *call, in *toolIn) (*tools.ToolDeleted, error) {
	t, err := a.Tools.DeleteTool(ctx, c.actor(ctx), in.ID)
	return &t, err
}

func (a *API) listMcpServers(ctx context.Context, c *call, in *listToolsIn) (*list[tools.McpServer], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ms, err := a.Tools.ListServers(ctx, c.actor(ctx), tools.Filter{ProjectID: in.ProjectID}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ms, func(m tools.McpServer) string { return m.ID }), nil
}

type createMcpServerIn struct {
	Body tools.McpServerCreate `body:"required"`
}

func (a *API) createMcpServer(ctx context.Context, c *call, in *createMcpServerIn) (*tools.McpServer, error) {
	m, err := a.Tools.CreateServer(ctx, c.actor(ctx), in.Body)
	return &m, err
}

type mcpServerIn struct {
	ID string `path:"server_id" format:"uuid" doc:"The MCP server."`
}

func (a *API) getMcpServer(ctx context.Context, c *call, in *mcpServerIn) (*tools.McpServer, error) {
	m, err := a.Tools.GetServer(ctx, c.actor(ctx), in.ID)
	return &m, err
}

type updateMcpServerIn struct {
	ID   string                `path:"server_id" format:"uuid" doc:"The MCP server."`
	Body tools.McpServerUpdate `body:"required"`
}

func (a *API) updateMcpServer(ctx context.Context, c *call, in *updateMcpServerIn) (*tools.McpServer, error) {
	m, err := a.Tools.UpdateServer(ctx, c.actor(ctx), in.ID, in.Body)
	return &m, err
}

func (a *API) deleteMcpServer(ctx context.Context, c *call, in *mcpServerIn) (*tools.McpServerDeleted, error) {
	m, err := a.Tools.DeleteServer(ctx, c.actor(ctx), in.ID)
	return &m, err
}
