// Package events holds the catalogue of Parley's events (issue 14): every event type, the Go
// type of its data, which are heard by default, and the Event object that GET /v1/events lists
// and every webhook delivery POSTs. The catalogue is a registry: a context that emits its own
// events (campaigns, say) registers their types from its own package with Register, and they
// appear in the OpenAPI document, in the checks of receivers' event lists and in the default
// set, with no change here.
//
// The package must never import net/http or the transport; it sends nothing itself.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Type is one event type of the catalogue.
type Type struct {
	Name string // dotted: conversation.ended
	// Summary says when it is emitted (the document's description of the type).
	Summary string
	// Data is the Go type of the event's data; its schema is reflected into the document.
	Data reflect.Type
	// OptIn types are heard only by receivers that name them (not in the default set).
	OptIn bool
	// Direct types are sent to one receiver, never fanned out (webhook.test).
	Direct bool
}

// Option changes a registered type.
type Option func(*Type)

// OptIn keeps the type out of the default set of a receiver made without events.
func OptIn() Option { return func(t *Type) { t.OptIn = true } }

// Direct marks a type sent to one receiver only.
func Direct() Option { return func(t *Type) { t.Direct = true } }

var (
	mu       sync.RWMutex
	registry = map[string]Type{}
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
)

// Register adds an event type whose data has the Go type of data (a value or a nil pointer of
// it). It panics on a malformed name or a type registered twice with another data type: these
// are mistakes of composition, made at init.
func Register(name, summary string, data any, opts ...Option) {
	if !nameRE.MatchString(name) {
		panic(fmt.Sprintf("events: %q is not a dotted lowercase event type", name))
	}
	dt := reflect.TypeOf(data)
	for dt != nil && dt.Kind() == reflect.Pointer {
		dt = dt.Elem()
	}
	if dt == nil {
		panic("events: Register " + name + " without a data type")
	}
	t := Type{Name: name, Summary: summary, Data: dt}
	for _, o := range opts {
		o(&t)
	}
	if (t.OptIn || t.Direct) != (slices.Contains(store.OptInEventTypes, name) || name == store.WebhookTestEvent) {
		panic("events: " + name + ": its opt-in or direct flag disagrees with the store's fan-out (store.OptInEventTypes)")
	}
	mu.Lock()
	defer mu.Unlock()
	if prev, ok := registry[name]; ok && prev.Data != dt {
		panic("events: " + name + " registered twice")
	}
	registry[name] = t
}

// Types returns every registered type, by name.
func Types() []Type {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Type, 0, len(registry))
	for _, t := range registry {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Type) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Lookup returns the registered type name.
func Lookup(name string) (Type, bool) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := registry[name]
	return t, ok
}

// Names lists every type a receiver may name (all but the direct ones), sorted.
func Names() []string {
	var out []string
	for _, t := range Types() {
		if !t.Direct {
			out = append(out, t.Name)
		}
	}
	return out
}

// DefaultNames lists the types a receiver made without events hears, sorted.
func DefaultNames() []string {
	var out []string
	for _, t := range Types() {
		if !t.Direct && !t.OptIn {
			out = append(out, t.Name)
		}
	}
	return out
}

// Event is the Event object of the interface: what GET /v1/events lists and the body of every
// webhook delivery.
type Event struct {
	Object         string          `json:"object" jsonschema:"enum=event"`
	ID             string          `json:"id" doc:"The event's id. A delivery's webhook-id names the delivery, not the event: each receiver gets its own." jsonschema:"format=uuid"`
	Type           string          `json:"type" doc:"The event type (an open set: a client must tolerate types it does not know)."`
	CreatedAt      app.Time        `json:"created_at"`
	ProjectID      *string         `json:"project_id" jsonschema:"format=uuid,nullable"`
	Mode           string          `json:"mode" doc:"live, or test for events of what test keys made." jsonschema:"enum=live,enum=test"`
	ConversationID *string         `json:"conversation_id" doc:"The conversation the event is about, if any." jsonschema:"format=uuid,nullable"`
	AgentID        *string         `json:"agent_id" doc:"The agent of that conversation, if any." jsonschema:"format=uuid,nullable"`
	Data           json.RawMessage `json:"data" doc:"The object the event is about, as it was when the event happened; its schema is the type's (the document's webhooks section names each)." jsonschema:"type=object"`
}

// SchemaDoc describes the object in the document.
func (Event) SchemaDoc() string {
	return "Something that happened in a project: a conversation ended, was analyzed or deleted, a scheduled call was placed, …. Events are kept 30 days."
}

// View is the interface's form of a stored event.
func View(e store.Event) Event {
	return Event{Object: "event", ID: string(e.ID), Type: e.Type, CreatedAt: app.T(e.CreatedAt), ProjectID: nullable(string(e.ProjectID)),
		Mode: string(e.Mode), ConversationID: nullable(string(e.ConversationID)), AgentID: nullable(string(e.AgentID)), Data: e.Data}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Retention is how long events (and webhook deliveries) are kept.
const Retention = 30 * 24 * time.Hour

// Filter narrows GET /v1/events.
type Filter struct {
	Types          []string
	ConversationID string
	CreatedAfter   time.Time
	CreatedBefore  time.Time
}

// Service lists events.
type Service struct {
	Store *store.Store
}

// List returns the actor's events that f selects, newest first. A test key sees test events
// only (the scope's mode).
func (s *Service) List(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]Event, error) {
	if err := CheckTypes("", "type", f.Types, true); err != nil {
		return nil, err
	}
	sf := store.EventFilter{Types: f.Types, ConversationID: store.ConversationID(f.ConversationID)}
	if !f.CreatedAfter.IsZero() {
		sf.CreatedAfter = &f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		sf.CreatedBefore = &f.CreatedBefore
	}
	es, err := s.Store.Events().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(es))
	for i, e := range es {
		out[i] = View(e)
	}
	return out, nil
}

// CheckTypes refuses unknown event types (422 unknown_event_type, naming each): in the body at
// pointer, or, with param set, in that query parameter. Direct types are refused too unless
// allowDirect.
func CheckTypes(pointer, param string, types []string, allowDirect bool) error {
	var fes []fault.FieldError
	for i, n := range types {
		t, ok := Lookup(n)
		if !ok || (t.Direct && !allowDirect) {
			fes = append(fes, fault.FieldError{Pointer: fmt.Sprintf("%s/%d", pointer, i), Parameter: param, Code: fault.CodeUnknownEventType,
				Detail: fmt.Sprintf("%s is not an event type a receiver can hear (known: %v).", app.QuoteID(n), Names())})
		}
	}
	if len(fes) > 0 {
		return fault.Invalid(fault.CodeUnknownEventType, fes)
	}
	return nil
}

// Emit records an event of a registered type with data, on tx (the transaction of the change
// it reports), so that its webhook deliveries commit with it.
func Emit(ctx context.Context, tx *store.Tx, e store.Event, data any) (store.Event, error) {
	if _, ok := Lookup(e.Type); !ok {
		return store.Event{}, fmt.Errorf("events: %q is not a registered event type", e.Type)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return store.Event{}, fmt.Errorf("events: %s data: %w", e.Type, err)
	}
	e.Data = b
	return tx.InsertEvent(ctx, e)
}
