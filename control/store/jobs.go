package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// JobID names a job. It is minted when the job is enqueued and stays the same across every
// attempt, so that what a job does once (a dial, a delivery) can be recognised downstream
// after a retry.
type JobID string

// Job states. A job is queued (waiting for next_attempt_at), running (claimed by a worker
// under a lease), done, or dead (it failed max_attempts times, or for good). Done and dead
// rows are kept until PurgeJobs removes them, so that dead jobs can be listed and retried.
const (
	JobQueued  = "queued"
	JobRunning = "running"
	JobDone    = "done"
	JobDead    = "dead"
)

// DefaultJobMaxAttempts is the max_attempts of a job enqueued without one.
const DefaultJobMaxAttempts = 10

// maxJobError is how much of a failure's text a job keeps, in bytes.
const maxJobError = 2000

// Job is one row of the queue.
type Job struct {
	ID             JobID
	Kind           string
	Payload        json.RawMessage // JSON; PostgreSQL (jsonb) may reformat it
	State          string
	DedupeKey      string // "" when none
	NextAttemptAt  time.Time
	Attempts       int // claims so far, the current one included
	MaxAttempts    int
	LeaseOwner     string     // the worker holding it (running), or that last held it
	LeaseExpiresAt *time.Time // while running
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     *time.Time // done or dead
}

// Lease is what proves a worker still holds the job: the owner and the attempt it claimed.
// Once the lease ran out and another claim took the job, the old lease matches nothing, so a
// late worker can neither complete nor fail the job.
func (j Job) Lease() JobLease { return JobLease{ID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempts} }

// JobLease names one claim of a job.
type JobLease struct {
	ID      JobID
	Owner   string
	Attempt int
}

// NewJob is a job to enqueue.
type NewJob struct {
	Kind    string
	Payload json.RawMessage // nil means {}
	// DedupeKey, when set, makes the enqueue a no-op while a row with that key is kept (any
	// state): EnqueueJob then returns that row.
	DedupeKey   string
	RunAt       time.Time // zero means now
	MaxAttempts int       // 0 means DefaultJobMaxAttempts
}

// ClaimJobs says what a worker claims.
type ClaimJobs struct {
	Owner string
	Kinds []string // only these kinds (the ones the worker has handlers for); required
	Now   time.Time
	Lease time.Duration
	Limit int
}

// JobFilter selects jobs for ListJobs, newest first.
type JobFilter struct {
	State    string // "" for every state
	Kind     string // "" for every kind
	BeforeID JobID  // the cursor: jobs older than this one
	Limit    int
}

const jobCols = `id, kind, payload, state, dedupe_key, next_attempt_at, attempts, max_attempts, lease_owner,
	lease_expires_at, last_error, created_at, updated_at, finished_at`

func scanJob(r rowScanner) (Job, error) {
	var j Job
	err := r.Scan(&j.ID, &j.Kind, jsonCol{&j.Payload}, &j.State, nullTextCol[string]{&j.DedupeKey}, timeCol{&j.NextAttemptAt},
		&j.Attempts, &j.MaxAttempts, nullTextCol[string]{&j.LeaseOwner}, nullTimeCol{&j.LeaseExpiresAt},
		nullTextCol[string]{&j.LastError}, timeCol{&j.CreatedAt}, timeCol{&j.UpdatedAt}, nullTimeCol{&j.FinishedAt})
	return j, err
}

