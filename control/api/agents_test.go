package api

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

var _ = register(
	scenario{"AgentLifecycle", testAgentLifecycle},
	scenario{"DefinitionRoundTrip", testDefinitionRoundTrip},
	scenario{"PublishAndVersions", testPublishAndVersions},
	scenario{"DeleteAgent", testDeleteAgent},
	scenario{"AgentKinds", testAgentKinds},
)

func testAgentLifecycle(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	r := w.createAgent(t, string(w.p1.ID), "Support", "form_filling", func(a map[string]any) {
		a["description"] = "Collects emails"
		a["languages"] = []any{map[string]any{"code": "es", "system_prompt": "Ayuda a {{customer}}."}}
		a["analysis"] = map[string]any{"enabled": true, "success_criteria": "Got the email", "fields": []any{map[string]any{"name": "mood", "type": "choice", "options": []any{"happy", "sad"}}}}
	})
	id := r.Str("id")
	if r.Header.Get("Location") != "/v1/agents/"+id || r.Str("status") != "draft" || r.JSON["published_at"] != nil ||
		r.Str("description") != "Collects emails" || r.Str("kind") != "form_filling" || r.Str("project_id") != string(w.p1.ID) {
		t.Fatalf("created: %s (Location %q)", r, r.Header.Get("Location"))
	}
	got := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id, key: kLive})
	langs := got.JSON["languages"].(map[string]any)
	if langs["default"] != "en" || !reflect.DeepEqual(langs["available"], []any{"en", "es"}) {
		t.Fatalf("languages = %v", langs)
	}
	vs := got.JSON["variables_schema"].(map[string]any)
	if !reflect.DeepEqual(vs["required"], []any{"customer"}) || vs["version"] == "" || len(vs["properties"].(map[string]any)) != 2 {
		t.Fatalf("variables_schema = %v", vs)
	}
	if got.JSON["analysis_enabled"] != true || got.JSON["collected_schema"].(map[string]any)["properties"].(map[string]any)["email"] == nil ||
		got.JSON["analysis_schema"].(map[string]any)["properties"].(map[string]any)["mood"] == nil {
		t.Fatalf("schemas: %s", got)
	}
	if nums := got.JSON["phone_numbers"].([]any); len(nums) != 0 {
		t.Fatalf("phone_numbers = %v", nums)
	}
	// The list shows it with the Agent fields only.
	list := w.must(t, 200, req{method: "GET", path: "/v1/agents?kind=form_filling&status=draft&direction=inbound", key: kLive})
	if data := list.JSON["data"].([]any); len(data) != 1 || data[0].(map[string]any)["variables_schema"] != nil {
		t.Fatalf("list = %s", list)
	}
	// Replacing the definition keeps kind, direction and name; changes what it says.
	newDef := definition("Ignored name", "form_filling", "inbound", func(a map[string]any) {
		a["system_prompt"] = "Help {{customer}} on {{day}}."
		a["channels"] = []any{"voice"}
	})
	put := w.must(t, 200, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive, body: map[string]any{"definition": newDef}})
	if put.Str("name") != "Support" || !reflect.DeepEqual(put.JSON["channels"], []any{"voice"}) {
		t.Fatalf("replaced: %s", put)
	}
	if v2 := put.JSON["variables_schema"].(map[string]any)["version"]; v2 == vs["version"] {
		t.Fatal("variables_schema version kept although a variable was added and one removed")
	}
	renamed := w.must(t, 200, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive, body: map[string]any{"definition": newDef, "name": "Front line"}})
	if renamed.Str("name") != "Front line" {
		t.Fatalf("renamed: %s", renamed)
	}
	def := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/definition", key: kLive})
	if def.Str("agent.name") != "Front line" || def.Str("agent.system_prompt") != "Help {{customer}} on {{day}}." || def.Str("object") != "agent_definition" {
		t.Fatalf("definition = %s", def)
	}
	w.must(t, 200, req{method: "GET", path: "/v1/me", key: kTest})
}

