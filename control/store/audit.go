package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ActorType says who did something recorded in the audit log.
type ActorType string

// Actor types.
const (
	ActorAPIKey   ActorType = "api_key"  // ActorID is the key's ID; ActorMode its mode
	ActorOperator ActorType = "operator" // someone running `parley admin`
	ActorSystem   ActorType = "system"   // Parley itself (workers, schedulers)
)

// AuditEvent records one thing people or API keys did in an organization.
type AuditEvent struct {
	ID         AuditID // set by InsertAudit when empty
	OrgID      OrgID
	ProjectID  ProjectID // "" when the event concerns no single project
	ActorType  ActorType
	ActorID    string
	ActorMode  Mode   // "" unless the actor is an API key
	Action     string // dotted name, e.g. "agent.created"
	ObjectType string // e.g. "agent"
	ObjectID   string
	RequestID  string
	Data       json.RawMessage // a JSON object; nil stores {}. Read back equal in meaning, not bytes.
	CreatedAt  time.Time       // set by InsertAudit when zero
}

// AuditFilter selects audit events, oldest first.
type AuditFilter struct {
	OrgID         OrgID
	Actions       []string  // only these actions; empty means all
	CreatedAfter  time.Time // only events created after this; zero means no bound
	CreatedBefore time.Time // only events created before this (the API holds back the last minute); zero means no bound
	AfterID       AuditID   // only events after this one (the previous page's last)
	Limit         int       // 1–1000; 0 means 100
}

// maxActions bounds the action filter of one ListAudit call.
const maxActions = 50

const auditCols = `id, org_id, project_id, actor_type, actor_id, actor_mode, action, object_type, object_id, request_id, data, created_at`

// InsertAudit records an event. Call it on the Tx that makes the change it records, so both
// commit or neither does.
func (q *Queries) InsertAudit(ctx context.Context, e AuditEvent) error {
	args, err := q.auditArgs(e)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, "insert audit event",
		`INSERT INTO audit_events (`+auditCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, args...)
	return err
}

// auditArgs fills an event's ID, time and data when empty, checks it, and returns its values
// in auditCols' order (InsertAudit's arguments).
func (q *Queries) auditArgs(e AuditEvent) ([]any, error) {
	if e.ID == "" {
		e.ID = newID[AuditID]()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = q.s.timeNow()
	}
	if len(e.Data) == 0 {
		e.Data = json.RawMessage(`{}`)
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return []any{string(e.ID), string(e.OrgID), nullText(e.ProjectID), string(e.ActorType), e.ActorID, nullText(e.ActorMode),
		e.Action, e.ObjectType, e.ObjectID, e.RequestID, string(e.Data), ts(e.CreatedAt)}, nil
}

// check refuses an event the log should not hold.
func (e AuditEvent) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("store: %w: audit event: "+format, append([]any{ErrInvalid}, a...)...)
	}
	switch {
	case !validID(e.ID):
		return bad("ID %q is not a canonical UUID", e.ID)
	case !validID(e.OrgID):
		return bad("organization %q is not a canonical UUID", e.OrgID)
	case e.ProjectID != "" && !validID(e.ProjectID):
		return bad("project %q is not a canonical UUID", e.ProjectID)
	case e.ActorType != ActorAPIKey && e.ActorType != ActorOperator && e.ActorType != ActorSystem:
		return bad("unknown actor type %q", e.ActorType)
	case e.ActorMode != "" && e.ActorMode != ModeLive && e.ActorMode != ModeTest:
		return bad("unknown actor mode %q", e.ActorMode)
	case e.ActorType == ActorAPIKey && (e.ActorMode == "" || !validID(e.ActorID)):
		return bad("an API key actor needs the key's ID and mode")
	case !validAction(e.Action):
		return bad("action %q is not a dotted lowercase name such as agent.created", e.Action)
	case len(e.ActorID) > 200 || len(e.ObjectType) > 100 || len(e.ObjectID) > 200 || len(e.RequestID) > 200:
		return bad("a field is too long")
	case !isJSONObject(e.Data):
		return bad("data is not a JSON object")
	}
	return nil
}

// validAction accepts names like "agent.created" or "webhook.secret_rotated".
func validAction(a string) bool {
	if a == "" || len(a) > 100 || !strings.Contains(a, ".") {
		return false
	}
	for _, part := range strings.Split(a, ".") {
		if part == "" {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				return false
			}
		}
	}
	return true
}

// isJSONObject reports whether b is one JSON object (what decoding it into a map accepts), by
// validating it, without decoding it.
func isJSONObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}

// ListAudit returns an organization's audit events matching f, oldest first by ID.
func (q *Queries) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEvent, error) {
	if !validID(f.OrgID) {
		return nil, fmt.Errorf("store: %w: organization %q is not a canonical UUID", ErrInvalid, f.OrgID)
	}
	if f.AfterID != "" && !validID(f.AfterID) {
		return nil, fmt.Errorf("store: %w: cursor %q is not a canonical UUID", ErrInvalid, f.AfterID)
	}
	if len(f.Actions) > maxActions {
		return nil, fmt.Errorf("store: %w: more than %d actions in one filter", ErrInvalid, maxActions)
	}
	var sb strings.Builder
	args := []any{string(f.OrgID)}
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	sb.WriteString(`SELECT ` + auditCols + ` FROM audit_events WHERE org_id = $1`)
	if f.AfterID != "" {
		sb.WriteString(` AND id > ` + arg(string(f.AfterID)))
	}
	if !f.CreatedAfter.IsZero() {
		sb.WriteString(` AND created_at > ` + arg(ts(f.CreatedAfter)))
	}
	if !f.CreatedBefore.IsZero() {
		sb.WriteString(` AND created_at < ` + arg(ts(f.CreatedBefore)))
	}
	if len(f.Actions) > 0 {
		sb.WriteString(` AND action IN (`)
		for i, a := range f.Actions {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(arg(a))
		}
		sb.WriteString(`)`)
	}
	sb.WriteString(` ORDER BY id LIMIT ` + arg(clampLimit(f.Limit)))
	return list(ctx, q, "list audit events", sb.String(), args, scanAudit)
}

func scanAudit(r rowScanner) (AuditEvent, error) {
	var e AuditEvent
	err := r.Scan(&e.ID, &e.OrgID, nullTextCol[ProjectID]{&e.ProjectID}, &e.ActorType, &e.ActorID, nullTextCol[Mode]{&e.ActorMode},
		&e.Action, &e.ObjectType, &e.ObjectID, &e.RequestID, jsonCol{&e.Data}, timeCol{&e.CreatedAt})
	return e, err
}
