package agentdef

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Placeholder is one {{marker}} in a text. {{name}} is required; {{name|fallback}} is optional
// and renders fallback (trimmed; it may be empty) when the variable is not given. Spaces inside
// the braces are ignored. A name is a letter or underscore, then letters, digits or underscores,
// at most 64 characters, and is case-sensitive. Text cannot hold a literal "{{".
type Placeholder struct {
	Name        string
	Fallback    string
	HasFallback bool
	Start, End  int // byte offsets of "{{" and just past "}}" in the text
}

var placeholderName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// PlaceholderError is a malformed marker in a text.
type PlaceholderError struct {
	Offset int // byte offset of the marker in the text
	Msg    string
}

func (e *PlaceholderError) Error() string {
	return fmt.Sprintf("placeholder at byte %d: %s", e.Offset, e.Msg)
}

// Placeholders returns the markers of text in order, or the first malformed one.
func Placeholders(text string) ([]Placeholder, error) {
	var out []Placeholder
	for i := 0; ; {
		j := strings.Index(text[i:], "{{")
		if j < 0 {
			return out, nil
		}
		start := i + j
		k := strings.Index(text[start+2:], "}}")
		if k < 0 {
			return nil, &PlaceholderError{start, `"{{" is never closed by "}}"`}
		}
		inner := text[start+2 : start+2+k]
		end := start + 2 + k + 2
		if strings.Contains(inner, "{{") {
			return nil, &PlaceholderError{start, `"{{" opens again before "}}"`}
		}
		p := Placeholder{Start: start, End: end}
		name, fallback, has := strings.Cut(inner, "|")
		p.Name = strings.TrimSpace(name)
		if has {
			p.HasFallback, p.Fallback = true, strings.TrimSpace(fallback)
		}
		if !placeholderName.MatchString(p.Name) {
			return nil, &PlaceholderError{start, fmt.Sprintf("%q is not a variable name (a letter or _, then letters, digits or _, at most 64)", p.Name)}
		}
		out = append(out, p)
		i = end
	}
}

// MissingVariableError is a required placeholder without a value.
type MissingVariableError struct{ Name string }

func (e *MissingVariableError) Error() string {
	return fmt.Sprintf("variable %q is required by {{%s}} but was not given", e.Name, e.Name)
}

// ErrVariableType is wrapped by Render when a variable is not text, a number or true/false.
var ErrVariableType = errors.New("a variable must be text, a number or true/false")

