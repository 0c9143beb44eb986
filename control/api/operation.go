package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/go-chi/chi/v5"

	"github.com/parley-voice/parley/control/jsoncheck"
)

// idemMode says whether an operation takes an Idempotency-Key.
type idemMode int

const (
	idemNone     idemMode = iota // the header is ignored
	idemOptional                 // taken when sent
	idemRequired                 // 400 without it
)

func (m idemMode) String() string {
	return [...]string{"none", "optional", "required"}[m]
}

// param is a path or query parameter of an operation. The same declaration checks requests
// and describes the parameter in the OpenAPI document.
type param struct {
	Name        string
	In          string // "path" or "query"
	Type        string // "string" or "integer"
	Format      string // "uuid" or "date-time"
	Enum        []string
	Array       bool // repeatable (?include=a&include=b): the values are checked one by one
	Min, Max    int  // integers: bounds when Max > 0
	Default     any
	Description string
	Extension   bool // Parley's addition to an operation of the specification (x-extension)
}

// operation is one operation of the interface: how it is routed, what it needs, what it takes
// and answers. The router, the checks every request goes through and the OpenAPI document are
// all made from these declarations, so they cannot disagree.
type operation struct {
	ID           string // the operation id of the specification
	Method       string
	Path         string // chi pattern below /v1
	Tag          string
	Summary      string
	Description  string
	Permission   string // "" when any valid key may call it
	LiveOnly     bool   // a test key is refused (403 live_key_required)
	Changes      bool   // changes something: refused in a frozen organization, audited
	Idempotency  idemMode
	Body         string // component schema of the JSON body; "" takes none
	BodyOptional bool   // an empty body stands for {}
	MaxBody      int64  // bytes; 0 means defaultMaxBody
	Params       []param
	List         bool   // takes limit and cursor, answers a list
	Status       int    // the success status
	Response     string // component schema of the success answer
	Location     bool   // the answer carries Location: the created object's path
	// Locate gives the Location of a typed operation's answer (with Location); it is given
	// the answer's value, never a pointer to it.
	Locate func(v any) string
	// Stream: the answer may instead be server-sent events (text/event-stream), described by
	// StreamDoc. Binary: the answer is a file of this media type, served with Range (206).
	// Multipart: the body is multipart/form-data (Body names its schema) read by the handler.
	Stream    bool
	StreamDoc string
	Binary    string
	Multipart bool
	// RawMedia: the body may also come as the file itself, in these media types, read by the
	// handler (issue 15: a contacts import as text/csv or application/x-ndjson; issue 16: a
	// knowledge document as PDF, HTML, DOCX, …).
	RawMedia []string
	// Extension marks an operation Parley adds to the specification's index (x-extension).
	Extension bool
	// Replay, when set, answers a replayed Idempotency-Key itself (a streamed answer replays
	// as a stream) from the stored answer.
	Replay func(w http.ResponseWriter, r *http.Request, status int, body []byte)
	Codes  []string
	Handle func(a *API, w http.ResponseWriter, r *http.Request) error
}

// Limits of request bodies.
const (
	defaultMaxBody    = 64 << 10 // 64 KB, the specification's limit on placing a call
	definitionMaxBody = 1 << 20  // 1 MB for bodies carrying an agent definition
)

func (op *operation) maxBody() int64 {
	if op.MaxBody > 0 {
		return op.MaxBody
	}
	return defaultMaxBody
}

// listParams are the parameters every list takes.
var listParams = []param{
	{Name: "limit", In: "query", Type: "integer", Min: 1, Max: 100, Default: defaultLimit, Description: "Page size, 1 to 100."},
	{Name: "cursor", In: "query", Type: "string", Description: "The next_cursor of the previous page, sent with the same filters."},
}

// allParams returns the operation's parameters, list parameters included.
func (op *operation) allParams() []param {
	ps := slices.Clone(op.Params)
	if op.List {
		ps = append(ps, listParams...)
	}
	return ps
}

