package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/jsoncheck"
)

// The OpenAPI 3.1 document (served at /openapi.v1.json without authentication). Its component
// schemas are reflected from the Go types of the operations (schema.go) and, hand-written, the
// agent definition's schema (package agentdef); its
// paths are made from operations(), with each operation's permission (x-permission), key kind
// (x-live-key-only), Idempotency-Key use (x-idempotency), parameters, strict body schemas,
// answers and the problem codes it can answer. The same schemas check request bodies at run
// time, so the document is what the service enforces.

// docURL names the document when its schemas are compiled.
const docURL = "https://parley.dev/openapi.v1.json"

// document builds the document once, without servers (OpenAPIDocument adds them).
var document = sync.OnceValues(func() (map[string]any, error) {
	registerSchema(problemType) // the answer of every error
	hooks := eventWebhooks()    // issue 14: the event catalogue, before the schemas are reflected
	schemas := map[string]any{}
	paths := map[string]any{}
	for _, op := range operations() {
		item, _ := paths["/v1"+op.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths["/v1"+op.Path] = item
		}
		item[strings.ToLower(op.Method)] = operationObject(op)
	}
	reflected, err := reflectedComponents()
	if err != nil {
		return nil, err
	}
	for name, s := range reflected {
		if _, dup := schemas[name]; dup {
			return nil, fmt.Errorf("api: component %s is defined twice", name)
		}
		schemas[name] = s
	}
	// The agent definition's schemas (AgentDefinitionInput, AgentDefinition and the
	// AgentDefinition.* parts) stay hand-written by design: they are the service.agent/1 JSON
	// Schema file of package agentdef, which also checks definitions on their own (agentdef.Parse,
	// the admin CLI, exported files), so reflection must not make a second source of them. The
	// reflected types refer to them by name (SchemaRef in schema.go).
	for name, s := range agentdef.OpenAPIComponents() {
		if _, dup := schemas[name]; dup {
			return nil, fmt.Errorf("api: component %s is defined twice", name)
		}
		schemas[name] = s
	}
	var catalog []any
	for _, c := range fault.Sorted() {
		catalog = append(catalog, map[string]any{"code": c, "status": fault.Codes[c].Status, "description": fault.Codes[c].Description})
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": map[string]any{
			"title":   "Parley API",
			"version": "1",
			"description": "Voice and chat agents. All paths begin with /v1. Every request sends Authorization: Bearer <API key> (sk_live_… or sk_test_…); a live key must never be sent from a browser. " +
				"Bodies are JSON (Content-Type: application/json, UTF-8); a member an operation does not take is refused (422, errors[] names it). " +
				"Errors are RFC 9457 problem documents with a stable code (x-error-codes lists them all). " +
				"Lists take limit (1 to 100, default 20) and cursor (the previous page's next_cursor, sent with the same filters) and answer {object: list, data, has_more, next_cursor}; paging is stable while objects are added. " +
				"Operations with x-idempotency take an Idempotency-Key header (at most 120 printable ASCII characters): the same request with the same key within 24 hours is answered with the first successful answer, byte for byte, with Idempotent-Replayed: true; another request with the key gets 422; a request arriving while the first is in progress gets 409. Keys are scoped to the organization, the key mode (live or test) and the operation. Answers other than 2xx are not kept. " +
				"Every answer carries RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset and RateLimit-Policy for the tightest of the key's and the organization's limits (requests a minute, a minute's worth in a burst); 429 carries Retry-After. " +
				"Each operation needs the permission in x-permission; a frozen organization answers 403 to every change, a frozen project 409; an object outside the key's project reach answers 404 exactly as a missing one.",
		},
		"security": []any{map[string]any{"bearer": []any{}}},
		"tags": []any{
			map[string]any{"name": "Keys"}, map[string]any{"name": "Projects"},
			map[string]any{"name": "Agents"}, map[string]any{"name": "Phone numbers"},
			map[string]any{"name": "Calls", "description": callsTagDoc},
			map[string]any{"name": "Chats", "description": chatsTagDoc},
			map[string]any{"name": "Conversations", "description": conversationsTagDoc},
			map[string]any{"name": "Testing", "description": "Operations that let an integration rehearse without a carrier: they run the real engine against the fake providers."},
			map[string]any{"name": "Billing"}, map[string]any{"name": "Audit"},
			map[string]any{"name": "Events", "description": eventsTagDoc}, map[string]any{"name": "Webhooks", "description": webhooksTagDoc},
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "An API key: sk_live_… or sk_test_…"},
			},
			"headers": rateLimitHeaders(),
		},
		"webhooks":      hooks,
		"x-error-codes": catalog,
		"x-scopes":      slices.Clone(Scopes),
	}
	return doc, nil
})

