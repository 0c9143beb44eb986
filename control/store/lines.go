package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ConversationLine is one transcript line of a conversation. Seq is the engine's: it starts at
// 1 and grows by one per line, so a reader that asks for the lines after the last seq it read
// never skips or repeats one.
type ConversationLine struct {
	Seq         int64
	Role        string // user, agent, tool, note or system
	Text        string
	Start       time.Time
	End         time.Time
	Interrupted bool
	Meta        json.RawMessage // an object; nil stores {}
	CreatedAt   time.Time
}

const lineCols = `seq, role, text, start_at, end_at, interrupted, meta, created_at`

func scanLine(r rowScanner) (ConversationLine, error) {
	var l ConversationLine
	err := r.Scan(&l.Seq, &l.Role, &l.Text, timeCol{&l.Start}, timeCol{&l.End}, &l.Interrupted, jsonCol{&l.Meta}, timeCol{&l.CreatedAt})
	return l, err
}

// AppendLines stores transcript lines of a conversation and moves its last_seq to the highest
// seq stored. A line whose seq is stored already is ErrConflict (the whole call stores nothing).
func (q *Queries) AppendLines(ctx context.Context, id ConversationID, lines []ConversationLine) error {
	if len(lines) == 0 {
		return nil
	}
	if !validID(id) {
		return notFound("conversation", id)
	}
	for _, l := range lines {
		if l.Seq < 1 || !validRole(l.Role) {
			return fmt.Errorf("store: %w: a line needs a seq ≥ 1 and a role (user, agent, tool, note, system), not %d %q", ErrInvalid, l.Seq, l.Role)
		}
		if len(l.Meta) > 0 && !isJSONObject(l.Meta) {
			return fmt.Errorf("store: %w: line meta is not a JSON object", ErrInvalid)
		}
	}
	return q.atomic(ctx, func(q *Queries) error {
		now := ts(q.s.timeNow())
		var top int64
		for _, l := range lines {
			meta := "{}"
			if len(l.Meta) > 0 {
				meta = string(l.Meta)
			}
			_, err := q.exec(ctx, "append conversation line",
				`INSERT INTO conversation_lines (conversation_id, `+lineCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				string(id), l.Seq, l.Role, l.Text, ts(l.Start), ts(l.End), l.Interrupted, meta, now)
			if err != nil {
				return err
			}
			top = max(top, l.Seq)
		}
		_, err := q.exec(ctx, "move last seq",
			`UPDATE conversations SET last_seq = $2, updated_at = $3 WHERE id = $1 AND last_seq < $2`, string(id), top, now)
		return err
	})
}

// ListLines returns up to limit lines of a conversation with seq greater than after, in order.
func (q *Queries) ListLines(ctx context.Context, id ConversationID, after int64, limit int) ([]ConversationLine, error) {
	if !validID(id) {
		return nil, notFound("conversation", id)
	}
	return list(ctx, q, "list conversation lines",
		`SELECT `+lineCols+` FROM conversation_lines WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		[]any{string(id), after, clampLimit(limit)}, scanLine)
}

// AllLines returns every line of a conversation, in order.
func (q *Queries) AllLines(ctx context.Context, id ConversationID) ([]ConversationLine, error) {
	var out []ConversationLine
	var after int64
	for {
		page, err := q.ListLines(ctx, id, after, 1000)
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

// validRole reports whether r is a transcript role.
func validRole(r string) bool {
	return strings.Contains(" user agent tool note system ", " "+r+" ")
}
