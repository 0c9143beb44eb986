package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"github.com/parley-voice/parley/control/app"
)

// Schemas of bodies and answers are reflected from their Go types with invopop/jsonschema,
// chosen because it is maintained, small (no framework to adopt: our declaration table stays
// the router and the checks), emits draft 2020-12 as OpenAPI 3.1 uses, takes per-field keywords
// from struct tags and lets a type describe itself (JSONSchemaAlias, JSONSchemaExtend).
//
// Conventions of the reflected schemas:
//   - every struct is strict (additionalProperties false); a field is required unless its json
//     tag has omitempty or omitzero;
//   - doc:"…" on a field is its description (jsonschema_description also works);
//   - jsonschema:"nullable" adds null; jsonschema:"enum=a,enum=b", "format=uuid", "minLength=1"
//     and the other keywords of invopop's tag work as documented there;
//   - an object field with one enum value (`json:"object" jsonschema:"enum=phone_number"`)
//     becomes const;
//   - a type's description is its SchemaDoc() string method, when it has one;
//   - const:"true" on a field makes its schema that one JSON value (the tags of invopop cannot
//     say const for a boolean);
//   - a type whose schema is written by hand elsewhere (the agent definition's, from package
//     agentdef) names that component with a SchemaRef() string method: fields of the type refer
//     to it, and an operation answering the type answers that component;
//   - generic lists are named after their item: list[numbers.PhoneNumber] is PhoneNumberList,
//     and an item named …Object drops that word (list[agents.AgentVersionObject] is
//     AgentVersionList).

// schemaExtras is a type that adds keywords its field tags cannot say (minProperties, say).
type schemaExtras interface{ SchemaExtras() map[string]any }

var schemaExtrasType = reflect.TypeFor[schemaExtras]()

// schemaRef is a type described by a component that is not reflected: SchemaRef names it.
type schemaRef interface{ SchemaRef() string }

var schemaRefType = reflect.TypeFor[schemaRef]()

// refOf returns the component that describes t when t names one (SchemaRef).
func refOf(t reflect.Type) (string, bool) {
	if !t.Implements(schemaRefType) {
		return "", false
	}
	return reflect.Zero(t).Interface().(schemaRef).SchemaRef(), true
}

// schemaDoc is a type that describes itself in the document.
type schemaDoc interface{ SchemaDoc() string }

var schemaDocType = reflect.TypeFor[schemaDoc]()

// componentName names a Go type in the document.
func componentName(t reflect.Type) string {
	name := t.Name()
	if i := strings.IndexByte(name, '['); i >= 0 {
		base, arg := name[:i], strings.TrimSuffix(name[i+1:], "]")
		if j := strings.LastIndexAny(arg, "./"); j >= 0 {
			arg = arg[j+1:]
		}
		switch base {
		case "list":
			return strings.TrimSuffix(arg, "Object") + "List"
		default:
			return arg + strings.ToUpper(base[:1]) + base[1:]
		}
	}
	return name
}

func newReflector(seen map[string]reflect.Type) *jsonschema.Reflector {
	return &jsonschema.Reflector{
		Anonymous: true,
		Namer: func(t reflect.Type) string {
			name := componentName(t)
			if name == "" {
				return ""
			}
			if prev, ok := seen[name]; ok && prev != t {
				panic(fmt.Sprintf("api: two types are named %s in the document: %s and %s", name, prev, t))
			}
			seen[name] = t
			return name
		},
		LookupComment: func(t reflect.Type, field string) string {
			if field == "" {
				if t.Implements(schemaDocType) {
					return reflect.Zero(t).Interface().(schemaDoc).SchemaDoc()
				}
				return ""
			}
			if f, ok := t.FieldByName(field); ok {
				return f.Tag.Get("doc")
			}
			return ""
		},
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if name, ok := refOf(t); ok {
				return &jsonschema.Schema{Ref: "#/components/schemas/" + name}
			}
			switch t {
			case reflect.TypeFor[json.RawMessage]():
				return &jsonschema.Schema{} // any JSON value; the field's doc says what it holds
			case reflect.TypeFor[time.Time](), reflect.TypeFor[app.Time]():
				return &jsonschema.Schema{Type: "string", Format: "date-time"}
			}
			return nil
		},
	}
}

// reflectedComponents returns the component schemas of the registered types and of every type
// they refer to.
func reflectedComponents() (map[string]any, error) {
	seen := map[string]reflect.Type{}
	r := newReflector(seen)
	out := map[string]any{}
	for _, t := range registeredSchemas() {
		s := r.ReflectFromType(t)
		b, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("api: reflect %s: %w", t, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		defs, _ := m["$defs"].(map[string]any)
		for name, d := range defs {
			out[name] = tidySchema(d)
		}
	}
	for name, t := range seen {
		s, ok := out[name].(map[string]any)
		if !ok {
			continue
		}
		if t.Implements(schemaExtrasType) {
			for k, v := range reflect.Zero(t).Interface().(schemaExtras).SchemaExtras() {
				s[k] = v
			}
		}
		if err := applyConsts(t, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyConsts makes the schema of each field of struct t tagged const:"<JSON value>" that value.
func applyConsts(t reflect.Type, s map[string]any) error {
	if t.Kind() != reflect.Struct {
		return nil
	}
	props, _ := s["properties"].(map[string]any)
	for _, f := range reflect.VisibleFields(t) {
		c, ok := f.Tag.Lookup("const")
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(c), &v); err != nil {
			return fmt.Errorf("api: %s.%s: const tag %q is not JSON: %w", t, f.Name, c, err)
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := map[string]any{"const": v}
		if old, ok := props[name].(map[string]any); ok && old["description"] != nil {
			p["description"] = old["description"]
		}
		props[name] = p
	}
	return nil
}

// tidySchema rewrites a reflected schema into the document's form: references point into
// components, a one-value object member is a const, a nullable simple type is a type list, and
// a nullable reference keeps its description beside its oneOf.
func tidySchema(v any) any {
	switch s := v.(type) {
	case []any:
		for i := range s {
			s[i] = tidySchema(s[i])
		}
		return s
	case map[string]any:
		for k, x := range s {
			s[k] = tidySchema(x)
		}
		if ref, ok := s["$ref"].(string); ok {
			s["$ref"] = strings.Replace(ref, "#/$defs/", "#/components/schemas/", 1)
		}
		if props, ok := s["properties"].(map[string]any); ok {
			if obj, ok := props["object"].(map[string]any); ok {
				if e, ok := obj["enum"].([]any); ok && len(e) == 1 {
					delete(obj, "enum")
					delete(obj, "type")
					obj["const"] = e[0]
				}
			}
		}
		if one, ok := s["oneOf"].([]any); ok && len(one) == 2 {
			first, _ := one[0].(map[string]any)
			second, _ := one[1].(map[string]any)
			if typ, ok := first["type"].(string); ok && second["type"] == "null" && first["$ref"] == nil {
				delete(s, "oneOf")
				for k, x := range first {
					if _, taken := s[k]; !taken {
						s[k] = x
					}
				}
				s["type"] = []any{typ, "null"}
				if e, ok := s["enum"].([]any); ok {
					s["enum"] = append(e, nil)
				}
			}
			if first["$ref"] != nil && second["type"] == "null" && first["description"] != nil && s["description"] == nil {
				s["description"] = first["description"] // the member's description, beside its oneOf
				delete(first, "description")
			}
		}
		return s
	}
	return v
}
