// Package jobs is Parley's one durable queue for work that runs later or again: scheduled-call
// dialling, purges, the lost-conversation reaper, and later webhook deliveries, campaign
// attempts, crawl refreshes and evaluation runs (DESIGN.md, "Many nodes").
//
// Jobs are rows of the store (store.Job), so they outlive any process. A Worker claims due jobs
// of the kinds it has handlers for under a lease (PostgreSQL: SELECT … FOR UPDATE SKIP LOCKED;
// SQLite: its single writer), extends the lease while the handler runs, and records the outcome:
// done; queued again after a backoff with jitter; or dead after the job's last attempt, kept and
// listable. A worker that dies loses its leases when they run out, and any worker claims those
// jobs again. Workers are woken through the bus when a job is enqueued and poll as a fallback.
// Periodic kinds (Every) are enqueued once per period with a dedupe key, however many workers
// run.
//
// Delivery is at least once. A job's ID is minted when it is enqueued and is the same on every
// attempt, so a handler whose effect must happen once makes it idempotent on that ID, or writes
// its effect in the transaction that completes the job (Job.CompleteIn): then a worker that lost
// its lease cannot commit, and the effect happens exactly once.
//
// The package must never import a transport (net/http, control/api): handlers are plain
// functions given at composition, and they call the domain layer.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// Handler runs one attempt of a job. It returns nil when the job is done, Permanent(err) when it
// can never succeed, and any other error to be retried after a backoff. Its ctx is cancelled
// when the kind's timeout passes, when the worker loses the job's lease (the cause is
// ErrLeaseLost) or when a stopping worker stops waiting for it.
type Handler func(ctx context.Context, j *Job) error

// Job is one attempt of a job, as a handler sees it.
type Job struct {
	// ID is the job's id: the same on every attempt, so that an effect keyed by it is
	// recognised downstream after a retry.
	ID      store.JobID
	Kind    string
	Payload json.RawMessage
	// Attempt counts from 1; MaxAttempts is the last one.
	Attempt     int
	MaxAttempts int
	DedupeKey   string
	EnqueuedAt  time.Time

	lease     store.JobLease
	now       func() time.Time
	completed atomic.Bool // CompleteIn or RetryIn succeeded: the lease need not be extended any more
	requeued  atomic.Bool // RetryIn succeeded: the worker records nothing more
}

func newJob(sj store.Job, now func() time.Time) *Job {
	return &Job{ID: sj.ID, Kind: sj.Kind, Payload: sj.Payload, Attempt: sj.Attempts, MaxAttempts: sj.MaxAttempts,
		DedupeKey: sj.DedupeKey, EnqueuedAt: sj.CreatedAt, lease: sj.Lease(), now: now}
}

// Decode unmarshals the job's payload into v.
func (j *Job) Decode(v any) error {
	if err := json.Unmarshal(j.Payload, v); err != nil {
		return Permanent(fmt.Errorf("jobs: %s %s: payload: %w", j.Kind, j.ID, err))
	}
	return nil
}

// CompleteIn marks the job done inside tx, so that the handler's own writes in tx and the
// completion commit together, or not at all. If the worker lost the lease meanwhile (the job
// was claimed again after the lease ran out), it returns an error wrapping ErrLeaseLost and
// the handler must let tx roll back. The handler then returns nil (or the error) as usual;
// the worker sees that the job is done.
func (j *Job) CompleteIn(ctx context.Context, tx *store.Tx) error {
	if err := tx.CompleteJob(ctx, j.lease, j.now()); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("jobs: %s %s: %w: %w", j.Kind, j.ID, ErrLeaseLost, err)
		}
		return err
	}
	j.completed.Store(true)
	return nil
}

// Lease is the job's lease, for a handler that marks the job done in a statement of its own
// (a store method that takes a *store.JobLease), which then calls Completed.
func (j *Job) Lease() store.JobLease { return j.lease }

// Completed tells the worker that the handler's own statement, under Lease, marked the job done
// and committed: the worker records nothing more, as after CompleteIn.
func (j *Job) Completed() { j.completed.Store(true) }

// CompleteAllIn is CompleteIn for several jobs at once: the store completes them in one
// statement where it can (a batch of webhook deliveries recorded in one transaction). It
// returns one error per job: nil, or one wrapping ErrLeaseLost for a job whose lease was lost,
// whose own writes in tx the caller must leave out (or roll back). Any other failure is the
// second result, and tx must roll back.
func CompleteAllIn(ctx context.Context, tx *store.Tx, js []*Job) ([]error, error) {
	if len(js) == 0 {
		return nil, nil
	}
	ls := make([]store.JobLease, len(js))
	for i, j := range js {
		ls[i] = j.lease
	}
	errs, err := tx.CompleteJobs(ctx, ls, js[0].now())
	if err != nil {
		return nil, err
	}
	for i, j := range js {
		if errs[i] != nil {
			errs[i] = fmt.Errorf("jobs: %s %s: %w: %w", j.Kind, j.ID, ErrLeaseLost, errs[i])
			continue
		}
		j.completed.Store(true)
	}
	return errs, nil
}

// RetryIn queues the job again for at inside tx, recording errText as this attempt's failure,
// so that the handler's own writes in tx (what the attempt did, when the next one is due) and
// the rescheduling commit together. It is for handlers that keep their own retry schedule (a
// webhook delivery's, or a Retry-After) instead of the worker's backoff. If the job has no
// attempt left it is dead instead. A lease lost meanwhile is an error wrapping ErrLeaseLost:
// the handler must let tx roll back. The handler then returns nil; the worker records nothing
// more.
func (j *Job) RetryIn(ctx context.Context, tx *store.Tx, errText string, at time.Time) error {
	if _, err := tx.FailJob(ctx, j.lease, errText, j.now(), &at); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("jobs: %s %s: %w: %w", j.Kind, j.ID, ErrLeaseLost, err)
		}
		return err
	}
	j.completed.Store(true)
	j.requeued.Store(true)
	return nil
}

// permanent marks an error that retrying cannot cure.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the worker buries the job at once instead of retrying it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was made by Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Claimed is the Job a handler sees for sj, a job its caller claimed (store.ClaimJobs), for
// running a handler outside a Worker: a benchmark of a handler with the worker's own claim.
func Claimed(sj store.Job, now func() time.Time) *Job { return newJob(sj, now) }
