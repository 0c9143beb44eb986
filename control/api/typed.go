package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/store"
)

// Typed operations. An operation is declared once, with Go types for what it takes and what it
// answers:
//
//	typed(operation{ID: "updatePhoneNumber", Method: "PATCH", Path: "/phone-numbers/{phone_number_id}", …},
//	    (*API).updatePhoneNumber)
//
//	func (a *API) updatePhoneNumber(ctx context.Context, c *call, in *updatePhoneNumberIn) (*numbers.PhoneNumber, error)
//
// The input type's fields say where each value comes from:
//
//	ID     string           `path:"phone_number_id" format:"uuid" doc:"The phone number."`
//	Status string           `query:"status" enum:"draft,published" doc:"…"`
//	Limit  int              `query:"limit" min:"1" max:"100" default:"20"`
//	Tags   []string         `query:"tag"` (repeatable)
//	N      string           `path:"version" type:"integer" min:"1"` (documented as an integer, read by the domain)
//	Since  time.Time        `query:"created_after"` (a date-time with its offset)
//	Body   numbers.Update   `body:"required"` (or body:"optional": an empty body stands for {})
//
// and embedding listQuery makes a list (limit and cursor). From these the declaration gets its
// parameters, its body schema and its answer schema (reflected from the Go types, see schema.go),
// so the route, the checks, the OpenAPI document and the handler cannot disagree.

// handlerFunc is what a typed operation does with its checked input.
type handlerFunc[In, Out any] func(a *API, ctx context.Context, c *call, in *In) (*Out, error)

// listQuery, embedded in an input type, makes the operation a list: it takes limit and cursor,
// which the handler reads with c.page().
type listQuery struct{}

var listQueryType = reflect.TypeFor[listQuery]()

// timeType is the type of a date-time query parameter.
var timeType = reflect.TypeFor[time.Time]()

// typed completes op from the types of its input and answer and sets its handler.
func typed[In, Out any](op operation, h handlerFunc[In, Out]) *operation {
	return declare[In, Out](op, func(a *API, ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *In) error {
		res, err := h(a, ctx, c, in)
		if err != nil {
			return a.answerError(w, r, c, err)
		}
		return a.writeAnswer(ctx, w, c, res)
	})
}

// rawHandlerFunc answers on w itself (a stream, a file), after the same checks and binding.
type rawHandlerFunc[In any] func(a *API, ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *In) error

// typedRaw is typed for operations whose answer is written by the handler (server-sent events,
// files); Out still describes the JSON answer in the document.
func typedRaw[In, Out any](op operation, h rawHandlerFunc[In]) *operation {
	return declare[In, Out](op, h)
}

// declare reads op's parameters and body from In and its answer from Out, and sets a handler
// that fills an In from the checked request and passes it on to h, with the commit hook that
// keeps an idempotent answer in place.
func declare[In, Out any](op operation, h rawHandlerFunc[In]) *operation {
	o := &op
	bindings := inputBindings(o, reflect.TypeFor[In]())
	o.Response = registerSchema(reflect.TypeFor[Out]())
	o.Handle = func(a *API, w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		c := callFrom(ctx)
		v := new(In)
		if err := bindings.bind(reflect.ValueOf(v).Elem(), c, r); err != nil {
			return err
		}
		return h(a, a.keepAnswer(ctx, c), c, w, r, v)
	}
	return o
}

// binding is where one field of an input type comes from.
type binding struct {
	field []int
	name  string
	in    string // "path", "query" or "body"
	kind  reflect.Kind
}

type bindings []binding

