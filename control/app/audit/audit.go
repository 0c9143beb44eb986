// Package audit serves the organization's audit log: everything people and API keys changed,
// oldest first, each event with its actor, action, object, request id and the changed fields
// (never a secret's value), kept 365 days. Events are recorded by app.Change in the
// transaction of the change they record; this package reads them and purges the old ones.
//
// It must never import net/http or the transport.
package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Retention is how long events are kept; Purge deletes older ones.
const Retention = 365 * 24 * time.Hour

// Settle is how long an event waits before it is listed: a change's transaction may commit a
// little after its events were stamped, so the newest events wait for the next page rather
// than appear behind a cursor that has moved past them.
const Settle = time.Minute

// AuditEvent is one event of the log.
type AuditEvent struct {
	Object     string         `json:"object" jsonschema:"enum=audit_event"`
	ID         string         `json:"id" jsonschema:"format=uuid"`
	Action     string         `json:"action" doc:"What was done: the object type and a past participle, such as phone_number.updated, api_key.created, credit.added. An open set."`
	Actor      AuditActor     `json:"actor"`
	ProjectID  *string        `json:"project_id" doc:"The project of the object; null when the event concerns the organization as a whole." jsonschema:"format=uuid,nullable"`
	ObjectType string         `json:"object_type" doc:"The type of the object changed, such as phone_number."`
	ObjectID   string         `json:"object_id" doc:"The id of the object changed."`
	RequestID  *string        `json:"request_id" doc:"The request that made the change (its X-Request-Id); null for the operator and the system." jsonschema:"nullable"`
	Data       map[string]any `json:"data" doc:"The changed fields: each as {from, to}, or the value it was made with. Never a secret's value."`
	CreatedAt  app.Time       `json:"created_at"`
}

// SchemaDoc describes the object in the document.
func (AuditEvent) SchemaDoc() string {
	return "One change made in the organization, through the API or by the operator (parley admin) or by Parley itself."
}

// AuditActor is who made a change.
type AuditActor struct {
	Type string  `json:"type" doc:"api_key: an API key (id is the key's id); operator: someone at the admin command line; system: Parley itself (id names the job)." jsonschema:"enum=api_key,enum=operator,enum=system"`
	ID   string  `json:"id" doc:"The key's id, the operator, or the job."`
	Mode *string `json:"mode" doc:"The key's mode; null unless the actor is an API key." jsonschema:"enum=live,enum=test,nullable"`
}

// Filter narrows the log.
type Filter struct {
	Actions      []string  // only these actions
	CreatedAfter time.Time // only events recorded after this (zero: no bound)
}

// Service serves the audit log.
type Service struct {
	Store *store.Store
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// List returns a page of the actor's organization's events that f selects, oldest first, with
// one more when another page follows. Events of the last minute (Settle) wait for a later
// page. The log is the organization's: an actor that does not reach every project is refused
// (403 all_projects_key_required), and a test key reads no events (an empty list, as the
// interface says "a test key reads no audit events").
func (s *Service) List(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]AuditEvent, error) {
	if !act.Scope.AllProjects {
		return nil, fault.E(fault.CodeAllProjectsRequired, "The audit log is the organization's: read it with a key that reaches every project.")
	}
	if !act.Live() {
		return nil, nil
	}
	es, err := s.Store.AuditLog().List(ctx, act.Scope, store.AuditQuery{Actions: f.Actions, CreatedAfter: f.CreatedAfter,
		CreatedBefore: s.now().Add(-Settle)}, pg)
	if err != nil {
		return nil, err
	}
	out := make([]AuditEvent, len(es))
	for i, e := range es {
		out[i] = View(e)
	}
	return out, nil
}

// Purge deletes the events of every organization older than Retention at now and returns how
// many. The periodic purge job calls it.
func (s *Service) Purge(ctx context.Context, now time.Time) (int, error) {
	return s.Store.AuditLog().PurgeBefore(ctx, now.Add(-Retention))
}

// View is the interface's form of a stored event.
func View(e store.AuditEvent) AuditEvent {
	v := AuditEvent{Object: "audit_event", ID: string(e.ID), Action: e.Action,
		Actor:     AuditActor{Type: string(e.ActorType), ID: e.ActorID},
		ProjectID: nullable(string(e.ProjectID)), ObjectType: e.ObjectType, ObjectID: e.ObjectID,
		RequestID: nullable(e.RequestID), Data: map[string]any{}, CreatedAt: app.T(e.CreatedAt)}
	if e.ActorMode != "" {
		m := string(e.ActorMode)
		v.Actor.Mode = &m
	}
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &v.Data) // the store holds JSON objects only
	}
	return v
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
