package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ConversationID names a conversation.
type ConversationID string

// Conversation statuses. A conversation only moves forward through them: pending (created, a
// call not yet ringing), ringing, in_progress (answered, or a chat that is open), ended.
const (
	ConvPending    = "pending"
	ConvRinging    = "ringing"
	ConvInProgress = "in_progress"
	ConvEnded      = "ended"
)

// convRank orders the statuses; a status change never moves back.
var convRank = map[string]int{ConvPending: 0, ConvRinging: 1, ConvInProgress: 2, ConvEnded: 3}

// Conversation channels: phone calls, browser voice calls, chats and the messaging app.
const (
	ChannelPhone    = "phone"
	ChannelVoice    = "voice"
	ChannelChat     = "chat"
	ChannelWhatsApp = "whatsapp"
)

// Conversation is one conversation of an agent, by voice or text. Its transcript lines are
// kept apart (ConversationLine); Turns and Cost are JSON the runtime writes when it ends.
type Conversation struct {
	ID            ConversationID
	OrgID         OrgID
	ProjectID     ProjectID
	AgentID       AgentID
	AgentVersion  int // the pinned published version; 0 follows the live definition
	Channel       string
	Direction     string // inbound or outbound
	Mode          Mode   // live, or test (made with a test key: rings nobody, costs nothing)
	Status        string
	EndReason     string
	ViaAPI        bool // a chat started through POST /v1/chats
	ExternalID    string
	Language      string
	FromNumber    string
	ToNumber      string
	PhoneNumberID PhoneNumberID
	Metadata      json.RawMessage // an object
	Variables     json.RawMessage // an object
	Turns         json.RawMessage // an array of turn metrics
	Cost          json.RawMessage // an object
	CostMicros    int64
	OwnerNode     string      // the node that runs it while it is live
	Recording     string      // the recording's path under the data directory; "" when none
	LastSeq       int64       // the seq of the newest stored transcript line
	Outcome       CallOutcome // how a call leg ended (issue 22); zero when nothing applies
	CreatedAt     time.Time
	UpdatedAt     time.Time
	RingingAt     *time.Time
	StartedAt     *time.Time
	EndedAt       *time.Time
	DeletedAt     *time.Time
	// issue 14: the post-call analysis and the collected values (objects; nil until worked
	// out), and when they were.
	Analysis   json.RawMessage
	Collected  json.RawMessage
	AnalyzedAt *time.Time
}

// CallOutcome is how a call leg ended, as the SIP signalling said it: the final status of an
// INVITE that failed, the Q.850 cause of an RFC 3326 Reason header (or the one Parley sent),
// and a short detail written for a person (never an internal error).
type CallOutcome struct {
	SIPStatus int // 100–699; 0 none
	Q850Cause int // 1–127; 0 none
	Detail    string
}

// IsZero reports whether nothing is known of how the leg ended.
func (o CallOutcome) IsZero() bool { return o == CallOutcome{} }

// Ended reports whether the conversation has ended.
func (c Conversation) Ended() bool { return c.Status == ConvEnded }

// Deleted reports whether the conversation was deleted (only its tombstone is left).
func (c Conversation) Deleted() bool { return c.DeletedAt != nil }

// ConversationFilter selects conversations, newest first.
type ConversationFilter struct {
	OrgID         OrgID
	Mode          Mode
	ProjectIDs    []ProjectID // the projects that may be listed; nil means every project
	AgentID       AgentID
	Status        string
	Channel       string
	Direction     string
	ExternalID    string
	CreatedAfter  *time.Time // created at or after
	CreatedBefore *time.Time // created before
	Deleted       bool       // list deleted conversations (tombstones) instead of live ones
	BeforeID      ConversationID
	Limit         int // 1–1000; 0 means 100
}

