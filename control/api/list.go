package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/control/fault"

	"github.com/google/uuid"
)

// Lists. A page holds limit items (default defaultLimit, 1 to 100) in the operation's order and
// the envelope {object: "list", data, has_more, next_cursor}. Pages are keyset pages: a cursor
// holds the last item's position (its UUIDv7 id, which sorts by creation, or a version number),
// so that rows inserted while a client pages are never seen twice and never push others out
// of sight. A cursor is opaque (base64url of a small JSON object) and bound to the operation and
// its filters: sent with other filters it is refused with 422 cursor_mismatch.
const defaultLimit = 20

// list is the envelope of every list answer.
type list[T any] struct {
	Object     string  `json:"object" jsonschema:"enum=list"`
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more" doc:"Whether another page follows."`
	NextCursor *string `json:"next_cursor" doc:"The cursor of the next page, sent back with the same filters; null on the last page." jsonschema:"nullable"`
}

// cursorBody is what a cursor holds.
type cursorBody struct {
	V     int    `json:"v"`
	Op    string `json:"o"`
	F     string `json:"f"` // hash of the filters
	After string `json:"a"` // position of the last item of the previous page
}

// page is the paging a list request asked for.
type page struct {
	limit   int
	after   string // "" on the first page
	filters string
	op      string
}

// filterHash names the filters of a list request: the operation's query parameters other than
// limit and cursor, and its path parameters.
func filterHash(c *call, pathValues ...string) string {
	var parts []string
	for k, v := range c.query {
		if k != "limit" && k != "cursor" {
			parts = append(parts, k+"="+v)
		}
	}
	slices.Sort(parts)
	parts = append(parts, pathValues...)
	h := sha256.Sum256([]byte(c.op.ID + "\x00" + strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:12])
}

// pageOf reads limit and cursor of a list request.
func pageOf(c *call, pathValues ...string) (page, error) {
	p := page{limit: defaultLimit, filters: filterHash(c, pathValues...), op: c.op.ID}
	if s, ok := c.query["limit"]; ok {
		p.limit, _ = strconv.Atoi(s) // checked by checkQuery
	}
	raw, ok := c.query["cursor"]
	if !ok {
		return p, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	var cb cursorBody
	if err == nil {
		err = json.Unmarshal(b, &cb)
	}
	if err != nil || cb.V != 1 || cb.Op != c.op.ID || cb.After == "" {
		return p, &fault.Error{Status: 422, Code: fault.CodeInvalidCursor, Detail: "The cursor is not one this list gave out; send the next_cursor of the previous page as it is.",
			Errors: []fault.FieldError{{Parameter: "cursor", Code: fault.CodeInvalidCursor, Detail: "Not a cursor of this list."}}}
	}
	if cb.F != p.filters {
		return p, &fault.Error{Status: 422, Code: fault.CodeCursorMismatch, Detail: "The cursor belongs to a page with other filters; send it with the filters of the page it came from, or start again without a cursor.",
			Errors: []fault.FieldError{{Parameter: "cursor", Code: fault.CodeCursorMismatch, Detail: "Sent with filters other than its page's."}}}
	}
	p.after = cb.After
	return p, nil
}

// cursor returns the cursor of the page after the item at position after.
func (p page) cursor(after string) *string {
	b, _ := json.Marshal(cursorBody{V: 1, Op: p.op, F: p.filters, After: after})
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// makeList builds the envelope from up to limit+1 items fetched; pos gives an item's position.
func makeList[T any](p page, items []T, pos func(T) string) list[T] {
	l := list[T]{Object: "list", Data: items}
	if len(items) > p.limit {
		l.Data, l.HasMore = items[:p.limit], true
		l.NextCursor = p.cursor(pos(items[p.limit-1]))
	}
	if l.Data == nil {
		l.Data = []T{}
	}
	return l
}

// isUUID reports whether s is a UUID in canonical lowercase form or any form uuid.Parse takes
// that is 36 characters long.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}
