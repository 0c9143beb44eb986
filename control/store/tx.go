package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Tx is one database transaction. Its repository methods (from the embedded *Queries) run inside
// it, so a change and the audit event that records it commit or roll back together. A Tx is only
// valid inside the function given to (*Store).Tx and must not be used from other goroutines.
type Tx struct {
	*Queries
	tx *sql.Tx
}

// SQL returns the transaction's database/sql handle, for a write that has no repository method
// but must commit with one (a job handler's own table written with CompleteJob, in tests).
// Repository code never uses it.
func (tx *Tx) SQL() *sql.Tx { return tx.tx }

// txAttempts bounds how often Tx runs fn when the engine asks to retry.
const txAttempts = 5

// Tx runs fn in a transaction and commits when fn returns nil; any error (or panic) rolls back.
// When the engine reports a transient conflict (SQLite busy or locked, PostgreSQL serialization
// failure or deadlock) the whole transaction is retried a few times, so fn may run more than once
// and must not have effects outside the transaction. Inside fn use only tx's methods: a call on
// the Store would need a second connection and, on SQLite, wait for the lock fn holds.
func (s *Store) Tx(ctx context.Context, fn func(*Tx) error) error {
	if err := s.checkReady(ctx); err != nil {
		return err
	}
	return s.tx(ctx, fn)
}

// tx is Tx without the schema check, for Migrate.
func (s *Store) tx(ctx context.Context, fn func(*Tx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = s.tryTx(ctx, fn)
		if err == nil || attempt == txAttempts || s.d.classify(err) != errRetry {
			return err
		}
		// Back off 5–10 ms, doubling per attempt, with jitter so that retrying writers spread out.
		d := time.Duration(5<<attempt) * time.Millisecond / 2
		d += rand.N(d)
		s.log.DebugContext(ctx, "store: retrying transaction", "attempt", attempt, "after", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Store) tryTx(ctx context.Context, fn func(*Tx) error) (err error) {
	s.noteStatement(TxOp)
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap("begin transaction", err)
	}
	var enqueued []string
	tx := &Tx{Queries: &Queries{db: sqlTx, s: s, inTx: true, enqueued: &enqueued, sqlTx: sqlTx}, tx: sqlTx}
	defer func() {
		if p := recover(); p != nil {
			_ = sqlTx.Rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		if rbErr := sqlTx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("store: rollback: %w", rbErr))
		}
		return err
	}
	if tx.batched != nil && len(*tx.batched) > 0 {
		batch := *tx.batched
		tx.batched = nil // inserted now, not batched again
		if _, err := tx.InsertEvents(ctx, batch); err != nil {
			_ = sqlTx.Rollback()
			return err
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return s.wrap("commit", err)
	}
	s.announce(enqueued...)
	return nil
}

// OnEnqueue sets fn to be told the kind of every job enqueued, once it can be claimed: at
// once for an enqueue on the Store, after the commit for one on a Tx (the Tx of an event
// records its webhook deliveries, say). It wakes the workers, so that work enqueued by any
// change starts without waiting for a poll. fn must not block. Set it before use.
func (s *Store) OnEnqueue(fn func(kind string)) { s.onEnqueue = fn }

// BatchEvents makes the events recorded on tx from now on (InsertEvent) wait until fn
// returns, and then be inserted together as InsertEvents does (issue 20: a call's end records
// conversation.ended and its final transcript): on SQLite two statements for them all instead
// of two each. PostgreSQL records each event with its receivers' read in one statement
// already; there it changes nothing. A batched event's id and time are given as it is
// inserted (InsertEvent returns it without); it cannot be read on tx, and an error in it is
// the commit's.
func (tx *Tx) BatchEvents() {
	if tx.batched == nil && tx.s.d.name != Postgres {
		tx.batched = new([]Event)
	}
}

// TxOp is the op OnStatement's fn is told of a transaction begun.
const TxOp = "transaction"

// OnStatement sets fn to be told of every statement the repository runs (its op, such as
// "insert event") and of every transaction begun (TxOp), on the caller's goroutine. It is for
// tests and benchmarks that count a use case's round trips; fn must be cheap and safe for
// concurrent use. Set it before use.
func (s *Store) OnStatement(fn func(op string)) { s.onStmt = fn }

func (s *Store) noteStatement(op string) {
	if s.onStmt != nil {
		s.onStmt(op)
	}
}

// announce tells OnEnqueue's fn of each kind once.
func (s *Store) announce(kinds ...string) {
	if s.onEnqueue == nil {
		return
	}
	for i, k := range kinds {
		if !slices.Contains(kinds[:i], k) {
			s.onEnqueue(k)
		}
	}
}

// noteEnqueued records that q enqueued a job of kind due now.
func (q *Queries) noteEnqueued(kind string) {
	if q.enqueued != nil {
		*q.enqueued = append(*q.enqueued, kind)
		return
	}
	q.s.announce(kind)
}