// codes returns every problem code the operation can answer.
func (op *operation) codes() []string {
	cs := slices.Clone(commonCodes)
	add := func(c ...string) { cs = append(cs, c...) }
	if op.Permission != "" {
		add(fault.CodeMissingPermission)
	}
	if op.LiveOnly {
		add(fault.CodeLiveKeyRequired)
	}
	if op.Changes {
		add(fault.CodeOrganizationFrozen)
	}
	if op.Multipart {
		add(fault.CodeBodyTooLarge, fault.CodeUnsupportedMediaType, fault.CodeValidationFailed)
	} else if op.Method != http.MethodGet {
		add(fault.CodeBodyTooLarge, fault.CodeUnsupportedMediaType, fault.CodeMalformedJSON)
		if op.Body != "" {
			add(fault.CodeValidationFailed)
		} else {
			add(fault.CodeUnexpectedBodyContent)
		}
	}
	hasQuery := false
	for _, p := range op.allParams() {
		hasQuery = hasQuery || p.In == "query"
	}
	add(fault.CodeUnknownParameter)
	if hasQuery {
		add(fault.CodeInvalidParameter)
	}
	if op.List {
		add(fault.CodeInvalidCursor, fault.CodeCursorMismatch)
	}
	switch op.Idempotency {
	case idemRequired:
		add(fault.CodeIdempotencyMissing)
		fallthrough
	case idemOptional:
		add(fault.CodeIdempotencyTooLong, fault.CodeIdempotencyInvalid, fault.CodeIdempotencyReused, fault.CodeIdempotencyInUse)
	}
	add(op.Codes...)
	slices.Sort(cs)
	return slices.Compact(cs)
}

// call is what the checks learnt about a request, for its handler.
type call struct {
	op    *operation
	p     *Principal
	query map[string]string // the query parameters, checked
	raw   []byte            // the body as sent
	value any               // the body decoded, checked against the schema
	idem  *idemState        // nil without an Idempotency-Key
	r     *http.Request
	kept  *answer // the answer stored with the Idempotency-Key in the change's transaction
}

type callKey struct{}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// handler returns the http.Handler of op: the checks every operation shares, then op.Handle.
func (a *API) handler(op *operation) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{op: op, p: PrincipalFrom(r.Context()), r: r}
		r = r.WithContext(context.WithValue(r.Context(), callKey{}, c))
		if err := a.serve(w, r, c); err != nil {
			a.fail(w, r, err)
		}
	})
}

// needScope refuses the request (403 missing_permission) unless its key holds perm, which what
// (a part of the operation, such as include=cost) needs besides the operation's own.
func (c *call) needScope(perm, what string) error {
	if c.p.Key.HasScope(perm) {
		return nil
	}
	e := fault.E(fault.CodeMissingPermission, "%s needs the permission %s, which this key lacks.", what, perm)
	e.Extra = map[string]any{"permission": perm}
	return e
}

// serve runs the shared checks in order, then the handler.
func (a *API) serve(w http.ResponseWriter, r *http.Request, c *call) error {
	op, p := c.op, c.p
	if op.Permission != "" && !p.Key.HasScope(op.Permission) {
		e := fault.E(fault.CodeMissingPermission, "This key lacks the permission %s, which %s %s needs.", op.Permission, op.Method, "/v1"+op.Path)
		e.Extra = map[string]any{"permission": op.Permission}
		return e
	}
	if op.LiveOnly && !p.Live() {
		return fault.E(fault.CodeLiveKeyRequired, "%s %s needs a live key; this is a test key.", op.Method, "/v1"+op.Path)
	}
	if op.Changes && p.Org.Frozen {
		return fault.E(fault.CodeOrganizationFrozen, "The organization is frozen: it can read but not change anything.")
	}
	q, err := checkQuery(r, op)
	if err != nil {
		return err
	}
	c.query = q
	if op.Method != http.MethodGet && !op.Multipart {
		if c.raw, err = readBody(r, op); err != nil {
			return err
		}
	}
	if op.Idempotency != idemNone {
		release, replayed, err := a.idempotency(w, r, c)
		if err != nil || replayed {
			return err
		}
		defer release()
	}
	if op.Method != http.MethodGet && !op.Multipart {
		if err := a.checkBody(c); err != nil {
			return err
		}
	}
	return op.Handle(a, w, r)
}

