package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/fault"
)

// scenario is one end-to-end test, run on each store.
type scenario struct {
	name string
	fn   func(t *testing.T, e engine)
}

// scenarios are every end-to-end test of the package; each file adds its own.
var scenarios []scenario

func register(s ...scenario) bool { scenarios = append(scenarios, s...); return true }

// TestAPI runs every scenario on every store, each as a parallel subtest with its own store,
// then checks that the suite exercised every operation of the document with a success.
func TestAPI(t *testing.T) {
	t.Run("scenarios", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e engine) {
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					s.fn(t, e)
				})
			}
		})
	})
	if t.Failed() {
		return
	}
	for _, op := range operations() {
		seen := false
		coverage.Range(func(k, _ any) bool {
			f := strings.Fields(k.(string))
			if f[0] == op.ID && f[1] == fmt.Sprint(op.Status) {
				seen = true
			}
			return !seen
		})
		if !seen {
			t.Errorf("no scenario got a %d from %s: the OpenAPI validation never saw it succeed", op.Status, op.ID)
		}
	}
	// Every catalogued code that an operation lists should be seen somewhere, except the ones
	// that need a broken store or bus.
	listed := map[string]bool{}
	for _, op := range operations() {
		for _, c := range op.codes() {
			listed[c] = true
		}
	}
	var missing []string
	for _, c := range fault.Sorted() {
		switch {
		// Answered in front of the router (the node's header limit; TestNodeEdges) or only when
		// the service fails.
		case c == fault.CodeInternal, c == fault.CodeServiceUnavailable, c == fault.CodeHeadersTooLarge, !listed[c]:
			continue
		}
		seen := false
		coverage.Range(func(k, _ any) bool {
			seen = strings.HasSuffix(k.(string), " "+c)
			return !seen
		})
		if !seen {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		t.Errorf("problem codes never answered by an operation in the suite: %v", missing)
	}
}

// definition returns an agent definition document of a kind and direction, with a prompt that
// names {{customer}} (required) and {{topic}} (optional).
func definition(name, kind, direction string, mods ...func(agent map[string]any)) map[string]any {
	agent := map[string]any{
		"name": name, "kind": kind, "direction": direction, "channels": []any{"phone", "chat"},
		"system_prompt": "You help {{customer}} with {{topic|anything}}.",
	}
	switch kind {
	case "form_filling":
		agent["collected"] = []any{map[string]any{"name": "email", "type": "email", "required": true}}
	case "workflow":
		agent["steps"] = []any{map[string]any{"name": "Greet", "instructions": "Greet {{customer}}."}}
	case "desk":
		agent["specialists"] = []any{map[string]any{"name": "Billing", "system_prompt": "Help with bills."}}
	}
	for _, m := range mods {
		m(agent)
	}
	return map[string]any{"format": "service.agent/1", "agent": agent, "references": map[string]any{"tools": []any{}}} // issue 17: tools named must exist in the project
}

// createAgent creates an agent with the live key and returns the answer.
func (w *world) createAgent(t *testing.T, project, name, kind string, mods ...func(map[string]any)) *resp {
	t.Helper()
	return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": project, "definition": definition(name, kind, "inbound", mods...)}})
}

// errorPointers returns the pointers (or parameters) and codes of a problem's errors.
func (r *resp) errorPointers() []string {
	var out []string
	es, _ := r.JSON["errors"].([]any)
	for _, e := range es {
		m := e.(map[string]any)
		where, _ := m["pointer"].(string)
		if p, ok := m["parameter"].(string); ok {
			where = "?" + p
		}
		out = append(out, where+" "+m["code"].(string))
	}
	return out
}

// hasError fails t unless the problem names place with code.
func (r *resp) hasError(t *testing.T, place, code string) {
	t.Helper()
	if !slices.Contains(r.errorPointers(), place+" "+code) {
		t.Fatalf("errors %v do not hold %s %s (%s)", r.errorPointers(), place, code, r)
	}
}
