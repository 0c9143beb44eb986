package api

import (
	"net/http"
	"slices"
	"testing"
)

var _ = register(scenario{"SpecSampleDefinition", testSpecSampleDefinition})

// testSpecSampleDefinition: the specification's sample definition (agent with name, kind,
// direction and system_prompt only; no format, no references) creates an agent, with the
// channels of its direction.
func testSpecSampleDefinition(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents", key: kLive, body: map[string]any{
		"project_id": w.p1.ID,
		"definition": map[string]any{"agent": map[string]any{"name": "Support", "kind": "faq", "direction": "inbound", "system_prompt": "You help callers."}},
	}})
	var got []string
	for _, c := range r.JSON["channels"].([]any) {
		got = append(got, c.(string))
	}
	if !slices.Equal(got, []string{"phone", "voice", "chat"}) {
		t.Fatalf("channels %v", got)
	}
	def := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/agents/" + r.Str("id") + "/definition", key: kLive})
	if def.Str("format") != "service.agent/1" {
		t.Fatalf("exported %s", def)
	}
}
