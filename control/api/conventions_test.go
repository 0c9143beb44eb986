package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

var _ = register(
	scenario{"Unauthorized", testUnauthorized},
	scenario{"Forbidden", testForbidden},
	scenario{"ReachIs404", testReach},
	scenario{"FrozenProject", testFrozenProject},
	scenario{"DuplicateName", testDuplicateName},
	scenario{"Bodies", testBodies},
	scenario{"Lists", testLists},
	scenario{"PagingUnderInserts", testPagingUnderInserts},
	scenario{"UnknownRoutes", testUnknownRoutes},
	scenario{"Audit", testAudit},
)

func testUnauthorized(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	_, revoked, _ := st.CreateKey(ctx, store.NewKey{OrgID: w.org.ID, Name: "revoked", Scopes: Scopes, AllProjects: true})
	rk, _ := st.LookupKey(ctx, revoked)
	if err := st.RevokeKey(ctx, rk.ID); err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	_, expiring, _ := st.CreateKey(ctx, store.NewKey{OrgID: w.org.ID, Name: "expiring", Scopes: Scopes, AllProjects: true, ExpiresAt: &exp})
	w.keys["revoked"], w.keys["expiring"] = revoked, expiring
	cases := []struct{ key, code string }{
		{"", fault.CodeMissingKey},
		{"Basic dXNlcjpwYXNz", fault.CodeMalformedKey},
		{"Bearer sk_live_short", fault.CodeMalformedKey},
		{"Bearer sk_live_" + strings.Repeat("A", 43), fault.CodeUnknownKey},
		{"revoked", fault.CodeRevokedKey},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		r := w.fails(t, 401, c.code, req{method: "GET", path: "/v1/agents", key: c.key})
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.code)
		}
		seen[c.code] = true
	}
	w.must(t, 200, req{method: "GET", path: "/v1/agents", key: "expiring"})
	later := time.Now().Add(2 * time.Hour)
	w.now.Store(&later)
	w.fails(t, 401, fault.CodeExpiredKey, req{method: "GET", path: "/v1/agents", key: "expiring"})
	if len(seen)+1 != 5 {
		t.Fatalf("the five causes must have five codes: %v", seen)
	}
}

func testForbidden(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ag := w.createAgent(t, string(w.p1.ID), "Support", "faq")
	id := ag.Str("id")
	// A missing permission names it.
	r := w.fails(t, 403, fault.CodeMissingPermission, req{method: "POST", path: "/v1/agents", key: kReadOnly,
		body: map[string]any{"project_id": w.p1.ID, "definition": definition("X", "faq", "inbound")}})
	if !strings.Contains(r.Str("detail"), "agents:write") || r.Str("permission") != "agents:write" {
		t.Fatalf("missing permission not named: %s", r)
	}
	w.fails(t, 403, fault.CodeMissingPermission, req{method: "GET", path: "/v1/projects", key: kReadOnly})
	// Any valid key reads itself, whatever its permissions.
	if me := w.must(t, 200, req{method: "GET", path: "/v1/me", key: kReadOnly}); me.Str("key.id") != string(w.keyIDs[kReadOnly]) {
		t.Fatalf("a narrow key reads %s", me)
	}
	w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id, key: kReadOnly})
	// A live key from a browser.
	w.fails(t, 403, fault.CodeLiveBrowser, req{method: "GET", path: "/v1/agents", key: kLive, header: map[string]string{"Origin": "https://app.example"}})
	w.must(t, 200, req{method: "GET", path: "/v1/agents", key: kLive, header: map[string]string{"Sec-Fetch-Mode": "cors"}}) // Node's fetch
	w.must(t, 200, req{method: "GET", path: "/v1/agents", key: kTest, header: map[string]string{"Origin": "https://app.example"}})
	// A test key on a live-key operation.
	w.fails(t, 403, fault.CodeLiveKeyRequired, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kTest,
		body: map[string]any{"definition": definition("Support", "faq", "inbound")}})
	// A frozen organization refuses changes and still reads.
	if err := st.SetOrgFrozen(context.Background(), w.org.ID, true); err != nil {
		t.Fatal(err)
	}
	w.fails(t, 403, fault.CodeOrganizationFrozen, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": w.p1.ID, "definition": definition("Y", "faq", "inbound")}})
	w.fails(t, 403, fault.CodeOrganizationFrozen, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive})
	w.fails(t, 403, fault.CodeOrganizationFrozen, req{method: "DELETE", path: "/v1/agents/" + id, key: kLive})
	w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id, key: kLive})
	w.must(t, 200, req{method: "GET", path: "/v1/me", key: kLive})
}

