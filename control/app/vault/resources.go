package vault

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// VaultSecret is the VaultSecret object of the interface. It never carries the value.
type VaultSecret struct {
	Object      string           `json:"object" jsonschema:"enum=vault_secret"`
	ID          string           `json:"id" jsonschema:"format=uuid"`
	ProjectID   string           `json:"project_id" jsonschema:"format=uuid"`
	Name        string           `json:"name" doc:"Unique in the project (ignoring case); tools and MCP servers name the secret by id."`
	Description string           `json:"description"`
	Type        string           `json:"type" doc:"How the value is sent: bearer (Authorization: Bearer <value>), header (<header_name>: <value>), basic (Authorization: Basic of username:value) or query (?<query_name>=<value>)." jsonschema:"enum=bearer,enum=header,enum=basic,enum=query"`
	HeaderName  *string          `json:"header_name" doc:"The header of a header secret; null otherwise." jsonschema:"nullable"`
	QueryName   *string          `json:"query_name" doc:"The query parameter of a query secret; null otherwise." jsonschema:"nullable"`
	Username    *string          `json:"username" doc:"The user name of a basic secret (the value is the password); null otherwise." jsonschema:"nullable"`
	UsedBy      []VaultSecretUse `json:"used_by" doc:"The tools, MCP servers and messaging-app senders that use the secret; a secret in use cannot be deleted."`
	CreatedAt   app.Time         `json:"created_at"`
	UpdatedAt   app.Time         `json:"updated_at"`
	LastUsedAt  *app.Time        `json:"last_used_at" doc:"When the value was last opened for an outbound request (kept to the minute); null when never." jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (VaultSecret) SchemaDoc() string {
	return "A credential in the vault of a project. The value is write-only: it is encrypted at rest (AES-256-GCM under its own data key, wrapped by the master key) and no answer, log, event or transcript ever carries it."
}

// VaultSecretUse names one user of a secret.
type VaultSecretUse struct {
	Type string `json:"type" doc:"What uses it (open-ended): tool, mcp_server, whatsapp_sender."`
	ID   string `json:"id"`
	Name string `json:"name"`
}

// SchemaDoc describes the object in the document.
func (VaultSecretUse) SchemaDoc() string {
	return "A tool, MCP server or sender that uses a vault secret."
}

// VaultSecretCreate is the body of secret creation.
type VaultSecretCreate struct {
	ProjectID   string  `json:"project_id" doc:"The project the secret is kept in; only its tools and servers can use it." jsonschema:"format=uuid"`
	Name        string  `json:"name" doc:"1 to 120 characters, unique in the project." jsonschema:"minLength=1,maxLength=120,pattern=^[^\\p{Cc}]*$"`
	Description string  `json:"description,omitempty" doc:"At most 500 characters." jsonschema:"maxLength=500,pattern=^[^\\p{Cc}]*$"`
	Type        string  `json:"type" doc:"How the value is sent (see VaultSecret)." jsonschema:"enum=bearer,enum=header,enum=basic,enum=query"`
	HeaderName  *string `json:"header_name,omitempty" doc:"Required for, and only for, a header secret: an HTTP header name." jsonschema:"maxLength=256,pattern=^[!#$%&'*+.^_|~0-9A-Za-z-]+$"`
	QueryName   *string `json:"query_name,omitempty" doc:"Required for, and only for, a query secret." jsonschema:"minLength=1,maxLength=256"`
	Username    *string `json:"username,omitempty" doc:"Required for, and only for, a basic secret; without a colon." jsonschema:"minLength=1,maxLength=256,pattern=^[^:\\p{Cc}]*$"`
	Value       string  `json:"value" doc:"The secret itself, write-only: never returned. 1 to 8192 bytes without control characters." jsonschema:"minLength=1,maxLength=8192,writeOnly=true"`
}

// SchemaDoc describes the body in the document.
func (VaultSecretCreate) SchemaDoc() string {
	return "A new vault secret. header_name, query_name and username go with the type that uses them."
}

// VaultSecretUpdate is the body of a secret's partial update.
type VaultSecretUpdate struct {
	Name        *string           `json:"name,omitempty" jsonschema:"minLength=1,maxLength=120,pattern=^[^\\p{Cc}]*$"`
	Description *string           `json:"description,omitempty" jsonschema:"maxLength=500,pattern=^[^\\p{Cc}]*$"`
	Type        *string           `json:"type,omitempty" doc:"A new type; the fields of the old type are cleared unless given." jsonschema:"enum=bearer,enum=header,enum=basic,enum=query"`
	HeaderName  app.Patch[string] `json:"header_name,omitzero" jsonschema:"maxLength=256,nullable"`
	QueryName   app.Patch[string] `json:"query_name,omitzero" jsonschema:"maxLength=256,nullable"`
	Username    app.Patch[string] `json:"username,omitzero" jsonschema:"maxLength=256,nullable"`
	Value       *string           `json:"value,omitempty" doc:"A new value (write-only), sealed under a new data key." jsonschema:"minLength=1,maxLength=8192,writeOnly=true"`
}

// SchemaExtras adds what the field tags cannot say: the body names at least one member.
func (VaultSecretUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// SchemaDoc describes the body in the document.
func (VaultSecretUpdate) SchemaDoc() string {
	return "Members left out are left as they are. Tools and servers that use the secret use the new value from their next call."
}

// VaultSecretDeleted is the answer of secret deletion.
type VaultSecretDeleted struct {
	Object  string `json:"object" jsonschema:"enum=vault_secret"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaExtras: deleted is the constant true (see conversations.Deleted).
func (VaultSecretDeleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object":  map[string]any{"const": "vault_secret"},
		"id":      map[string]any{"type": "string", "format": "uuid"},
		"deleted": map[string]any{"const": true},
	}}
}

