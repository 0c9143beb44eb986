package jsoncheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Problem codes: what is wrong at a place. They are stable; clients may switch on them.
const (
	CodeUnknownField  = "unknown_field"  // a member the schema does not take
	CodeRequired      = "required"       // a required member is missing
	CodeInvalidType   = "invalid_type"   // a value of the wrong JSON type
	CodeTooShort      = "too_short"      // a string, array or object below its minimum size
	CodeTooLong       = "too_long"       // a string, array or object above its maximum size
	CodeOutOfRange    = "out_of_range"   // a number outside its bounds
	CodeInvalidValue  = "invalid_value"  // not one of the allowed values, or not of the pattern
	CodeInvalidFormat = "invalid_format" // not a uuid, date-time, …
	CodeNotUnique     = "not_unique"     // an array with the same item twice
	CodeDuplicate     = "duplicate_member"
	CodeMalformed     = "malformed_json"
)

// Problem is one thing wrong with a JSON value, at a place.
type Problem struct {
	Pointer string `json:"pointer"` // RFC 6901 JSON pointer into the checked value
	Code    string `json:"code"`
	Detail  string `json:"detail"`
}

// ProblemsError is a list of problems, as an error.
type ProblemsError struct{ Problems []Problem }

func (e *ProblemsError) Error() string {
	parts := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		parts = append(parts, p.Detail)
	}
	return strings.Join(parts, "; ")
}

// Validator checks values against one compiled schema.
type Validator struct {
	schema *jsonschema.Schema
}

// Compile compiles the schema at loc (a URL, with a JSON-pointer fragment for a schema inside a
// document) from the given resources (URL → decoded JSON document). Formats are asserted.
func Compile(resources map[string]any, loc string) (*Validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for url, doc := range resources {
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("jsoncheck: add %s: %w", url, err)
		}
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("jsoncheck: compile %s: %w", loc, err)
	}
	return &Validator{schema: s}, nil
}

// Validate checks v (as returned by Decode) and returns its problems, in pointer order; none
// when v fits.
func (v *Validator) Validate(value any) []Problem {
	err := v.schema.Validate(value)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Pointer: "", Code: CodeInvalidValue, Detail: err.Error()}}
	}
	var out []Problem
	collect(ve, &out)
	if len(out) == 0 {
		out = append(out, Problem{Pointer: "", Code: CodeInvalidValue, Detail: "The value does not fit the schema."})
	}
	slices.SortStableFunc(out, func(a, b Problem) int { return strings.Compare(a.Pointer, b.Pointer) })
	return slices.CompactFunc(out, func(a, b Problem) bool { return a == b })
}