func testReach(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	in := w.createAgent(t, string(w.p1.ID), "Inside", "faq").Str("id")
	out := w.createAgent(t, string(w.p2.ID), "Outside", "faq").Str("id")
	missing := "0190a6f0-0000-7000-8000-0000000000aa"
	w.must(t, 200, req{method: "GET", path: "/v1/agents/" + in, key: kNarrow})
	// Out of reach answers exactly as missing: same status, code, type, title; detail differs
	// only by the id it echoes.
	norm := func(r *resp, id string) string {
		m := map[string]any{}
		for k, v := range r.JSON {
			if k != "request_id" {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m)
		return strings.ReplaceAll(string(b), id, "<id>")
	}
	for _, path := range []string{"/v1/agents/%s", "/v1/agents/%s/definition", "/v1/agents/%s/versions"} {
		a := w.fails(t, 404, fault.CodeAgentNotFound, req{method: "GET", path: fmt.Sprintf(path, out), key: kNarrow})
		b := w.fails(t, 404, fault.CodeAgentNotFound, req{method: "GET", path: fmt.Sprintf(path, missing), key: kNarrow})
		if norm(a, out) != norm(b, missing) {
			t.Fatalf("out of reach and missing differ:\n%s\n%s", a, b)
		}
	}
	w.fails(t, 404, fault.CodeAgentNotFound, req{method: "DELETE", path: "/v1/agents/" + out, key: kNarrow})
	w.fails(t, 404, fault.CodeAgentNotFound, req{method: "POST", path: "/v1/agents/" + out + "/publish", key: kNarrow})
	w.fails(t, 404, fault.CodeAgentNotFound, req{method: "GET", path: "/v1/agents/not-a-uuid", key: kNarrow})
	w.fails(t, 404, fault.CodeProjectNotFound, req{method: "POST", path: "/v1/agents", key: kNarrow,
		body: map[string]any{"project_id": w.p2.ID, "definition": definition("X", "faq", "inbound")}})
	w.fails(t, 404, fault.CodeProjectNotFound, req{method: "GET", path: "/v1/agents?project_id=" + string(w.p2.ID), key: kNarrow})
	// Lists show only what the key reaches.
	list := w.must(t, 200, req{method: "GET", path: "/v1/agents", key: kNarrow})
	if data := list.JSON["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != in {
		t.Fatalf("narrow key lists %s", list)
	}
	projects := w.must(t, 200, req{method: "GET", path: "/v1/projects", key: kNarrow})
	if data := projects.JSON["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != string(w.p1.ID) {
		t.Fatalf("narrow key lists projects %s", projects)
	}
	if all := w.must(t, 200, req{method: "GET", path: "/v1/projects", key: kLive}); len(all.JSON["data"].([]any)) != 2 {
		t.Fatalf("projects %s", all)
	}
	// Another organization's agent is as missing, even for a key reaching all projects.
	other := newWorld(t, st, worldOpts{})
	w.fails(t, 404, fault.CodeAgentNotFound, req{method: "GET", path: "/v1/agents/" + other.createAgent(t, string(other.p1.ID), "Theirs", "faq").Str("id"), key: kLive})
}

func testFrozenProject(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	id := w.createAgent(t, string(w.p1.ID), "Support", "faq").Str("id")
	if err := st.SetProjectFrozen(context.Background(), w.p1.ID, true); err != nil {
		t.Fatal(err)
	}
	w.fails(t, 409, fault.CodeProjectFrozen, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": w.p1.ID, "definition": definition("New", "faq", "inbound")}})
	w.fails(t, 409, fault.CodeProjectFrozen, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive,
		body: map[string]any{"definition": definition("Support", "faq", "inbound")}})
	w.fails(t, 409, fault.CodeProjectFrozen, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive})
	w.fails(t, 409, fault.CodeProjectFrozen, req{method: "DELETE", path: "/v1/agents/" + id, key: kLive})
	w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id, key: kLive})
	w.createAgent(t, string(w.p2.ID), "Elsewhere", "faq") // the other project is not frozen
}

