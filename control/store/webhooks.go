package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/secrets"
)

// Webhooks (issue 14). A receiver hears the events of its project and mode. Recording an event
// (InsertEvent) makes, in the same transaction, one delivery per receiver that hears it and
// one job of kind WebhookDeliverKind that carries it: an event recorded is an event delivered
// at least once, whatever crashes.

// ReceiverID names a webhook receiver.
type ReceiverID string

// DeliveryID names a delivery: the webhook-id of each of its attempts.
type DeliveryID string

// WebhookDeliverKind is the job kind of a delivery; its payload is {"delivery_id": …}.
const WebhookDeliverKind = "webhooks.deliver"

// WebhookJobAttempts is the max attempts of a delivery job: the delivery counts its own
// attempts (the retry schedule); the job's count covers, besides, claims lost to dead workers
// and waits for a receiver that has its most deliveries in flight.
const WebhookJobAttempts = 1000

// MaxReceiversPerProject is how many receivers a project may have (both modes together).
const MaxReceiversPerProject = 10

// OptInEventTypes are heard only by receivers that name them; the default set (a receiver
// made without events) is every other type. WebhookTestEvent is never fanned out: it goes to
// the receiver tested only.
var OptInEventTypes = []string{"conversation.transcript", "form.abandoned"}

// WebhookTestEvent is the type of the event POST /v1/webhooks/{id}/test sends.
const WebhookTestEvent = "webhook.test"

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// ErrFull says a project holds MaxReceiversPerProject receivers already.
var ErrFull = fmt.Errorf("%w: the project has %d webhook receivers already", ErrInvalid, MaxReceiversPerProject)

