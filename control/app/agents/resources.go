package agents

import (
	"encoding/json"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/numbers"
)

// The resource types of agents in the interface. The transport reflects their schemas into the
// OpenAPI document (see control/api/schema.go for the tags). The definition document itself is
// not reflected: its schema is agentdef's hand-written JSON Schema (service.agent/1), which the
// types below refer to by component name (SchemaRef).

// Agent is the Agent object of the interface (the members every agent answer has).
type Agent struct {
	Object      string    `json:"object" jsonschema:"enum=agent"`
	ID          string    `json:"id" jsonschema:"format=uuid"`
	ProjectID   string    `json:"project_id" jsonschema:"format=uuid"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Kind        string    `json:"kind" jsonschema:"enum=form_filling,enum=workflow,enum=faq,enum=custom,enum=desk"`
	Direction   string    `json:"direction" jsonschema:"enum=inbound,enum=outbound"`
	Status      string    `json:"status" doc:"draft until first published; published once a version is published; archived once deleted (a deleted agent is not served by the API and is purged at purges_at)." jsonschema:"enum=draft,enum=published,enum=archived"`
	Channels    []string  `json:"channels" jsonschema:"enum=voice,enum=chat,enum=phone,enum=whatsapp"`
	PublishedAt *app.Time `json:"published_at" jsonschema:"nullable"`
	CreatedAt   app.Time  `json:"created_at"`
	UpdatedAt   app.Time  `json:"updated_at"`
}

// AgentDetail is the AgentDetail object: the agent with its languages, schemas and numbers.
type AgentDetail struct {
	Agent
	Languages       Languages             `json:"languages"`
	VariablesSchema VariablesSchema       `json:"variables_schema"`
	CollectedSchema JSONSchemaObject      `json:"collected_schema"`
	AnalysisEnabled bool                  `json:"analysis_enabled"`
	AnalysisSchema  JSONSchemaObject      `json:"analysis_schema"`
	PhoneNumbers    []numbers.PhoneNumber `json:"phone_numbers" doc:"The numbers the agent answers or calls from, in the order a call picks from when it names none (the earliest assigned first)."`
}

// AgentWritten is the AgentWritten object: the agent as it is after a write.
type AgentWritten struct {
	AgentDetail
}

// SchemaDoc describes the object in the document.
func (AgentWritten) SchemaDoc() string { return "The agent as it is after the write." }

// Languages is the agent's language versions.
type Languages struct {
	Object    string   `json:"object" jsonschema:"enum=languages"`
	Default   string   `json:"default" doc:"The language used when a conversation names none."`
	Available []string `json:"available" doc:"Every language version, the default first."`
}

// SchemaDoc describes the object in the document.
func (Languages) SchemaDoc() string {
	return "The agent's language versions: short language codes a conversation can take as language."
}

// VariablesSchema is the JSON Schema of the variables a conversation of the agent starts with
// (agentdef.Definition.VariablesSchema).
type VariablesSchema map[string]any

// SchemaDoc describes the schema in the document.
func (VariablesSchema) SchemaDoc() string {
	return "A JSON Schema (draft 2020-12) of the variables object a conversation can start with, derived from the {{placeholders}} of the agent's texts: one property per variable (text, number or true/false), required listing those some marker needs without a fallback, no other variables. version changes exactly when the set of variable names changes."
}

// SchemaExtras says what a map's reflection cannot: the members the schema always has.
func (VariablesSchema) SchemaExtras() map[string]any {
	return map[string]any{
		"required": []any{"type", "properties", "required", "additionalProperties", "version"},
		"properties": map[string]any{
			"version":              map[string]any{"type": "string"},
			"type":                 map[string]any{"const": "object"},
			"properties":           map[string]any{"type": "object"},
			"required":             map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"additionalProperties": map[string]any{"const": false},
		},
		"additionalProperties": true,
	}
}

// JSONSchemaObject is a JSON Schema the service derives (collected_schema, analysis_schema).
type JSONSchemaObject map[string]any

// SchemaDoc describes the schema in the document.
func (JSONSchemaObject) SchemaDoc() string { return "A JSON Schema (draft 2020-12)." }

// SchemaExtras says a schema may hold any keyword.
func (JSONSchemaObject) SchemaExtras() map[string]any {
	return map[string]any{"additionalProperties": true}
}

// AgentDeleted is the answer to deleting an agent.
type AgentDeleted struct {
	Object   string   `json:"object" jsonschema:"enum=agent"`
	Deleted  bool     `json:"deleted" const:"true"`
	ID       string   `json:"id" jsonschema:"format=uuid"`
	PurgesAt app.Time `json:"purges_at" doc:"30 days after the deletion: the agent is then gone for good. Until then the operator can restore it (parley admin agents restore)."`
}

// AgentVersionObject is one published version of an agent.
type AgentVersionObject struct {
	Object          string          `json:"object" jsonschema:"enum=agent_version"`
	AgentID         string          `json:"agent_id" jsonschema:"format=uuid"`
	Note            string          `json:"note"`
	PublishedAt     app.Time        `json:"published_at"`
	VariablesSchema VariablesSchema `json:"variables_schema"`
	Version         int             `json:"version" doc:"The version number, used as agent_version elsewhere." jsonschema:"minimum=1"`
}

// AgentCreate is the body of creating an agent.
type AgentCreate struct {
	ProjectID  string          `json:"project_id" doc:"The project the agent is made in." jsonschema:"format=uuid"`
	Definition DefinitionInput `json:"definition"`
	Name       *Name           `json:"name,omitempty" doc:"1 to 120 characters; taken as it is (409 agent_name_taken when the project has it). When omitted the definition's name is used, made unique in the project: Support, Support (2), …" jsonschema:"nullable"`
}

// AgentDefinitionReplace is the body of replacing an agent's definition.
type AgentDefinitionReplace struct {
	Definition DefinitionInput `json:"definition" doc:"The new definition; its kind and direction must equal the agent's own. The definition's own name is ignored: the agent keeps its name unless name is given."`
	Name       *Name           `json:"name,omitempty" doc:"A new name, if it is to change." jsonschema:"nullable"`
}

// AgentPublishRequest is the body of publishing an agent (it may be empty).
type AgentPublishRequest struct {
	Note string `json:"note,omitempty" doc:"What changed, kept with the version." jsonschema:"maxLength=500,default="`
}

// DefinitionInput is a definition document as a request body carries it: the JSON as sent,
// which the domain reads with agentdef.Parse so that what does not fit is answered as 422
// invalid_definition with /definition/… pointers. The body's schema check has already
// applied its JSON Schema, the AgentDefinitionInput component.
type DefinitionInput json.RawMessage

// UnmarshalJSON keeps the member as sent.
func (d *DefinitionInput) UnmarshalJSON(b []byte) error {
	*d = append((*d)[:0], b...)
	return nil
}

// MarshalJSON writes the member as sent.
func (d DefinitionInput) MarshalJSON() ([]byte, error) { return json.RawMessage(d).MarshalJSON() }

// SchemaRef names the hand-written component of agentdef that describes it.
func (DefinitionInput) SchemaRef() string { return "AgentDefinitionInput" }

// Name is an agent's name in a body: agentdef's Name schema (1 to 120 characters, no control
// characters, no space at either end).
type Name string

// SchemaRef names the hand-written component of agentdef that describes it.
func (Name) SchemaRef() string { return agentdef.ComponentPrefix + "Name" }

// Definition is a definition document as exported, every setting present. Its schema is the
// hand-written AgentDefinition component of agentdef.
type Definition struct {
	agentdef.Document
}

// SchemaRef names the hand-written component of agentdef that describes it.
func (Definition) SchemaRef() string { return "AgentDefinition" }