// readBody reads the body within the operation's limit and checks its media type.
func readBody(r *http.Request, op *operation) ([]byte, error) {
	limit := op.maxBody()
	if r.ContentLength > limit {
		return nil, fault.E(fault.CodeBodyTooLarge, "The request body is larger than %d bytes, the most %s %s takes.", limit, op.Method, "/v1"+op.Path)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fault.E(fault.CodeBodyTooLarge, "The request body is larger than %d bytes.", mbe.Limit)
		}
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, fault.E(fault.CodeBodyTooLarge, "The request body is larger than %d bytes, the most %s %s takes.", limit, op.Method, "/v1"+op.Path)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, nil
	}
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return nil, fault.E(fault.CodeUnsupportedMediaType, "Send the body as Content-Type: application/json (got %q).", ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return nil, fault.E(fault.CodeUnsupportedMediaType, "Bodies are UTF-8 JSON; charset %q is not taken.", cs)
	}
	return body, nil
}

// checkBody decodes the body strictly and checks it against the operation's schema.
func (a *API) checkBody(c *call) error {
	op := c.op
	if c.raw == nil {
		if op.Body == "" || op.BodyOptional {
			c.raw, c.value = []byte("{}"), map[string]any{}
			if op.Body == "" {
				return nil
			}
			return a.validateBody(c)
		}
		return &fault.Error{Status: 422, Code: fault.CodeValidationFailed, Detail: fmt.Sprintf("%s %s needs a JSON body.", op.Method, "/v1"+op.Path),
			Errors: []fault.FieldError{{Pointer: "", Code: jsoncheck.CodeRequired, Detail: "A JSON body is required."}}}
	}
	v, err := jsoncheck.Decode(c.raw)
	if err != nil {
		return malformed(err)
	}
	c.value = v
	if op.Body == "" {
		obj, ok := v.(map[string]any)
		if !ok || len(obj) > 0 {
			var fes []fault.FieldError
			for k := range obj {
				fes = append(fes, fault.FieldError{Pointer: "/" + jsoncheck.EscapePointer(k), Code: jsoncheck.CodeUnknownField,
					Detail: fmt.Sprintf("Unknown field %q: %s %s takes no body members.", k, op.Method, "/v1"+op.Path)})
			}
			slices.SortFunc(fes, func(a, b fault.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) })
			if len(fes) == 0 {
				fes = []fault.FieldError{{Pointer: "", Code: jsoncheck.CodeInvalidType, Detail: "The body must be empty or {}."}}
			}
			return &fault.Error{Status: 422, Code: fault.CodeUnexpectedBodyContent, Detail: fes[0].Detail, Errors: fes}
		}
		return nil
	}
	return a.validateBody(c)
}

// validateBody checks c.value against the operation's body schema.
func (a *API) validateBody(c *call) error {
	v, err := bodyValidator(c.op.Body)
	if err != nil {
		return err
	}
	if ps := v.Validate(c.value); len(ps) > 0 {
		code := fault.CodeValidationFailed
		for _, p := range ps {
			if strings.HasPrefix(p.Pointer, "/definition/") || p.Pointer == "/definition" {
				code = fault.CodeInvalidDefinition
			}
		}
		return invalid(code, ps)
	}
	return nil
}

// malformed turns a decoding error into a 422 malformed_json.
func malformed(err error) error {
	var se *jsoncheck.SyntaxError
	if errors.As(err, &se) {
		return &fault.Error{Status: 422, Code: fault.CodeMalformedJSON, Detail: "The body is not valid JSON: " + se.Error() + ".",
			Errors: []fault.FieldError{{Pointer: se.Pointer, Code: jsoncheck.CodeMalformed, Detail: se.Error()}}}
	}
	var de *jsoncheck.DuplicateError
	if errors.As(err, &de) {
		return &fault.Error{Status: 422, Code: fault.CodeMalformedJSON, Detail: "The body " + de.Error() + "; each member may appear once.",
			Errors: []fault.FieldError{{Pointer: de.Pointer, Code: jsoncheck.CodeDuplicate, Detail: de.Error()}}}
	}
	return err
}