// inputBindings reads the input type's fields into op's parameters and body, and returns how to
// fill a value of it.
func inputBindings(op *operation, t reflect.Type) bindings {
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("api: %s: input %s is not a struct", op.ID, t))
	}
	var bs bindings
	for _, f := range reflect.VisibleFields(t) {
		switch {
		case f.Type == listQueryType:
			op.List = true
		case f.Tag.Get("path") != "" || f.Tag.Get("query") != "":
			p := paramFromField(op.ID, f)
			op.Params = append(op.Params, p)
			bs = append(bs, binding{field: f.Index, name: p.Name, in: p.In, kind: f.Type.Kind()})
		case f.Name == "Body":
			switch f.Tag.Get("body") {
			case "required":
			case "optional":
				op.BodyOptional = true
			default:
				panic(fmt.Sprintf("api: %s: Body needs body:\"required\" or body:\"optional\"", op.ID))
			}
			op.Body = registerSchema(f.Type)
			if !op.Multipart { // a multipart body is read by its handler; Body documents it
				bs = append(bs, binding{field: f.Index, in: "body"})
			}
		case f.Anonymous:
		default:
			panic(fmt.Sprintf("api: %s: input field %s has no path, query or body tag", op.ID, f.Name))
		}
	}
	return bs
}

// paramFromField is the parameter declared by a path or query field.
func paramFromField(opID string, f reflect.StructField) param {
	p := param{Name: f.Tag.Get("path"), In: "path", Type: "string", Format: f.Tag.Get("format"), Description: f.Tag.Get("doc")}
	if p.Name == "" {
		p.Name, p.In = f.Tag.Get("query"), "query"
	}
	kind := f.Type.Kind()
	if kind == reflect.Slice {
		p.Array, kind = true, f.Type.Elem().Kind()
	}
	switch {
	case kind == reflect.String:
	case kind == reflect.Int, kind == reflect.Int64:
		p.Type = "integer"
	case f.Type == timeType:
		p.Format = "date-time"
	default:
		panic(fmt.Sprintf("api: %s: parameter %s of type %s", opID, p.Name, f.Type))
	}
	if t := f.Tag.Get("type"); t != "" {
		// A path segment the domain reads itself (so that a malformed one is its 404) while
		// the document gives its JSON type: `type:"integer"` on a string field.
		p.Type = t
	}
	if e := f.Tag.Get("enum"); e != "" {
		p.Enum = strings.Split(e, ",")
	}
	p.Extension = f.Tag.Get("extension") == "true"
	p.Min, _ = strconv.Atoi(f.Tag.Get("min"))
	p.Max, _ = strconv.Atoi(f.Tag.Get("max"))
	if d := f.Tag.Get("default"); d != "" {
		if n, err := strconv.Atoi(d); err == nil && p.Type == "integer" {
			p.Default = n
		} else {
			p.Default = d
		}
	}
	return p
}

// bind fills v from the request's checked parameters and body.
func (bs bindings) bind(v reflect.Value, c *call, r *http.Request) error {
	for _, b := range bs {
		f := v.FieldByIndex(b.field)
		switch b.in {
		case "body":
			if err := c.bind(f.Addr().Interface()); err != nil {
				return err
			}
			continue
		case "path":
			f.SetString(pathParam(r, b.name))
			continue
		}
		raw, ok := c.query[b.name]
		if !ok {
			continue
		}
		switch b.kind {
		case reflect.String:
			f.SetString(raw)
		case reflect.Int, reflect.Int64:
			n, _ := strconv.ParseInt(raw, 10, 64) // checked by checkQuery
			f.SetInt(n)
		case reflect.Slice:
			f.Set(reflect.ValueOf(strings.Split(raw, ",")))
		case reflect.Struct: // time.Time
			t, _ := time.Parse(time.RFC3339Nano, raw) // checked by checkQuery
			f.Set(reflect.ValueOf(t))
		}
	}
	return nil
}

// actor is the caller as the domain layer sees it.
func (c *call) actor(ctx context.Context) app.Actor {
	return app.KeyActor(c.p.Key, c.p.Org, problem.RequestID(ctx))
}

// page reads limit and cursor of a list request, bound to its filters; pathValues are the
// path parameters the list depends on.
func (c *call) page(pathValues ...string) (page, error) { return pageOf(c, pathValues...) }