// Render fills the markers of text from vars. Values may be strings, numbers (any Go integer or
// float type, or json.Number) or booleans. A required marker without a value is a
// *MissingVariableError; a malformed marker is a *PlaceholderError. Render never panics.
func Render(text string, vars map[string]any) (string, error) {
	ps, err := Placeholders(text)
	if err != nil {
		return "", err
	}
	if len(ps) == 0 {
		return text, nil
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, p := range ps {
		b.WriteString(text[last:p.Start])
		last = p.End
		v, ok := vars[p.Name]
		if !ok || v == nil {
			if !p.HasFallback {
				return "", &MissingVariableError{p.Name}
			}
			b.WriteString(p.Fallback)
			continue
		}
		s, err := FormatValue(v)
		if err != nil {
			return "", fmt.Errorf("variable %q: %w", p.Name, err)
		}
		b.WriteString(s)
	}
	b.WriteString(text[last:])
	return b.String(), nil
}

// FormatValue renders one variable value as text: strings as they are, numbers in their
// shortest form, booleans as true or false.
func FormatValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		if _, err := x.Float64(); err != nil {
			return "", fmt.Errorf("%w: %q is not a number", ErrVariableType, string(x))
		}
		return string(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("%w: %v is not a finite number", ErrVariableType, x)
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return FormatValue(float64(x))
	case int:
		return strconv.Itoa(x), nil
	case int8, int16, int32, int64:
		return fmt.Sprint(x), nil
	case uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("%w, not %T", ErrVariableType, v)
}

// Variable is one variable a conversation with the agent can start with.
type Variable struct {
	Name     string
	Required bool   // some marker names it without a fallback
	Default  string // the first fallback seen, when not required
	Places   []string
}

// Templates returns every text of the definition that may hold placeholders, by JSON pointer
// from the document root, in document order.
func (d *Definition) Templates() []Text {
	var out []Text
	for _, t := range d.texts() {
		if t.template {
			out = append(out, Text{Pointer: t.ptr, Value: t.s})
		}
	}
	return out
}

// Text is one text of a definition and where it is.
type Text struct {
	Pointer string
	Value   string
}

// Variables returns the variables the definition's placeholders name, sorted by name. A
// variable is required when any marker names it without a fallback. Markers were checked by
// Parse; a malformed one is skipped here.
func (d *Definition) Variables() []Variable {
	byName := map[string]*Variable{}
	for _, t := range d.Templates() {
		ps, err := Placeholders(t.Value)
		if err != nil {
			continue
		}
		for _, p := range ps {
			v := byName[p.Name]
			if v == nil {
				v = &Variable{Name: p.Name, Required: !p.HasFallback, Default: p.Fallback}
				byName[p.Name] = v
			} else if !p.HasFallback {
				v.Required, v.Default = true, ""
			}
			if !slices.Contains(v.Places, t.Pointer) {
				v.Places = append(v.Places, t.Pointer)
			}
		}
	}
	out := make([]Variable, 0, len(byName))
	for _, v := range byName {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// VariablesVersion names a set of variable names: it is the same for the same set, in any
// order, and differs when a name is added or removed. Whether a variable is required does not
// change it.
func VariablesVersion(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	s = slices.Compact(s)
	h := sha256.Sum256([]byte(strings.Join(s, "\n")))
	return "vars_" + hex.EncodeToString(h[:8])
}

// VariablesSchema is the JSON Schema (draft 2020-12) of the variables a conversation with the
// agent can start with, plus "version" (see VariablesVersion). Unknown variables are refused;
// each value is text, a number or true/false.
func (d *Definition) VariablesSchema() map[string]any {
	vs := d.Variables()
	props := map[string]any{}
	required := []string{}
	names := make([]string, 0, len(vs))
	for _, v := range vs {
		names = append(names, v.Name)
		p := map[string]any{"type": []string{"string", "number", "boolean"}}
		if v.Required {
			required = append(required, v.Name)
		} else {
			p["default"] = v.Default
		}
		props[v.Name] = p
	}
	return map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
		"version":              VariablesVersion(names),
	}
}

// CheckVariables reports what is wrong with the variables a conversation starts with: an
// unknown name, a value that is not text, a number or true/false, or a required variable that
// is missing. Pointers are relative to the variables object.
func (d *Definition) CheckVariables(vars map[string]any) []Problem {
	vs := d.Variables()
	known := map[string]bool{}
	var out []Problem
	for _, v := range vs {
		known[v.Name] = true
		if _, ok := vars[v.Name]; !ok && v.Required {
			out = append(out, Problem{Pointer: "/" + v.Name, Code: "required", Detail: fmt.Sprintf("Variable %q is required by the agent's {{%s}}.", v.Name, v.Name)})
		}
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			out = append(out, Problem{Pointer: "/" + escape(k), Code: "unknown_variable", Detail: fmt.Sprintf("The agent has no {{%s}}; it takes %s.", k, variableList(vs))})
			continue
		}
		switch vars[k].(type) {
		case nil:
			out = append(out, Problem{Pointer: "/" + escape(k), Code: "invalid_type", Detail: fmt.Sprintf("Variable %q must be text, a number or true/false, not null.", k)})
		default:
			if _, err := FormatValue(vars[k]); err != nil {
				out = append(out, Problem{Pointer: "/" + escape(k), Code: "invalid_type", Detail: fmt.Sprintf("Variable %q must be text, a number or true/false.", k)})
			}
		}
	}
	return out
}

func variableList(vs []Variable) string {
	if len(vs) == 0 {
		return "no variables"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.Name
	}
	return strings.Join(s, ", ")
}
