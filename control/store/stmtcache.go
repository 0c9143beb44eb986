package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps SQLite statements prepared (issue 14: preparing every statement again was a
// quarter of the CPU of a webhook delivery). A statement is prepared once on the pool
// (database/sql then prepares it once per connection and keeps it), and a transaction uses it
// through Tx.StmtContext, which reuses the connection's prepared statement. PostgreSQL is left to
// pgx, which caches its statements itself. The cache holds at most maxCachedStmts texts; beyond
// them (queries built with a varying number of placeholders) statements are prepared each time,
// as before.
type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool // being prepared in the background
	closed  bool
	wg      sync.WaitGroup
}

const maxCachedStmts = 512

// get returns the cached statement of query (already rebound); nil when there is none yet or
// it cannot be cached. Outside a transaction it prepares it at once. Inside one it never
// prepares (that needs a connection of the pool, and waiting for one while the transaction
// holds its own could deadlock a full pool): it has the statement prepared in the background
// for the next time and runs this one as text.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string, inTx bool) *sql.Stmt {
	c.mu.Lock()
	if st, ok := c.stmts[query]; ok || c.closed || len(c.stmts)+len(c.pending) >= maxCachedStmts || c.pending[query] {
		c.mu.Unlock()
		return st
	}
	if inTx {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
		c.wg.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.wg.Done()
			c.prepare(context.Background(), db, query)
		}()
		return nil
	}
	c.mu.Unlock()
	return c.prepare(ctx, db, query)
}

// prepare prepares query on the pool and caches it (no lock is held while it waits).
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	st, err := db.PrepareContext(context.WithoutCancel(ctx), query)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, query)
	if err != nil {
		return nil // the statement runs unprepared and reports its own error
	}
	if prev, ok := c.stmts[query]; ok || c.closed {
		st.Close()
		return prev
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	c.stmts[query] = st
	return st
}

// close closes every cached statement; statements prepared later are closed at once. Call it
// before the pool is closed, and wait after.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}

// prepared returns the statement to run query with on q: the cached one (inside a transaction,
// bound to it; release closes that binding), or nil to run the text as it is.
func (q *Queries) prepared(ctx context.Context, query string) (st *sql.Stmt, release func()) {
	if q.s.d != sqliteDialect {
		return nil, nil
	}
	cached := q.s.stmts.get(ctx, q.s.db, query, q.sqlTx != nil)
	if cached == nil {
		return nil, nil
	}
	if q.sqlTx == nil {
		return cached, func() {}
	}
	ts := q.sqlTx.StmtContext(ctx, cached)
	return ts, func() { ts.Close() }
}
