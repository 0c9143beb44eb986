package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parley-voice/parley/control/store"
)

var _ = register(scenario{"ReachGenerated", testReachGenerated})

// reachObject makes, in the world's second project with the live key, an object that a path
// parameter names, and says whether it belongs to a key mode (seen only by keys of its mode).
type reachObject struct {
	modeBound bool
	make      func(t *testing.T, w *world, ids map[string]string) string
}

// reachObjects has one entry per path parameter of the interface. An operation whose path names
// a parameter missing here fails the test: add how to make its object, and the operation is
// covered.
var reachObjects = map[string]reachObject{
	"agent_id": {make: func(t *testing.T, w *world, _ map[string]string) string {
		return w.publishedAgent(t, w.p2.ID, "Reach "+randHex(3), "outbound", channels("phone", "chat", "voice"))
	}},
	"version":    {make: func(*testing.T, *world, map[string]string) string { return "1" }},
	"project_id": {make: func(_ *testing.T, w *world, _ map[string]string) string { return string(w.p2.ID) }},
	"phone_number_id": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return string(w.number(t, w.p2.ID, ids["agent_id"], "+14155550177").ID)
	}},
	"conversation_id": {modeBound: true, make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive,
			body: map[string]any{"agent_id": ids["agent_id"], "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	}},
	"command_id": {modeBound: true, make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + ids["conversation_id"] + "/notes", key: kLive,
			body: map[string]any{"text": "VIP"}}).Str("id")
	}},
	"sender_id": {make: func(t *testing.T, w *world, ids map[string]string) string { // issue 19
		sn, err := w.st.WhatsAppSenders().Create(t.Context(), store.OrgScope(w.org.ID), store.NewWhatsAppSender{OrgID: w.org.ID, ProjectID: w.p2.ID,
			AgentID: store.AgentID(ids["agent_id"]), PhoneNumberID: fmt.Sprint(time.Now().UnixNano()), BusinessAccountID: "102290129340398"})
		if err != nil {
			t.Fatal(err)
		}
		return string(sn.ID)
	}},
	"scheduled_call_id": {modeBound: true, make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/scheduled-calls", key: kLive, header: idem("reach-" + randHex(4)),
			body: map[string]any{"agent_id": ids["agent_id"], "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"},
				"dial_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}}).Str("id")
	}},
	// issue 14: receivers and their deliveries belong to the mode of the key that made them.
	"receiver_id": {modeBound: true, make: func(t *testing.T, w *world, _ map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kLive,
			body: map[string]any{"project_id": w.p2.ID, "url": "https://reach.example.com/hook"}}).Str("id")
	}},
	"delivery_id": {modeBound: true, make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/webhooks/" + ids["receiver_id"] + "/test", key: kLive}).Str("id")
	}},
	// issue 15: campaigns (live only), contacts (per project) and the do-not-call list (the
	// whole organization's: a narrow key does not reach it).
	"campaign_id": {modeBound: true, make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("reach-" + randHex(4)),
			body: map[string]any{"agent_id": ids["agent_id"], "name": "Reach", "contacts": []any{map[string]any{"to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}}}}).Str("id")
	}},
	"contact_id": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/contacts", key: kLive,
			body: map[string]any{"project_id": ids["project_id"], "number": "+14155550101"}}).Str("id")
	}},
	"number": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive,
			body: map[string]any{"number": "+14155550102"}}).Str("number")
	}},
	// issue 16: knowledge bases, their documents (a raw text body) and crawls (queued; no worker runs here).
	"knowledge_base_id": {make: func(t *testing.T, w *world, _ map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/knowledge-bases", key: kLive,
			body: map[string]any{"project_id": string(w.p2.ID), "name": "Reach " + randHex(3)}}).Str("id")
	}},
	"document_id": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/knowledge-bases/" + ids["knowledge_base_id"] + "/documents", key: kLive,
			body: "Opening hours are nine to five.", header: map[string]string{"Content-Type": "text/plain"}}).Str("id")
	}},
	"crawl_id": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/knowledge-bases/" + ids["knowledge_base_id"] + "/crawls", key: kLive,
			body: map[string]any{"start_url": "http://127.0.0.1:9/"}}).Str("id")
	}},
	// issue 18: saved conversations and runs.
	"evaluation_id": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + ids["agent_id"] + "/evaluations", key: kLive,
			body: map[string]any{"turns": []any{map[string]any{"text": "hi"}}, "criteria": map[string]any{"success": "greets"}}}).Str("id")
	}},
	"run_id": {make: func(t *testing.T, w *world, ids map[string]string) string {
		return w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + ids["agent_id"] + "/evaluation-runs", key: kLive}).Str("id")
	}},
	// issue 17: the vault, tools and MCP servers.
	"secret_id": {make: func(t *testing.T, w *world, _ map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/vault/secrets", key: kLive,
			body: map[string]any{"project_id": string(w.p2.ID), "name": "reach-" + randHex(3), "type": "bearer", "value": "reach-value"}}).Str("id")
	}},
	"tool_id": {make: func(t *testing.T, w *world, _ map[string]string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/tools", key: kLive,
			body: map[string]any{"project_id": string(w.p2.ID), "name": "reach_" + randHex(3), "description": "d",
				"request": map[string]any{"method": "GET", "url": "https://example.com/x"}}}).Str("id")
	}},
	"server_id": {make: func(t *testing.T, w *world, _ map[string]string) string {
		// No MCP client in the reach world: saved with a last_error, which is all reach needs.
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/mcp-servers", key: kLive,
			body: map[string]any{"project_id": string(w.p2.ID), "name": "reach_" + randHex(3), "url": "https://example.com/mcp"}}).Str("id")
	}},
}

