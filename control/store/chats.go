package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ChatState is what a chat carries from one message to the next, kept with its conversation
// (issue 13): with it and the chat's LLM messages (ChatMessages) any node answers the next
// message, after a restart or after the node that answered the last one died.
//
// A chat is answered by one holder at a time: LeaseChat takes the chat's lease (a holder name
// and an expiry) only when no one holds it or the holder's lease ran out, and every write of
// the state checks that the writer still holds it.
type ChatState struct {
	Turns       int             // messages answered: the chat's length
	LLMFailures int             // replies that failed in a row
	Cost        json.RawMessage // what the chat used so far (an object)
	IdleSeconds int             // how long the chat waits for a message before it ends; -1 for ever, 0 not kept (an older version's chat)
	IdleAt      *time.Time      // when it ends for want of a message (nil: no deadline yet)
	Lease       string          // the holder answering a message, or ""
	LeaseUntil  *time.Time      // when that holder's lease runs out
	Messages    int             // how many LLM messages are stored
}

const chatCols = `chat_turns, chat_failures, chat_cost, chat_idle_seconds, chat_idle_at, chat_lease, chat_lease_until,
	(SELECT COUNT(*) FROM chat_messages m WHERE m.conversation_id = conversations.id)`

func scanChat(r rowScanner) (Conversation, ChatState, error) {
	var c Conversation
	var st ChatState
	dest, finish := conversationDest(&c)
	dest = append(dest, &st.Turns, &st.LLMFailures, jsonCol{&st.Cost}, &st.IdleSeconds, nullTimeCol{&st.IdleAt},
		nullTextCol[string]{&st.Lease}, nullTimeCol{&st.LeaseUntil}, &st.Messages)
	err := r.Scan(dest...)
	finish()
	return c, st, err
}