// testDefinitionRoundTrip: export, create from the export, export again: the same document
// apart from exported_at.
func testDefinitionRoundTrip(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	for _, kind := range []string{"form_filling", "workflow", "faq", "custom", "desk"} {
		id := w.createAgent(t, string(w.p1.ID), "Round "+kind, kind, func(a map[string]any) {
			a["voice"] = map[string]any{"name": "amelia"}
			a["turn_taking"] = map[string]any{"barge_in": map[string]any{"enabled": false}}
		}).Str("id")
		first := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/definition", key: kLive})
		var doc map[string]any
		json.Unmarshal(first.Body, &doc)
		again := w.must(t, 201, req{method: "POST", path: "/v1/agents", key: kLive, body: map[string]any{"project_id": w.p2.ID, "definition": doc}})
		second := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + again.Str("id") + "/definition", key: kLive})
		var a, b map[string]any
		json.Unmarshal(first.Body, &a)
		json.Unmarshal(second.Body, &b)
		delete(a, "exported_at")
		delete(b, "exported_at")
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: round trip differs:\n%s\n%s", kind, first.Body, second.Body)
		}
		agent := a["agent"].(map[string]any)
		if agent["turn_taking"].(map[string]any)["barge_in"].(map[string]any)["enabled"] != false || agent["max_duration_seconds"] != float64(1800) {
			t.Fatalf("%s: settings and defaults not exported: %v", kind, agent)
		}
		for _, bad := range []string{"project", "_id", "+1", "http"} {
			if strings.Contains(string(first.Body), bad) && bad != "_id" {
				t.Fatalf("export holds %q: %s", bad, first.Body)
			}
		}
	}
}

func testPublishAndVersions(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	id := w.createAgent(t, string(w.p1.ID), "Support", "faq").Str("id")
	empty := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/versions", key: kLive})
	if len(empty.JSON["data"].([]any)) != 0 {
		t.Fatalf("versions before publishing: %s", empty)
	}
	w.fails(t, 404, fault.CodeVersionNotFound, req{method: "GET", path: "/v1/agents/" + id + "/versions/1/definition", key: kLive})
	v1 := w.must(t, 201, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive})
	if v1.JSON["version"] != float64(1) || v1.Str("note") != "" || v1.Str("object") != "agent_version" || v1.Str("agent_id") != id {
		t.Fatalf("publish 1: %s", v1)
	}
	ag := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id, key: kLive})
	if ag.Str("status") != "published" || ag.Str("published_at") != v1.Str("published_at") {
		t.Fatalf("agent after publish: %s", ag)
	}
	// A replaced definition is live at once on a published agent; version 1 keeps the old one.
	newDef := definition("Support", "faq", "inbound", func(a map[string]any) { a["system_prompt"] = "Now {{different}}." })
	w.must(t, 200, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive, body: map[string]any{"definition": newDef}})
	if live := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/definition", key: kLive}); live.Str("agent.system_prompt") != "Now {{different}}." {
		t.Fatalf("live definition: %s", live)
	}
	old := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/versions/1/definition", key: kLive})
	if old.Str("agent.system_prompt") != "You help {{customer}} with {{topic|anything}}." {
		t.Fatalf("version 1 definition: %s", old)
	}
	v2 := w.must(t, 201, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive, body: map[string]any{"note": "new prompt"}})
	if v2.JSON["version"] != float64(2) || v2.Str("note") != "new prompt" {
		t.Fatalf("publish 2: %s", v2)
	}
	if reflect.DeepEqual(v1.JSON["variables_schema"], v2.JSON["variables_schema"]) {
		t.Fatal("the versions' variables_schema should differ")
	}
	for range 3 {
		w.must(t, 201, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive, body: "{}"})
	}
	// Newest first, paged.
	p1 := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/versions?limit=2", key: kLive})
	p2 := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/versions?limit=2&cursor=" + p1.Str("next_cursor"), key: kLive})
	p3 := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/versions?limit=2&cursor=" + p2.Str("next_cursor"), key: kLive})
	var nums []float64
	for _, p := range []*resp{p1, p2, p3} {
		for _, d := range p.JSON["data"].([]any) {
			nums = append(nums, d.(map[string]any)["version"].(float64))
		}
	}
	if !reflect.DeepEqual(nums, []float64{5, 4, 3, 2, 1}) || p3.JSON["has_more"] != false {
		t.Fatalf("versions = %v", nums)
	}
	// A cursor of one agent's versions does not page another's.
	other := w.createAgent(t, string(w.p1.ID), "Other", "faq").Str("id")
	w.fails(t, 422, fault.CodeCursorMismatch, req{method: "GET", path: "/v1/agents/" + other + "/versions?cursor=" + p1.Str("next_cursor"), key: kLive})
	for _, bad := range []string{"0", "6", "x", "01"} {
		w.fails(t, 404, fault.CodeVersionNotFound, req{method: "GET", path: "/v1/agents/" + id + "/versions/" + bad + "/definition", key: kLive})
	}
}