// reachOrder is the order objects are made in (later ones use earlier ones' ids).
var reachOrder = []string{"project_id", "agent_id", "version", "phone_number_id", "conversation_id", "command_id", "scheduled_call_id", "secret_id", "tool_id", "server_id", "receiver_id", "delivery_id",
	"campaign_id", "contact_id", "number", "knowledge_base_id", "document_id", "crawl_id", "evaluation_id", "run_id", "sender_id"}

// reachBodies are request bodies for operations whose body the schema-made sample does not fit
// (it must pass the body checks, which run before the object is loaded).
var reachBodies = map[string]func() any{
	"replaceAgentDefinition": func() any { return map[string]any{"definition": definition("Reach", "custom", "outbound")} },
	"updateWebhookReceiver":  func() any { return map[string]any{"include_values": true} },
	"createWebhookReceiver":  func() any { return map[string]any{"project_id": "", "url": "https://reach.example.com/hook"} },
	"addCampaignContacts":    func() any { return map[string]any{"contacts": []any{map[string]any{"to_number": "+14155550123"}}} },
	"updateContact":          func() any { return map[string]any{"name": "Reach"} },
	"createKnowledgeCrawl":   func() any { return map[string]any{"start_url": "http://127.0.0.1:9/"} },
	"updateWhatsappSender":   func() any { return map[string]any{"display_number": "+1 555 0100"} }, // issue 19
	"sendWhatsappMessage":    func() any { return map[string]any{"text": "Hello"} },
}

var pathParamRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// testReachGenerated calls every operation that names an object in its path with three keys
// that must not reach it: one of another organization, one of another project, and (for
// objects that belong to a key mode, on operations a test key may call) one of the other mode.
// Each answers 404 exactly as it does for random ids: same status, type, code, title and detail
// but for the id itself and the request id. It is made from the operation table, so a new
// operation is covered without a test of its own.
func testReachGenerated(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	other := newWorld(t, st, worldOpts{})
	ids := map[string]string{}
	for _, name := range reachOrder {
		ids[name] = reachObjects[name].make(t, w, ids)
	}
	for name := range reachObjects {
		if ids[name] == "" {
			t.Fatalf("reachObjects has %s but reachOrder does not", name)
		}
	}
	// The three outsiders, all with every permission: another organization's key (kept in this
	// world's key table), the narrow key (project one only) and the test key.
	w.keys["other-org"] = other.keys[kLive]
	covered := 0
	for _, op := range operations() {
		names := pathParamRE.FindAllStringSubmatch(op.Path, -1)
		if len(names) == 0 {
			continue
		}
		modeBound := false
		for _, m := range names {
			o, ok := reachObjects[m[1]]
			if !ok {
				t.Errorf("%s: no reachObjects entry makes the object of path parameter %s; add one", op.ID, m[1])
				continue
			}
			modeBound = modeBound || o.modeBound
		}
		outsiders := []string{"other-org", kNarrow}
		if modeBound && !op.LiveOnly {
			outsiders = append(outsiders, kTest)
		}
		body := reachBody(t, op)
		for _, key := range outsiders {
			real := reachRequest(op, key, body, func(p string) string { return ids[p] })
			random := reachRequest(op, key, body, func(p string) string {
				if p == "version" {
					return "7"
				}
				return uuid.Must(uuid.NewV7()).String()
			})
			a, b := w.do(t, real), w.do(t, random)
			if a.Status != http.StatusNotFound {
				t.Errorf("%s %s with key %s: %s, want 404", op.Method, real.path, key, a)
				continue
			}
			if na, nb := reachNorm(a, real.path), reachNorm(b, random.path); na != nb {
				t.Errorf("%s with key %s: out of reach and missing differ:\n  %s\n  %s", op.ID, key, na, nb)
			}
		}
		covered++
	}
	// Objects named in the query (filters) or the body (the agent a call or chat starts with,
	// the project an agent is made in): an outsider's answer must not tell the object from a
	// missing one.
	for _, op := range operations() {
		if pathParamRE.MatchString(op.Path) {
			continue
		}
		var query, members []string
		for _, p := range op.allParams() {
			if _, ok := reachObjects[p.Name]; ok && p.In == "query" {
				query = append(query, p.Name)
			}
		}
		sample, _ := reachBody(t, op).(map[string]any)
		for name := range sample {
			// A body's number (a contact's, a do-not-call entry's) is a value, not a reference to
			// the do-not-call entry that the path parameter {number} names (issue 15).
			if _, ok := reachObjects[name]; ok && name != "number" {
				members = append(members, name)
			}
		}
		if len(query)+len(members) == 0 {
			continue
		}
		build := func(key string, id func(string) string) req {
			q := reachRequest(op, key, nil, id)
			if len(members) > 0 {
				body := map[string]any{}
				for k, v := range sample {
					body[k] = v
				}
				for _, m := range members {
					body[m] = id(m)
				}
				q.body = body
			}
			sep := "?"
			for _, name := range query {
				q.path += sep + name + "=" + id(name)
				sep = "&"
			}
			return q
		}
		for _, key := range []string{"other-org", kNarrow} {
			real := build(key, func(p string) string { return ids[p] })
			random := build(key, func(string) string { return uuid.Must(uuid.NewV7()).String() })
			a, b := w.do(t, real), w.do(t, random)
			if a.Status == http.StatusOK && b.Status == http.StatusOK && len(query) > 0 && len(members) == 0 {
				// A filter naming an unknown object lists nothing: the list must be empty.
				if data, _ := a.JSON["data"].([]any); len(data) != 0 {
					t.Errorf("%s with key %s lists %d items of another's object", op.ID, key, len(data))
				}
				continue
			}
			if a.Status != b.Status || a.Code() != b.Code() {
				t.Errorf("%s with key %s: out of reach %s, missing %s", op.ID, key, a, b)
			}
		}
		covered++
	}
	t.Logf("%d operations naming an object checked with outsider keys", covered)
	if covered < 10 {
		t.Fatalf("only %d operations name an object; the table walk found too few", covered)
	}
}