// GetChat returns a conversation with its chat state, or ErrNotFound.
func (q *Queries) GetChat(ctx context.Context, id ConversationID) (Conversation, ChatState, error) {
	if !validID(id) {
		return Conversation{}, ChatState{}, notFound("conversation", id)
	}
	var c Conversation
	var st ChatState
	err := q.get(ctx, "get chat", `SELECT `+convCols+`, `+chatCols+` FROM conversations WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { c, st, err = scanChat(r); return err })
	return c, st, err
}

// LeaseChat makes holder the one that answers chat id until now+ttl, when the chat is in
// progress and nobody holds it (or the holder's lease ran out). It returns the chat as it is
// then and whether holder got it; when not, the chat says why (ended, or Lease names the
// holder).
func (q *Queries) LeaseChat(ctx context.Context, id ConversationID, holder string, now time.Time, ttl time.Duration) (Conversation, ChatState, bool, error) {
	if holder == "" || ttl <= 0 {
		return Conversation{}, ChatState{}, false, fmt.Errorf("store: %w: a chat lease needs a holder and a time", ErrInvalid)
	}
	if !validID(id) {
		return Conversation{}, ChatState{}, false, notFound("conversation", id)
	}
	now = normTime(now)
	res, err := q.exec(ctx, "lease chat",
		`UPDATE conversations SET chat_lease = $2, chat_lease_until = $3, owner_node = $4
		WHERE id = $1 AND channel IN ('chat', 'whatsapp') AND status = 'in_progress' AND (chat_lease IS NULL OR chat_lease_until < $5)`,
		string(id), holder, ts(now.Add(ttl)), holderNode(holder), ts(now))
	if err != nil {
		return Conversation{}, ChatState{}, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Conversation{}, ChatState{}, false, err
	}
	c, st, err := q.GetChat(ctx, id)
	return c, st, n == 1 && err == nil, err
}

// holderNode is the node part of a lease holder ("node/token").
func holderNode(holder string) string {
	for i := len(holder) - 1; i > 0; i-- {
		if holder[i] == '/' {
			return holder[:i]
		}
	}
	return holder
}

// RenewChatLease moves the expiry of holder's lease of chat id to until; false when holder
// no longer holds it.
func (q *Queries) RenewChatLease(ctx context.Context, id ConversationID, holder string, until time.Time) (bool, error) {
	res, err := q.exec(ctx, "renew chat lease", `UPDATE conversations SET chat_lease_until = $3 WHERE id = $1 AND chat_lease = $2`,
		string(id), holder, ts(normTime(until)))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ReleaseChatLease gives up holder's lease of chat id (nothing when holder no longer holds it).
func (q *Queries) ReleaseChatLease(ctx context.Context, id ConversationID, holder string) error {
	_, err := q.exec(ctx, "release chat lease", `UPDATE conversations SET chat_lease = NULL, chat_lease_until = NULL WHERE id = $1 AND chat_lease = $2`,
		string(id), holder)
	return err
}

// ChatMessages returns the stored LLM messages of chat id, in order.
func (q *Queries) ChatMessages(ctx context.Context, id ConversationID) ([]json.RawMessage, error) {
	if !validID(id) {
		return nil, notFound("conversation", id)
	}
	return list(ctx, q, "list chat messages", `SELECT message FROM chat_messages WHERE conversation_id = $1 ORDER BY n`,
		[]any{string(id)}, func(r rowScanner) (json.RawMessage, error) {
			var m json.RawMessage
			err := r.Scan(jsonCol{&m})
			return m, err
		})
}

// ChatUpdate is what one message (or steering command) of a chat changed.
type ChatUpdate struct {
	Lines []ConversationLine // the new transcript lines
	// Messages are the new LLM messages, stored after the first From (the count the writer
	// read: a count that moved meanwhile is ErrConflict).
	Messages    []json.RawMessage
	From        int
	Turns       int
	LLMFailures int
	Cost        json.RawMessage // nil keeps what is stored
	IdleAt      *time.Time      // nil keeps what is stored
	At          time.Time
	Release     bool // give the lease up
}

// SaveChat stores what a message of chat id changed, under holder's lease: the lines, the new
// LLM messages and the state, together. It is ErrConflict, and stores nothing, when holder no
// longer holds the lease or the chat has ended.
func (q *Queries) SaveChat(ctx context.Context, id ConversationID, holder string, u ChatUpdate) error {
	if !validID(id) {
		return notFound("conversation", id)
	}
	for _, m := range u.Messages {
		if !isJSONObject(m) {
			return fmt.Errorf("store: %w: a chat message is not a JSON object", ErrInvalid)
		}
	}
	var cost any
	if u.Cost != nil {
		if !isJSONObject(u.Cost) {
			return fmt.Errorf("store: %w: chat cost is not a JSON object", ErrInvalid)
		}
		cost = string(u.Cost)
	}
	return q.atomic(ctx, func(q *Queries) error {
		at := ts(normTime(u.At))
		set := `chat_turns = $3, chat_failures = $4, chat_cost = COALESCE($5, chat_cost), chat_idle_at = COALESCE($6, chat_idle_at), updated_at = $7`
		if u.Release {
			set += `, chat_lease = NULL, chat_lease_until = NULL`
		}
		res, err := q.exec(ctx, "save chat",
			`UPDATE conversations SET `+set+` WHERE id = $1 AND chat_lease = $2 AND status = 'in_progress'`,
			string(id), holder, u.Turns, u.LLMFailures, cost, nullTS(u.IdleAt), at)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("store: save chat %s: %w: the lease is not %s's, or the chat has ended", id, ErrConflict, holder)
		}
		var have int
		if err := q.get(ctx, "count chat messages", `SELECT COUNT(*) FROM chat_messages WHERE conversation_id = $1`, []any{string(id)},
			func(r rowScanner) error { return r.Scan(&have) }); err != nil {
			return err
		}
		if have != u.From {
			return fmt.Errorf("store: save chat %s: %w: %d messages stored, the writer read %d", id, ErrConflict, have, u.From)
		}
		for i, m := range u.Messages {
			if _, err := q.exec(ctx, "append chat message", `INSERT INTO chat_messages (conversation_id, n, message) VALUES ($1, $2, $3)`,
				string(id), u.From+i+1, string(m)); err != nil {
				return err
			}
		}
		return q.AppendLines(ctx, id, u.Lines)
	})
}

// ChatIdleSeconds is how an idle limit is stored: whole seconds, rounded up; -1 for none (0 is
// left to chats stored by an older version, which had no limit kept).
func ChatIdleSeconds(idle time.Duration) int {
	if idle <= 0 {
		return -1
	}
	return int((idle + time.Second - 1) / time.Second)
}

// StartChatState sets the idle limit of a chat that has just started (0: none) and its first
// idle deadline.
func (q *Queries) StartChatState(ctx context.Context, id ConversationID, idle time.Duration, at time.Time) error {
	var idleAt any
	secs := ChatIdleSeconds(idle)
	if secs > 0 {
		idleAt = ts(normTime(at).Add(time.Duration(secs) * time.Second))
	}
	res, err := q.exec(ctx, "start chat state", `UPDATE conversations SET chat_idle_seconds = $2, chat_idle_at = $3 WHERE id = $1`,
		string(id), secs, idleAt)
	return affectedOne(res, err, "conversation", id)
}

// IdleChats returns chats in progress that nobody holds and whose idle deadline passed at now,
// oldest deadline first. A chat stored before its deadline was kept (chat_idle_at NULL,
// chat_idle_seconds 0, an older version's chat) counts as idle when it was last updated before
// legacyBefore (zero: never).
func (q *Queries) IdleChats(ctx context.Context, now, legacyBefore time.Time, limit int) ([]ConversationID, error) {
	n := ts(normTime(now))
	legacy := any(nil)
	if !legacyBefore.IsZero() {
		legacy = ts(normTime(legacyBefore))
	}
	return list(ctx, q, "list idle chats",
		`SELECT id FROM conversations WHERE channel = 'chat' AND status = 'in_progress'
			AND (chat_lease IS NULL OR chat_lease_until < $1)
			AND (chat_idle_at < $1 OR (chat_idle_at IS NULL AND chat_idle_seconds = 0 AND updated_at < $2))
		ORDER BY chat_idle_at LIMIT $3`,
		[]any{n, legacy, clampLimit(limit)}, func(r rowScanner) (ConversationID, error) {
			var id ConversationID
			err := r.Scan(&id)
			return id, err
		})
}