func rateLimitHeaders() map[string]any {
	h := func(desc string) map[string]any {
		return map[string]any{"description": desc, "schema": map[string]any{"type": "integer", "minimum": 0}}
	}
	return map[string]any{
		"RateLimit-Limit":     h("Requests the tightest applicable limit allows in a burst."),
		"RateLimit-Remaining": h("Requests that would be allowed right now."),
		"RateLimit-Reset":     h("Seconds until the limit is full again."),
		"RateLimit-Policy":    map[string]any{"description": "The tightest limit: <requests>;w=60 (a minute).", "schema": map[string]any{"type": "string"}},
		"Retry-After":         h("Seconds to wait before retrying."),
	}
}

// operationObject is the OpenAPI Operation Object of op.
func operationObject(op *operation) map[string]any {
	o := map[string]any{
		"operationId":     op.ID,
		"summary":         op.Summary,
		"tags":            []any{op.Tag},
		"x-live-key-only": op.LiveOnly,
		"x-idempotency":   op.Idempotency.String(),
		"x-changes":       op.Changes,
	}
	desc := op.Description
	if op.Permission != "" {
		o["x-permission"] = op.Permission
		desc = strings.TrimSpace(desc + " Needs the permission " + op.Permission + ".")
	} else {
		o["x-permission"] = nil
	}
	if desc != "" {
		o["description"] = desc
	}
	var params []any
	for _, p := range op.allParams() {
		s := map[string]any{"type": p.Type}
		if p.Format != "" {
			s["format"] = p.Format
		}
		if len(p.Enum) > 0 {
			s["enum"] = p.Enum
		}
		if p.Type == "integer" && p.Max > 0 {
			s["minimum"], s["maximum"] = p.Min, p.Max
		}
		if p.Default != nil {
			s["default"] = p.Default
		}
		if p.Name == "cursor" {
			s["minLength"] = 1
		}
		if p.Array {
			s = map[string]any{"type": "array", "items": s}
		}
		po := map[string]any{"name": p.Name, "in": p.In, "required": p.In == "path", "schema": s}
		if p.Array {
			po["style"], po["explode"] = "form", true
		}
		if p.Description != "" {
			po["description"] = p.Description
		}
		if p.Extension {
			po["x-extension"] = true
		}
		params = append(params, po)
	}
	if op.Idempotency != idemNone {
		params = append(params, map[string]any{
			"name": idemHeader, "in": "header", "required": op.Idempotency == idemRequired,
			"description": "A unique value per request (a UUID, say): a retry with the same key and request is answered with the first answer instead of being done twice.",
			"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": maxIdemKey, "pattern": "^[\\x20-\\x7e]+$"},
		})
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	if op.Body != "" {
		media := "application/json"
		if op.Multipart {
			media = "multipart/form-data"
		}
		content := map[string]any{media: map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + op.Body}}}
		for _, m := range op.RawMedia {
			raw := map[string]any{"type": "string"}
			if !strings.HasPrefix(m, "text/") && m != "application/x-ndjson" {
				raw["format"] = "binary"
			}
			content[m] = map[string]any{"schema": raw}
		}
		o["requestBody"] = map[string]any{
			"required":    !op.BodyOptional,
			"description": fmt.Sprintf("At most %d bytes.", op.maxBody()),
			"content":     content,
		}
	}
	if op.Extension {
		o["x-extension"] = true
	}
	headers := map[string]any{}
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"} {
		headers[h] = map[string]any{"$ref": "#/components/headers/" + h}
	}
	ok := map[string]any{
		"description": op.Summary,
		"headers":     maps.Clone(headers),
		"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + op.Response}}},
	}
	if op.Location {
		ok["headers"].(map[string]any)["Location"] = map[string]any{"description": "The path of the created object.", "schema": map[string]any{"type": "string"}}
	}
	if op.Stream {
		ok["content"].(map[string]any)["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string", "description": op.StreamDoc}}
		ok["description"] = op.Summary + ". " + op.StreamDoc
	}
	var partial map[string]any
	if op.Binary != "" {
		ok["content"] = map[string]any{op.Binary: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		ok["headers"].(map[string]any)["Accept-Ranges"] = map[string]any{"description": "bytes", "schema": map[string]any{"type": "string"}}
		partial = map[string]any{
			"description": "The bytes a Range header asked for (RFC 9110 §14).",
			"headers": map[string]any{
				"Content-Range":   map[string]any{"description": "bytes <first>-<last>/<size>", "schema": map[string]any{"type": "string"}},
				"RateLimit-Limit": map[string]any{"$ref": "#/components/headers/RateLimit-Limit"}, "RateLimit-Remaining": map[string]any{"$ref": "#/components/headers/RateLimit-Remaining"},
				"RateLimit-Reset": map[string]any{"$ref": "#/components/headers/RateLimit-Reset"}, "RateLimit-Policy": map[string]any{"$ref": "#/components/headers/RateLimit-Policy"},
			},
			"content": map[string]any{op.Binary: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}},
		}
	}
	if op.Idempotency != idemNone {
		ok["headers"].(map[string]any)[replayedHeader] = map[string]any{"description": "true when the answer is the replay of an earlier request with the same Idempotency-Key.", "schema": map[string]any{"type": "string", "enum": []any{"true"}}}
	}
	responses := map[string]any{fmt.Sprint(op.Status): ok}
	if partial != nil {
		responses["206"] = partial
	}
	byStatus := map[int][]string{}
	for _, c := range op.codes() {
		byStatus[fault.Codes[c].Status] = append(byStatus[fault.Codes[c].Status], c)
	}
	statuses := slices.Collect(maps.Keys(byStatus))
	sort.Ints(statuses)
	for _, st := range statuses {
		cs := byStatus[st]
		var lines []string
		for _, c := range cs {
			lines = append(lines, c+": "+fault.Codes[c].Description)
		}
		rh := maps.Clone(headers)
		if st == 429 || st == 503 || st == 409 {
			rh["Retry-After"] = map[string]any{"$ref": "#/components/headers/Retry-After"}
		}
		if st == 401 {
			rh["WWW-Authenticate"] = map[string]any{"description": "Bearer realm=\"parley\"", "schema": map[string]any{"type": "string"}}
		}
		responses[fmt.Sprint(st)] = map[string]any{
			"description":   statusText(st) + ". Codes: " + strings.Join(lines, " "),
			"x-error-codes": cs,
			"headers":       rh,
			"content":       map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}},
		}
	}
	o["responses"] = responses
	return o
}