// storePage is the store's keyset page of p.
func (p page) storePage() store.Page { return store.Page{Limit: p.limit, After: p.after} }

// listOf builds the list envelope from up to limit+1 items; pos gives an item's position.
func listOf[T any](p page, items []T, pos func(T) string) *list[T] {
	l := makeList(p, items, pos)
	return &l
}

// keepAnswer returns ctx carrying the commit hook that stores the answer of a request with an
// Idempotency-Key in the transaction of its change (see app.Change).
func (a *API) keepAnswer(ctx context.Context, c *call) context.Context {
	if c.idem == nil {
		return ctx
	}
	return app.WithCommitHook(ctx, func(ctx context.Context, tx *store.Tx, result any) error {
		ans, err := c.answerOf(result)
		if err != nil {
			return err
		}
		if err := a.saveIdempotency(ctx, tx, c, ans); err != nil {
			return err
		}
		c.kept = ans
		return nil
	})
}

// answerOf encodes a successful answer of c's operation.
func (c *call) answerOf(v any) (*answer, error) {
	body, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	ans := &answer{status: c.op.Status, header: map[string]string{"Content-Type": "application/json"}, body: body}
	if c.op.Locate != nil {
		// The answer kept in a change's transaction is the domain's value, the one written
		// after it the handler's pointer: Locate is given the value either way.
		ans.header["Location"] = c.op.Locate(reflect.Indirect(reflect.ValueOf(v)).Interface())
	}
	return ans, nil
}

// writeAnswer writes a successful answer. One kept in a change's transaction is written as
// kept; one whose operation made no change in a transaction (a read, a call placed on a media
// node) is kept now when the request has an Idempotency-Key.
func (a *API) writeAnswer(ctx context.Context, w http.ResponseWriter, c *call, v any) error {
	ans := c.kept
	if ans == nil {
		var err error
		if ans, err = c.answerOf(v); err != nil {
			return err
		}
		if c.idem != nil {
			err := a.Store.Tx(ctx, func(tx *store.Tx) error { return a.saveIdempotency(ctx, tx, c, ans) })
			if errors.Is(err, errIdemRace) {
				return a.raceAnswer(w, c.r, c)
			}
			if err != nil {
				return err
			}
		}
	}
	for k, v := range ans.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
	return nil
}

// answerError handles a failed operation: when another node finished the same idempotent
// request first, its answer is replayed.
func (a *API) answerError(w http.ResponseWriter, r *http.Request, c *call, err error) error {
	if errors.Is(err, errIdemRace) {
		return a.raceAnswer(w, r, c)
	}
	return err
}

// raceAnswer answers as the request that kept its answer first (its lock had expired).
func (a *API) raceAnswer(w http.ResponseWriter, r *http.Request, c *call) error {
	if done, rerr := a.replay(w, r, c, c.idem); done || rerr != nil {
		return rerr
	}
	return fault.E(fault.CodeIdempotencyInUse, "A request with this Idempotency-Key is still being processed; retry when it has finished.")
}

// registered types of bodies and answers, by component name.
var (
	schemaMu    sync.Mutex
	schemaTypes = map[string]reflect.Type{}
)

// registerSchema records t as a component of the document and returns its name. A type
// described by a component written by hand (SchemaRef) is not recorded: its name is returned.
func registerSchema(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name, ok := refOf(t); ok {
		return name
	}
	name := componentName(t)
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if prev, ok := schemaTypes[name]; ok && prev != t {
		panic(fmt.Sprintf("api: two types are named %s in the document: %s and %s", name, prev, t))
	}
	schemaTypes[name] = t
	return name
}

// registeredSchemas returns the registered types in name order.
func registeredSchemas() []reflect.Type {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	names := make([]string, 0, len(schemaTypes))
	for n := range schemaTypes {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]reflect.Type, len(names))
	for i, n := range names {
		out[i] = schemaTypes[n]
	}
	return out
}
