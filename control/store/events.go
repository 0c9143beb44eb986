package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// EventID names an event.
type EventID string

// Event is something that happened to a conversation (conversation.ended,
// conversation.deleted, …), recorded for GET /v1/events and for webhook deliveries.
type Event struct {
	ID             EventID
	OrgID          OrgID
	ProjectID      ProjectID
	Mode           Mode
	Type           string
	ConversationID ConversationID
	AgentID        AgentID
	Data           json.RawMessage // an object
	CreatedAt      time.Time
}

const eventCols = `id, org_id, project_id, mode, type, conversation_id, agent_id, data, created_at`

func scanEvent(r rowScanner) (Event, error) {
	var e Event
	err := r.Scan(&e.ID, &e.OrgID, nullTextCol[ProjectID]{&e.ProjectID}, &e.Mode, &e.Type, nullTextCol[ConversationID]{&e.ConversationID},
		nullTextCol[AgentID]{&e.AgentID}, jsonCol{&e.Data}, timeCol{&e.CreatedAt})
	return e, err
}

// InsertEvent records an event. Call it on the Tx of the change it reports.
func (q *Queries) InsertEvent(ctx context.Context, e Event) (Event, error) {
	if !validID(e.OrgID) || e.Type == "" || (e.Mode != ModeLive && e.Mode != ModeTest) {
		return Event{}, fmt.Errorf("store: %w: an event needs an organization, a type and a mode", ErrInvalid)
	}
	data, err := objectOr("event data", e.Data)
	if err != nil {
		return Event{}, err
	}
	if q.batched != nil { // Tx.BatchEvents: inserted with the others as the Tx commits
		e.Data = json.RawMessage(data)
		*q.batched = append(*q.batched, e)
		return e, nil
	}
	e.ID, e.Data, e.CreatedAt = newID[EventID](), json.RawMessage(data), q.s.timeNow()
	args := []any{string(e.ID), string(e.OrgID), nullText(e.ProjectID), string(e.Mode), e.Type, nullText(e.ConversationID),
		nullText(e.AgentID), data, ts(e.CreatedAt)}
	const insert = `INSERT INTO events (` + eventCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	// issue 14: the deliveries to the receivers that hear it commit with it.
	err = q.atomic(ctx, func(q *Queries) error {
		if !fansOut(e) {
			_, err := q.exec(ctx, "insert event", insert, args...)
			return err
		}
		var rs []Receiver
		if q.s.d.name == Postgres {
			// The event and the read of its project's receivers in one round trip.
			// The same query as receiversOfEvent, on the INSERT's $3 (project) and $4 (mode).
			rs, err = list(ctx, q, "insert event and read its receivers",
				`WITH e AS (`+insert+`) SELECT `+receiverCols+` FROM webhook_receivers WHERE project_id = $3 AND mode = $4 AND disabled_at IS NULL`,
				args, scanReceiver)
		} else {
			if _, err = q.exec(ctx, "insert event", insert, args...); err == nil {
				rs, err = list(ctx, q, "receivers of an event", receiversOfEvent, []any{string(e.ProjectID), string(e.Mode)}, scanReceiver)
			}
		}
		if err != nil {
			return err
		}
		return q.deliverTo(ctx, e, rs)
	})
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// EventFilter narrows a list of events.
type EventFilter struct {
	Types          []string // any of these; none: every type
	ConversationID ConversationID
	CreatedAfter   *time.Time // created at or after
	CreatedBefore  *time.Time // created before
}

// Events is the repository of a caller's events: the scope's organization, projects and mode.
type Events struct{ q *Queries }

// Events returns the event repository.
func (q *Queries) Events() Events { return Events{q} }

// List returns the scope's events that f selects, newest first, paged like every list.
func (r Events) List(ctx context.Context, sc Scope, f EventFilter, pg Page) ([]Event, error) {
	b := newSel(`SELECT `+eventCols+` FROM events`).scope(sc, "org_id", "project_id", "mode")
	if len(f.Types) > 0 {
		ph := make([]string, len(f.Types))
		for i, t := range f.Types {
			ph[i] = b.arg(t)
		}
		b.where = append(b.where, "type IN ("+strings.Join(ph, ", ")+")")
	}
	if f.ConversationID != "" {
		b.id("conversation_id", string(f.ConversationID))
	}
	if f.CreatedAfter != nil {
		b.cond("created_at >= ?", ts(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		b.cond("created_at < ?", ts(*f.CreatedBefore))
	}
	return many(ctx, r.q, "list events", b, b.page("id", pg, true), scanEvent)
}

// Get returns the scope's event with id, or ErrNotFound.
func (r Events) Get(ctx context.Context, sc Scope, id EventID) (Event, error) {
	b := newSel(`SELECT `+eventCols+` FROM events`).scope(sc, "org_id", "project_id", "mode").id("id", string(id))
	return one(ctx, r.q, "get event", b, scanEvent)
}

// ListEvents returns an organization's events of a mode, oldest first, after afterID.
func (q *Queries) ListEvents(ctx context.Context, org OrgID, mode Mode, afterID EventID, limit int) ([]Event, error) {
	if afterID == "" {
		afterID = "00000000-0000-0000-0000-000000000000"
	}
	return list(ctx, q, "list events", `SELECT `+eventCols+` FROM events WHERE org_id = $1 AND mode = $2 AND id > $3 ORDER BY id LIMIT $4`,
		[]any{string(org), string(mode), string(afterID), clampLimit(limit)}, scanEvent)
}