// reachRequest is op's request with path parameters filled by id.
func reachRequest(op *operation, key string, body any, id func(string) string) req {
	path := "/v1" + pathParamRE.ReplaceAllStringFunc(op.Path, func(m string) string { return id(m[1 : len(m)-1]) })
	q := req{method: op.Method, path: path, key: key, body: body}
	if op.Idempotency != idemNone {
		q.header = idem("reach-" + randHex(6))
	}
	if op.Binary != "" {
		q.header = map[string]string{"Accept": op.Binary}
	}
	return q
}

// reachBody is a body that passes op's body checks.
func reachBody(t *testing.T, op *operation) any {
	if f, ok := reachBodies[op.ID]; ok {
		return f()
	}
	if op.Body == "" || op.Multipart {
		return nil
	}
	doc, err := document()
	if err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	return sampleOf(schemas, map[string]any{"$ref": "#/components/schemas/" + op.Body})
}

// sampleOf makes the smallest value that fits a schema of the document: required members only,
// the first enum value or const, the minimum of numbers, formats honoured.
func sampleOf(schemas map[string]any, s map[string]any) any {
	if ref, ok := s["$ref"].(string); ok {
		next, _ := schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
		return sampleOf(schemas, next)
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			return sampleOf(schemas, alts[0].(map[string]any))
		}
	}
	typ := s["type"]
	if ts, ok := typ.([]any); ok && len(ts) > 0 {
		typ = ts[0]
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		names := make([]string, 0, len(req))
		for _, r := range req {
			names = append(names, r.(string))
		}
		if len(names) == 0 {
			if n, _ := s["minProperties"].(float64); n > 0 || s["minProperties"] != nil {
				for name := range props {
					names = append(names, name)
					break
				}
			}
		}
		sort.Strings(names)
		for _, name := range names {
			p, _ := props[name].(map[string]any)
			out[name] = sampleOf(schemas, p)
		}
		return out
	case "array":
		return []any{}
	case "integer", "number":
		if m, ok := s["minimum"]; ok {
			return m
		}
		return 1
	case "boolean":
		return false
	case "string":
		switch s["format"] {
		case "uuid":
			return uuid.Must(uuid.NewV7()).String()
		case "date-time":
			return time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		}
		if p, _ := s["pattern"].(string); strings.Contains(p, `\+[1-9]`) {
			return "+14155550123"
		}
		return "x"
	}
	return map[string]any{}
}

// reachNorm is a 404 answer without its request id, with the ids of its path replaced.
func reachNorm(r *resp, path string) string {
	m := map[string]any{}
	for k, v := range r.JSON {
		if k != "request_id" {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	s := string(b)
	for _, seg := range strings.Split(path, "/") {
		if _, err := uuid.Parse(seg); err == nil {
			s = strings.ReplaceAll(s, seg, "<id>")
		}
	}
	return fmt.Sprint(r.Status) + " " + s
}