// Filter narrows a list of secrets.
type Filter struct {
	ProjectID string
}

// Credential is an opened secret, for one outbound request. Its value leaves it only through
// Header, Query and Value; printing, logging or encoding it as JSON shows "[vault secret]".
type Credential struct {
	ID         store.SecretID
	Name       string
	Type       store.SecretType
	HeaderName string
	QueryName  string
	Username   string
	value      string
}

// redacted is what a Credential prints as.
const redacted = "[vault secret]"

// Header returns the header the credential is sent in (bearer, header and basic secrets).
func (c Credential) Header() (name, value string, ok bool) {
	switch c.Type {
	case store.SecretBearer:
		return "Authorization", "Bearer " + c.value, true
	case store.SecretHeader:
		return c.HeaderName, c.value, true
	case store.SecretBasic:
		return "Authorization", "Basic " + basic(c.Username, c.value), true
	}
	return "", "", false
}

// Query returns the query parameter the credential is sent in (query secrets).
func (c Credential) Query() (name, value string, ok bool) {
	if c.Type == store.SecretQuery {
		return c.QueryName, c.value, true
	}
	return "", "", false
}

// Value returns the value itself, for a caller that sends it its own way (a messaging-app
// access token, an app secret that signs). Never log or return it.
func (c Credential) Value() string { return c.value }

// Valid reports whether the credential holds a value.
func (c Credential) Valid() bool { return c.value != "" }

// Redact replaces every occurrence of the value (and of its encoded forms) in s.
func (c Credential) Redact(s string) string {
	if c.value == "" {
		return s
	}
	s = strings.ReplaceAll(s, c.value, redacted)
	if c.Type == store.SecretBasic {
		s = strings.ReplaceAll(s, basic(c.Username, c.value), redacted)
	}
	return s
}

// String, GoString, LogValue and MarshalJSON never show the value.
func (c Credential) String() string               { return redacted }
func (c Credential) GoString() string             { return redacted }
func (c Credential) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (c Credential) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// WithValue returns c holding value: a credential made outside the vault (a test, a setting of
// the operator) that is sent, printed and redacted like one the vault opened.
func (c Credential) WithValue(value string) Credential {
	c.value = value
	return c
}
