package api

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/fault"

	"github.com/go-chi/chi/v5"
)

// specIndex is the specification's index of operations (testdata/spec-index.txt, copied from
// spec/interface-v1.md): operation id → method and path.
func specIndex(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("testdata/spec-index.txt")
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 3 {
			t.Fatalf("spec-index.txt: bad line %q", line)
		}
		idx[f[0]] = f[1] + " " + f[2]
	}
	if len(idx) != 98 {
		t.Fatalf("spec-index.txt holds %d operations, the specification 98", len(idx))
	}
	return idx
}

func servedDocument(t *testing.T) map[string]any {
	t.Helper()
	raw, err := OpenAPIDocument("https://api.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestRouterMatchesDocument walks the chi router and the document's paths: a route missing
// from the document, or a documented operation the router lacks, fails.
func TestRouterMatchesDocument(t *testing.T) {
	routes := map[string]bool{}
	err := chi.Walk((&API{}).Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes[method+" /v1"+strings.TrimSuffix(route, "/")] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	doc := servedDocument(t)
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			documented[strings.ToUpper(method)+" "+path] = op.(map[string]any)["operationId"].(string)
		}
	}
	for r := range routes {
		if _, ok := documented[r]; !ok {
			t.Errorf("route %s is served but not in the OpenAPI document", r)
		}
	}
	spec := specIndex(t)
	extOf := map[string]bool{}
	for _, item := range doc["paths"].(map[string]any) {
		for _, raw := range item.(map[string]any) {
			op := raw.(map[string]any)
			extOf[op["operationId"].(string)] = op["x-extension"] == true
		}
	}
	specRoutes := map[string]string{}
	for id, r := range spec {
		specRoutes[r] = id
	}
	served := 0
	for r, id := range documented {
		if !routes[r] {
			t.Errorf("the document has %s (%s) but the router does not serve it", r, id)
		}
		switch want, inSpec := spec[id]; {
		case extOf[id] && inSpec:
			t.Errorf("%s is in the specification's index but marked x-extension", id)
		case extOf[id] && specRoutes[r] != "":
			t.Errorf("extension %s takes %s, the route of the specification's %s", id, r, specRoutes[r])
		case !extOf[id] && !inSpec:
			t.Errorf("operation %s (%s) is neither in the specification's index nor marked x-extension", id, r)
		case !extOf[id] && want != r:
			t.Errorf("operation %s is %s in the document, %q in the specification", id, r, want)
		case !extOf[id]:
			served++
		}
	}
	t.Logf("%d of the specification's %d operations served, %d extensions", served, len(spec), len(documented)-served)
	if servers := doc["servers"].([]any); servers[0].(map[string]any)["url"] != "https://api.example.test" {
		t.Errorf("servers = %v", servers)
	}
}

// TestDocumentContents checks what every operation must declare.
func TestDocumentContents(t *testing.T) {
	openAPIRouter(t) // kin-openapi loads and validates it
	doc := servedDocument(t)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc["openapi"])
	}
	catalog := map[string]int{}
	for _, e := range doc["x-error-codes"].([]any) {
		m := e.(map[string]any)
		catalog[m["code"].(string)] = int(m["status"].(float64))
	}
	for c, ec := range fault.Codes {
		if catalog[c] != ec.Status {
			t.Errorf("code %s: status %d in the document, %d in the catalog", c, catalog[c], ec.Status)
		}
	}
	specPerms := []string{"agents:read", "agents:write", "calls:write", "campaigns:read", "campaigns:write", "chats:write",
		"conversations:read", "conversations:delete", "transcripts:read", "billing:read", "webhooks:read", "webhooks:write",
		"evaluations:run", "audit:read", "whatsapp:write"}
	for _, p := range specPerms {
		if !slices.Contains(Scopes, p) {
			t.Errorf("permission %s of the specification is not a scope", p)
		}
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for path, item := range doc["paths"].(map[string]any) {
		for method, raw := range item.(map[string]any) {
			op := raw.(map[string]any)
			where := strings.ToUpper(method) + " " + path
			perm, ok := op["x-permission"]
			if !ok {
				t.Errorf("%s: no x-permission", where)
			} else if perm == nil && op["operationId"] != "getMe" {
				// getMe is the one exception: any valid key reads itself, so that a narrowly
				// scoped key can see what it may do.
				t.Errorf("%s: every operation needs a named permission", where)
			} else if perm != nil && !slices.Contains(Scopes, perm.(string)) {
				t.Errorf("%s: x-permission %v is not a scope", where, perm)
			}
			for _, k := range []string{"x-live-key-only", "x-idempotency", "summary", "responses"} {
				if op[k] == nil {
					t.Errorf("%s: no %s", where, k)
				}
			}
			for status, r := range op["responses"].(map[string]any) {
				st, _ := strconv.Atoi(status)
				resp := r.(map[string]any)
				hs, _ := resp["headers"].(map[string]any)
				if hs["RateLimit-Limit"] == nil || hs["RateLimit-Remaining"] == nil || hs["RateLimit-Reset"] == nil {
					t.Errorf("%s %s: rate-limit headers not documented", where, status)
				}
				if st < 400 {
					continue
				}
				cs, _ := resp["x-error-codes"].([]any)
				if len(cs) == 0 {
					t.Errorf("%s %s: no x-error-codes", where, status)
				}
				for _, c := range cs {
					if catalog[c.(string)] != st {
						t.Errorf("%s %s lists %v, whose status is %d", where, status, c, catalog[c.(string)])
					}
				}
			}
			if rb, ok := op["requestBody"].(map[string]any); ok {
				for ct, media := range rb["content"].(map[string]any) {
					ref, ok := media.(map[string]any)["schema"].(map[string]any)["$ref"].(string)
					if !ok {
						if ct == "application/json" {
							t.Errorf("%s: a JSON body without a component schema", where)
						}
						continue // a raw body (CSV, JSON lines, a document file)
					}
					checkStrict(t, where, schemas, ref, map[string]bool{})
				}
			}
		}
	}
	for _, name := range []string{"AgentDefinition", "AgentDefinitionInput", "AgentDefinition.Agent", "AgentDefinition.References", "Problem"} {
		if schemas[name] == nil {
			t.Errorf("component %s missing", name)
		}
	}
}