// collect walks the error tree and turns each leaf into a Problem.
func collect(e *jsonschema.ValidationError, out *[]Problem) {
	at := pointerOf(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference, *kind.Not:
		if len(e.Causes) == 0 {
			if _, isNot := k.(*kind.Not); isNot {
				*out = append(*out, Problem{at, CodeInvalidValue, fmt.Sprintf("%s is not allowed here.", name(at))})
			}
			return
		}
		for _, c := range e.Causes {
			collect(c, out)
		}
	case *kind.AnyOf, *kind.OneOf:
		*out = append(*out, alternatives(at, e)...)
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			ptr := at + "/" + EscapePointer(p)
			*out = append(*out, Problem{ptr, CodeUnknownField, fmt.Sprintf("Unknown field %q at %s: it is not part of this object.", p, ptr)})
		}
	case *kind.Required:
		for _, m := range k.Missing {
			ptr := at + "/" + EscapePointer(m)
			*out = append(*out, Problem{ptr, CodeRequired, fmt.Sprintf("%s is required.", ptr)})
		}
	case *kind.Type:
		*out = append(*out, Problem{at, CodeInvalidType, fmt.Sprintf("%s must be %s, not %s.", name(at), orList(k.Want), article(k.Got))})
	case *kind.Enum:
		*out = append(*out, Problem{at, CodeInvalidValue, fmt.Sprintf("%s must be one of %s.", name(at), listValues(k.Want))})
	case *kind.Const:
		*out = append(*out, Problem{at, CodeInvalidValue, fmt.Sprintf("%s must be %s.", name(at), showValue(k.Want))})
	case *kind.Format:
		*out = append(*out, Problem{at, CodeInvalidFormat, fmt.Sprintf("%s is not a valid %s.", name(at), k.Want)})
	case *kind.Pattern:
		*out = append(*out, Problem{at, CodeInvalidValue, fmt.Sprintf("%s does not have an allowed form (pattern %s).", name(at), k.Want)})
	case *kind.MinLength:
		*out = append(*out, Problem{at, CodeTooShort, fmt.Sprintf("%s must be at least %d characters long.", name(at), k.Want)})
	case *kind.MaxLength:
		*out = append(*out, Problem{at, CodeTooLong, fmt.Sprintf("%s must be at most %d characters long.", name(at), k.Want)})
	case *kind.MinItems:
		*out = append(*out, Problem{at, CodeTooShort, fmt.Sprintf("%s must have at least %d item%s.", name(at), k.Want, plural(k.Want))})
	case *kind.MaxItems:
		*out = append(*out, Problem{at, CodeTooLong, fmt.Sprintf("%s must have at most %d item%s.", name(at), k.Want, plural(k.Want))})
	case *kind.MinProperties:
		*out = append(*out, Problem{at, CodeTooShort, fmt.Sprintf("%s must have at least %d member%s.", name(at), k.Want, plural(k.Want))})
	case *kind.MaxProperties:
		*out = append(*out, Problem{at, CodeTooLong, fmt.Sprintf("%s must have at most %d member%s.", name(at), k.Want, plural(k.Want))})
	case *kind.UniqueItems:
		*out = append(*out, Problem{at + fmt.Sprintf("/%d", k.Duplicates[1]), CodeNotUnique, fmt.Sprintf("%s repeats item %d: items must be unique.", name(at), k.Duplicates[0])})
	case *kind.Minimum:
		*out = append(*out, Problem{at, CodeOutOfRange, fmt.Sprintf("%s must be at least %s.", name(at), ratString(k.Want))})
	case *kind.Maximum:
		*out = append(*out, Problem{at, CodeOutOfRange, fmt.Sprintf("%s must be at most %s.", name(at), ratString(k.Want))})
	case *kind.ExclusiveMinimum:
		*out = append(*out, Problem{at, CodeOutOfRange, fmt.Sprintf("%s must be more than %s.", name(at), ratString(k.Want))})
	case *kind.ExclusiveMaximum:
		*out = append(*out, Problem{at, CodeOutOfRange, fmt.Sprintf("%s must be less than %s.", name(at), ratString(k.Want))})
	case *kind.MultipleOf:
		*out = append(*out, Problem{at, CodeOutOfRange, fmt.Sprintf("%s must be a multiple of %s.", name(at), ratString(k.Want))})
	case *kind.PropertyNames:
		ptr := at + "/" + EscapePointer(k.Property)
		*out = append(*out, Problem{ptr, CodeInvalidValue, fmt.Sprintf("%q is not an allowed member name at %s.", k.Property, name(at))})
	case *kind.FalseSchema:
		*out = append(*out, Problem{at, CodeUnknownField, fmt.Sprintf("%s is not allowed here.", name(at))})
	default:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				collect(c, out)
			}
			return
		}
		*out = append(*out, Problem{at, CodeInvalidValue, fmt.Sprintf("%s does not fit: %s", name(at), e.ErrorKind.LocalizedString(message.NewPrinter(language.English)))})
	}
}

// alternatives reports an anyOf/oneOf failure. When every alternative failed on the value's
// type, one invalid_type names all the wanted types; otherwise the problems of the first
// alternative that got past the type are reported.
func alternatives(at string, e *jsonschema.ValidationError) []Problem {
	var types []string
	var got string
	for _, c := range e.Causes {
		var ps []Problem
		collect(c, &ps)
		onlyType := true
		for _, p := range ps {
			if p.Code != CodeInvalidType || p.Pointer != at {
				onlyType = false
			}
		}
		if !onlyType || len(ps) == 0 {
			return ps
		}
		for _, leaf := range typeLeaves(c) {
			got = leaf.Got
			for _, w := range leaf.Want {
				if !slices.Contains(types, w) {
					types = append(types, w)
				}
			}
		}
	}
	if len(types) == 0 {
		return []Problem{{at, CodeInvalidValue, fmt.Sprintf("%s does not fit any of the allowed forms.", name(at))}}
	}
	return []Problem{{at, CodeInvalidType, fmt.Sprintf("%s must be %s, not %s.", name(at), orList(types), article(got))}}
}

func typeLeaves(e *jsonschema.ValidationError) []*kind.Type {
	if t, ok := e.ErrorKind.(*kind.Type); ok {
		return []*kind.Type{t}
	}
	var out []*kind.Type
	for _, c := range e.Causes {
		out = append(out, typeLeaves(c)...)
	}
	return out
}

func pointerOf(loc []string) string { return Pointer(loc...) }

// name is how a sentence names a place.
func name(ptr string) string {
	if ptr == "" {
		return "The value"
	}
	return ptr
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func article(t string) string {
	switch t {
	case "":
		return "something else"
	case "array", "integer", "object":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func orList(ws []string) string {
	as := make([]string, len(ws))
	for i, w := range ws {
		as[i] = article(w)
	}
	switch len(as) {
	case 0:
		return "something else"
	case 1:
		return as[0]
	}
	return strings.Join(as[:len(as)-1], ", ") + " or " + as[len(as)-1]
}

func listValues(vs []any) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = showValue(v)
	}
	return strings.Join(s, ", ")
}

func showValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}