func testDuplicateName(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	w.createAgent(t, string(w.p1.ID), "Support", "faq")
	sales := w.createAgent(t, string(w.p1.ID), "Sales", "faq").Str("id")
	w.fails(t, 409, fault.CodeAgentNameTaken, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": w.p1.ID, "name": "support", "definition": definition("Whatever", "faq", "inbound")}})
	w.fails(t, 409, fault.CodeAgentNameTaken, req{method: "PUT", path: "/v1/agents/" + sales + "/definition", key: kLive,
		body: map[string]any{"name": "Support", "definition": definition("Sales", "faq", "inbound")}})
	// Without a name the definition's name is made unique.
	for _, want := range []string{"Support (2)", "Support (3)"} {
		r := w.createAgent(t, string(w.p1.ID), "Support", "faq")
		if r.Str("name") != want {
			t.Fatalf("name = %q, want %q", r.Str("name"), want)
		}
		def := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + r.Str("id") + "/definition", key: kLive})
		if def.Str("agent.name") != want {
			t.Fatalf("definition name = %q, want %q", def.Str("agent.name"), want)
		}
	}
}

func testBodies(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	id := w.createAgent(t, string(w.p1.ID), "Support", "faq").Str("id")
	create := func(body any) req {
		return req{method: "POST", path: "/v1/agents", key: kLive, body: body}
	}
	good := map[string]any{"project_id": w.p1.ID, "definition": definition("Body", "faq", "inbound")}
	// Media type.
	r := create(good)
	r.header = map[string]string{"Content-Type": "text/plain"}
	w.fails(t, 415, fault.CodeUnsupportedMediaType, r)
	r.header = map[string]string{"Content-Type": "application/json; charset=latin1"}
	w.fails(t, 415, fault.CodeUnsupportedMediaType, r)
	r.header = map[string]string{"Content-Type": "application/json; charset=UTF-8"}
	w.must(t, 201, r)
	// Malformed JSON names the place and the line.
	m := w.fails(t, 422, fault.CodeMalformedJSON, create(`{"project_id": "x",
  "definition": {"agent": {"name": }}}`))
	m.hasError(t, "/definition/agent/name", "malformed_json")
	if !strings.Contains(m.Str("detail"), "line 2") {
		t.Fatalf("malformed JSON detail without the line: %s", m)
	}
	w.fails(t, 422, fault.CodeMalformedJSON, create(`{"project_id": "a", "project_id": "b"}`)).hasError(t, "/project_id", "duplicate_member")
	w.fails(t, 422, fault.CodeMalformedJSON, create("{\"project_id\": \"\xff\"}"))
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/agents", key: kLive}).hasError(t, "", "required")
	// Unknown fields, types and ranges, with their places.
	unknown := map[string]any{"project_id": w.p1.ID, "definition": definition("U", "faq", "inbound"), "colour": "red"}
	w.fails(t, 422, fault.CodeValidationFailed, create(unknown)).hasError(t, "/colour", "unknown_field")
	w.fails(t, 422, fault.CodeInvalidDefinition, create(map[string]any{"project_id": w.p1.ID,
		"definition": definition("U", "faq", "inbound", func(a map[string]any) { a["colour"] = "red" })})).hasError(t, "/definition/agent/colour", "unknown_field")
	w.fails(t, 422, fault.CodeValidationFailed, create(map[string]any{"project_id": 5, "definition": definition("U", "faq", "inbound")})).hasError(t, "/project_id", "invalid_type")
	w.fails(t, 422, fault.CodeValidationFailed, create(map[string]any{"project_id": "nope", "definition": definition("U", "faq", "inbound")})).hasError(t, "/project_id", "invalid_format")
	w.fails(t, 422, fault.CodeValidationFailed, create(map[string]any{"project_id": w.p1.ID, "name": strings.Repeat("n", 121), "definition": definition("U", "faq", "inbound")})).hasError(t, "/name", "too_long")
	w.fails(t, 422, fault.CodeValidationFailed, create(map[string]any{"project_id": w.p1.ID, "name": "", "definition": definition("U", "faq", "inbound")})).hasError(t, "/name", "too_short")
	w.fails(t, 422, fault.CodeValidationFailed, create(map[string]any{"project_id": w.p1.ID, "name": "\u00a0Padded", "definition": definition("U", "faq", "inbound")}))
	w.fails(t, 422, fault.CodeValidationFailed, create(map[string]any{"project_id": w.p1.ID, "name": "Tab\there", "definition": definition("U", "faq", "inbound")}))
	w.fails(t, 422, fault.CodeInvalidDefinition, create(map[string]any{"project_id": w.p1.ID,
		"definition": definition("U", "faq", "inbound", func(a map[string]any) { a["max_duration_seconds"] = 5 })})).hasError(t, "/definition/agent/max_duration_seconds", "out_of_range")
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive, body: map[string]any{"note": strings.Repeat("é", 501)}}).hasError(t, "/note", "too_long")
	w.must(t, 201, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive, body: map[string]any{"note": strings.Repeat("é", 500)}})
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive, body: map[string]any{"notes": "x"}}).hasError(t, "/notes", "unknown_field")
	w.fails(t, 422, fault.CodeUnexpectedBodyContent, req{method: "DELETE", path: "/v1/agents/" + id, key: kLive, body: map[string]any{"force": true}}).hasError(t, "/force", "unknown_field")
	// Forbidden content in a definition, by place.
	phone := definition("P", "faq", "inbound", func(a map[string]any) { a["system_prompt"] = "Transfer callers to +44 20 7183 8750." })
	w.fails(t, 422, fault.CodeInvalidDefinition, create(map[string]any{"project_id": w.p1.ID, "definition": phone})).hasError(t, "/definition/agent/system_prompt", "phone_number_not_allowed")
	withID := definition("P", "faq", "inbound")
	withID["references"] = map[string]any{"callback_agent": id}
	w.fails(t, 422, fault.CodeInvalidDefinition, create(map[string]any{"project_id": w.p1.ID, "definition": withID})).hasError(t, "/definition/references/callback_agent", "object_id_not_allowed")
	// Kind and direction cannot change.
	w.fails(t, 422, fault.CodeKindMismatch, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive,
		body: map[string]any{"definition": definition("Support", "custom", "inbound")}}).hasError(t, "/definition/agent/kind", "kind_mismatch")
	w.fails(t, 422, fault.CodeDirectionMismatch, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive,
		body: map[string]any{"definition": definition("Support", "faq", "outbound")}}).hasError(t, "/definition/agent/direction", "direction_mismatch")
	// Size: over the operation's limit is 413.
	w.fails(t, 413, fault.CodeBodyTooLarge, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive,
		body: `{"note": "` + strings.Repeat("x", 70<<10) + `"}`})
	w.fails(t, 413, fault.CodeBodyTooLarge, create(`{"project_id": "`+strings.Repeat("x", 1<<20)+`"}`))
}

