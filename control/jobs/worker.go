package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
)

// Defaults of Options.
const (
	DefaultConcurrency  = 4
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultDrainTimeout = 10 * time.Second
	// DefaultPeriodicAttempts is the max attempts of a periodic run whose kind sets none: a
	// run that keeps failing gives way to the next period's.
	DefaultPeriodicAttempts = 3
	// MaxPeriod is the longest period Every accepts. A periodic run's dedupe key must outlive
	// its period, so done jobs must be kept (store.PurgeJobs) at least this long.
	MaxPeriod = 24 * time.Hour
)

// recordTimeout bounds the writes that record an attempt's outcome, which run even while the
// worker stops.
const recordTimeout = 10 * time.Second

// Options configure a Worker.
type Options struct {
	Store *store.Store
	// Bus wakes the worker when a job is enqueued (WakeChannel). nil: it only polls.
	Bus bus.PubSub
	// Owner names the worker in leases (the node id); a random suffix is added so that two
	// workers, or two runs of one node, never share a lease. "" means the host name.
	Owner string
	// Concurrency bounds the jobs one worker runs at once (default 4).
	Concurrency int
	// PollInterval is how often the worker looks for due jobs when nothing woke it (default
	// 1 s): jobs retried after a backoff, jobs whose lease ran out, wake-ups lost.
	PollInterval time.Duration
	// Lease is how long a claim holds a job (default 30 s). The worker extends the leases of
	// the jobs it runs every Lease/3; a worker that dies loses them within Lease.
	Lease time.Duration
	// DrainTimeout is how long Run waits, once its ctx is cancelled, for the jobs in flight
	// before it cancels their contexts (default 10 s).
	DrainTimeout time.Duration
	// ClaimBatch is how many slots must be free before a busy worker claims again when its
	// last claim filled every slot (default 1: claim as soon as one frees). A larger batch
	// makes fewer, larger claims under a backlog (one write transaction each); the poll
	// still claims for fewer. Webhook deliveries use a quarter of Concurrency.
	ClaimBatch int
	// Backoff spaces the retries of failed jobs (default DefaultBackoff).
	Backoff *Backoff
	Log     *slog.Logger
	// Now is the clock written into the queue (default time.Now). Nodes sharing a database
	// must keep their clocks in step (NTP): leases and due times are compared across nodes.
	Now func() time.Time
}

// KindOption configures a registered kind.
type KindOption func(*kind)

// WithTimeout bounds each attempt of the kind: its handler's ctx ends after d.
func WithTimeout(d time.Duration) KindOption { return func(k *kind) { k.timeout = d } }

// WithMaxAttempts sets the max attempts of the kind's periodic runs (Every). Jobs enqueued
// otherwise carry their own (store.NewJob.MaxAttempts).
func WithMaxAttempts(n int) KindOption { return func(k *kind) { k.maxAttempts = n } }

type kind struct {
	h           Handler
	timeout     time.Duration
	maxAttempts int
}

type periodic struct {
	kind   string
	period time.Duration
}

// inflight is a job a worker runs.
type inflight struct {
	job    *Job
	cancel context.CancelCauseFunc
	until  time.Time // the lease as last extended; guarded by Worker.mu
}

// Stats counts what a worker did since it was made.
type Stats struct {
	Claimed   uint64 // attempts started
	Done      uint64
	Retried   uint64 // attempts that failed and were queued again
	Dead      uint64 // attempts after which the job was dead
	LeaseLost uint64 // attempts cut short because another worker took the job
	Wakeups   uint64 // bus messages that made the worker look for jobs
}

// Worker runs jobs of the kinds registered on it, at most Concurrency at once. Register the
// handlers and periodic kinds, then call Run once.
type Worker struct {
	o     Options
	owner string
	queue *Queue
	log   *slog.Logger

	mu       sync.Mutex
	started  bool
	kinds    map[string]*kind
	periodic []periodic
	running  map[store.JobID]*inflight

	claimed, done, retried, dead, leaseLost, wakeups atomic.Uint64
}