const convCols = `id, org_id, project_id, agent_id, agent_version, channel, direction, mode, status, end_reason, via_api,
	external_id, language, from_number, to_number, phone_number_id, metadata, variables, turns, cost, cost_micros,
	owner_node, recording, last_seq, created_at, updated_at, ringing_at, started_at, ended_at, deleted_at,
	end_sip_status, end_q850_cause, end_detail, analysis, collected, analyzed_at`

func scanConversation(r rowScanner) (Conversation, error) {
	var c Conversation
	dest, finish := conversationDest(&c)
	err := r.Scan(dest...)
	finish()
	return c, err
}

// conversationDest is the scan destinations of convCols, in order, and what to do after the
// scan. Every query that selects convCols (with more columns after them) scans through it, so
// a column added to convCols is read everywhere at once.
func conversationDest(c *Conversation) ([]any, func()) {
	var version, sipStatus, q850 *int
	dest := []any{&c.ID, &c.OrgID, &c.ProjectID, &c.AgentID, &version, &c.Channel, &c.Direction, &c.Mode, &c.Status,
		nullTextCol[string]{&c.EndReason}, &c.ViaAPI, nullTextCol[string]{&c.ExternalID}, &c.Language,
		nullTextCol[string]{&c.FromNumber}, nullTextCol[string]{&c.ToNumber}, nullTextCol[PhoneNumberID]{&c.PhoneNumberID},
		jsonCol{&c.Metadata}, jsonCol{&c.Variables}, jsonCol{&c.Turns}, jsonCol{&c.Cost}, &c.CostMicros,
		nullTextCol[string]{&c.OwnerNode}, nullTextCol[string]{&c.Recording}, &c.LastSeq,
		timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt}, nullTimeCol{&c.RingingAt}, nullTimeCol{&c.StartedAt},
		nullTimeCol{&c.EndedAt}, nullTimeCol{&c.DeletedAt}, &sipStatus, &q850, nullTextCol[string]{&c.Outcome.Detail},
		nullJSONCol{&c.Analysis}, nullJSONCol{&c.Collected}, nullTimeCol{&c.AnalyzedAt}}
	return dest, func() {
		if sipStatus != nil {
			c.Outcome.SIPStatus = *sipStatus
		}
		if q850 != nil {
			c.Outcome.Q850Cause = *q850
		}
		if version != nil {
			c.AgentVersion = *version
		}
	}
}

// NewConversationID returns a fresh conversation id (a UUIDv7), for callers that must name a
// conversation before it is stored (a scheduled call leasing its dial).
func NewConversationID() ConversationID { return newID[ConversationID]() }

// objectOr returns raw when it is a JSON object, "{}" when it is empty, or ErrInvalid.
func objectOr(what string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "{}", nil
	}
	if !isJSONObject(raw) {
		return "", fmt.Errorf("store: %w: %s is not a JSON object", ErrInvalid, what)
	}
	return string(raw), nil
}