func testLists(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	var ids []string
	for i := range 25 {
		kind := "faq"
		if i%5 == 0 {
			kind = "custom"
		}
		ids = append(ids, w.createAgent(t, string(w.p1.ID), fmt.Sprintf("Agent %02d", i), kind).Str("id"))
	}
	get := func(q string) *resp { return w.must(t, 200, req{method: "GET", path: "/v1/agents" + q, key: kLive}) }
	first := get("")
	if first.JSON["object"] != "list" || len(first.JSON["data"].([]any)) != defaultLimit || first.JSON["has_more"] != true || first.Str("next_cursor") == "" {
		t.Fatalf("default page: %s", first)
	}
	// Walk with limit 7: every agent once, oldest first, and the last page says so.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "?limit=7"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p := get(q)
		for _, d := range p.JSON["data"].([]any) {
			got = append(got, d.(map[string]any)["id"].(string))
		}
		if p.JSON["has_more"] != true {
			if p.JSON["next_cursor"] != nil {
				t.Fatalf("last page with a cursor: %s", p)
			}
			break
		}
		cursor = p.Str("next_cursor")
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("paged %d agents, want the %d oldest first", len(got), len(ids))
	}
	// Filters, and the cursor bound to them.
	custom := get("?kind=custom&limit=2")
	if len(custom.JSON["data"].([]any)) != 2 || custom.JSON["has_more"] != true {
		t.Fatalf("kind filter: %s", custom)
	}
	c := custom.Str("next_cursor")
	w.must(t, 200, req{method: "GET", path: "/v1/agents?limit=2&kind=custom&cursor=" + c, key: kLive})
	w.fails(t, 422, fault.CodeCursorMismatch, req{method: "GET", path: "/v1/agents?kind=faq&cursor=" + c, key: kLive}).hasError(t, "?cursor", fault.CodeCursorMismatch)
	w.fails(t, 422, fault.CodeCursorMismatch, req{method: "GET", path: "/v1/agents?cursor=" + c, key: kLive})
	w.fails(t, 422, fault.CodeInvalidCursor, req{method: "GET", path: "/v1/agents?cursor=bm90LWEtY3Vyc29y", key: kLive})
	w.fails(t, 422, fault.CodeInvalidCursor, req{method: "GET", path: "/v1/phone-numbers?cursor=" + c, key: kLive})
	for _, bad := range []string{"0", "101", "-1", "ten", "1.5"} {
		w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/agents?limit=" + bad, key: kLive}).hasError(t, "?limit", fault.CodeInvalidParameter)
	}
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/agents?status=live", key: kLive}).hasError(t, "?status", fault.CodeInvalidParameter)
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/agents?project_id=abc", key: kLive})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/agents?limit=1&limit=2", key: kLive})
	w.fails(t, 422, fault.CodeUnknownParameter, req{method: "GET", path: "/v1/agents?starting_after=x", key: kLive}).hasError(t, "?starting_after", fault.CodeUnknownParameter)
	w.fails(t, 422, fault.CodeUnknownParameter, req{method: "GET", path: "/v1/me?verbose=1", key: kLive})
	for _, q := range []string{"?limit=1", "?limit=100", "?status=draft&direction=inbound&kind=faq&project_id=" + string(w.p1.ID)} {
		get(q)
	}
	if p := get("?status=published"); len(p.JSON["data"].([]any)) != 0 || p.JSON["has_more"] != false {
		t.Fatalf("no published agents yet: %s", p)
	}
}

