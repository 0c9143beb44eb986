package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestWorker runs the worker's conformance tests on both store engines.
func TestWorker(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*testing.T, opener)
	}{
		{"RunsJob", testRunsJob},
		{"RetryWithBackoff", testRetryWithBackoff},
		{"DeadAfterMaxAttempts", testDeadAfterMax},
		{"PermanentAndPanic", testPermanentAndPanic},
		{"LeaseExpiryReclaim", testLeaseExpiryReclaim},
		{"LeaseExtended", testLeaseExtended},
		{"LeaseLostRollsBackEffect", testLeaseLost},
		{"PeriodicOncePerPeriod", testPeriodic},
		{"BusWakeUp", testBusWakeUp},
		{"ConcurrencyAndCleanStop", testConcurrencyAndStop},
		{"DrainTimeout", testDrainTimeout},
		{"CompletedByHandler", testCompletedByHandler},
	}
	engines(t, func(t *testing.T, open opener) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, open)
			})
		}
	})
}

func newWorker(s *store.Store, o jobs.Options) *jobs.Worker {
	o.Store = s
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	if o.Owner == "" {
		o.Owner = "test"
	}
	return jobs.NewWorker(o)
}

func enqueue(t *testing.T, s *store.Store, nj store.NewJob) store.Job {
	t.Helper()
	j, created, err := s.EnqueueJob(t.Context(), nj)
	if err != nil || !created {
		t.Fatalf("EnqueueJob: %v (created %v)", err, created)
	}
	return j
}

func jobState(t *testing.T, s *store.Store, id store.JobID) store.Job {
	t.Helper()
	j, err := s.GetJob(context.Background(), id)
	if err != nil {
		t.Fatalf("GetJob: %v", err)
	}
	return j
}

func waitState(t *testing.T, s *store.Store, id store.JobID, state string) store.Job {
	t.Helper()
	var j store.Job
	poll(t, 10*time.Second, "job "+string(id)+" to be "+state, func() bool {
		j = jobState(t, s, id)
		return j.State == state
	})
	return j
}

