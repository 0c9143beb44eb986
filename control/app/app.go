// Package app is the domain layer of the control plane: the rules of each resource, in
// sub-packages by context (numbers, agents, calls, billing, audit, …), called alike by the HTTP
// transport, the job workers and the admin CLI.
//
// This root package holds what every context shares: the Actor (who acts and the Scope it
// reaches), Change (one store transaction with its audit events and, through a commit hook,
// whatever the caller must keep in the same transaction, such as an idempotent answer), the
// loaders every context uses (projects), and the Patch type of partial updates.
//
// The domain layer must never import net/http or the transport: it speaks in store types,
// its own resource types and classified errors (package fault).
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Actor is who acts and what it reaches.
type Actor struct {
	// Scope is applied by the store to every read and write of the actor's objects.
	Scope store.Scope
	// Org is the actor's organization as loaded when the request or job began (frozen flag,
	// credit).
	Org store.Org
	// Type, ID and Mode name the actor in the audit log: an API key (its id and mode), an
	// operator at the admin CLI, or the system (a worker, with the job's name as ID).
	Type store.ActorType
	ID   string
	// RequestID ties the audit events to the request's log lines ("" for jobs).
	RequestID string
}

// KeyActor is the actor of an API key.
func KeyActor(k store.Key, org store.Org, requestID string) Actor {
	return Actor{Scope: store.KeyScope(k), Org: org, Type: store.ActorAPIKey, ID: string(k.ID), RequestID: requestID}
}

// OperatorActor is the actor of an operator at the admin CLI: the whole organization, both modes.
func OperatorActor(org store.Org, who string) Actor {
	return Actor{Scope: store.OrgScope(org.ID), Org: org, Type: store.ActorOperator, ID: who}
}

// SystemActor is Parley itself acting for an organization (a worker, a scheduler).
func SystemActor(org store.Org, job string) Actor {
	return Actor{Scope: store.OrgScope(org.ID), Org: org, Type: store.ActorSystem, ID: job}
}

// Mode is the actor's key mode ("" for operators and the system).
func (a Actor) Mode() store.Mode { return a.Scope.Mode }

// Live reports whether the actor acts in live mode (an operator or the system does).
func (a Actor) Live() bool { return a.Scope.Mode != store.ModeTest }

// CommitHook is called inside a change's transaction, after the change and before the commit,
// with the change's result. The HTTP layer keeps the idempotent answer with it, so the answer
// and the change commit together or not at all.
type CommitHook func(ctx context.Context, tx *store.Tx, result any) error

type hookKey struct{}

// WithCommitHook returns ctx carrying h for the changes made under it.
func WithCommitHook(ctx context.Context, h CommitHook) context.Context {
	return context.WithValue(ctx, hookKey{}, h)
}