// testPagingUnderInserts pages through the agents while others are created: every agent that
// existed before paging began is seen exactly once, and no agent twice.
func testPagingUnderInserts(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	before := map[string]bool{}
	for i := range 30 {
		a, err := st.Agents().Create(ctx, store.OrgScope(w.org.ID), store.NewAgent{ProjectID: w.p1.ID, Name: fmt.Sprintf("Before %d", i),
			Kind: "faq", Direction: "inbound", Channels: []string{"chat"}, Definition: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		before[string(a.ID)] = true
	}
	var inserted atomic.Int64
	insert := func(i int64) error {
		p := w.p1.ID
		if i%2 == 1 {
			p = w.p2.ID
		}
		_, err := st.Agents().Create(ctx, store.OrgScope(w.org.ID), store.NewAgent{ProjectID: p, Name: fmt.Sprintf("During %d", i),
			Kind: "faq", Direction: "inbound", Channels: []string{"chat"}, Definition: json.RawMessage(`{}`)})
		return err
	}
	// One writer inserts (up to 40) while the pages are read; after each page two more are
	// inserted before the next, so that every page boundary sees inserts on every engine.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 40 {
			select {
			case <-stop:
				return
			default:
			}
			if err := insert(inserted.Add(1)); err != nil {
				t.Errorf("insert while paging: %v", err)
				return
			}
		}
	})
	seen := map[string]int{}
	last := ""
	cursor := ""
	for pages := 0; pages < 1000; pages++ {
		q := "/v1/agents?limit=4"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p := w.must(t, 200, req{method: "GET", path: q, key: kLive})
		for _, d := range p.JSON["data"].([]any) {
			id := d.(map[string]any)["id"].(string)
			seen[id]++
			if id <= last {
				t.Fatalf("page order broken: %s after %s", id, last)
			}
			last = id
		}
		if p.JSON["has_more"] != true {
			break
		}
		cursor = p.Str("next_cursor")
		if pages < 12 {
			for range 2 {
				if err := insert(inserted.Add(1)); err != nil {
					t.Fatal(err)
				}
			}
		} else if pages == 12 {
			close(stop)
			wg.Wait()
		}
	}
	select {
	case <-stop:
	default:
		close(stop)
		wg.Wait()
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("agent %s seen %d times", id, n)
		}
	}
	for id := range before {
		if seen[id] != 1 {
			t.Fatalf("agent %s that existed before paging was not seen", id)
		}
	}
	if inserted.Load() < 20 {
		t.Fatalf("only %d agents inserted while paging", inserted.Load())
	}
}

