package store

import (
	"context"
	"encoding/json"
	"fmt"
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
	e.ID, e.Data, e.CreatedAt = newID[EventID](), json.RawMessage(data), q.s.timeNow()
	_, err = q.exec(ctx, "insert event",
		`INSERT INTO events (`+eventCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		string(e.ID), string(e.OrgID), nullText(e.ProjectID), string(e.Mode), e.Type, nullText(e.ConversationID),
		nullText(e.AgentID), data, ts(e.CreatedAt))
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// ListEvents returns an organization's events of a mode, oldest first, after afterID.
func (q *Queries) ListEvents(ctx context.Context, org OrgID, mode Mode, afterID EventID, limit int) ([]Event, error) {
	if afterID == "" {
		afterID = "00000000-0000-0000-0000-000000000000"
	}
	return list(ctx, q, "list events", `SELECT `+eventCols+` FROM events WHERE org_id = $1 AND mode = $2 AND id > $3 ORDER BY id LIMIT $4`,
		[]any{string(org), string(mode), string(afterID), clampLimit(limit)}, scanEvent)
}