// EnqueueJob stores a job and reports whether it did: with a DedupeKey that a kept row holds,
// it stores nothing and returns that row. Call it on a Tx to enqueue with the change that
// calls for the job; the job is then claimable once the Tx commits.
func (q *Queries) EnqueueJob(ctx context.Context, nj NewJob) (Job, bool, error) {
	if nj.Payload == nil {
		nj.Payload = json.RawMessage(`{}`)
	}
	if nj.MaxAttempts == 0 {
		nj.MaxAttempts = DefaultJobMaxAttempts
	}
	switch {
	case nj.Kind == "" || len(nj.Kind) > 200:
		return Job{}, false, fmt.Errorf("store: %w: a job needs a kind of at most 200 bytes", ErrInvalid)
	case !json.Valid(nj.Payload):
		return Job{}, false, fmt.Errorf("store: %w: job payload is not JSON", ErrInvalid)
	case nj.MaxAttempts < 1:
		return Job{}, false, fmt.Errorf("store: %w: max attempts %d", ErrInvalid, nj.MaxAttempts)
	case len(nj.DedupeKey) > 500:
		return Job{}, false, fmt.Errorf("store: %w: dedupe key longer than 500 bytes", ErrInvalid)
	}
	now := q.s.timeNow()
	runAt := now
	if !nj.RunAt.IsZero() {
		runAt = normTime(nj.RunAt)
	}
	var j Job
	created := false
	err := q.atomic(ctx, func(q *Queries) error {
		err := q.get(ctx, "enqueue job",
			`INSERT INTO jobs (id, kind, payload, state, dedupe_key, next_attempt_at, attempts, max_attempts, created_at, updated_at)
			VALUES ($1, $2, $3, 'queued', $4, $5, 0, $6, $7, $7)
			ON CONFLICT (dedupe_key) DO NOTHING RETURNING `+jobCols,
			[]any{string(newID[JobID]()), nj.Kind, string(nj.Payload), nullText(nj.DedupeKey), ts(runAt), nj.MaxAttempts, ts(now)},
			func(r rowScanner) (err error) { j, err = scanJob(r); return err })
		if err == nil {
			created = true
			if !j.NextAttemptAt.After(j.CreatedAt) {
				q.noteEnqueued(j.Kind)
			}
			return nil
		}
		if !isNotFound(err) || nj.DedupeKey == "" {
			return err
		}
		return q.get(ctx, "enqueue job: read the job holding its dedupe key",
			`SELECT `+jobCols+` FROM jobs WHERE dedupe_key = $1`, []any{nj.DedupeKey},
			func(r rowScanner) (err error) { j, err = scanJob(r); return err })
	})
	return j, created, err
}

// GetJob returns a job, or ErrNotFound.
func (q *Queries) GetJob(ctx context.Context, id JobID) (Job, error) {
	if !validID(id) {
		return Job{}, notFound("job", id)
	}
	var j Job
	err := q.get(ctx, "get job", `SELECT `+jobCols+` FROM jobs WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { j, err = scanJob(r); return err })
	return j, err
}

// ListJobs returns jobs newest first.
func (q *Queries) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	if f.BeforeID != "" && !validID(f.BeforeID) {
		return nil, fmt.Errorf("store: %w: bad job cursor", ErrInvalid)
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.State != "" {
		if !slices.Contains([]string{JobQueued, JobRunning, JobDone, JobDead}, f.State) {
			return nil, fmt.Errorf("store: %w: job state %q", ErrInvalid, f.State)
		}
		add("state = $%d", f.State)
	}
	if f.Kind != "" {
		add("kind = $%d", f.Kind)
	}
	if f.BeforeID != "" {
		add("id < $%d", string(f.BeforeID))
	}
	query := `SELECT ` + jobCols + ` FROM jobs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, clampLimit(f.Limit))
	query += fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args))
	return list(ctx, q, "list jobs", query, args, scanJob)
}