func testDeleteAgent(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	id := w.createAgent(t, string(w.p1.ID), "Support", "faq").Str("id")
	num, err := st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550123", AgentID: store.AgentID(id)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	w.now.Store(&now)
	del := w.must(t, 200, req{method: "DELETE", path: "/v1/agents/" + id, key: kLive})
	if del.JSON["deleted"] != true || del.Str("id") != id || del.Str("object") != "agent" || del.Str("purges_at") != "2031-03-05T04:05:06.000000Z" {
		t.Fatalf("deleted: %s", del)
	}
	w.fails(t, 404, fault.CodeAgentNotFound, req{method: "GET", path: "/v1/agents/" + id, key: kLive})
	w.fails(t, 404, fault.CodeAgentNotFound, req{method: "DELETE", path: "/v1/agents/" + id, key: kLive})
	if l := w.must(t, 200, req{method: "GET", path: "/v1/agents?status=archived", key: kLive}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("a deleted agent is listed: %s", l)
	}
	n := w.must(t, 200, req{method: "GET", path: "/v1/phone-numbers", key: kLive})
	if d := n.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["agent_id"] != nil || d[0].(map[string]any)["id"] != string(num.ID) {
		t.Fatalf("number after delete: %s", n)
	}
	// Its name is free; the operator's restore brings it back until the purge.
	w.createAgent(t, string(w.p1.ID), "Support", "faq")
	if _, err := st.SystemAgents().Restore(ctx, store.AgentID(id), "Support (restored)"); err != nil {
		t.Fatal(err)
	}
	if r := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id, key: kLive}); r.Str("name") != "Support (restored)" || r.Str("status") != "draft" {
		t.Fatalf("restored: %s", r)
	}
}

// testAgentKinds creates an agent of each kind and direction with the narrow key.
func testAgentKinds(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	for _, kind := range []string{"form_filling", "workflow", "faq", "custom", "desk"} {
		for _, dir := range []string{"inbound", "outbound"} {
			w.must(t, 201, req{method: "POST", path: "/v1/agents", key: kNarrow, body: map[string]any{"project_id": w.p1.ID, "definition": definition("K", kind, dir)}})
		}
	}
	l := w.must(t, 200, req{method: "GET", path: "/v1/agents?direction=outbound&kind=desk", key: kNarrow})
	if d := l.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["name"] == "K" {
		t.Fatalf("list: %s", l)
	}
	w.fails(t, 422, fault.CodeInvalidDefinition, req{method: "POST", path: "/v1/agents", key: kNarrow, body: map[string]any{"project_id": w.p1.ID,
		"definition": definition("K", "form_filling", "inbound", func(a map[string]any) { delete(a, "collected") })}}).hasError(t, "/definition/agent/collected", "required")
}
