package agentdef

import (
	"strings"
)

// ComponentPrefix starts the names of the definition's sub-schemas among OpenAPI components.
const ComponentPrefix = "AgentDefinition."

// OpenAPIComponents returns the definition's schema as OpenAPI 3.1 components (JSON Schema
// 2020-12), keyed by component name: AgentDefinitionInput (what createAgent and
// replaceAgentDefinition take), AgentDefinition (what the definition endpoints answer: the
// same with object, exported_at and references always present) and one
// "AgentDefinition.<Name>" per sub-schema, with every "#/$defs/<Name>" reference rewritten to
// "#/components/schemas/AgentDefinition.<Name>".
func OpenAPIComponents() map[string]any {
	root := SchemaValue()
	defs, _ := root["$defs"].(map[string]any)
	delete(root, "$defs")
	delete(root, "$schema")
	delete(root, "$id")
	out := map[string]any{}
	for name, s := range defs {
		out[ComponentPrefix+name] = rewriteRefs(s)
	}
	out["AgentDefinitionInput"] = rewriteRefs(root)
	out["AgentDefinition"] = map[string]any{
		"title":       "AgentDefinition",
		"description": "An agent definition document as exported: every setting is present, defaults included.",
		"allOf":       []any{map[string]any{"$ref": "#/components/schemas/AgentDefinitionInput"}},
		"required":    []any{"object", "format", "exported_at", "agent", "references"},
	}
	return out
}

// rewriteRefs returns v with "#/$defs/X" references pointing at the OpenAPI components.
func rewriteRefs(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if s, ok := val.(string); ok && k == "$ref" && strings.HasPrefix(s, "#/$defs/") {
				out[k] = "#/components/schemas/" + ComponentPrefix + strings.TrimPrefix(s, "#/$defs/")
				continue
			}
			out[k] = rewriteRefs(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = rewriteRefs(val)
		}
		return out
	}
	return v
}

// CollectedSchema is the JSON Schema (draft 2020-12) of a conversation's collected object:
// one member per collected field. Members may be missing: a conversation can end before the
// agent has every answer.
func (d *Definition) CollectedSchema() map[string]any {
	return objectSchema(d.Agent.Collected, nil)
}

// AnalysisSchema is the JSON Schema of a conversation's analysis: summary when asked for,
// successful when there are success criteria, and one member per analysis field.
func (d *Definition) AnalysisSchema() map[string]any {
	extra := map[string]any{}
	an := d.Agent.Analysis
	if an.Summary {
		extra["summary"] = map[string]any{"type": "string", "description": "What happened in the conversation."}
	}
	if an.SuccessCriteria != "" {
		extra["successful"] = map[string]any{"type": "boolean", "description": "Whether the conversation met the success criteria."}
	}
	return objectSchema(an.Fields, extra)
}

func objectSchema(fs []Field, extra map[string]any) map[string]any {
	props := map[string]any{}
	for k, v := range extra {
		props[k] = v
	}
	for _, f := range fs {
		props[f.Name] = fieldSchema(f)
	}
	return map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
}

func fieldSchema(f Field) map[string]any {
	s := map[string]any{}
	switch f.Type {
	case FieldNumber:
		s["type"] = "number"
	case FieldInteger:
		s["type"] = "integer"
	case FieldBoolean:
		s["type"] = "boolean"
	case FieldDate:
		s["type"], s["format"] = "string", "date"
	case FieldTime:
		s["type"], s["format"] = "string", "time"
	case FieldDateTime:
		s["type"], s["format"] = "string", "date-time"
	case FieldEmail:
		s["type"], s["format"] = "string", "email"
	case FieldPhoneNumber:
		s["type"], s["pattern"] = "string", `^\+[1-9][0-9]{6,14}$`
	case FieldChoice:
		enum := make([]any, len(f.Options))
		for i, o := range f.Options {
			enum[i] = o
		}
		s["type"], s["enum"] = "string", enum
	default:
		s["type"] = "string"
	}
	if f.Description != "" {
		s["description"] = f.Description
	}
	if f.Required {
		s["x-required"] = true
	}
	return s
}