// NewWorker returns a worker with o's settings (defaults for zero values).
func NewWorker(o Options) *Worker {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	o.ClaimBatch = min(max(o.ClaimBatch, 1), o.Concurrency)
	if o.Backoff == nil {
		o.Backoff = &DefaultBackoff
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Owner == "" {
		o.Owner, _ = os.Hostname()
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := o.Owner + "/" + hex.EncodeToString(b[:])
	return &Worker{o: o, owner: owner, queue: NewQueue(o.Store, o.Bus, o.Log), log: o.Log.With("worker", owner),
		kinds: make(map[string]*kind), running: make(map[store.JobID]*inflight)}
}

// Owner is the name the worker's leases carry.
func (w *Worker) Owner() string { return w.owner }

// Queue enqueues on the worker's store and wakes through its bus.
func (w *Worker) Queue() *Queue { return w.queue }

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{Claimed: w.claimed.Load(), Done: w.done.Load(), Retried: w.retried.Load(), Dead: w.dead.Load(),
		LeaseLost: w.leaseLost.Load(), Wakeups: w.wakeups.Load()}
}

// Register makes the worker run jobs of kind with h. It panics on an empty kind, a nil
// handler, a kind registered twice or a call after Run: these are mistakes of composition.
func (w *Worker) Register(name string, h Handler, opts ...KindOption) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case name == "" || h == nil:
		panic("jobs: Register needs a kind and a handler")
	case w.kinds[name] != nil:
		panic(fmt.Sprintf("jobs: kind %q registered twice", name))
	case w.started:
		panic(ErrRunning)
	}
	k := &kind{h: h}
	for _, o := range opts {
		o(k)
	}
	w.kinds[name] = k
}

// Every enqueues a job of kind once per period while the worker runs: at the start of each
// period (periods are aligned on the Unix epoch, so every node computes the same ones), with
// the dedupe key "every:<kind>:<period start in Unix ms>". However many workers run Every for
// a kind, each period has one job, run by one of them. The kind must be registered by the time
// Run starts. It panics on a period ≤ 0 or over MaxPeriod, or after Run.
func (w *Worker) Every(name string, period time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case period <= 0 || period > MaxPeriod:
		panic(fmt.Sprintf("jobs: Every %q: period %s is not in (0, %s]", name, period, MaxPeriod))
	case w.started:
		panic(ErrRunning)
	}
	w.periodic = append(w.periodic, periodic{kind: name, period: period})
}

// periodStart is the start of the period of length d that holds t, periods being aligned on
// the Unix epoch.
func periodStart(t time.Time, d time.Duration) time.Time {
	ns := t.UnixNano()
	return time.Unix(0, ns-ns%int64(d)).UTC()
}

// PeriodKey is the dedupe key of the run of kind for the period that starts at start.
func PeriodKey(kind string, start time.Time) string {
	return fmt.Sprintf("every:%s:%d", kind, start.UnixMilli())
}

