package session

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var placeholderRe = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// MissingVariablesError names every placeholder that has no value.
type MissingVariablesError struct{ Names []string }

func (e *MissingVariablesError) Error() string {
	return "missing values for placeholders: " + strings.Join(e.Names, ", ")
}

// Render fills {{placeholders}} in text from vars (text, numbers or true/false). Every
// placeholder must have a value; the error names all that do not.
func Render(text string, vars map[string]any) (string, error) {
	var missing []string
	out := placeholderRe.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholderRe.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok || v == nil {
			missing = append(missing, name)
			return m
		}
		return formatVar(v)
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", &MissingVariablesError{Names: dedupe(missing)}
	}
	return out, nil
}

// Placeholders returns the distinct placeholder names in text, sorted.
func Placeholders(text string) []string {
	var names []string
	for _, m := range placeholderRe.FindAllStringSubmatch(text, -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	return dedupe(names)
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func formatVar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	default:
		return fmt.Sprint(x)
	}
}
