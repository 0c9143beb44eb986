package jobs

import (
	"context"
	"log/slog"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
)

// WakeChannel is the bus channel on which an enqueue wakes the workers; the payload is the
// job's kind. It only shortens the wait: a worker that misses it finds the job on its next poll.
const WakeChannel = "jobs:wake"

// Queue enqueues jobs and wakes the workers. It is safe for concurrent use.
type Queue struct {
	st  *store.Store
	bus bus.PubSub // nil: workers find new jobs by polling
	log *slog.Logger
}

// NewQueue returns a queue on st that wakes workers through b (nil for none). log may be nil.
func NewQueue(st *store.Store, b bus.PubSub, log *slog.Logger) *Queue {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queue{st: st, bus: b, log: log}
}

// Enqueue stores a job and wakes the workers when it is due now. With a DedupeKey that a kept
// job holds, it stores nothing and returns that job with created false.
func (q *Queue) Enqueue(ctx context.Context, nj store.NewJob) (j store.Job, created bool, err error) {
	j, created, err = q.st.EnqueueJob(ctx, nj)
	if err != nil || !created {
		return j, created, err
	}
	if !j.NextAttemptAt.After(j.CreatedAt) {
		q.Wake(ctx, j.Kind)
	}
	return j, true, nil
}

// Wake tells the workers that a job of kind is due, for a job enqueued on a store.Tx once that
// Tx has committed. It never fails: a lost wake-up costs at most one poll interval.
func (q *Queue) Wake(ctx context.Context, kind string) {
	if q.bus == nil {
		return
	}
	if err := q.bus.Publish(ctx, WakeChannel, []byte(kind)); err != nil {
		q.log.DebugContext(ctx, "jobs: cannot wake the workers; they will poll", "kind", kind, "err", err)
	}
}