// Run claims and runs jobs until ctx is cancelled. Then it claims nothing more, lets the jobs
// in flight finish for up to DrainTimeout, cancels the contexts of those still running, waits
// for them and records their outcome (one cancelled by the stop is queued again at once), and
// returns nil. It returns an error at once when it cannot start.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return ErrRunning
	}
	if len(w.kinds) == 0 {
		w.mu.Unlock()
		return ErrNoHandlers
	}
	for _, p := range w.periodic {
		if w.kinds[p.kind] == nil {
			w.mu.Unlock()
			return fmt.Errorf("jobs: Every %q: no handler registered for it", p.kind)
		}
	}
	w.started = true
	kinds := make([]string, 0, len(w.kinds))
	for k := range w.kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	periodics := slices.Clone(w.periodic)
	w.mu.Unlock()

	var wake <-chan bus.Message
	if w.o.Bus != nil {
		sub, err := w.o.Bus.Subscribe(ctx, WakeChannel)
		if err != nil {
			w.log.WarnContext(ctx, "jobs: cannot subscribe to wake-ups; polling only", "every", w.o.PollInterval, "err", err)
		} else {
			defer sub.Close()
			wake = sub.Messages()
		}
	}

	// Handlers outlive ctx by up to the drain timeout; the lease keeper outlives the handlers.
	hctx, stopHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandlers()
	kctx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	defer stopKeeper()
	var bg sync.WaitGroup
	for _, p := range periodics {
		bg.Go(func() { w.schedule(ctx, p) })
	}
	bg.Go(func() { w.keepLeases(kctx) })

	var handlers sync.WaitGroup
	slots := make(chan struct{}, w.o.Concurrency)
	freed := make(chan struct{}, 1)
	poll := time.NewTicker(w.o.PollInterval)
	defer poll.Stop()
	failing := false
	for ctx.Err() == nil {
		mayHaveMore := true // with every slot taken, a freed slot is worth a claim
		if free := cap(slots) - len(slots); free > 0 {
			js, err := w.o.Store.ClaimJobs(ctx, store.ClaimJobs{Owner: w.owner, Kinds: kinds, Now: w.o.Now(), Lease: w.o.Lease, Limit: free})
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				failing = true
				w.log.WarnContext(ctx, "jobs: cannot claim jobs; retrying at each poll", "err", err)
			case err == nil && failing:
				failing = false
				w.log.InfoContext(ctx, "jobs: claiming again")
			}
			for _, sj := range js {
				slots <- struct{}{}
				w.claimed.Add(1)
				j := newJob(sj, w.o.Now)
				handlers.Go(func() {
					w.execute(hctx, j)
					<-slots
					select {
					case freed <- struct{}{}:
					default:
					}
				})
			}
			mayHaveMore = err == nil && len(js) == free
		}
		w.wait(ctx, &wake, poll.C, freed, mayHaveMore, kinds, func() int { return cap(slots) - len(slots) })
	}

	drain := time.AfterFunc(w.o.DrainTimeout, stopHandlers)
	handlers.Wait()
	drain.Stop()
	stopKeeper()
	bg.Wait()
	return nil
}

// wait returns when the worker should look for jobs again: a wake-up for one of its kinds, the
// poll, ClaimBatch freed slots when the last claim filled every slot, or ctx's end.
func (w *Worker) wait(ctx context.Context, wake *<-chan bus.Message, poll <-chan time.Time, freed <-chan struct{}, mayHaveMore bool, kinds []string, free func() int) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll:
			return
		case <-freed:
			if mayHaveMore && free() >= w.o.ClaimBatch {
				return
			}
		case m, ok := <-*wake:
			if !ok {
				*wake = nil // the bus closed; poll only
				continue
			}
			if _, found := slices.BinarySearch(kinds, string(m.Payload)); found && free() >= w.o.ClaimBatch {
				w.wakeups.Add(1)
				return
			}
		}
	}
}