// Receiver is a webhook receiver.
type Receiver struct {
	ID            ReceiverID
	OrgID         OrgID
	ProjectID     ProjectID
	Mode          Mode
	URL           string
	Events        []string // nil: the default set (every type but OptInEventTypes)
	AgentIDs      []AgentID
	IncludeValues bool
	// The sealed signing secrets: the current one, and until PrevSecretUntil the one it
	// replaced (both sign during the overlap).
	SecretSealed     string
	PrevSecretSealed string
	PrevSecretUntil  *time.Time
	DisabledAt       *time.Time // set when the receiver answered 410 Gone
	DisabledReason   string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Hears reports whether the receiver takes events of type typ about agent (agent "" for an
// event about no agent).
func (r Receiver) Hears(typ string, agent AgentID) bool {
	if r.DisabledAt != nil || typ == WebhookTestEvent {
		return false
	}
	if r.Events == nil {
		if slices.Contains(OptInEventTypes, typ) {
			return false
		}
	} else if !slices.Contains(r.Events, typ) {
		return false
	}
	return len(r.AgentIDs) == 0 || agent == "" || slices.Contains(r.AgentIDs, agent)
}

// receiverAAD binds a sealed secret to its receiver, so that it cannot be moved to another.
func receiverAAD(id ReceiverID) []byte { return []byte("webhook_receiver:" + string(id) + ":secret") }

// Secrets opens the secrets that sign at now: the current one first, then the previous one
// while its overlap lasts.
func (r Receiver) Secrets(box *secrets.Box, now time.Time) ([]string, error) {
	if box == nil {
		return nil, fmt.Errorf("store: receiver %s: no master key to open its secret", r.ID)
	}
	cur, err := box.Open(r.SecretSealed, receiverAAD(r.ID))
	if err != nil {
		return nil, fmt.Errorf("store: receiver %s: %w", r.ID, err)
	}
	out := []string{string(cur)}
	if r.PrevSecretSealed != "" && r.PrevSecretUntil != nil && now.Before(*r.PrevSecretUntil) {
		prev, err := box.Open(r.PrevSecretSealed, receiverAAD(r.ID))
		if err != nil {
			return nil, fmt.Errorf("store: receiver %s: %w", r.ID, err)
		}
		out = append(out, string(prev))
	}
	return out, nil
}

// NewReceiver is a receiver to create.
type NewReceiver struct {
	ProjectID     ProjectID
	Mode          Mode
	URL           string
	Events        []string // nil: the default set
	AgentIDs      []AgentID
	IncludeValues bool
	Secret        string // sealed with the box given to Create
}

// ReceiverChange changes a receiver; nil members are left as they are.
type ReceiverChange struct {
	URL           *string
	Events        *[]string // pointing at nil: back to the default set
	AgentIDs      *[]AgentID
	IncludeValues *bool
	Enable        bool // clear a 410's disabling
}

const receiverCols = `id, org_id, project_id, mode, url, events, agent_ids, include_values, secret_sealed, prev_secret_sealed,
	prev_secret_until, disabled_at, disabled_reason, created_at, updated_at`

func scanReceiver(r rowScanner) (Receiver, error) {
	var x Receiver
	var events, agents json.RawMessage
	err := r.Scan(&x.ID, &x.OrgID, &x.ProjectID, &x.Mode, &x.URL, nullJSONCol{&events}, jsonCol{&agents}, &x.IncludeValues,
		&x.SecretSealed, nullTextCol[string]{&x.PrevSecretSealed}, nullTimeCol{&x.PrevSecretUntil}, nullTimeCol{&x.DisabledAt},
		nullTextCol[string]{&x.DisabledReason}, timeCol{&x.CreatedAt}, timeCol{&x.UpdatedAt})
	if err != nil {
		return x, err
	}
	if events != nil {
		x.Events = []string{}
		if err := json.Unmarshal(events, &x.Events); err != nil {
			return x, fmt.Errorf("store: receiver %s: events: %w", x.ID, err)
		}
	}
	x.AgentIDs = []AgentID{}
	if err := json.Unmarshal(agents, &x.AgentIDs); err != nil {
		return x, fmt.Errorf("store: receiver %s: agent ids: %w", x.ID, err)
	}
	return x, nil
}

// Receivers is the repository of a caller's webhook receivers. Every read and write applies
// the caller's Scope, the mode included: a test key sees only the receivers made with test keys.
type Receivers struct{ q *Queries }

// Receivers returns the receiver repository.
func (q *Queries) Receivers() Receivers { return Receivers{q} }

func receiverSel(sc Scope) *sel {
	return newSel(`SELECT `+receiverCols+` FROM webhook_receivers`).scope(sc, "org_id", "project_id", "mode")
}

func eventsArg(events []string) (any, error) {
	if events == nil {
		return nil, nil
	}
	return jsonText(events)
}

// Create stores a receiver in a project the scope reaches, sealing its secret with box. A
// full project is ErrFull; a project outside the scope, ErrNotFound.
func (r Receivers) Create(ctx context.Context, box *secrets.Box, sc Scope, nr NewReceiver) (Receiver, error) {
	if box == nil || nr.Secret == "" {
		return Receiver{}, fmt.Errorf("store: %w: a receiver needs a secret and a master key", ErrInvalid)
	}
	if nr.Mode != ModeLive && nr.Mode != ModeTest {
		return Receiver{}, fmt.Errorf("store: %w: receiver mode %q", ErrInvalid, nr.Mode)
	}
	if !sc.Reaches(nr.ProjectID) || !validID(nr.ProjectID) {
		return Receiver{}, notFound("project", nr.ProjectID)
	}
	var out Receiver
	err := r.q.atomic(ctx, func(q *Queries) error {
		p, err := q.lockProject(ctx, nr.ProjectID)
		if err != nil {
			return err
		}
		if p.OrgID != sc.Org {
			return notFound("project", nr.ProjectID)
		}
		var n int
		if err := q.get(ctx, "count receivers", `SELECT count(*) FROM webhook_receivers WHERE project_id = $1`,
			[]any{string(nr.ProjectID)}, func(r rowScanner) error { return r.Scan(&n) }); err != nil {
			return err
		}
		if n >= MaxReceiversPerProject {
			return fmt.Errorf("store: create receiver: %w", ErrFull)
		}
		now := q.s.timeNow()
		x := Receiver{ID: newID[ReceiverID](), OrgID: sc.Org, ProjectID: nr.ProjectID, Mode: nr.Mode, URL: nr.URL,
			Events: nr.Events, AgentIDs: nr.AgentIDs, IncludeValues: nr.IncludeValues, CreatedAt: now, UpdatedAt: now}
		if x.AgentIDs == nil {
			x.AgentIDs = []AgentID{}
		}
		if x.SecretSealed, err = box.Seal([]byte(nr.Secret), receiverAAD(x.ID)); err != nil {
			return fmt.Errorf("store: seal receiver secret: %w", err)
		}
		ev, err := eventsArg(x.Events)
		if err != nil {
			return err
		}
		ag, err := jsonText(x.AgentIDs)
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, "create receiver",
			`INSERT INTO webhook_receivers (id, org_id, project_id, mode, url, events, agent_ids, include_values, secret_sealed, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
			string(x.ID), string(x.OrgID), string(x.ProjectID), string(x.Mode), x.URL, ev, ag, x.IncludeValues, x.SecretSealed, ts(now))
		out = x
		return err
	})
	return out, err
}

// lockProject reads a project, locking its row (a no-op update) so that counts made under it
// stand until the commit.
func (q *Queries) lockProject(ctx context.Context, id ProjectID) (Project, error) {
	var p Project
	err := q.get(ctx, "lock project", `UPDATE projects SET name = name WHERE id = $1 RETURNING org_id, frozen`, []any{string(id)},
		func(r rowScanner) error { return r.Scan(&p.OrgID, &p.Frozen) })
	p.ID = id
	return p, err
}

// Get returns the scope's receiver with id, or ErrNotFound.
func (r Receivers) Get(ctx context.Context, sc Scope, id ReceiverID) (Receiver, error) {
	return one(ctx, r.q, "get receiver", receiverSel(sc).id("id", string(id)), scanReceiver)
}

// List returns the scope's receivers (of project, when set), oldest first.
func (r Receivers) List(ctx context.Context, sc Scope, project ProjectID, pg Page) ([]Receiver, error) {
	b := receiverSel(sc).optID("project_id", string(project))
	return many(ctx, r.q, "list receivers", b, b.page("id", pg, false), scanReceiver)
}

// Update changes the scope's receiver and returns it as it now is.
func (r Receivers) Update(ctx context.Context, sc Scope, id ReceiverID, ch ReceiverChange) (Receiver, error) {
	var out Receiver
	err := r.q.atomic(ctx, func(q *Queries) error {
		x, err := q.Receivers().Get(ctx, sc, id)
		if err != nil {
			return err
		}
		if ch.URL != nil {
			x.URL = *ch.URL
		}
		if ch.Events != nil {
			x.Events = *ch.Events
		}
		if ch.AgentIDs != nil {
			x.AgentIDs = *ch.AgentIDs
			if x.AgentIDs == nil {
				x.AgentIDs = []AgentID{}
			}
		}
		if ch.IncludeValues != nil {
			x.IncludeValues = *ch.IncludeValues
		}
		if ch.Enable {
			x.DisabledAt, x.DisabledReason = nil, ""
		}
		x.UpdatedAt = q.s.timeNow()
		ev, err := eventsArg(x.Events)
		if err != nil {
			return err
		}
		ag, err := jsonText(x.AgentIDs)
		if err != nil {
			return err
		}
		res, err := q.exec(ctx, "update receiver",
			`UPDATE webhook_receivers SET url = $2, events = $3, agent_ids = $4, include_values = $5, disabled_at = $6,
				disabled_reason = $7, updated_at = $8 WHERE id = $1`,
			string(x.ID), x.URL, ev, ag, x.IncludeValues, nullTS(x.DisabledAt), nullText(x.DisabledReason), ts(x.UpdatedAt))
		out = x
		return affectedOne(res, err, "receiver", id)
	})
	return out, err
}

// Delete removes the scope's receiver with its deliveries (their jobs find nothing to send).
func (r Receivers) Delete(ctx context.Context, sc Scope, id ReceiverID) (Receiver, error) {
	var out Receiver
	err := r.q.atomic(ctx, func(q *Queries) error {
		x, err := q.Receivers().Get(ctx, sc, id)
		if err != nil {
			return err
		}
		out = x
		res, err := q.exec(ctx, "delete receiver", `DELETE FROM webhook_receivers WHERE id = $1`, string(id))
		return affectedOne(res, err, "receiver", id)
	})
	return out, err
}

// Rotate makes secret the scope's receiver's signing secret; the current one keeps signing too
// until overlapUntil.
func (r Receivers) Rotate(ctx context.Context, box *secrets.Box, sc Scope, id ReceiverID, secret string, overlapUntil time.Time) (Receiver, error) {
	if box == nil || secret == "" {
		return Receiver{}, fmt.Errorf("store: %w: a rotation needs a secret and a master key", ErrInvalid)
	}
	var out Receiver
	err := r.q.atomic(ctx, func(q *Queries) error {
		x, err := q.Receivers().Get(ctx, sc, id)
		if err != nil {
			return err
		}
		sealed, err := box.Seal([]byte(secret), receiverAAD(x.ID))
		if err != nil {
			return fmt.Errorf("store: seal receiver secret: %w", err)
		}
		until := normTime(overlapUntil)
		x.PrevSecretSealed, x.PrevSecretUntil, x.SecretSealed = x.SecretSealed, &until, sealed
		x.UpdatedAt = q.s.timeNow()
		res, err := q.exec(ctx, "rotate receiver secret",
			`UPDATE webhook_receivers SET secret_sealed = $2, prev_secret_sealed = $3, prev_secret_until = $4, updated_at = $5 WHERE id = $1`,
			string(x.ID), x.SecretSealed, x.PrevSecretSealed, ts(until), ts(x.UpdatedAt))
		out = x
		return affectedOne(res, err, "receiver", id)
	})
	return out, err
}

// DisableReceiver turns a receiver off (it answered 410 Gone): it hears nothing until a PATCH
// enables it again. Pending deliveries to it end as failed when their turn comes.
func (q *Queries) DisableReceiver(ctx context.Context, id ReceiverID, reason string, at time.Time) error {
	_, err := q.exec(ctx, "disable receiver",
		`UPDATE webhook_receivers SET disabled_at = $2, disabled_reason = $3, updated_at = $2 WHERE id = $1 AND disabled_at IS NULL`,
		string(id), ts(normTime(at)), reason)
	return err
}

// fansOut reports whether an event may have deliveries: it belongs to a project and is not a
// test event (which goes to the receiver tested only).
func fansOut(e Event) bool { return e.ProjectID != "" && e.Type != WebhookTestEvent }

// receiversOfEvent reads the enabled receivers of a project ($1) and mode ($2), who may hear its
// events.
const receiversOfEvent = `SELECT ` + receiverCols + ` FROM webhook_receivers WHERE project_id = $1 AND mode = $2 AND disabled_at IS NULL`

// deliverTo makes the deliveries of e, one per receiver of rs that hears it, each with its job.
// It runs in the transaction that records e.
func (q *Queries) deliverTo(ctx context.Context, e Event, rs []Receiver) error {
	for _, r := range rs {
		if r.Hears(e.Type, e.AgentID) {
			if _, err := q.CreateDelivery(ctx, r.ID, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delivery is one event sent (or to send) to one receiver, with its attempts.
type Delivery struct {
	ID             DeliveryID
	ReceiverID     ReceiverID
	EventID        EventID
	EventType      string
	Status         string
	Attempts       int // made so far
	NextAttemptAt  *time.Time
	LastStatusCode int // 0: none yet, or no answer
	CreatedAt      time.Time
	UpdatedAt      time.Time
	DeliveredAt    *time.Time
	AttemptList    []DeliveryAttempt // filled by ListDeliveries, oldest first
}

// DeliveryAttempt is one POST of a delivery.
type DeliveryAttempt struct {
	N          int
	At         time.Time
	StatusCode int // 0: no answer
	DurationMS int64
	Body       string // the first 2 KB of the answer
	Error      string
}

// MaxAttemptBody is how much of an answer's body an attempt keeps, in bytes.
const MaxAttemptBody = 2048

const deliveryCols = `id, receiver_id, event_id, event_type, status, attempts, next_attempt_at, last_status_code, created_at, updated_at, delivered_at`

func scanDelivery(r rowScanner) (Delivery, error) {
	var d Delivery
	var code *int
	err := r.Scan(&d.ID, &d.ReceiverID, &d.EventID, &d.EventType, &d.Status, &d.Attempts, nullTimeCol{&d.NextAttemptAt}, &code,
		timeCol{&d.CreatedAt}, timeCol{&d.UpdatedAt}, nullTimeCol{&d.DeliveredAt})
	if code != nil {
		d.LastStatusCode = *code
	}
	return d, err
}

type deliveryPayload struct {
	DeliveryID DeliveryID `json:"delivery_id"`
	Once       bool       `json:"once,omitempty"` // a resend: one attempt, no retries
}

// CreateDelivery makes a pending delivery of e to receiver rid and enqueues its job.
func (q *Queries) CreateDelivery(ctx context.Context, rid ReceiverID, e Event) (Delivery, error) {
	now := q.s.timeNow()
	d := Delivery{ID: newID[DeliveryID](), ReceiverID: rid, EventID: e.ID, EventType: e.Type, Status: DeliveryPending,
		NextAttemptAt: &now, CreatedAt: now, UpdatedAt: now}
	if q.s.d.name == Postgres {
		// The delivery and its job in one statement: one round trip per receiver of an event.
		payload, _ := json.Marshal(deliveryPayload{DeliveryID: d.ID})
		_, err := q.exec(ctx, "create delivery and its job",
			`WITH d AS (
				INSERT INTO webhook_deliveries (id, receiver_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, 'pending', 0, $5, $5, $5))
			INSERT INTO jobs (id, kind, payload, state, next_attempt_at, attempts, max_attempts, created_at, updated_at)
			VALUES ($6, $7, $8, 'queued', $5, 0, $9, $5, $5)`,
			string(d.ID), string(rid), string(e.ID), e.Type, ts(now), string(newID[JobID]()), WebhookDeliverKind, string(payload), WebhookJobAttempts)
		if err == nil {
			q.noteEnqueued(WebhookDeliverKind)
		}
		return d, err
	}
	err := q.atomic(ctx, func(q *Queries) error {
		if _, err := q.exec(ctx, "create delivery",
			`INSERT INTO webhook_deliveries (id, receiver_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, 'pending', 0, $5, $5, $5)`,
			string(d.ID), string(rid), string(e.ID), e.Type, ts(now)); err != nil {
			return err
		}
		return q.enqueueDelivery(ctx, d.ID, now, false)
	})
	return d, err
}

func (q *Queries) enqueueDelivery(ctx context.Context, id DeliveryID, at time.Time, once bool) error {
	payload, _ := json.Marshal(deliveryPayload{id, once})
	_, _, err := q.EnqueueJob(ctx, NewJob{Kind: WebhookDeliverKind, Payload: payload, RunAt: at, MaxAttempts: WebhookJobAttempts})
	return err
}

// DeliveryIDOf reads the delivery a job of WebhookDeliverKind carries, and whether it is a
// resend (one attempt).
func DeliveryIDOf(payload json.RawMessage) (DeliveryID, bool, error) {
	var p deliveryPayload
	if err := json.Unmarshal(payload, &p); err != nil || !validID(p.DeliveryID) {
		return "", false, fmt.Errorf("store: %w: not a delivery job's payload", ErrInvalid)
	}
	return p.DeliveryID, p.Once, nil
}

// DeliveryFilter narrows a list of deliveries.
type DeliveryFilter struct {
	Status string // "" for every status
}

// ListDeliveries returns the deliveries of the scope's receiver, newest first, each with its
// attempts. A receiver outside the scope is ErrNotFound.
func (r Receivers) ListDeliveries(ctx context.Context, sc Scope, id ReceiverID, f DeliveryFilter, pg Page) ([]Delivery, error) {
	if _, err := r.Get(ctx, sc, id); err != nil {
		return nil, err
	}
	b := newSel(`SELECT `+deliveryCols+` FROM webhook_deliveries`).id("receiver_id", string(id))
	if f.Status != "" {
		b.cond("status = ?", f.Status)
	}
	ds, err := many(ctx, r.q, "list deliveries", b, b.page("id", pg, true), scanDelivery)
	if err != nil || len(ds) == 0 {
		return ds, err
	}
	ph := make([]string, len(ds))
	args := make([]any, len(ds))
	idx := map[DeliveryID]int{}
	for i, d := range ds {
		ph[i] = fmt.Sprintf("$%d", i+1)
		args[i] = string(d.ID)
		idx[d.ID] = i
		ds[i].AttemptList = []DeliveryAttempt{}
	}
	type row struct {
		id DeliveryID
		a  DeliveryAttempt
	}
	rows, err := list(ctx, r.q, "list delivery attempts",
		`SELECT delivery_id, n, at, status_code, duration_ms, response_body, error FROM webhook_attempts
		WHERE delivery_id IN (`+strings.Join(ph, ", ")+`) ORDER BY delivery_id, n`, args,
		func(rs rowScanner) (row, error) {
			var x row
			var code *int
			err := rs.Scan(&x.id, &x.a.N, timeCol{&x.a.At}, &code, &x.a.DurationMS, &x.a.Body, &x.a.Error)
			if code != nil {
				x.a.StatusCode = *code
			}
			return x, err
		})
	if err != nil {
		return nil, err
	}
	for _, x := range rows {
		i := idx[x.id]
		ds[i].AttemptList = append(ds[i].AttemptList, x.a)
	}
	return ds, nil
}

// Resend makes a new attempt of the scope's receiver's delivery, with the same webhook-id: the
// delivery is pending again and a job carries it. A delivery of another receiver is
// ErrNotFound.
func (r Receivers) Resend(ctx context.Context, sc Scope, id ReceiverID, did DeliveryID) (Delivery, error) {
	var out Delivery
	err := r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.Receivers().Get(ctx, sc, id); err != nil {
			return err
		}
		b := newSel(`SELECT `+deliveryCols+` FROM webhook_deliveries`).id("id", string(did)).id("receiver_id", string(id))
		d, err := one(ctx, q, "get delivery", b, scanDelivery)
		if err != nil {
			return err
		}
		now := q.s.timeNow()
		if _, err := q.exec(ctx, "resend delivery",
			`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, updated_at = $2 WHERE id = $1`,
			string(d.ID), ts(now)); err != nil {
			return err
		}
		d.Status, d.NextAttemptAt, d.UpdatedAt = DeliveryPending, &now, now
		out = d
		return q.enqueueDelivery(ctx, d.ID, now, true)
	})
	return out, err
}

// Sending is what a delivery job needs: the delivery, its receiver and its event.
type Sending struct {
	Delivery Delivery
	Receiver Receiver
	Event    Event
}

// GetSending reads a delivery with its receiver and event (the worker's read, by id alone).
// A delivery whose receiver was deleted is ErrNotFound.
func (q *Queries) GetSending(ctx context.Context, id DeliveryID) (Sending, error) {
	var s Sending
	if !validID(id) {
		return s, notFound("delivery", id)
	}
	d := "d." + strings.ReplaceAll(deliveryCols, ", ", ", d.")
	rc := "r." + strings.ReplaceAll(strings.Join(strings.Fields(receiverCols), " "), ", ", ", r.")
	ec := "e." + strings.ReplaceAll(eventCols, ", ", ", e.")
	err := q.get(ctx, "get delivery to send",
		`SELECT `+d+`, `+rc+`, `+ec+` FROM webhook_deliveries d JOIN webhook_receivers r ON r.id = d.receiver_id
		JOIN events e ON e.id = d.event_id WHERE d.id = $1`, []any{string(id)},
		func(r rowScanner) error {
			// One row, three objects: scan into a row splitter.
			return scanSending(r, &s)
		})
	return s, err
}

// GetSendings reads several deliveries as GetSending does each, in one query on PostgreSQL
// (the delivery workers read theirs together). A delivery not found (its receiver deleted) is
// left out of the map.
func (q *Queries) GetSendings(ctx context.Context, ids []DeliveryID) (map[DeliveryID]Sending, error) {
	out := make(map[DeliveryID]Sending, len(ids))
	if q.s.d.name != Postgres || len(ids) < 2 {
		for _, id := range ids {
			snd, err := q.GetSending(ctx, id)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[id] = snd
		}
		return out, nil
	}
	arg := make([]string, 0, len(ids))
	for _, id := range ids {
		if validID(id) {
			arg = append(arg, string(id))
		}
	}
	d := "d." + strings.ReplaceAll(deliveryCols, ", ", ", d.")
	rc := "r." + strings.ReplaceAll(strings.Join(strings.Fields(receiverCols), " "), ", ", ", r.")
	ec := "e." + strings.ReplaceAll(eventCols, ", ", ", e.")
	got, err := list(ctx, q, "get deliveries to send",
		`SELECT `+d+`, `+rc+`, `+ec+` FROM webhook_deliveries d JOIN webhook_receivers r ON r.id = d.receiver_id
		JOIN events e ON e.id = d.event_id WHERE d.id = ANY($1::text[]::uuid[])`, []any{arg},
		func(r rowScanner) (Sending, error) {
			var s Sending
			err := scanSending(r, &s)
			return s, err
		})
	if err != nil {
		return nil, err
	}
	for _, snd := range got {
		out[snd.Delivery.ID] = snd
	}
	return out, nil
}

func scanSending(r rowScanner, s *Sending) error {
	var code *int
	var events, agents json.RawMessage
	x := &s.Receiver
	d := &s.Delivery
	e := &s.Event
	err := r.Scan(&d.ID, &d.ReceiverID, &d.EventID, &d.EventType, &d.Status, &d.Attempts, nullTimeCol{&d.NextAttemptAt}, &code,
		timeCol{&d.CreatedAt}, timeCol{&d.UpdatedAt}, nullTimeCol{&d.DeliveredAt},
		&x.ID, &x.OrgID, &x.ProjectID, &x.Mode, &x.URL, nullJSONCol{&events}, jsonCol{&agents}, &x.IncludeValues,
		&x.SecretSealed, nullTextCol[string]{&x.PrevSecretSealed}, nullTimeCol{&x.PrevSecretUntil}, nullTimeCol{&x.DisabledAt},
		nullTextCol[string]{&x.DisabledReason}, timeCol{&x.CreatedAt}, timeCol{&x.UpdatedAt},
		&e.ID, &e.OrgID, nullTextCol[ProjectID]{&e.ProjectID}, &e.Mode, &e.Type, nullTextCol[ConversationID]{&e.ConversationID},
		nullTextCol[AgentID]{&e.AgentID}, jsonCol{&e.Data}, timeCol{&e.CreatedAt})
	if err != nil {
		return err
	}
	if code != nil {
		d.LastStatusCode = *code
	}
	if events != nil {
		x.Events = []string{}
		_ = json.Unmarshal(events, &x.Events)
	}
	x.AgentIDs = []AgentID{}
	_ = json.Unmarshal(agents, &x.AgentIDs)
	return nil
}

// AttemptOutcome is how one attempt went and what follows: Status is the delivery's new status
// (pending with NextAt for a retry).
type AttemptOutcome struct {
	Attempt DeliveryAttempt
	Status  string
	NextAt  *time.Time
}

// RecordAttempt stores an attempt of delivery id and its outcome. Call it on the Tx that
// completes or reschedules the delivery's job.
func (q *Queries) RecordAttempt(ctx context.Context, id DeliveryID, o AttemptOutcome) (Delivery, error) {
	a := cleanAttempt(o.Attempt)
	var code any
	if a.StatusCode != 0 {
		code = a.StatusCode
	}
	now := q.s.timeNow()
	var delivered any
	if o.Status == DeliveryDelivered {
		delivered = ts(now)
	}
	var d Delivery
	err := q.atomic(ctx, func(q *Queries) error {
		err := q.get(ctx, "record delivery attempt",
			`UPDATE webhook_deliveries SET attempts = attempts + 1, status = $2, next_attempt_at = $3, last_status_code = $4,
				updated_at = $5, delivered_at = COALESCE($6, delivered_at) WHERE id = $1 RETURNING `+deliveryCols,
			[]any{string(id), o.Status, nullTS(o.NextAt), code, ts(now), delivered},
			func(r rowScanner) (err error) { d, err = scanDelivery(r); return err })
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, "insert delivery attempt",
			`INSERT INTO webhook_attempts (delivery_id, n, at, status_code, duration_ms, response_body, error) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			string(id), d.Attempts, ts(normTime(a.At)), code, a.DurationMS, a.Body, a.Error)
		return err
	})
	return d, err
}

// SettledAttempt is the last attempt of a delivery: its outcome is delivered or failed.
type SettledAttempt struct {
	DeliveryID DeliveryID
	Outcome    AttemptOutcome
}

// RecordSettled stores, as RecordAttempt does each, attempts that settle their deliveries
// (delivered or failed, no next attempt). Call it on the Tx that completes the deliveries' jobs.
// On PostgreSQL one statement updates every delivery and inserts every attempt, so that a
// batch of deliveries costs one round trip; a retry (pending) is recorded with RecordAttempt.
func (q *Queries) RecordSettled(ctx context.Context, as []SettledAttempt) error {
	for _, x := range as {
		if x.Outcome.Status != DeliveryDelivered && x.Outcome.Status != DeliveryFailed {
			return fmt.Errorf("store: %w: delivery %s: %q does not settle it", ErrInvalid, x.DeliveryID, x.Outcome.Status)
		}
		if !validID(x.DeliveryID) {
			return notFound("delivery", x.DeliveryID)
		}
	}
	seen := make(map[DeliveryID]bool, len(as))
	dup := false
	for _, x := range as {
		dup = dup || seen[x.DeliveryID]
		seen[x.DeliveryID] = true
	}
	// One delivery twice in a batch (a resend settling with the attempt it followed) is
	// recorded attempt by attempt: the statement below would number both attempts alike.
	if q.s.d.name != Postgres || len(as) < 2 || dup {
		for _, x := range as {
			if _, err := q.RecordAttempt(ctx, x.DeliveryID, x.Outcome); err != nil {
				return err
			}
		}
		return nil
	}
	n := len(as)
	ids, statuses, ats, bodies, errTexts := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	codes, durs := make([]int64, n), make([]int64, n)
	for i, x := range as {
		a := cleanAttempt(x.Outcome.Attempt)
		ids[i], statuses[i], ats[i], bodies[i], errTexts[i] = string(x.DeliveryID), x.Outcome.Status, ts(normTime(a.At)), a.Body, a.Error
		codes[i], durs[i] = int64(a.StatusCode), a.DurationMS
	}
	res, err := q.exec(ctx, "record settled delivery attempts",
		`WITH v AS (
			SELECT * FROM unnest($1::text[]::uuid[], $2::text[], $3::int[], $4::text[]::timestamptz[], $5::bigint[], $6::text[], $7::text[])
				AS v(id, status, code, at, dur, body, err)),
		d AS (
			UPDATE webhook_deliveries w SET attempts = w.attempts + 1, status = v.status, next_attempt_at = NULL,
				last_status_code = NULLIF(v.code, 0), updated_at = $8,
				delivered_at = CASE WHEN v.status = 'delivered' THEN $8::timestamptz ELSE w.delivered_at END
			FROM v WHERE w.id = v.id RETURNING w.id, w.attempts)
		INSERT INTO webhook_attempts (delivery_id, n, at, status_code, duration_ms, response_body, error)
		SELECT d.id, d.attempts, v.at, NULLIF(v.code, 0), v.dur, v.body, v.err FROM d JOIN v ON v.id = d.id`,
		ids, statuses, codes, ats, durs, bodies, errTexts, ts(q.s.timeNow()))
	if err != nil {
		return err
	}
	if got, err := res.RowsAffected(); err != nil {
		return q.s.wrap("record settled delivery attempts", err)
	} else if got != int64(n) {
		return fmt.Errorf("store: record settled delivery attempts: %w: %d of %d deliveries found", ErrNotFound, got, n)
	}
	return nil
}

// cleanAttempt makes an attempt storable: an answer's body is whatever the receiver sent, kept
// as UTF-8 text without NULs (which PostgreSQL's text refuses), cut to MaxAttemptBody.
func cleanAttempt(a DeliveryAttempt) DeliveryAttempt {
	a.Body = truncateText(strings.ReplaceAll(strings.ToValidUTF8(a.Body, "\uFFFD"), "\x00", "\uFFFD"), MaxAttemptBody)
	a.Error = truncateText(strings.ToValidUTF8(a.Error, "\uFFFD"), maxJobError)
	return a
}

// PurgeEvents deletes the events and the deliveries (with their attempts) made before before:
// both are kept 30 days. It returns how many events went.
func (q *Queries) PurgeEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := q.atomic(ctx, func(q *Queries) error {
		cut := ts(normTime(before))
		if _, err := q.exec(ctx, "purge deliveries", `DELETE FROM webhook_deliveries WHERE created_at < $1 AND status <> 'pending'`, cut); err != nil {
			return err
		}
		res, err := q.exec(ctx, "purge events",
			`DELETE FROM events WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id)`, cut)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// nullJSONCol scans a nullable JSON column; NULL leaves nil.
type nullJSONCol struct{ raw *json.RawMessage }

func (c nullJSONCol) Scan(src any) error {
	if src == nil {
		*c.raw = nil
		return nil
	}
	return jsonCol{c.raw}.Scan(src)
}
