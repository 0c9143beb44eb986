package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Queries holds every repository method. *Store and *Tx both embed it, so one method runs alone
// (Store) or inside a transaction with other changes, such as the audit event that records them
// (Tx). Its zero value is not usable; get one from a Store or a Tx.
type Queries struct {
	db   execer
	s    *Store
	inTx bool
	// enqueued names the job kinds a Tx enqueued, announced once it commits (see
	// Store.OnEnqueue); nil outside a Tx.
	enqueued *[]string
	sqlTx    *sql.Tx // the Tx's, for its prepared statements; nil outside a Tx
	// batched holds the events a Tx records after BatchEvents, inserted as it commits; nil:
	// events are inserted at once.
	batched *[]Event
}

// execer is what *sql.DB and *sql.Tx have in common.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner interface{ Scan(dest ...any) error }

// ready refuses repository calls on a database this binary has not migrated. Inside a Tx the
// Store checked already.
func (q *Queries) ready(ctx context.Context) error {
	if q.inTx {
		return nil
	}
	return q.s.checkReady(ctx)
}

// exec runs a statement that returns no rows.
func (q *Queries) exec(ctx context.Context, op, query string, args ...any) (sql.Result, error) {
	if err := q.ready(ctx); err != nil {
		return nil, err
	}
	q.s.noteStatement(op)
	query = q.s.d.rebind(query)
	var res sql.Result
	var err error
	if st, release := q.prepared(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
		release()
	} else {
		res, err = q.db.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return nil, q.s.wrap(op, err)
	}
	return res, nil
}

// get runs a query for one row and scans it with scan; no row is ErrNotFound.
func (q *Queries) get(ctx context.Context, op, query string, args []any, scan func(rowScanner) error) error {
	if err := q.ready(ctx); err != nil {
		return err
	}
	q.s.noteStatement(op)
	query = q.s.d.rebind(query)
	var row *sql.Row
	st, release := q.prepared(ctx, query)
	if st != nil {
		row = st.QueryRowContext(ctx, args...)
		defer release()
	} else {
		row = q.db.QueryRowContext(ctx, query, args...)
	}
	if err := scan(row); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: %s: %w", op, ErrNotFound)
		}
		return q.s.wrap(op, err)
	}
	return nil
}

// list runs a query and scans every row with scan.
func list[T any](ctx context.Context, q *Queries, op, query string, args []any, scan func(rowScanner) (T, error)) ([]T, error) {
	if err := q.ready(ctx); err != nil {
		return nil, err
	}
	q.s.noteStatement(op)
	query = q.s.d.rebind(query)
	var rows *sql.Rows
	var err error
	if st, release := q.prepared(ctx, query); st != nil {
		defer release()
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = q.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, q.s.wrap(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, q.s.wrap(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, q.s.wrap(op, err)
	}
	return out, nil
}

// atomic runs fn in a transaction: the caller's, or a new one when q belongs to the Store.
func (q *Queries) atomic(ctx context.Context, fn func(*Queries) error) error {
	if q.inTx {
		return fn(q)
	}
	return q.s.Tx(ctx, func(tx *Tx) error { return fn(tx.Queries) })
}

// Timestamps. SQLite keeps them as TEXT in this fixed-width layout, which sorts like the time it
// names; PostgreSQL parses the same text into timestamptz. Both keep microseconds.
const tsLayout = "2006-01-02T15:04:05.000000Z"

// ts renders t as a query argument.
func ts(t time.Time) string { return t.UTC().Format(tsLayout) }

// nullTS renders an optional time as a query argument.
func nullTS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

// nullText renders "" as NULL.
func nullText[T ~string](s T) any {
	if s == "" {
		return nil
	}
	return string(s)
}

// nullInt renders 0 as NULL.
func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// normTime is how every time leaves and enters the store: UTC, whole microseconds.
func normTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// timeCol scans a timestamp column: time.Time from PostgreSQL, text from SQLite.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*c.t = v.UTC()
	case string:
		return c.parse(v)
	case []byte:
		return c.parse(string(v))
	default:
		return fmt.Errorf("store: cannot scan %T into a time", src)
	}
	return nil
}

func (c timeCol) parse(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("store: bad stored time %q: %w", s, err)
	}
	*c.t = t.UTC()
	return nil
}

// nullTimeCol scans a nullable timestamp column.
type nullTimeCol struct{ t **time.Time }

func (c nullTimeCol) Scan(src any) error {
	if src == nil {
		*c.t = nil
		return nil
	}
	var t time.Time
	if err := (timeCol{&t}).Scan(src); err != nil {
		return err
	}
	*c.t = &t
	return nil
}

// nullTextCol scans a nullable text column into a string type; NULL becomes "".
type nullTextCol[T ~string] struct{ p *T }

func (c nullTextCol[T]) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.p = ""
	case string:
		*c.p = T(v)
	case []byte:
		*c.p = T(v)
	default:
		return fmt.Errorf("store: cannot scan %T into text", src)
	}
	return nil
}

// jsonCol scans a JSON column (jsonb on PostgreSQL, TEXT on SQLite) into a Go value.
type jsonCol struct{ v any }

func (c jsonCol) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("store: cannot scan %T as JSON", src)
	}
	if raw, ok := c.v.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], b...)
		return nil
	}
	return json.Unmarshal(b, c.v)
}

// jsonText renders v as JSON text for a query argument.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("store: %w: %v", ErrInvalid, err)
	}
	return string(b), nil
}

// maxName is the longest name (in characters) of an organization, project or key.
const maxName = 120

// checkName refuses empty, padded, over-long or control-character names.
func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("store: %w: %s name is empty", ErrInvalid, what)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("store: %w: %s name %q has leading or trailing space", ErrInvalid, what, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("store: %w: %s name is not UTF-8", ErrInvalid, what)
	case utf8.RuneCountInString(s) > maxName:
		return fmt.Errorf("store: %w: %s name is longer than %d characters", ErrInvalid, what, maxName)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("store: %w: %s name %q holds a control character", ErrInvalid, what, s)
	}
	return nil
}

// notFound reports a missing row by ID.
func notFound(what string, id any) error {
	return fmt.Errorf("store: %s %v: %w", what, id, ErrNotFound)
}

// clampLimit turns a caller's page size into one the store serves.
func clampLimit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}
