package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// CommandID names a steering command.
type CommandID string

// Command kinds and statuses.
const (
	CommandSay      = "say"
	CommandNote     = "note"
	CommandTransfer = "transfer"
	CommandEnd      = "end"

	CommandPending = "pending"
	CommandDone    = "done"
	CommandFailed  = "failed"
)

// Command is a steering command sent to a live conversation: it is pending until the node that
// runs the conversation reports it done or failed (with the reason).
type Command struct {
	ID             CommandID
	OrgID          OrgID
	ConversationID ConversationID
	Kind           string
	Status         string
	Reason         string
	Params         json.RawMessage // an object: the text, the destination, …
	CreatedAt      time.Time
	CompletedAt    *time.Time
}

const commandCols = `id, org_id, conversation_id, kind, status, reason, params, created_at, completed_at`

func scanCommand(r rowScanner) (Command, error) {
	var c Command
	err := r.Scan(&c.ID, &c.OrgID, &c.ConversationID, &c.Kind, &c.Status, nullTextCol[string]{&c.Reason}, jsonCol{&c.Params},
		timeCol{&c.CreatedAt}, nullTimeCol{&c.CompletedAt})
	return c, err
}

// CreateCommand stores a pending command for a conversation.
func (q *Queries) CreateCommand(ctx context.Context, c Command) (Command, error) {
	switch c.Kind {
	case CommandSay, CommandNote, CommandTransfer, CommandEnd:
	default:
		return Command{}, fmt.Errorf("store: %w: command kind %q", ErrInvalid, c.Kind)
	}
	if !validID(c.OrgID) || !validID(c.ConversationID) {
		return Command{}, notFound("conversation", c.ConversationID)
	}
	params, err := objectOr("command params", c.Params)
	if err != nil {
		return Command{}, err
	}
	c.ID, c.Status, c.Reason, c.CompletedAt = newID[CommandID](), CommandPending, "", nil
	c.Params, c.CreatedAt = json.RawMessage(params), q.s.timeNow()
	_, err = q.exec(ctx, "create command",
		`INSERT INTO conversation_commands (id, org_id, conversation_id, kind, status, params, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		string(c.ID), string(c.OrgID), string(c.ConversationID), c.Kind, c.Status, params, ts(c.CreatedAt))
	if err != nil {
		return Command{}, err
	}
	return c, nil
}

// GetCommand returns a command, or ErrNotFound.
func (q *Queries) GetCommand(ctx context.Context, id CommandID) (Command, error) {
	if !validID(id) {
		return Command{}, notFound("command", id)
	}
	var c Command
	err := q.get(ctx, "get command", `SELECT `+commandCols+` FROM conversation_commands WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { c, err = scanCommand(r); return err })
	return c, err
}

// FinishCommand records how a pending command ended (done, or failed with a reason). A command
// that is no longer pending is left as it is; FinishCommand reports whether it changed it.
func (q *Queries) FinishCommand(ctx context.Context, id CommandID, status, reason string, at time.Time) (bool, error) {
	if status != CommandDone && status != CommandFailed {
		return false, fmt.Errorf("store: %w: command status %q", ErrInvalid, status)
	}
	res, err := q.exec(ctx, "finish command",
		`UPDATE conversation_commands SET status = $2, reason = $3, completed_at = $4 WHERE id = $1 AND status = 'pending'`,
		string(id), status, nullText(reason), ts(normTime(at)))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// FailPendingCommands settles the pending commands of a conversation that ended before they
// ran: end commands are done (the conversation has ended), the others fail with reason. It
// returns how many it settled.
func (q *Queries) FailPendingCommands(ctx context.Context, id ConversationID, reason string, at time.Time) (int64, error) {
	res, err := q.exec(ctx, "fail pending commands",
		`UPDATE conversation_commands
		SET status = CASE WHEN kind = 'end' THEN 'done' ELSE 'failed' END,
			reason = CASE WHEN kind = 'end' THEN NULL ELSE $2 END, completed_at = $3
		WHERE conversation_id = $1 AND status = 'pending'`,
		string(id), reason, ts(normTime(at)))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
