package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Conversations is the repository of a caller's conversations: every read and write takes the
// caller's Scope and applies it in SQL, with the conversation's mode (the other key mode gets
// ErrNotFound). A deleted conversation (a tombstone) is not found, except by ListDeleted.
//
// The runtime reaches conversations by id alone (GetConversation, AppendLines, …): it runs them
// for whichever organization they belong to.
type Conversations struct{ q *Queries }

// Conversations returns the conversation repository.
func (q *Queries) Conversations() Conversations { return Conversations{q} }

// ConversationListFilter narrows a list of conversations.
type ConversationListFilter struct {
	ProjectID     ProjectID // only this project's
	AgentID       AgentID
	Status        string
	Channel       string
	Direction     string
	ExternalID    string
	CreatedAfter  *time.Time // created at or after
	CreatedBefore *time.Time // created before
}

// convSel selects the scope's conversations that are not deleted (or, with deleted, only the
// deleted ones).
func convSel(sc Scope, deleted bool) *sel {
	b := newSel(`SELECT `+convCols+` FROM conversations`).scope(sc, "org_id", "project_id", "mode")
	if deleted {
		return b.cond("deleted_at IS NOT NULL")
	}
	return b.cond("deleted_at IS NULL")
}

// Get returns the scope's conversation with id, or ErrNotFound (also when it was deleted).
func (r Conversations) Get(ctx context.Context, sc Scope, id ConversationID) (Conversation, error) {
	return one(ctx, r.q, "get conversation", convSel(sc, false).id("id", string(id)), scanConversation)
}

// List returns the scope's conversations that f selects, newest first: a page of up to
// pg.Limit (pg.After is the last id of the previous page), and one more when another follows.
func (r Conversations) List(ctx context.Context, sc Scope, f ConversationListFilter, pg Page) ([]Conversation, error) {
	b := convSel(sc, false).optID("project_id", string(f.ProjectID)).optID("agent_id", string(f.AgentID))
	for col, v := range map[string]string{"status": f.Status, "channel": f.Channel, "direction": f.Direction, "external_id": f.ExternalID} {
		if v != "" {
			b.cond(col+" = ?", v)
		}
	}
	if f.CreatedAfter != nil {
		b.cond("created_at >= ?", ts(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		b.cond("created_at < ?", ts(*f.CreatedBefore))
	}
	return many(ctx, r.q, "list conversations", b, b.page("id", pg, true), scanConversation)
}

// ListDeleted returns the scope's deleted conversations (tombstones) of f's project and agent,
// newest first, paged like List.
func (r Conversations) ListDeleted(ctx context.Context, sc Scope, f ConversationListFilter, pg Page) ([]Conversation, error) {
	b := convSel(sc, true).optID("project_id", string(f.ProjectID)).optID("agent_id", string(f.AgentID))
	return many(ctx, r.q, "list deleted conversations", b, b.page("id", pg, true), scanConversation)
}

// Delete removes the scope's conversation's transcript, commands and values and leaves a
// tombstone (listed by ListDeleted). It returns the conversation as it was, so that the caller
// can remove its files (recording, attachments). A conversation outside the scope, or already
// deleted, is ErrNotFound; one that has not ended is ErrConflict.
func (r Conversations) Delete(ctx context.Context, sc Scope, id ConversationID, at time.Time) (Conversation, error) {
	var c Conversation
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if c, err = q.Conversations().Get(ctx, sc, id); err != nil {
			return err
		}
		if !c.Ended() {
			return fmt.Errorf("store: delete conversation %s: %w: it is %s", id, ErrConflict, c.Status)
		}
		if _, err := q.exec(ctx, "delete conversation lines", `DELETE FROM conversation_lines WHERE conversation_id = $1`, string(id)); err != nil {
			return err
		}
		if _, err := q.exec(ctx, "delete conversation commands", `DELETE FROM conversation_commands WHERE conversation_id = $1`, string(id)); err != nil {
			return err
		}
		if _, err := q.exec(ctx, "delete tool calls", `DELETE FROM tool_calls WHERE conversation_id = $1`, string(id)); err != nil { // issue 17
			return err
		}
		if _, err := q.exec(ctx, "delete chat messages", `DELETE FROM chat_messages WHERE conversation_id = $1`, string(id)); err != nil {
			return err
		}
		now := ts(normTime(at))
		// deleted_at IS NULL: of two racing deletes, the second changes nothing and is not found.
		res, err := q.exec(ctx, "delete conversation",
			`UPDATE conversations SET deleted_at = $2, updated_at = $2, metadata = '{}', variables = '{}', turns = '[]',
				from_number = NULL, to_number = NULL, external_id = NULL, recording = NULL
			WHERE id = $1 AND deleted_at IS NULL`, string(id), now)
		return affectedOne(res, err, "conversation", id)
	})
	return c, err
}

// lineColsOf is lineCols with each column taken from table alias l.
var lineColsOf = "l." + strings.ReplaceAll(lineCols, ", ", ", l.")

// Lines returns up to limit transcript lines with seq greater than after of the scope's
// conversation id, in order; a conversation outside the scope has none.
func (r Conversations) Lines(ctx context.Context, sc Scope, id ConversationID, after int64, limit int) ([]ConversationLine, error) {
	b := newSel(`SELECT `+lineColsOf+` FROM conversation_lines l JOIN conversations c ON c.id = l.conversation_id`).
		scope(sc, "c.org_id", "c.project_id", "c.mode").cond("c.deleted_at IS NULL").id("l.conversation_id", string(id)).
		cond("l.seq > ?", after)
	tail := " ORDER BY l.seq LIMIT " + b.arg(clampLimit(limit))
	return many(ctx, r.q, "list conversation lines", b, tail, scanLine)
}

// AllLines returns every transcript line of the scope's conversation id, in order.
func (r Conversations) AllLines(ctx context.Context, sc Scope, id ConversationID) ([]ConversationLine, error) {
	var out []ConversationLine
	var after int64
	for {
		page, err := r.Lines(ctx, sc, id, after, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// commandColsOf is commandCols with each column taken from table alias k.
var commandColsOf = "k." + strings.ReplaceAll(commandCols, ", ", ", k.")

// Command returns the command cmd of the scope's conversation conv, or ErrNotFound.
func (r Conversations) Command(ctx context.Context, sc Scope, conv ConversationID, cmd CommandID) (Command, error) {
	b := newSel(`SELECT `+commandColsOf+` FROM conversation_commands k JOIN conversations c ON c.id = k.conversation_id`).
		scope(sc, "c.org_id", "c.project_id", "c.mode").cond("c.deleted_at IS NULL").
		id("k.conversation_id", string(conv)).id("k.id", string(cmd))
	return one(ctx, r.q, "get command", b, scanCommand)
}

// AddCommand stores a pending command of kind with params for the scope's conversation conv.
func (r Conversations) AddCommand(ctx context.Context, sc Scope, conv ConversationID, kind string, params []byte) (Command, error) {
	var cmd Command
	err := r.q.atomic(ctx, func(q *Queries) error {
		c, err := q.Conversations().Get(ctx, sc, conv)
		if err != nil {
			return err
		}
		cmd, err = q.CreateCommand(ctx, Command{OrgID: c.OrgID, ConversationID: c.ID, Kind: kind, Params: params})
		return err
	})
	return cmd, err
}