// CreateConversation stores a new conversation. Its ID is made when empty; Status defaults to
// pending. The project must belong to the organization (ErrNotFound otherwise).
func (q *Queries) CreateConversation(ctx context.Context, c Conversation) (Conversation, error) {
	c, args, err := q.newConversation(c)
	if err != nil {
		return Conversation{}, err
	}
	// One statement: the row is inserted only when its project is in its organization (the
	// project's own read is folded into the INSERT), else nothing is and it is not found.
	res, err := q.exec(ctx, "create conversation", `INSERT INTO conversations (`+convInsertCols+`)
		SELECT `+convInsertVals+` FROM projects p WHERE p.id = $3 AND p.org_id = $2`, args...)
	if err != nil {
		return Conversation{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return Conversation{}, err
	} else if n == 0 {
		return Conversation{}, notFound("project", c.ProjectID)
	}
	return c, nil
}

// A new conversation's row: its columns, and their values from newConversation's arguments
// ($1 the id, $2 the organization, $3 the project, … $20).
const (
	convInsertCols = `id, org_id, project_id, agent_id, agent_version, channel, direction, mode, status, via_api,
		external_id, language, from_number, to_number, phone_number_id, metadata, variables, turns, cost, owner_node,
		created_at, updated_at, started_at`
	convInsertVals = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, '[]', '{}', $18, $19, $19, $20`
)

// newConversation checks a conversation to create, fills what creation sets (its ID when
// empty, pending when it has no status, its times) and returns it with its row's arguments
// (convInsertVals).
func (q *Queries) newConversation(c Conversation) (Conversation, []any, error) {
	if c.ID == "" {
		c.ID = newID[ConversationID]()
	}
	if c.Status == "" {
		c.Status = ConvPending
	}
	switch {
	case !validID(c.ID) || !validID(c.OrgID) || !validID(c.ProjectID) || !validID(c.AgentID):
		return Conversation{}, nil, fmt.Errorf("store: %w: conversation ids", ErrInvalid)
	case !slices.Contains([]string{ChannelPhone, ChannelVoice, ChannelChat, ChannelWhatsApp}, c.Channel):
		return Conversation{}, nil, fmt.Errorf("store: %w: conversation channel %q", ErrInvalid, c.Channel)
	case c.Direction != "inbound" && c.Direction != "outbound":
		return Conversation{}, nil, fmt.Errorf("store: %w: conversation direction %q", ErrInvalid, c.Direction)
	case c.Mode != ModeLive && c.Mode != ModeTest:
		return Conversation{}, nil, fmt.Errorf("store: %w: conversation mode %q", ErrInvalid, c.Mode)
	case c.Status != ConvPending && c.Status != ConvInProgress:
		return Conversation{}, nil, fmt.Errorf("store: %w: a conversation starts pending or in progress, not %q", ErrInvalid, c.Status)
	case c.Language == "":
		return Conversation{}, nil, fmt.Errorf("store: %w: conversation language is empty", ErrInvalid)
	case c.AgentVersion < 0:
		return Conversation{}, nil, fmt.Errorf("store: %w: agent version %d", ErrInvalid, c.AgentVersion)
	}
	meta, err := objectOr("metadata", c.Metadata)
	if err != nil {
		return Conversation{}, nil, err
	}
	vars, err := objectOr("variables", c.Variables)
	if err != nil {
		return Conversation{}, nil, err
	}
	now := q.s.timeNow()
	c.CreatedAt, c.UpdatedAt = now, now
	c.Metadata, c.Variables, c.Turns, c.Cost = json.RawMessage(meta), json.RawMessage(vars), json.RawMessage("[]"), json.RawMessage("{}")
	c.EndReason, c.EndedAt, c.DeletedAt, c.RingingAt, c.LastSeq, c.CostMicros, c.Recording = "", nil, nil, nil, 0, 0, ""
	if c.Status == ConvInProgress {
		c.StartedAt = &now
	} else {
		c.StartedAt = nil
	}
	var version any
	if c.AgentVersion > 0 {
		version = c.AgentVersion
	}
	return c, []any{string(c.ID), string(c.OrgID), string(c.ProjectID), string(c.AgentID), version, c.Channel, c.Direction, string(c.Mode),
		c.Status, c.ViaAPI, nullText(c.ExternalID), c.Language, nullText(c.FromNumber), nullText(c.ToNumber),
		nullText(c.PhoneNumberID), meta, vars, nullText(c.OwnerNode), ts(now), nullTS(c.StartedAt)}, nil
}

// GetConversation returns a conversation (deleted ones too: check Deleted), or ErrNotFound.
func (q *Queries) GetConversation(ctx context.Context, id ConversationID) (Conversation, error) {
	if !validID(id) {
		return Conversation{}, notFound("conversation", id)
	}
	var c Conversation
	err := q.get(ctx, "get conversation", `SELECT `+convCols+` FROM conversations WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { c, err = scanConversation(r); return err })
	return c, err
}