// checkStrict fails when an object schema reachable from a request body allows members it
// does not name.
func checkStrict(t *testing.T, where string, schemas map[string]any, ref string, seen map[string]bool) {
	t.Helper()
	var walk func(s any)
	walk = func(s any) {
		switch x := s.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				name := strings.TrimPrefix(r, "#/components/schemas/")
				if !seen[name] {
					seen[name] = true
					walk(schemas[name])
				}
			}
			if props, ok := x["properties"].(map[string]any); ok && len(props) > 0 {
				if x["additionalProperties"] != false && x["type"] == "object" {
					t.Errorf("%s: a body object with %v allows other members", where, slices.Sorted(mapKeys(props)))
				}
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(map[string]any{"$ref": ref})
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestErrorCatalog checks that every Code constant of the package is catalogued and that
// every catalogued code can be answered somewhere.
func TestErrorCatalog(t *testing.T) {
	fset := token.NewFileSet()
	consts := map[string]string{}
	for _, f := range []string{"../fault/fault.go"} {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "Code") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	if len(consts) < 30 {
		t.Fatalf("found only %d code constants", len(consts))
	}
	for name, code := range consts {
		if _, ok := fault.Codes[code]; !ok {
			t.Errorf("%s (%q) is not in the catalog", name, code)
		}
	}
	answered := map[string]bool{fault.CodeRouteNotFound: true, fault.CodeMethodNotAllowed: true}
	for _, op := range operations() {
		for _, c := range op.codes() {
			answered[c] = true
		}
	}
	// Codes kept for operations of later versions: a required Idempotency-Key (calls,
	// scheduled calls, campaigns).
	reserved := []string{fault.CodeIdempotencyMissing}
	var dead []string
	for c := range fault.Codes {
		if !answered[c] && !slices.Contains(reserved, c) {
			dead = append(dead, c)
		}
	}
	sort.Strings(dead)
	if len(dead) > 0 {
		t.Errorf("catalogued codes no operation answers: %v", dead)
	}
}

// TestScopes checks ParseScopes.
func TestScopes(t *testing.T) {
	all, err := ParseScopes("")
	if err != nil || len(all) != len(Scopes) {
		t.Fatalf("ParseScopes(\"\") = %v, %v", all, err)
	}
	got, err := ParseScopes(" agents:read, agents:read ,numbers:write")
	if err != nil || !slices.Equal(got, []string{"agents:read", "numbers:write"}) {
		t.Fatalf("ParseScopes = %v, %v", got, err)
	}
	if _, err := ParseScopes("agents:fly"); err == nil {
		t.Fatal("an unknown scope was taken")
	}
}