// invalid builds a 422 from problems; detail repeats the first ones.
func invalid(code string, ps []jsoncheck.Problem) *fault.Error {
	fes := make([]fault.FieldError, len(ps))
	for i, p := range ps {
		fes[i] = fault.FieldError{Pointer: p.Pointer, Code: p.Code, Detail: p.Detail}
	}
	return fault.Invalid(code, fes)
}

// bind decodes the checked body into dst.
func (c *call) bind(dst any) error {
	if err := json.Unmarshal(c.raw, dst); err != nil {
		return &fault.Error{Status: 422, Code: fault.CodeValidationFailed, Detail: "The body does not fit: " + err.Error(), Cause: err}
	}
	return nil
}

// checkQuery checks the query against the operation's parameters: no unknown or repeated
// parameter, each of its type and range.
func checkQuery(r *http.Request, op *operation) (map[string]string, error) {
	values := r.URL.Query()
	out := map[string]string{}
	known := map[string]param{}
	for _, p := range op.allParams() {
		if p.In == "query" {
			known[p.Name] = p
		}
	}
	var fes []fault.FieldError
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		vs := values[k]
		p, ok := known[k]
		switch {
		case !ok:
			fes = append(fes, fault.FieldError{Parameter: k, Code: fault.CodeUnknownParameter, Detail: fmt.Sprintf("%s %s takes no query parameter %q.", op.Method, "/v1"+op.Path, k)})
			continue
		case len(vs) > 1 && !p.Array:
			fes = append(fes, fault.FieldError{Parameter: k, Code: fault.CodeInvalidParameter, Detail: fmt.Sprintf("Query parameter %s is given %d times; give it once.", k, len(vs))})
			continue
		}
		bad := false
		for _, v := range vs {
			if msg := p.check(v); msg != "" {
				fes = append(fes, fault.FieldError{Parameter: k, Code: fault.CodeInvalidParameter, Detail: msg})
				bad = true
				break
			}
		}
		if !bad {
			out[k] = strings.Join(vs, ",")
		}
	}
	if len(fes) == 0 {
		return out, nil
	}
	code := fault.CodeInvalidParameter
	if fes[0].Code == fault.CodeUnknownParameter {
		code = fault.CodeUnknownParameter
	}
	return nil, &fault.Error{Status: 422, Code: code, Detail: fes[0].Detail, Errors: fes}
}

// check returns what is wrong with a value of p, or "".
func (p param) check(v string) string {
	switch {
	case p.Type == "integer":
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Sprintf("%s must be an integer, not %q.", p.Name, v)
		}
		if p.Max > 0 && (n < p.Min || n > p.Max) {
			return fmt.Sprintf("%s must be from %d to %d, not %d.", p.Name, p.Min, p.Max, n)
		}
	case p.Format == "uuid":
		if !isUUID(v) {
			return fmt.Sprintf("%s must be a UUID, not %q.", p.Name, v)
		}
	case p.Format == "date-time":
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Sprintf("%s must be a date-time with its offset (RFC 3339), such as 2026-05-01T09:30:00Z, not %q.", p.Name, v)
		}
	case len(p.Enum) > 0:
		if !slices.Contains(p.Enum, v) {
			return fmt.Sprintf("%s must be one of %s, not %q.", p.Name, strings.Join(p.Enum, ", "), v)
		}
	case v == "":
		return fmt.Sprintf("%s must not be empty.", p.Name)
	}
	return ""
}

// pathParam returns a path parameter of the request.
func pathParam(r *http.Request, name string) string { return chi.URLParam(r, name) }