// ListConversations returns conversations newest first, across the scopes of an organization's
// keys: the system's list (the runtime's and the API's tests read it). A caller's list goes
// through Conversations().List, which applies the caller's Scope.
func (q *Queries) ListConversations(ctx context.Context, f ConversationFilter) ([]Conversation, error) {
	if !validID(f.OrgID) || (f.BeforeID != "" && !validID(f.BeforeID)) {
		return nil, fmt.Errorf("store: %w: bad organization or cursor ID", ErrInvalid)
	}
	where := []string{"org_id = $1", "mode = $2"}
	args := []any{string(f.OrgID), string(f.Mode)}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if f.Deleted {
		where = append(where, "deleted_at IS NOT NULL")
	} else {
		where = append(where, "deleted_at IS NULL")
	}
	if f.ProjectIDs != nil {
		if len(f.ProjectIDs) == 0 {
			return nil, nil
		}
		ps := make([]string, 0, len(f.ProjectIDs))
		for _, p := range f.ProjectIDs {
			if !validID(p) {
				return nil, fmt.Errorf("store: %w: project id %q", ErrInvalid, p)
			}
			args = append(args, string(p))
			ps = append(ps, fmt.Sprintf("$%d", len(args)))
		}
		where = append(where, "project_id IN ("+strings.Join(ps, ", ")+")")
	}
	if f.AgentID != "" {
		if !validID(f.AgentID) {
			return nil, nil
		}
		add("agent_id = ?", string(f.AgentID))
	}
	if f.Status != "" {
		add("status = ?", f.Status)
	}
	if f.Channel != "" {
		add("channel = ?", f.Channel)
	}
	if f.Direction != "" {
		add("direction = ?", f.Direction)
	}
	if f.ExternalID != "" {
		add("external_id = ?", f.ExternalID)
	}
	if f.CreatedAfter != nil {
		add("created_at >= ?", ts(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		add("created_at < ?", ts(*f.CreatedBefore))
	}
	if f.BeforeID != "" {
		add("id < ?", string(f.BeforeID))
	}
	args = append(args, clampLimit(f.Limit))
	query := `SELECT ` + convCols + ` FROM conversations WHERE ` + strings.Join(where, " AND ") +
		fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args))
	return list(ctx, q, "list conversations", query, args, scanConversation)
}

// SetConversationStatus moves a conversation forward to status (ringing or in_progress) and
// stamps the moment. A move backwards, or any move of an ended conversation, changes nothing
// and reports false.
func (q *Queries) SetConversationStatus(ctx context.Context, id ConversationID, status string, at time.Time) (bool, error) {
	return q.setConversationStatus(ctx, id, status, at, nil)
}

// SetConversationStatusGet is SetConversationStatus that also returns the conversation as
// moved (the zero Conversation when it did not move).
func (q *Queries) SetConversationStatusGet(ctx context.Context, id ConversationID, status string, at time.Time) (Conversation, bool, error) {
	var c Conversation
	ok, err := q.setConversationStatus(ctx, id, status, at, &c)
	return c, ok, err
}