// ClaimJobs takes up to c.Limit jobs of c.Kinds that are due at c.Now (queued with
// next_attempt_at reached, or running with a lease that ran out) and leases them to c.Owner
// until c.Now+c.Lease, counting an attempt each. It returns them in due order.
//
// On PostgreSQL the rows are chosen with SELECT … FOR UPDATE SKIP LOCKED in the transaction
// that sets the lease, so workers claiming at once take different jobs without waiting for
// each other. On SQLite the IMMEDIATE transaction holds the only write lock, so claims take
// turns. A running job whose lease ran out after its last allowed attempt is not run again:
// it is marked dead, with the lost lease as its error.
func (q *Queries) ClaimJobs(ctx context.Context, c ClaimJobs) ([]Job, error) {
	if c.Owner == "" || c.Lease <= 0 || len(c.Kinds) == 0 || c.Now.IsZero() {
		return nil, fmt.Errorf("store: %w: a claim needs an owner, kinds, a time and a lease", ErrInvalid)
	}
	now := ts(normTime(c.Now))
	until := ts(normTime(c.Now.Add(c.Lease)))
	limit := clampLimit(c.Limit)
	// kindsIn appends the kinds to args and returns "kind IN ($n, …)".
	kindsIn := func(args []any) ([]any, string) {
		ps := make([]string, len(c.Kinds))
		for i, k := range c.Kinds {
			args = append(args, k)
			ps[i] = fmt.Sprintf("$%d", len(args))
		}
		return args, "kind IN (" + strings.Join(ps, ", ") + ")"
	}
	buryArgs, buryKinds := kindsIn([]any{now, limit})
	claimArgs, claimKinds := kindsIn([]any{now, until, c.Owner, limit})
	due, lapsed := true, true
	if !q.inTx {
		// Look before taking the write lock: an idle worker polling must not contend with the
		// writers that extend leases and record outcomes (on SQLite a writer waits its turn
		// by sleeping, so a steady stream of empty claims can starve it).
		lookArgs, lookKinds := kindsIn([]any{now})
		if err := q.get(ctx, "look for due jobs",
			`SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued' AND next_attempt_at <= $1 AND `+lookKinds+`),
				EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND lease_expires_at <= $1 AND `+lookKinds+`)`,
			lookArgs, func(r rowScanner) error { return r.Scan(&due, &lapsed) }); err != nil {
			return nil, err
		}
		if !due && !lapsed {
			return nil, nil
		}
	}
	var out []Job
	err := q.atomic(ctx, func(q *Queries) error {
		// Bury the jobs whose worker went away during their last attempt.
		if lapsed {
			if _, err := q.exec(ctx, "bury jobs whose last lease ran out",
				`UPDATE jobs SET state = 'dead', finished_at = $1, updated_at = $1, lease_expires_at = NULL,
					last_error = 'lease held by ' || lease_owner || ' ran out on its last attempt (the worker stopped or lost the database)'
				WHERE id IN (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at <= $1 AND attempts >= max_attempts AND `+buryKinds+`
					LIMIT $2 `+q.s.d.skipLocked+`)`, buryArgs...); err != nil {
				return err
			}
		}
		// Two claims, each a range of its own index (an OR of the two would scan the whole
		// table, done rows included, on every claim): first the jobs whose lease ran out, then
		// the queued ones that are due, oldest first (jobs_due_order), up to the limit.
		claim := func(cond string, n int) ([]Job, error) {
			args := slices.Clone(claimArgs)
			args[3] = n
			return list(ctx, q, "claim jobs",
				`UPDATE jobs SET state = 'running', lease_owner = $3, lease_expires_at = $2, attempts = attempts + 1, updated_at = $1
				WHERE id IN (SELECT id FROM jobs WHERE `+cond+` AND `+claimKinds+`
					ORDER BY next_attempt_at, id LIMIT $4 `+q.s.d.skipLocked+`)
				RETURNING `+jobCols, args, scanJob)
		}
		if lapsed {
			got, err := claim(`state = 'running' AND lease_expires_at <= $1 AND attempts < max_attempts`, limit)
			if err != nil {
				return err
			}
			out = got
		}
		if due && len(out) < limit {
			got, err := claim(`state = 'queued' AND next_attempt_at <= $1`, limit-len(out))
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Job) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	return out, nil
}

// leaseCond matches a job still held under l ($1 id, $2 owner, $3 attempt).
const leaseCond = `id = $1 AND state = 'running' AND lease_owner = $2 AND attempts = $3`

func leaseArgs(l JobLease, more ...any) []any {
	return append([]any{string(l.ID), l.Owner, l.Attempt}, more...)
}

// lostLease explains why a lease matched nothing.
func lostLease(op string, l JobLease) error {
	return fmt.Errorf("store: %s %s: %w: attempt %d is no longer held by %s", op, l.ID, ErrConflict, l.Attempt, l.Owner)
}

// ExtendJobLease moves the lease of a job still held under l to until. A lease that ran out
// may be extended as long as nobody claimed the job meanwhile. A lease lost to another claim
// (or a job finished) is ErrConflict.
func (q *Queries) ExtendJobLease(ctx context.Context, l JobLease, now, until time.Time) error {
	res, err := q.exec(ctx, "extend job lease",
		`UPDATE jobs SET lease_expires_at = $4, updated_at = $5 WHERE `+leaseCond,
		leaseArgs(l, ts(normTime(until)), ts(normTime(now)))...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return q.s.wrap("extend job lease", err)
	} else if n == 0 {
		return lostLease("extend the lease of job", l)
	}
	return nil
}

// CompleteJob marks a job held under l done. Call it on the Tx that makes the job's effect, so
// that the effect and the completion commit together: a worker that lost the lease gets
// ErrConflict and its effect rolls back with it. Completing a job already done under the same
// lease is not an error.
func (q *Queries) CompleteJob(ctx context.Context, l JobLease, at time.Time) error {
	// One statement does it; the read after it only tells a repeat from a lost lease.
	res, err := q.exec(ctx, "complete job",
		`UPDATE jobs SET state = 'done', finished_at = $4, updated_at = $4, lease_expires_at = NULL WHERE `+leaseCond,
		leaseArgs(l, ts(normTime(at)))...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return q.s.wrap("complete job", err)
	} else if n == 1 {
		return nil
	}
	j, err := q.GetJob(ctx, l.ID)
	if err == nil && j.State == JobDone && j.LeaseOwner == l.Owner && j.Attempts == l.Attempt {
		return nil
	}
	if err != nil && !isNotFound(err) {
		return err
	}
	return lostLease("complete job", l)
}

// CompleteJobs marks done the jobs held under ls, as CompleteJob does each, and returns one
// error per lease: nil, or ErrConflict when the lease was lost. Call it on the Tx that makes the
// jobs' effects. On PostgreSQL one statement completes them all (a batch of webhook
// deliveries costs one round trip, not one per job); only a lease that statement did not find
// held is looked at again, one by one, to tell a repeat from a lost lease.
func (q *Queries) CompleteJobs(ctx context.Context, ls []JobLease, at time.Time) ([]error, error) {
	errs := make([]error, len(ls))
	if len(ls) == 0 {
		return errs, nil
	}
	held := make(map[JobLease]bool, len(ls))
	if q.s.d.name == Postgres && len(ls) > 1 {
		ids := make([]string, len(ls))
		owners := make([]string, len(ls))
		attempts := make([]int64, len(ls))
		for i, l := range ls {
			if !validID(l.ID) {
				return nil, fmt.Errorf("store: %w: job id %q", ErrInvalid, l.ID)
			}
			ids[i], owners[i], attempts[i] = string(l.ID), l.Owner, int64(l.Attempt)
		}
		got, err := list(ctx, q, "complete jobs",
			`UPDATE jobs SET state = 'done', finished_at = $4, updated_at = $4, lease_expires_at = NULL
			FROM unnest($1::text[]::uuid[], $2::text[], $3::int[]) AS v(id, owner, attempt)
			WHERE jobs.id = v.id AND jobs.state = 'running' AND jobs.lease_owner = v.owner AND jobs.attempts = v.attempt
			RETURNING jobs.id, jobs.lease_owner, jobs.attempts`,
			[]any{ids, owners, attempts, ts(normTime(at))},
			func(r rowScanner) (l JobLease, err error) { err = r.Scan(&l.ID, &l.Owner, &l.Attempt); return l, err })
		if err != nil {
			return nil, err
		}
		for _, l := range got {
			held[l] = true
		}
	}
	for i, l := range ls {
		if !held[l] {
			err := q.CompleteJob(ctx, l, at)
			if err != nil && !errors.Is(err, ErrConflict) {
				return nil, err
			}
			errs[i] = err
		}
	}
	return errs, nil
}

// FailJob records that the attempt held under l failed with errText: the job is queued again
// at retryAt, or, when retryAt is nil or the attempt was its last, it is dead. It returns the
// job as it now is. A lease no longer held is ErrConflict.
func (q *Queries) FailJob(ctx context.Context, l JobLease, errText string, at time.Time, retryAt *time.Time) (Job, error) {
	now := ts(normTime(at))
	errText = truncateText(errText, maxJobError)
	var j Job
	err := q.atomic(ctx, func(q *Queries) error {
		if retryAt != nil {
			err := q.get(ctx, "retry job",
				`UPDATE jobs SET state = 'queued', next_attempt_at = $4, last_error = $5, updated_at = $6, lease_expires_at = NULL
				WHERE `+leaseCond+` AND attempts < max_attempts RETURNING `+jobCols,
				leaseArgs(l, ts(normTime(*retryAt)), errText, now),
				func(r rowScanner) (err error) { j, err = scanJob(r); return err })
			if !isNotFound(err) {
				return err
			}
		}
		err := q.get(ctx, "bury job",
			`UPDATE jobs SET state = 'dead', last_error = $4, finished_at = $5, updated_at = $5, lease_expires_at = NULL
			WHERE `+leaseCond+` RETURNING `+jobCols,
			leaseArgs(l, errText, now),
			func(r rowScanner) (err error) { j, err = scanJob(r); return err })
		if isNotFound(err) {
			return lostLease("fail job", l)
		}
		return err
	})
	return j, err
}

// RequeueJob puts a dead job back in the queue, due at at, with its attempts counted from
// zero again (an operator's retry). A job that is not dead is ErrConflict.
func (q *Queries) RequeueJob(ctx context.Context, id JobID, at time.Time) (Job, error) {
	if !validID(id) {
		return Job{}, notFound("job", id)
	}
	now := ts(normTime(at))
	var j Job
	err := q.atomic(ctx, func(q *Queries) error {
		err := q.get(ctx, "requeue job",
			`UPDATE jobs SET state = 'queued', attempts = 0, next_attempt_at = $2, updated_at = $2, finished_at = NULL
			WHERE id = $1 AND state = 'dead' RETURNING `+jobCols,
			[]any{string(id), now}, func(r rowScanner) (err error) { j, err = scanJob(r); return err })
		if !isNotFound(err) {
			return err
		}
		if j, err = q.GetJob(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("store: requeue job %s: %w: it is %s, not dead", id, ErrConflict, j.State)
	})
	return j, err
}

// PurgeJobs deletes the jobs done before doneBefore and the jobs dead before deadBefore, and
// returns how many. Queued and running jobs are never purged. A dedupe key is free again once
// its row is purged, so keep done rows longer than the longest period of a periodic job.
func (q *Queries) PurgeJobs(ctx context.Context, doneBefore, deadBefore time.Time) (int64, error) {
	res, err := q.exec(ctx, "purge jobs",
		`DELETE FROM jobs WHERE (state = 'done' AND finished_at < $1) OR (state = 'dead' AND finished_at < $2)`,
		ts(normTime(doneBefore)), ts(normTime(deadBefore)))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, q.s.wrap("purge jobs", err)
	}
	return n, nil
}

// truncateText cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