// OpenAPIDocument returns the document as JSON, naming baseURL (if set) as its server.
func OpenAPIDocument(baseURL string) ([]byte, error) {
	doc, err := document()
	if err != nil {
		return nil, err
	}
	d := maps.Clone(doc)
	if baseURL != "" {
		d["servers"] = []any{map[string]any{"url": strings.TrimRight(baseURL, "/")}}
	}
	return json.MarshalIndent(d, "", "  ")
}

// OpenAPIHandler serves the document; it needs no authentication.
func (a *API) OpenAPIHandler() http.Handler {
	body, err := OpenAPIDocument(a.BaseURL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			a.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(append(body, '\n'))
	})
}

// validators compiles the body schema of each operation from the document, once.
var validators = sync.OnceValues(func() (map[string]*jsoncheck.Validator, error) {
	doc, err := document()
	if err != nil {
		return nil, err
	}
	// Compile from a JSON round trip of the document, in the forms the validator expects.
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	v, err := jsoncheck.Decode(b)
	if err != nil {
		return nil, err
	}
	out := map[string]*jsoncheck.Validator{}
	for _, op := range operations() {
		if op.Body == "" || out[op.Body] != nil {
			continue
		}
		val, err := jsoncheck.Compile(map[string]any{docURL: v}, docURL+"#/components/schemas/"+op.Body)
		if err != nil {
			return nil, err
		}
		out[op.Body] = val
	}
	return out, nil
})

func bodyValidator(schema string) (*jsoncheck.Validator, error) {
	vs, err := validators()
	if err != nil {
		return nil, err
	}
	v, ok := vs[schema]
	if !ok {
		return nil, fmt.Errorf("api: no validator for %s", schema)
	}
	return v, nil
}
