package tools

import (
	"encoding/json"

	"github.com/parley-voice/parley/control/app"
)

// Tool is the Tool object of the interface: an HTTP function tool the agents of its project
// call by name.
type Tool struct {
	Object      string          `json:"object" jsonschema:"enum=tool"`
	ID          string          `json:"id" jsonschema:"format=uuid"`
	ProjectID   string          `json:"project_id" jsonschema:"format=uuid"`
	Name        string          `json:"name" doc:"The function name the LLM calls and agent definitions name in references.tools; unique in the project (ignoring case)."`
	Description string          `json:"description" doc:"What the tool does, for the LLM."`
	Parameters  json.RawMessage `json:"parameters" doc:"JSON Schema (draft 2020-12) of the arguments: an object schema."`
	Request     ToolRequest     `json:"request"`
	SecretID    *string         `json:"secret_id" doc:"The vault secret sent with the request, as its type says; null when none." jsonschema:"format=uuid,nullable"`
	TimeoutMS   int             `json:"timeout_ms" doc:"How long a call may take before it is abandoned (the LLM is told it failed, the caller hears the apology)."`
	Filler      *string         `json:"filler" doc:"Spoken when a call runs past the agent's filler delay (about 1 s); null: the agent's own fillers." jsonschema:"nullable"`
	ResultMode  string          `json:"result_mode" doc:"llm: the result goes back to the LLM, which answers; speak: the result's text is spoken as it is." jsonschema:"enum=llm,enum=speak"`
	Apology     *string         `json:"apology" doc:"Said when a call fails (error, timeout, a bad answer) and nothing else of the turn worked; null: the agent's apology line." jsonschema:"nullable"`
	TestSafe    bool            `json:"test_safe" doc:"Whether conversations of test keys call the real URL; otherwise they get mock_result."`
	MockResult  json.RawMessage `json:"mock_result" doc:"What a test-key conversation gets instead of calling a tool that is not test_safe."`
	CreatedAt   app.Time        `json:"created_at"`
	UpdatedAt   app.Time        `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (Tool) SchemaDoc() string {
	return "An HTTP function tool. The request's url, headers and body are templates: {{name}} is replaced by the argument name, or else the conversation variable name ({{args.name}} and {{vars.name}} choose one). " +
		"A body member whose whole value is one {{…}} takes the value as JSON; without a body, POST, PUT and PATCH send the arguments. The response is read up to 64 KB and must be JSON or text."
}

// ToolRequest is the HTTP request a tool sends.
type ToolRequest struct {
	Method  string            `json:"method" jsonschema:"enum=GET,enum=POST,enum=PUT,enum=PATCH,enum=DELETE"`
	URL     string            `json:"url" doc:"An http or https URL template; its scheme and host are literal (no {{…}}), and must resolve to public addresses (checked when saved and at every call)." jsonschema:"minLength=1,maxLength=2048"`
	Headers map[string]string `json:"headers,omitempty" doc:"Header templates. Credentials come from the secret: Authorization, Proxy-Authorization and Cookie are refused here (422)."`
	Body    json.RawMessage   `json:"body,omitempty" doc:"A JSON template of the body (see Tool)."`
}

// ToolCreate is the body of tool creation.
type ToolCreate struct {
	ProjectID   string          `json:"project_id" jsonschema:"format=uuid"`
	Name        string          `json:"name" jsonschema:"pattern=^[a-zA-Z0-9_-]{1\\,64}$"`
	Description string          `json:"description" jsonschema:"minLength=1,maxLength=1024"`
	Parameters  json.RawMessage `json:"parameters,omitempty" doc:"JSON Schema of the arguments (an object schema); an object with no properties when left out."`
	Request     ToolRequest     `json:"request"`
	SecretID    *string         `json:"secret_id,omitempty" jsonschema:"format=uuid,nullable"`
	TimeoutMS   *int            `json:"timeout_ms,omitempty" doc:"100 to 60000; 8000 when left out." jsonschema:"minimum=100,maximum=60000"`
	Filler      *string         `json:"filler,omitempty" jsonschema:"maxLength=200,nullable"`
	ResultMode  *string         `json:"result_mode,omitempty" doc:"llm when left out." jsonschema:"enum=llm,enum=speak"`
	Apology     *string         `json:"apology,omitempty" jsonschema:"maxLength=300,nullable"`
	TestSafe    *bool           `json:"test_safe,omitempty" doc:"false when left out."`
	MockResult  json.RawMessage `json:"mock_result,omitempty" doc:"{\"mock\": true} when left out."`
}

// SchemaDoc describes the body in the document.
func (ToolCreate) SchemaDoc() string { return "A new HTTP tool." }

// ToolUpdate is the body of a tool's partial update.
type ToolUpdate struct {
	Name        *string           `json:"name,omitempty" jsonschema:"pattern=^[a-zA-Z0-9_-]{1\\,64}$"`
	Description *string           `json:"description,omitempty" jsonschema:"minLength=1,maxLength=1024"`
	Parameters  json.RawMessage   `json:"parameters,omitempty"`
	Request     *ToolRequest      `json:"request,omitempty" doc:"Replaces the whole request."`
	SecretID    app.Patch[string] `json:"secret_id,omitzero" doc:"null: no secret." jsonschema:"format=uuid,nullable"`
	TimeoutMS   *int              `json:"timeout_ms,omitempty" jsonschema:"minimum=100,maximum=60000"`
	Filler      app.Patch[string] `json:"filler,omitzero" jsonschema:"maxLength=200,nullable"`
	ResultMode  *string           `json:"result_mode,omitempty" jsonschema:"enum=llm,enum=speak"`
	Apology     app.Patch[string] `json:"apology,omitzero" jsonschema:"maxLength=300,nullable"`
	TestSafe    *bool             `json:"test_safe,omitempty"`
	MockResult  json.RawMessage   `json:"mock_result,omitempty"`
}

// SchemaExtras: the body names at least one member.
func (ToolUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// SchemaDoc describes the body in the document.
func (ToolUpdate) SchemaDoc() string {
	return "Members left out are left as they are; conversations already running keep the tool as it was when they started."
}

// ToolDeleted is the answer of tool deletion.
type ToolDeleted struct {
	Object  string `json:"object" jsonschema:"enum=tool"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaExtras: deleted is the constant true.
func (ToolDeleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object": map[string]any{"const": "tool"}, "id": map[string]any{"type": "string", "format": "uuid"}, "deleted": map[string]any{"const": true},
	}}
}