func testRunsJob(t *testing.T, open opener) {
	s := open(t)
	w := newWorker(s, jobs.Options{})
	type seen struct {
		id      store.JobID
		attempt int
		n       int
	}
	got := make(chan seen, 1)
	w.Register("greet", func(ctx context.Context, j *jobs.Job) error {
		var p struct{ N int }
		if err := j.Decode(&p); err != nil {
			return err
		}
		got <- seen{j.ID, j.Attempt, p.N}
		return nil
	})
	run(t, w)
	j, _, err := w.Queue().Enqueue(t.Context(), store.NewJob{Kind: "greet", Payload: json.RawMessage(`{"n": 42}`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g.id != j.ID || g.attempt != 1 || g.n != 42 {
			t.Fatalf("handler saw %+v, want job %s attempt 1 n 42", g, j.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run")
	}
	done := waitState(t, s, j.ID, store.JobDone)
	if done.Attempts != 1 || done.LeaseOwner != w.Owner() || done.FinishedAt == nil {
		t.Fatalf("done job %+v", done)
	}
	poll(t, 5*time.Second, "the worker to count the job done", func() bool { return w.Stats().Done == 1 })
	if st := w.Stats(); st.Claimed != 1 || st.Done != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testRetryWithBackoff(t *testing.T, open opener) {
	s := open(t)
	const step = 150 * time.Millisecond
	// Rand gives the top of the jitter range, so each wait is exactly its step.
	w := newWorker(s, jobs.Options{Backoff: &jobs.Backoff{Base: step, Max: 2 * step, Rand: func(n int64) int64 { return n - 1 }}})
	var mu sync.Mutex
	var at []time.Time
	var id store.JobID
	w.Register("flaky", func(ctx context.Context, j *jobs.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if id != "" && j.ID != id {
			return fmt.Errorf("job id changed between attempts: %s then %s", id, j.ID)
		}
		id = j.ID
		at = append(at, time.Now())
		if j.Attempt < 3 {
			return fmt.Errorf("attempt %d failed", j.Attempt)
		}
		return nil
	})
	run(t, w)
	j := enqueue(t, s, store.NewJob{Kind: "flaky", MaxAttempts: 5})
	done := waitState(t, s, j.ID, store.JobDone)
	if done.Attempts != 3 || done.LastError != "attempt 2 failed" {
		t.Fatalf("done after retries: %+v", done)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 3 {
		t.Fatalf("%d attempts ran, want 3", len(at))
	}
	// Waits of about step, then 2·step (capped); the claim clock is the store's microseconds.
	for i, want := range []time.Duration{step, 2 * step} {
		if gap := at[i+1].Sub(at[i]); gap < want-time.Millisecond {
			t.Fatalf("attempt %d ran %s after attempt %d, want at least %s", i+2, gap, i+1, want)
		}
	}
	poll(t, 5*time.Second, "the worker to count the job done", func() bool { return w.Stats().Done == 1 })
	if st := w.Stats(); st.Retried != 2 || st.Done != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testDeadAfterMax(t *testing.T, open opener) {
	s := open(t)
	w := newWorker(s, jobs.Options{Backoff: &jobs.Backoff{Base: time.Millisecond, Max: time.Millisecond}})
	var calls atomic.Int32
	w.Register("doomed", func(ctx context.Context, j *jobs.Job) error {
		calls.Add(1)
		return errors.New("always fails")
	})
	run(t, w)
	j := enqueue(t, s, store.NewJob{Kind: "doomed", MaxAttempts: 3})
	dead := waitState(t, s, j.ID, store.JobDead)
	if dead.Attempts != 3 || dead.LastError != "always fails" || calls.Load() != 3 {
		t.Fatalf("dead job %+v after %d calls", dead, calls.Load())
	}
	listed, err := s.ListJobs(t.Context(), store.JobFilter{State: store.JobDead})
	if err != nil || len(listed) != 1 || listed[0].ID != j.ID {
		t.Fatalf("ListJobs(dead) = %v, %v", listed, err)
	}
	poll(t, 5*time.Second, "the worker to count the job dead", func() bool { return w.Stats().Dead == 1 })
	if st := w.Stats(); st.Dead != 1 || st.Retried != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func testPermanentAndPanic(t *testing.T, open opener) {
	s := open(t)
	w := newWorker(s, jobs.Options{Backoff: &jobs.Backoff{Base: time.Millisecond, Max: time.Millisecond}})
	w.Register("bad-payload", func(ctx context.Context, j *jobs.Job) error {
		var v struct{ N int }
		return j.Decode(&v) // the payload is a string: a permanent error
	})
	var panics atomic.Int32
	w.Register("panics", func(ctx context.Context, j *jobs.Job) error {
		if panics.Add(1) == 1 {
			panic("first attempt explodes")
		}
		return nil
	})
	run(t, w)
	bad := enqueue(t, s, store.NewJob{Kind: "bad-payload", Payload: json.RawMessage(`"nope"`), MaxAttempts: 5})
	p := enqueue(t, s, store.NewJob{Kind: "panics", MaxAttempts: 5})
	if d := waitState(t, s, bad.ID, store.JobDead); d.Attempts != 1 || !strings.Contains(d.LastError, "payload") {
		t.Fatalf("a permanent failure: %+v", d)
	}
	if d := waitState(t, s, p.ID, store.JobDone); d.Attempts != 2 || !strings.Contains(d.LastError, "first attempt explodes") {
		t.Fatalf("a job that panicked once: %+v", d)
	}
}

// testLeaseExpiryReclaim: a worker claimed a job and died (nobody extends its lease); when the
// lease runs out a live worker claims the job again and runs it, with the same id.
func testLeaseExpiryReclaim(t *testing.T, open opener) {
	s := open(t)
	j := enqueue(t, s, store.NewJob{Kind: "orphan"})
	claimedAt := time.Now()
	ghost, err := s.ClaimJobs(t.Context(), store.ClaimJobs{Owner: "ghost", Kinds: []string{"orphan"}, Now: claimedAt, Lease: 400 * time.Millisecond, Limit: 1})
	if err != nil || len(ghost) != 1 {
		t.Fatalf("ghost claim: %v %v", ghost, err)
	}
	w := newWorker(s, jobs.Options{})
	ran := make(chan time.Time, 1)
	w.Register("orphan", func(ctx context.Context, jj *jobs.Job) error {
		if jj.ID != j.ID || jj.Attempt != 2 {
			return jobs.Permanent(fmt.Errorf("got job %s attempt %d", jj.ID, jj.Attempt))
		}
		ran <- time.Now()
		return nil
	})
	run(t, w)
	select {
	case at := <-ran:
		if at.Sub(claimedAt) < 400*time.Millisecond {
			t.Fatalf("re-claimed %s after the ghost's claim, before its lease ran out", at.Sub(claimedAt))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the orphaned job was not claimed again")
	}
	done := waitState(t, s, j.ID, store.JobDone)
	if done.Attempts != 2 || done.LeaseOwner != w.Owner() {
		t.Fatalf("job %+v", done)
	}
}

// testLeaseExtended: a job that runs longer than its lease keeps it; a second worker polling
// all along never takes it.
func testLeaseExtended(t *testing.T, open opener) {
	s := open(t)
	const lease = 3 * time.Second // extended every second, with room for a loaded machine
	release := make(chan struct{})
	var calls atomic.Int32
	h := func(ctx context.Context, j *jobs.Job) error {
		calls.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	a := newWorker(s, jobs.Options{Lease: lease, Owner: "a"})
	a.Register("long", h)
	run(t, a)
	j := enqueue(t, s, store.NewJob{Kind: "long"})
	first := waitState(t, s, j.ID, store.JobRunning)
	b := newWorker(s, jobs.Options{Lease: lease, Owner: "b", PollInterval: 10 * time.Millisecond})
	b.Register("long", h)
	run(t, b)
	// Wait until well past the first lease, with the lease extended beyond now.
	poll(t, 10*time.Second, "the lease to be extended past its first expiry", func() bool {
		cur := jobState(t, s, j.ID)
		return time.Now().After(first.LeaseExpiresAt.Add(time.Second)) && cur.LeaseExpiresAt.After(time.Now())
	})
	close(release)
	done := waitState(t, s, j.ID, store.JobDone)
	if done.Attempts != 1 || calls.Load() != 1 || b.Stats().Claimed != 0 {
		t.Fatalf("job %+v ran %d times, b claimed %d", done, calls.Load(), b.Stats().Claimed)
	}
}

// testLeaseLost: another claim takes the job while its handler runs (as after a long pause of
// the worker). The handler's ctx ends with ErrLeaseLost, and its effect, written in the
// transaction that completes the job, rolls back: the effect happens once, by the new holder.
func testLeaseLost(t *testing.T, open opener) {
	s := open(t)
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE effects (job_id TEXT PRIMARY KEY, owner TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	effect := func(ctx context.Context, j *jobs.Job, owner string) error {
		return s.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.SQL().ExecContext(ctx, `INSERT INTO effects (job_id, owner) VALUES (`+placeholder(s, 1)+`, `+placeholder(s, 2)+`)`,
				string(j.ID), owner); err != nil {
				return err
			}
			return j.CompleteIn(ctx, tx)
		})
	}
	cause := make(chan error, 1)
	w := newWorker(s, jobs.Options{Lease: 2 * time.Second})
	w.Register("stolen", func(ctx context.Context, j *jobs.Job) error {
		<-ctx.Done()
		select {
		case cause <- context.Cause(ctx):
		default:
		}
		return effect(context.WithoutCancel(ctx), j, "late")
	})
	run(t, w)
	j := enqueue(t, s, store.NewJob{Kind: "stolen"})
	waitState(t, s, j.ID, store.JobRunning)
	// Claim it as if its lease had run out: the worker's next extension finds it gone.
	thief, err := s.ClaimJobs(t.Context(), store.ClaimJobs{Owner: "thief", Kinds: []string{"stolen"}, Now: time.Now().Add(time.Hour), Lease: time.Hour, Limit: 1})
	if err != nil || len(thief) != 1 || thief[0].Attempts != 2 || thief[0].ID != j.ID {
		t.Fatalf("thief claim: %+v %v", thief, err)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, jobs.ErrLeaseLost) {
			t.Fatalf("the handler's ctx ended with %v, want ErrLeaseLost", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's ctx was not cancelled when its lease was lost")
	}
	poll(t, 10*time.Second, "the worker to record the lost lease", func() bool { return w.Stats().LeaseLost == 1 })
	var n int
	if err := s.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM effects`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d effects after the late completion (%v), want 0: it must roll back", n, err)
	}
	if got := jobState(t, s, j.ID); got.State != store.JobRunning || got.LeaseOwner != "thief" {
		t.Fatalf("the late worker changed the job: %+v", got)
	}
}

// testPeriodic: three workers run Every on one kind; each period is enqueued and run once.
func testPeriodic(t *testing.T, open opener) {
	s := open(t)
	const period = 200 * time.Millisecond
	var mu sync.Mutex
	runs := map[string][]store.JobID{} // dedupe key → the jobs that ran with it
	var ws []*jobs.Worker
	var stops []func()
	for i := range 3 {
		w := newWorker(s, jobs.Options{Owner: fmt.Sprintf("node%d", i)})
		w.Register("tick", func(ctx context.Context, j *jobs.Job) error {
			mu.Lock()
			defer mu.Unlock()
			runs[j.DedupeKey] = append(runs[j.DedupeKey], j.ID)
			return nil
		})
		w.Every("tick", period)
		ws = append(ws, w)
		stops = append(stops, run(t, w))
	}
	poll(t, 20*time.Second, "5 periods to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) >= 5
	})
	for _, stop := range stops {
		stop()
	}
	mu.Lock()
	defer mu.Unlock()
	for key, ids := range runs {
		if len(ids) != 1 {
			t.Fatalf("period %s ran %d times: %v", key, len(ids), ids)
		}
		var ms int64
		if _, err := fmt.Sscanf(key, "every:tick:%d", &ms); err != nil || ms%period.Milliseconds() != 0 {
			t.Fatalf("dedupe key %q does not name a period start", key)
		}
	}
	rows, err := s.ListJobs(t.Context(), store.JobFilter{Kind: "tick", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, r := range rows {
		_, ran := runs[r.DedupeKey]
		switch {
		case r.State == store.JobDone && ran:
			done++
		case r.State == store.JobQueued && !ran: // enqueued before the stop, not run yet
		default:
			t.Fatalf("job %s of period %s is %s (ran: %v)", r.ID, r.DedupeKey, r.State, ran)
		}
	}
	if done != len(runs) {
		t.Fatalf("%d done rows for %d runs", done, len(runs))
	}
}

// testBusWakeUp: a worker that polls once an hour runs a new job at once, woken by the bus.
func testBusWakeUp(t *testing.T, open opener) {
	s := open(t)
	b := bus.NewMemory()
	t.Cleanup(func() { b.Close() })
	checkWakeUp(t, s, b, b)
}

// checkWakeUp enqueues through a queue on enq and checks that a worker subscribed on sub, which
// would otherwise poll only once an hour, runs the job within a second.
func checkWakeUp(t *testing.T, s *store.Store, enq, sub bus.PubSub) {
	t.Helper()
	w := jobs.NewWorker(jobs.Options{Store: s, Bus: sub, PollInterval: time.Hour, Owner: "sleepy"})
	ran := make(chan time.Time, 2)
	w.Register("wake", func(ctx context.Context, j *jobs.Job) error {
		ran <- time.Now()
		return nil
	})
	q := jobs.NewQueue(s, enq, nil)
	run(t, w)
	// The first job is there before the worker's first claim or after it, either way it
	// runs; once it has, the worker is idle until woken or the hour passes.
	if _, _, err := q.Enqueue(t.Context(), store.NewJob{Kind: "wake"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the first job did not run")
	}
	poll(t, 10*time.Second, "the worker to finish the first job", func() bool { return w.Stats().Done == 1 })
	wakes := w.Stats().Wakeups
	start := time.Now()
	if _, _, err := q.Enqueue(t.Context(), store.NewJob{Kind: "wake"}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-ran:
		latency := at.Sub(start)
		t.Logf("bus wake-up: the job ran %s after Enqueue began (poll interval 1h)", latency)
		if latency > time.Second {
			t.Fatalf("the job ran %s after it was enqueued, want under 1 s", latency)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the worker was not woken by the bus")
	}
	if w.Stats().Wakeups <= wakes {
		t.Fatalf("the job ran without a wake-up being counted")
	}
}

// TestBusWakeUpRedis wakes a worker on one node from a queue on another, through Redis.
func TestBusWakeUpRedis(t *testing.T) {
	url := testenv.RedisURL(t)
	prefix := fmt.Sprintf("parleytest:jobs:%d:", time.Now().UnixNano())
	open := func() bus.Bus {
		b, err := bus.Open(t.Context(), url, nil, bus.WithPrefix(prefix))
		if err != nil {
			t.Fatalf("bus.Open: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	s := openStore(t, store.Options{DataDir: t.TempDir()})
	checkWakeUp(t, s, open(), open())
}

// testConcurrencyAndStop: a worker runs at most Concurrency jobs at once; when its ctx is
// cancelled it claims nothing more and Run returns once the jobs in flight finish.
func testConcurrencyAndStop(t *testing.T, open opener) {
	s := open(t)
	w := newWorker(s, jobs.Options{Concurrency: 2})
	release := make(chan struct{})
	var cur, peak atomic.Int32
	w.Register("slow", func(ctx context.Context, j *jobs.Job) error {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release // ignores ctx: the stop must wait for it
		return nil
	})
	var ids []store.JobID
	for range 6 {
		ids = append(ids, enqueue(t, s, store.NewJob{Kind: "slow"}).ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- w.Run(ctx) }()
	poll(t, 10*time.Second, "two jobs to run", func() bool { return cur.Load() == 2 })
	cancel()
	select {
	case err := <-returned:
		t.Fatalf("Run returned (%v) with two jobs in flight", err)
	case <-time.After(100 * time.Millisecond): // Run may not return at all here; this bounds the check
	}
	close(release)
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its jobs finished")
	}
	if peak.Load() != 2 {
		t.Fatalf("%d jobs ran at once, want at most 2", peak.Load())
	}
	states := map[string]int{}
	for _, id := range ids {
		states[jobState(t, s, id).State]++
	}
	if states[store.JobDone] != 2 || states[store.JobQueued] != 4 {
		t.Fatalf("after the stop: %v, want 2 done and 4 still queued", states)
	}
	if err := w.Run(context.Background()); !errors.Is(err, jobs.ErrRunning) {
		t.Fatalf("a second Run: %v, want ErrRunning", err)
	}
}

// testDrainTimeout: a job still running when the drain timeout passes has its ctx cancelled
// and goes back to the queue at once, for another worker.
func testDrainTimeout(t *testing.T, open opener) {
	s := open(t)
	w := newWorker(s, jobs.Options{DrainTimeout: 200 * time.Millisecond, Backoff: &jobs.Backoff{Base: time.Hour, Max: time.Hour}})
	started := make(chan struct{})
	w.Register("stubborn", func(ctx context.Context, j *jobs.Job) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	j := enqueue(t, s, store.NewJob{Kind: "stubborn"})
	stop := run(t, w)
	<-started
	begin := time.Now()
	stop()
	if took := time.Since(begin); took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("Run returned %s after its ctx was cancelled, want just after the 200ms drain timeout", took)
	}
	got := jobState(t, s, j.ID)
	if got.State != store.JobQueued || got.Attempts != 1 || got.NextAttemptAt.After(time.Now()) || got.LastError == "" {
		t.Fatalf("a job cut short by the stop: %+v; want queued again at once, not after the hour of backoff", got)
	}
}

func TestBackoff(t *testing.T) {
	b := jobs.Backoff{Base: time.Second, Max: 8 * time.Second}
	for attempt, step := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 10: 8 * time.Second, 100: 8 * time.Second} {
		lo, hi := step, time.Duration(0)
		for range 200 {
			d := b.Delay(attempt)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < step/2 || hi > step || hi-lo < step/4 {
			t.Errorf("attempt %d: delays in [%s, %s], want spread within [%s, %s]", attempt, lo, hi, step/2, step)
		}
	}
	top := jobs.Backoff{Base: time.Second, Max: time.Minute, Rand: func(n int64) int64 { return n - 1 }}
	if d := top.Delay(3); d != 4*time.Second {
		t.Errorf("top of the jitter range for attempt 3 = %s, want 4s", d)
	}
}

func TestRegisterMistakes(t *testing.T) {
	w := jobs.NewWorker(jobs.Options{})
	h := func(context.Context, *jobs.Job) error { return nil }
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		f()
	}
	w.Register("a", h)
	mustPanic("a kind registered twice", func() { w.Register("a", h) })
	mustPanic("a nil handler", func() { w.Register("b", nil) })
	mustPanic("a zero period", func() { w.Every("a", 0) })
	mustPanic("a period over a day", func() { w.Every("a", 25*time.Hour) })
	if err := jobs.NewWorker(jobs.Options{}).Run(t.Context()); !errors.Is(err, jobs.ErrNoHandlers) {
		t.Errorf("Run without handlers: %v", err)
	}
	w.Every("unregistered", time.Minute)
	if err := w.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "unregistered") {
		t.Errorf("Run with a periodic kind that has no handler: %v", err)
	}
}

// testCompletedByHandler: a job the handler completes in its own Tx (CompleteIn, or
// CompleteAllIn for several) is done with that Tx; the worker writes nothing more. A handler
// whose completing Tx rolled back but which still returns nil has its job run again once the
// lease runs out: the effect that rolled back is not lost.
func testCompletedByHandler(t *testing.T, open opener) {
	s := open(t)
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE effects (job_id TEXT NOT NULL, attempt INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	errRollback := errors.New("roll back")
	w := newWorker(s, jobs.Options{Lease: time.Second, PollInterval: 100 * time.Millisecond})
	w.Register("effect", func(ctx context.Context, j *jobs.Job) error {
		err := s.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.SQL().ExecContext(ctx, `INSERT INTO effects (job_id, attempt) VALUES (`+placeholder(s, 1)+`, `+placeholder(s, 2)+`)`,
				string(j.ID), j.Attempt); err != nil {
				return err
			}
			errs, err := jobs.CompleteAllIn(ctx, tx, []*jobs.Job{j})
			if err != nil || errs[0] != nil {
				return fmt.Errorf("complete: %v %v", err, errs)
			}
			if string(j.Payload) == `{"fail_first": true}` && j.Attempt == 1 {
				return errRollback // the handler's bug: it drops the error below
			}
			return nil
		})
		if errors.Is(err, errRollback) {
			return nil
		}
		return err
	})
	run(t, w)
	ok, _, err := w.Queue().Enqueue(t.Context(), store.NewJob{Kind: "effect"})
	if err != nil {
		t.Fatal(err)
	}
	lost, _, err := w.Queue().Enqueue(t.Context(), store.NewJob{Kind: "effect", Payload: json.RawMessage(`{"fail_first": true}`)})
	if err != nil {
		t.Fatal(err)
	}
	done := waitState(t, s, ok.ID, store.JobDone)
	if done.Attempts != 1 || done.LeaseOwner != w.Owner() {
		t.Fatalf("job %+v", done)
	}
	again := waitState(t, s, lost.ID, store.JobDone)
	if again.Attempts != 2 {
		t.Fatalf("the job whose completion rolled back: %+v, want done at attempt 2", again)
	}
	rows, err := s.DB().QueryContext(t.Context(), `SELECT job_id, attempt FROM effects ORDER BY job_id, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%d", id, n))
	}
	want := []string{string(ok.ID) + "/1", string(lost.ID) + "/2"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("effects %v, want %v (each once, the rolled-back one at its second attempt)", got, want)
	}
}