// execute runs one attempt and records its outcome.
func (w *Worker) execute(hctx context.Context, j *Job) {
	w.mu.Lock()
	k := w.kinds[j.Kind]
	ctx, cancel := context.WithCancelCause(hctx)
	me := &inflight{job: j, cancel: cancel, until: w.o.Now().Add(w.o.Lease)}
	if prev := w.running[j.ID]; prev != nil {
		// This worker's own lease ran out (it could not extend it in time) and its claim took
		// the job again: the new attempt supersedes the old.
		prev.cancel(fmt.Errorf("%w: attempt %d claimed again as attempt %d", ErrLeaseLost, prev.job.Attempt, j.Attempt))
	}
	w.running[j.ID] = me
	w.mu.Unlock()
	runCtx := ctx
	if k.timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(ctx, k.timeout)
		defer stop()
	}
	start := time.Now()
	err := call(runCtx, k.h, j)
	w.mu.Lock()
	if w.running[j.ID] == me {
		delete(w.running, j.ID)
	}
	w.mu.Unlock()
	lost := errors.Is(context.Cause(ctx), ErrLeaseLost)
	cancel(nil)

	rctx, stop := context.WithTimeout(context.WithoutCancel(hctx), recordTimeout)
	defer stop()
	log := w.log.With("job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "took", time.Since(start).Round(time.Millisecond))
	now := w.o.Now()
	switch {
	case lost:
		w.leaseLost.Add(1)
		log.WarnContext(rctx, "jobs: lost the job's lease while running it; another worker runs it again", "err", err)
	case err == nil && j.requeued.Load():
		w.retried.Add(1)
		log.DebugContext(rctx, "jobs: the handler queued the job again")
	case err == nil && j.completed.Load():
		// The handler completed the job in its own transaction (CompleteIn): nothing to write.
		// Had that transaction rolled back while the handler still returned nil, the job stays
		// running until its lease runs out and is run again: its effect is not lost.
		w.done.Add(1)
		log.DebugContext(rctx, "jobs: done (completed by the handler)")
	case err == nil:
		if cerr := w.o.Store.CompleteJob(rctx, j.lease, now); cerr != nil {
			if errors.Is(cerr, store.ErrConflict) {
				w.leaseLost.Add(1)
			}
			log.WarnContext(rctx, "jobs: the job ran but cannot be marked done; it may run again", "err", cerr)
			return
		}
		w.done.Add(1)
		log.DebugContext(rctx, "jobs: done")
	default:
		var retry *time.Time
		if !IsPermanent(err) {
			t := now.Add(w.o.Backoff.Delay(j.Attempt))
			if hctx.Err() != nil {
				t = now // the worker stopped it: another may take it at once
			}
			retry = &t
		}
		sj, ferr := w.o.Store.FailJob(rctx, j.lease, err.Error(), now, retry)
		switch {
		case ferr != nil:
			log.WarnContext(rctx, "jobs: the job failed and its failure cannot be recorded", "err", err, "record_err", ferr)
		case sj.State == store.JobDead:
			w.dead.Add(1)
			log.WarnContext(rctx, "jobs: the job failed for good; it is dead", "err", err)
		default:
			w.retried.Add(1)
			log.InfoContext(rctx, "jobs: the job failed; it will be retried", "err", err, "at", sj.NextAttemptAt)
		}
	}
}

// call runs h, turning a panic into an error.
func call(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("jobs: handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, j)
}

// keepLeases extends the leases of the jobs in flight every Lease/3 until ctx ends. A job
// whose lease another claim took has its ctx cancelled with ErrLeaseLost; so has one whose
// lease cannot be extended (the database is unreachable) once the lease has run out.
func (w *Worker) keepLeases(ctx context.Context) {
	t := time.NewTicker(w.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		jobs := make([]*inflight, 0, len(w.running))
		for _, f := range w.running {
			if !f.job.completed.Load() {
				jobs = append(jobs, f)
			}
		}
		w.mu.Unlock()
		for _, f := range jobs {
			now := w.o.Now()
			until := now.Add(w.o.Lease)
			err := w.o.Store.ExtendJobLease(ctx, f.job.lease, now, until)
			w.mu.Lock()
			switch {
			case err == nil:
				f.until = until
			case errors.Is(err, store.ErrConflict) && !f.job.completed.Load():
				f.cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			case err != nil && ctx.Err() == nil && !now.Before(f.until):
				f.cancel(fmt.Errorf("%w: cannot extend the lease: %w", ErrLeaseLost, err))
			}
			w.mu.Unlock()
		}
	}
}

// schedule enqueues the periodic kind p at the start of each period until ctx ends.
func (w *Worker) schedule(ctx context.Context, p periodic) {
	w.mu.Lock()
	attempts := w.kinds[p.kind].maxAttempts
	w.mu.Unlock()
	if attempts <= 0 {
		attempts = DefaultPeriodicAttempts
	}
	for {
		start := periodStart(w.o.Now(), p.period)
		_, _, err := w.queue.Enqueue(ctx, store.NewJob{Kind: p.kind, DedupeKey: PeriodKey(p.kind, start), RunAt: start, MaxAttempts: attempts})
		if err != nil && ctx.Err() == nil {
			w.log.WarnContext(ctx, "jobs: cannot enqueue a periodic job", "kind", p.kind, "err", err)
		}
		t := time.NewTimer(start.Add(p.period).Sub(w.o.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