func (q *Queries) setConversationStatus(ctx context.Context, id ConversationID, status string, at time.Time, moved *Conversation) (bool, error) {
	rank, ok := convRank[status]
	if !ok || status == ConvEnded || status == ConvPending {
		return false, fmt.Errorf("store: %w: status %q (end a conversation with EndConversation)", ErrInvalid, status)
	}
	col := "ringing_at"
	if status == ConvInProgress {
		col = "started_at"
	}
	var lower []string
	for s, r := range convRank {
		if r < rank {
			lower = append(lower, "'"+s+"'")
		}
	}
	slices.Sort(lower)
	query := `UPDATE conversations SET status = $2, ` + col + ` = $3, updated_at = $3 WHERE id = $1 AND status IN (` + strings.Join(lower, ", ") + `)`
	args := []any{string(id), status, ts(normTime(at))}
	if moved != nil { // issue 20: the conversation as moved, in the same statement
		return q.updateConversation(ctx, "set conversation status", query, args, moved)
	}
	res, err := q.exec(ctx, "set conversation status", query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ConversationEnd is what is recorded when a conversation ends.
type ConversationEnd struct {
	Reason     string
	At         time.Time
	Turns      json.RawMessage // an array; nil keeps what is stored
	Cost       json.RawMessage // an object; nil keeps what is stored
	CostMicros int64
	Recording  string      // "" keeps what is stored
	Outcome    CallOutcome // how the call leg ended; zero stores nothing
}

// EndConversation marks a conversation ended with its reason, turns and cost. It reports false
// (and changes nothing) when it had ended already.
func (q *Queries) EndConversation(ctx context.Context, id ConversationID, e ConversationEnd) (bool, error) {
	return q.endConversation(ctx, id, e, nil)
}

// EndConversationGet is EndConversation that also returns the conversation as ended (the
// zero Conversation when it had ended already).
func (q *Queries) EndConversationGet(ctx context.Context, id ConversationID, e ConversationEnd) (Conversation, bool, error) {
	var c Conversation
	ok, err := q.endConversation(ctx, id, e, &c)
	return c, ok, err
}

func (q *Queries) endConversation(ctx context.Context, id ConversationID, e ConversationEnd, ended *Conversation) (bool, error) {
	if e.Reason == "" {
		return false, fmt.Errorf("store: %w: an end needs a reason", ErrInvalid)
	}
	turns, cost := any(nil), any(nil)
	if e.Turns != nil {
		if !json.Valid(e.Turns) || !strings.HasPrefix(strings.TrimSpace(string(e.Turns)), "[") {
			return false, fmt.Errorf("store: %w: turns is not a JSON array", ErrInvalid)
		}
		turns = string(e.Turns)
	}
	if e.Cost != nil {
		if !isJSONObject(e.Cost) {
			return false, fmt.Errorf("store: %w: cost is not a JSON object", ErrInvalid)
		}
		cost = string(e.Cost)
	}
	o := e.Outcome
	if o.SIPStatus != 0 && (o.SIPStatus < 100 || o.SIPStatus > 699) || o.Q850Cause < 0 || o.Q850Cause > 127 {
		return false, fmt.Errorf("store: %w: SIP status %d or Q.850 cause %d out of range", ErrInvalid, o.SIPStatus, o.Q850Cause)
	}
	at := ts(normTime(e.At))
	const query = `UPDATE conversations SET status = 'ended', end_reason = $2, ended_at = $3, updated_at = $3,
			turns = COALESCE($4, turns), cost = COALESCE($5, cost), cost_micros = $6, recording = COALESCE($7, recording),
			end_sip_status = $8, end_q850_cause = $9, end_detail = $10
		WHERE id = $1 AND status <> 'ended'`
	args := []any{string(id), e.Reason, at, turns, cost, e.CostMicros, nullText(e.Recording),
		nullInt(o.SIPStatus), nullInt(o.Q850Cause), nullText(truncateText(o.Detail, 300))}
	if ended != nil { // issue 20: the conversation as ended, in the same statement
		return q.updateConversation(ctx, "end conversation", query, args, ended)
	}
	res, err := q.exec(ctx, "end conversation", query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// updateConversation runs an UPDATE of one conversation and scans the row it changed into c;
// it reports false when no row changed.
func (q *Queries) updateConversation(ctx context.Context, op, query string, args []any, c *Conversation) (bool, error) {
	err := q.get(ctx, op, query+` RETURNING `+convCols, args, func(r rowScanner) (err error) { *c, err = scanConversation(r); return err })
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// SetConversationOwner records the node that runs a conversation.
func (q *Queries) SetConversationOwner(ctx context.Context, id ConversationID, node string) error {
	res, err := q.exec(ctx, "set conversation owner", `UPDATE conversations SET owner_node = $2 WHERE id = $1`, string(id), nullText(node))
	return affectedOne(res, err, "conversation", id)
}

// SetConversationRecording records where a conversation's recording is kept.
func (q *Queries) SetConversationRecording(ctx context.Context, id ConversationID, path string) error {
	res, err := q.exec(ctx, "set conversation recording", `UPDATE conversations SET recording = $2 WHERE id = $1`, string(id), nullText(path))
	return affectedOne(res, err, "conversation", id)
}

// ActiveConversations returns conversations that are not ended and were last updated before
// olderThan, oldest first: the candidates for a conversation whose node went away. Chats in
// progress are not among them, nor messaging-app conversations (issue 19), which take the same
// durable path: no node holds a chat between its messages (see ChatState), and only its idle
// deadline (IdleChats; the 24-hour window for a messaging-app one) ends one.
func (q *Queries) ActiveConversations(ctx context.Context, olderThan time.Time, limit int) ([]Conversation, error) {
	return list(ctx, q, "list active conversations",
		`SELECT `+convCols+` FROM conversations WHERE status <> 'ended' AND updated_at < $1
			AND NOT (channel IN ('chat', 'whatsapp') AND status = 'in_progress') ORDER BY updated_at LIMIT $2`,
		[]any{ts(normTime(olderThan)), clampLimit(limit)}, scanConversation)
}

// ActiveOwners returns the nodes that own conversations not ended (issue 22: the nodes whose
// loss must end calls). Chats and messaging-app conversations in progress do not count: the
// owner of one is only the node that answered its last message, and its loss ends none.
func (q *Queries) ActiveOwners(ctx context.Context) ([]string, error) {
	return list(ctx, q, "list active owners",
		`SELECT DISTINCT owner_node FROM conversations WHERE status <> 'ended' AND owner_node IS NOT NULL
			AND NOT (channel IN ('chat', 'whatsapp') AND status = 'in_progress') ORDER BY owner_node LIMIT 1000`,
		nil, func(r rowScanner) (string, error) {
			var s string
			err := r.Scan(&s)
			return s, err
		})
}

// ActiveConversationsOf returns up to limit conversations not ended that node owns, but for
// chats and messaging-app conversations in progress (see ActiveOwners).
func (q *Queries) ActiveConversationsOf(ctx context.Context, node string, limit int) ([]Conversation, error) {
	return list(ctx, q, "list active conversations of a node",
		`SELECT `+convCols+` FROM conversations WHERE status <> 'ended' AND owner_node = $1
			AND NOT (channel IN ('chat', 'whatsapp') AND status = 'in_progress') ORDER BY updated_at LIMIT $2`,
		[]any{node, clampLimit(limit)}, scanConversation)
}

// TouchConversation sets updated_at, so that a live conversation is not taken for a lost one.
func (q *Queries) TouchConversation(ctx context.Context, id ConversationID, at time.Time) error {
	_, err := q.exec(ctx, "touch conversation", `UPDATE conversations SET updated_at = $2 WHERE id = $1 AND status <> 'ended'`,
		string(id), ts(normTime(at)))
	return err
}

// SetConversationAnalysis stores what the post-call analysis worked out (issue 14): the
// analysis and the collected values (objects; nil leaves one as it is).
func (q *Queries) SetConversationAnalysis(ctx context.Context, id ConversationID, analysis, collected json.RawMessage, at time.Time) error {
	var a, c any
	if analysis != nil {
		if !isJSONObject(analysis) {
			return fmt.Errorf("store: %w: analysis is not a JSON object", ErrInvalid)
		}
		a = string(analysis)
	}
	if collected != nil {
		if !isJSONObject(collected) {
			return fmt.Errorf("store: %w: collected is not a JSON object", ErrInvalid)
		}
		c = string(collected)
	}
	res, err := q.exec(ctx, "set conversation analysis",
		`UPDATE conversations SET analysis = COALESCE($2, analysis), collected = COALESCE($3, collected), analyzed_at = $4, updated_at = $4
		WHERE id = $1 AND deleted_at IS NULL`, string(id), a, c, ts(normTime(at)))
	return affectedOne(res, err, "conversation", id)
}