// Change runs fn in one store transaction. The audit events fn records, the change itself and
// whatever the context's commit hook keeps commit together or not at all.
func Change[T any](ctx context.Context, st *store.Store, act Actor, fn func(tx *store.Tx, au *Audit) (T, error)) (T, error) {
	var out T
	err := st.Tx(ctx, func(tx *store.Tx) error {
		au := &Audit{ctx: ctx, tx: tx, act: act}
		v, err := fn(tx, au)
		if err != nil {
			return err
		}
		out = v
		if h, ok := ctx.Value(hookKey{}).(CommitHook); ok && h != nil {
			return h(ctx, tx, v)
		}
		return nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// Audit records the audit events of one change, in its transaction.
type Audit struct {
	ctx context.Context
	tx  *store.Tx
	act Actor
}

// Record writes one event: the actor, the action (a dotted name such as
// "phone_number.updated"), the object and the changed fields. data never carries a secret's
// value.
func (au *Audit) Record(action, objectType, objectID string, project store.ProjectID, data any) error {
	e, err := au.act.AuditEvent(action, objectType, objectID, project, data)
	if err != nil {
		return err
	}
	return au.tx.InsertAudit(au.ctx, e)
}

// AuditEvent is the event Audit.Record writes for act, for a store write that records it in
// the statement that makes its change (the dialler's placed attempt).
func (a Actor) AuditEvent(action, objectType, objectID string, project store.ProjectID, data any) (store.AuditEvent, error) {
	var raw json.RawMessage
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return store.AuditEvent{}, fmt.Errorf("audit data: %w", err)
		}
		raw = b
	}
	mode := store.Mode("")
	if a.Type == store.ActorAPIKey {
		mode = a.Scope.Mode
	}
	return store.AuditEvent{
		OrgID: a.Org.ID, ProjectID: project, ActorType: a.Type, ActorID: a.ID, ActorMode: mode,
		Action: action, ObjectType: objectType, ObjectID: objectID, RequestID: a.RequestID, Data: raw,
	}, nil
}

// As returns the audit of the same change that records in act's name: a system change that
// crosses organizations (a purge) records each event under its own organization.
func (au *Audit) As(act Actor) *Audit { return &Audit{ctx: au.ctx, tx: au.tx, act: act} }

// Changed is the audit form of one changed field.
func Changed(from, to any) map[string]any { return map[string]any{"from": from, "to": to} }

// Nullable is s, or nil when s is empty (a cleared reference in an audit event or an answer).
func Nullable[T ~string](s T) any {
	if s == "" {
		return nil
	}
	return string(s)
}

// QuoteID quotes an id the caller sent for a message, shortened when it is long.
func QuoteID(id string) string {
	if len(id) > 64 {
		id = id[:64] + "…"
	}
	return strconv.Quote(id)
}

// NotFound returns the 404 of code for id when err says the object is missing (or outside the
// actor's scope, which the store answers the same way), and err otherwise.
func NotFound(err error, code, what, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return fault.E(code, "No %s %s is reachable with this key.", what, QuoteID(id))
	}
	return err
}

// Project returns the actor's project with id (404 project_not_found outside its scope).
func Project(ctx context.Context, q *store.Queries, act Actor, id string) (store.Project, error) {
	p, err := q.Projects().Get(ctx, act.Scope, store.ProjectID(id))
	return p, NotFound(err, fault.CodeProjectNotFound, "project", id)
}

// FilterProject resolves a list filter's optional project id in the actor's reach: "" for
// none, else the project's id, or the same 404 as a missing project.
func FilterProject(ctx context.Context, q *store.Queries, act Actor, id string) (store.ProjectID, error) {
	if id == "" {
		return "", nil
	}
	p, err := Project(ctx, q, act, id)
	return p.ID, err
}

// Writable refuses changes in a frozen project (409 project_frozen).
func Writable(p store.Project) error {
	if p.Frozen {
		return fault.E(fault.CodeProjectFrozen, "The project %s is frozen: its objects cannot be changed.", p.Name)
	}
	return nil
}

// WritableProject loads the project with id and refuses changes when it is frozen.
func WritableProject(ctx context.Context, q *store.Queries, act Actor, id store.ProjectID) error {
	p, err := Project(ctx, q, act, string(id))
	if err != nil {
		return err
	}
	return Writable(p)
}

// Patch is one member of a partial update (PATCH) body: left out (Set false), null (Set and
// Null) or a value. encoding/json calls UnmarshalJSON only for members that are present, which
// is what tells "left out" from null. In a body type it is declared with `json:",omitzero"`,
// and with the jsonschema tag "nullable" when null is taken.
type Patch[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// UnmarshalJSON records that the member was sent, and whether as null.
func (p *Patch[T]) UnmarshalJSON(b []byte) error {
	p.Set = true
	if string(b) == "null" {
		p.Null = true
		return nil
	}
	return json.Unmarshal(b, &p.Value)
}

// MarshalJSON writes the value, or null.
func (p Patch[T]) MarshalJSON() ([]byte, error) {
	if !p.Set || p.Null {
		return []byte("null"), nil
	}
	return json.Marshal(p.Value)
}

// IsZero reports a member left out (for omitzero).
func (p Patch[T]) IsZero() bool { return !p.Set }

// JSONSchemaAlias describes a Patch in the API's schemas as its value's type (the schema
// reflector reads this; "nullable" on the field adds null).
func (Patch[T]) JSONSchemaAlias() any {
	var v T
	return v
}