// McpServer is the McpServer object of the interface.
type McpServer struct {
	Object          string    `json:"object" jsonschema:"enum=mcp_server"`
	ID              string    `json:"id" jsonschema:"format=uuid"`
	ProjectID       string    `json:"project_id" jsonschema:"format=uuid"`
	Name            string    `json:"name" doc:"Unique in the project; references.tools may name the server (all its allowed tools), or server.tool."`
	URL             string    `json:"url" doc:"The Streamable HTTP endpoint."`
	SecretID        *string   `json:"secret_id" jsonschema:"format=uuid,nullable"`
	TimeoutMS       int       `json:"timeout_ms"`
	TTLMS           int       `json:"ttl_ms" doc:"How long the discovered tool list is kept before it is fetched again (also on notifications/tools/list_changed); never inside a turn."`
	AllowedTools    []string  `json:"allowed_tools" doc:"The tools agents may call; null: every tool the server lists." jsonschema:"nullable"`
	TestSafe        bool      `json:"test_safe" doc:"Whether test-key conversations call the server; otherwise they get {\"mock\": true}."`
	ResultMode      string    `json:"result_mode" doc:"llm: its tools' results go back to the LLM; speak: their text is spoken as it is." jsonschema:"enum=llm,enum=speak"`
	Tools           []McpTool `json:"tools" doc:"The tools discovered at the last refresh."`
	ProtocolVersion *string   `json:"protocol_version" doc:"The MCP protocol version negotiated at the last refresh." jsonschema:"nullable"`
	LastError       *string   `json:"last_error" doc:"Why the last refresh failed (unreachable, unknown protocol version, malformed JSON-RPC); null when it worked. Conversations go on without the server's tools." jsonschema:"nullable"`
	RefreshedAt     *app.Time `json:"refreshed_at" jsonschema:"nullable"`
	CreatedAt       app.Time  `json:"created_at"`
	UpdatedAt       app.Time  `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (McpServer) SchemaDoc() string {
	return "An MCP server reached over Streamable HTTP. Its tool list is fetched when it is saved and refreshed on ttl_ms or tools/list_changed, never inside a turn."
}

// McpTool is one tool an MCP server lists.
type McpTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Allowed     bool            `json:"allowed" doc:"Whether agents may call it (allowed_tools)."`
}

// McpServerCreate is the body of server creation.
type McpServerCreate struct {
	ProjectID    string   `json:"project_id" jsonschema:"format=uuid"`
	Name         string   `json:"name" jsonschema:"pattern=^[a-zA-Z0-9_-]{1\\,64}$"`
	URL          string   `json:"url" doc:"http or https; must resolve to public addresses." jsonschema:"minLength=1,maxLength=2048"`
	SecretID     *string  `json:"secret_id,omitempty" jsonschema:"format=uuid,nullable"`
	TimeoutMS    *int     `json:"timeout_ms,omitempty" doc:"100 to 60000; 8000 when left out." jsonschema:"minimum=100,maximum=60000"`
	TTLMS        *int     `json:"ttl_ms,omitempty" doc:"60000 to 604800000; 3600000 when left out." jsonschema:"minimum=60000,maximum=604800000"`
	AllowedTools []string `json:"allowed_tools,omitempty" jsonschema:"nullable,maxItems=128"`
	TestSafe     *bool    `json:"test_safe,omitempty"`
	ResultMode   *string  `json:"result_mode,omitempty" doc:"llm when left out." jsonschema:"enum=llm,enum=speak"`
}

// SchemaDoc describes the body in the document.
func (McpServerCreate) SchemaDoc() string {
	return "A new MCP server; its tools are discovered before the answer."
}

// McpServerUpdate is the body of a server's partial update.
type McpServerUpdate struct {
	Name         *string             `json:"name,omitempty" jsonschema:"pattern=^[a-zA-Z0-9_-]{1\\,64}$"`
	URL          *string             `json:"url,omitempty" jsonschema:"minLength=1,maxLength=2048"`
	SecretID     app.Patch[string]   `json:"secret_id,omitzero" jsonschema:"format=uuid,nullable"`
	TimeoutMS    *int                `json:"timeout_ms,omitempty" jsonschema:"minimum=100,maximum=60000"`
	TTLMS        *int                `json:"ttl_ms,omitempty" jsonschema:"minimum=60000,maximum=604800000"`
	AllowedTools app.Patch[[]string] `json:"allowed_tools,omitzero" jsonschema:"nullable"`
	TestSafe     *bool               `json:"test_safe,omitempty"`
	ResultMode   *string             `json:"result_mode,omitempty" jsonschema:"enum=llm,enum=speak"`
	Refresh      bool                `json:"refresh,omitempty" doc:"Fetch the tool list again even if nothing else changed."`
}

// SchemaExtras: the body names at least one member.
func (McpServerUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// SchemaDoc describes the body in the document.
func (McpServerUpdate) SchemaDoc() string {
	return "Members left out are left as they are. A new url or secret, or refresh: true, fetches the tool list again before the answer."
}

// McpServerDeleted is the answer of server deletion.
type McpServerDeleted struct {
	Object  string `json:"object" jsonschema:"enum=mcp_server"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaExtras: deleted is the constant true.
func (McpServerDeleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object": map[string]any{"const": "mcp_server"}, "id": map[string]any{"type": "string", "format": "uuid"}, "deleted": map[string]any{"const": true},
	}}
}

// Filter narrows a list.
type Filter struct {
	ProjectID string
}