func testUnknownRoutes(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	w.fails(t, 404, fault.CodeRouteNotFound, req{method: "GET", path: "/v1/nothing/here", key: kLive})
	w.fails(t, 404, fault.CodeRouteNotFound, req{method: "GET", path: "/v1", key: kLive})
	r := w.fails(t, 405, fault.CodeMethodNotAllowed, req{method: "DELETE", path: "/v1/me", key: kLive})
	if r.Header.Get("Allow") != "GET" {
		t.Fatalf("Allow = %q", r.Header.Get("Allow"))
	}
	r = w.fails(t, 405, fault.CodeMethodNotAllowed, req{method: "PATCH", path: "/v1/agents/0190a6f0-0000-7000-8000-0000000000aa", key: kLive})
	if r.Header.Get("Allow") != "GET, DELETE" {
		t.Fatalf("Allow = %q", r.Header.Get("Allow"))
	}
	w.fails(t, 401, fault.CodeMissingKey, req{method: "GET", path: "/v1/nothing"})
	doc := w.must(t, 200, req{method: "GET", path: "/openapi.v1.json"})
	if doc.JSON["openapi"] != "3.1.0" {
		t.Fatalf("openapi.v1.json: %.200s", doc.Body)
	}
}

func testAudit(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	created := w.createAgent(t, string(w.p1.ID), "Support", "faq")
	id := created.Str("id")
	w.must(t, 200, req{method: "PUT", path: "/v1/agents/" + id + "/definition", key: kLive, body: map[string]any{"definition": definition("Support", "faq", "inbound")}})
	pub := w.must(t, 201, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kTest, body: map[string]any{"note": "first"}})
	num, err := st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550111"})
	if err != nil {
		t.Fatal(err)
	}
	w.must(t, 200, req{method: "PATCH", path: "/v1/phone-numbers/" + string(num.ID), key: kLive, body: map[string]any{"agent_id": id, "label": "Main"}})
	// A refused change records nothing.
	w.fails(t, 409, fault.CodeAgentNameTaken, req{method: "POST", path: "/v1/agents", key: kLive, body: map[string]any{"project_id": w.p1.ID, "name": "Support", "definition": definition("S", "faq", "inbound")}})
	del := w.must(t, 200, req{method: "DELETE", path: "/v1/agents/" + id, key: kLive})
	events, err := st.ListAudit(ctx, store.AuditFilter{OrgID: w.org.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		action, object, objectID, key, rid string
		mode                               store.Mode
	}{
		{"agent.created", "agent", id, kLive, created.Header.Get("X-Request-Id"), store.ModeLive},
		{"agent.definition_replaced", "agent", id, kLive, "", store.ModeLive},
		{"agent.published", "agent", id, kTest, pub.Header.Get("X-Request-Id"), store.ModeTest},
		{"phone_number.updated", "phone_number", string(num.ID), kLive, "", store.ModeLive},
		{"agent.deleted", "agent", id, kLive, del.Header.Get("X-Request-Id"), store.ModeLive},
	}
	if len(events) != len(want) {
		t.Fatalf("%d audit events, want %d: %+v", len(events), len(want), events)
	}
	for i, wv := range want {
		ev := events[i]
		if ev.Action != wv.action || ev.ObjectType != wv.object || ev.ObjectID != wv.objectID || ev.ActorType != store.ActorAPIKey ||
			ev.ActorID != string(w.keyIDs[wv.key]) || ev.ActorMode != wv.mode || ev.ProjectID != w.p1.ID || ev.RequestID == "" ||
			(wv.rid != "" && ev.RequestID != wv.rid) {
			t.Errorf("audit event %d = %+v, want %+v", i, ev, wv)
		}
	}
	var data map[string]any
	json.Unmarshal(events[2].Data, &data)
	if data["version"] != float64(1) || data["note"] != "first" {
		t.Errorf("agent.published data = %s", events[2].Data)
	}
	// The purge worker removes the agent for good after 30 days and says so.
	a := w.api
	if n, err := a.Agents.Purge(ctx, time.Now().Add(29*24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("purge before time: %d, %v", n, err)
	}
	if n, err := a.Agents.Purge(ctx, time.Now().Add(31*24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge after 30 days: %d, %v", n, err)
	}
	if _, err := st.SystemAgents().GetIncludingDeleted(ctx, store.AgentID(id)); err == nil {
		t.Fatal("agent still stored after purge")
	}
	events, _ = st.ListAudit(ctx, store.AuditFilter{OrgID: w.org.ID, Actions: []string{"agent.purged"}})
	if len(events) != 1 || events[0].ObjectID != id || events[0].ActorType != store.ActorSystem {
		t.Fatalf("agent.purged events: %+v", events)
	}
	_ = http.StatusOK
}
