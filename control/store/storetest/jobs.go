package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// jobsTests are the conformance tests of the job queue's repository.
var jobsTests = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"Jobs/EnqueueClaimComplete", testJobsEnqueueClaimComplete},
	{"Jobs/ClaimKindsAndLimit", testJobsClaimKindsAndLimit},
	{"Jobs/RetryBackoff", testJobsRetryBackoff},
	{"Jobs/DeadAfterMaxAttempts", testJobsDeadAfterMax},
	{"Jobs/LeaseExpiryReclaim", testJobsLeaseExpiry},
	{"Jobs/LeaseExpiryOnLastAttempt", testJobsLeaseExpiryLastAttempt},
	{"Jobs/ExtendLease", testJobsExtendLease},
	{"Jobs/CompleteInTx", testJobsCompleteInTx},
	{"Jobs/Dedupe", testJobsDedupe},
	{"Jobs/ListDeadWithCursor", testJobsList},
	{"Jobs/RequeueDead", testJobsRequeue},
	{"Jobs/Purge", testJobsPurge},
	{"Jobs/ClaimConcurrent", testJobsClaimConcurrent},
	{"Jobs/Refused", testJobsRefused},
	{"Jobs/CompleteMany", testJobsCompleteMany},
}

// t0 is a fixed instant the job tests claim at, far from the store's own clock.
var jobT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func enqueue(t *testing.T, s *store.Store, nj store.NewJob) store.Job {
	t.Helper()
	j, created, err := s.EnqueueJob(t.Context(), nj)
	if err != nil || !created {
		t.Fatalf("EnqueueJob(%+v) = %v, created %v", nj, err, created)
	}
	return j
}

func claim(t *testing.T, s *store.Store, owner string, at time.Time, lease time.Duration, limit int, kinds ...string) []store.Job {
	t.Helper()
	if len(kinds) == 0 {
		kinds = []string{"k"}
	}
	js, err := s.ClaimJobs(t.Context(), store.ClaimJobs{Owner: owner, Kinds: kinds, Now: at, Lease: lease, Limit: limit})
	if err != nil {
		t.Fatalf("ClaimJobs(%s at %s): %v", owner, at, err)
	}
	return js
}

func getJob(t *testing.T, s *store.Store, id store.JobID) store.Job {
	t.Helper()
	return must[store.Job](t, "GetJob")(s.GetJob(t.Context(), id))
}

func ids(js []store.Job) []store.JobID {
	out := make([]store.JobID, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func testJobsEnqueueClaimComplete(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	a := enqueue(t, s, store.NewJob{Kind: "k", Payload: json.RawMessage(`{"n": 1}`), RunAt: jobT0.Add(-2 * time.Second)})
	b := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0.Add(-time.Second), MaxAttempts: 3})
	later := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0.Add(time.Minute)})
	if a.State != store.JobQueued || a.Attempts != 0 || a.MaxAttempts != store.DefaultJobMaxAttempts || a.LeaseOwner != "" || a.FinishedAt != nil {
		t.Fatalf("enqueued %+v", a)
	}
	if string(b.Payload) != `{}` {
		t.Fatalf("a job without a payload has %s, want {}", b.Payload)
	}

	got := claim(t, s, "w1", jobT0, 30*time.Second, 10)
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("claimed %v, want the two due jobs in due order [%s %s]", ids(got), a.ID, b.ID)
	}
	j := got[0]
	var payload struct{ N int }
	if err := json.Unmarshal(j.Payload, &payload); err != nil || payload.N != 1 {
		t.Fatalf("payload %s (%v)", j.Payload, err)
	}
	if j.State != store.JobRunning || j.Attempts != 1 || j.LeaseOwner != "w1" || j.LeaseExpiresAt == nil ||
		!j.LeaseExpiresAt.Equal(jobT0.Add(30*time.Second)) {
		t.Fatalf("claimed job %+v", j)
	}
	if again := claim(t, s, "w2", jobT0.Add(time.Second), 30*time.Second, 10); len(again) != 0 {
		t.Fatalf("a second worker claimed %v while the leases run", ids(again))
	}
	if err := s.CompleteJob(ctx, j.Lease(), jobT0.Add(time.Second)); err != nil {
		t.Fatalf("CompleteJob: %v", err)
	}
	done := getJob(t, s, j.ID)
	if done.State != store.JobDone || done.FinishedAt == nil || !done.FinishedAt.Equal(jobT0.Add(time.Second)) || done.LeaseExpiresAt != nil || done.LeaseOwner != "w1" {
		t.Fatalf("completed job %+v", done)
	}
	if err := s.CompleteJob(ctx, j.Lease(), jobT0.Add(2*time.Second)); err != nil {
		t.Fatalf("completing again under the same lease: %v", err)
	}
	if err := s.CompleteJob(ctx, got[1].Lease(), jobT0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	other := j.Lease()
	other.Owner = "w2"
	wantErr(t, "CompleteJob by another owner", s.CompleteJob(ctx, other, jobT0), store.ErrConflict)
	if got := getJob(t, s, later.ID); got.State != store.JobQueued || got.Attempts != 0 {
		t.Fatalf("the job not yet due changed: %+v", got)
	}
	if got := claim(t, s, "w1", jobT0.Add(time.Minute), time.Second, 10); len(got) != 1 || got[0].ID != later.ID {
		t.Fatalf("at its time, claimed %v, want %s", ids(got), later.ID)
	}
}

func testJobsClaimKindsAndLimit(t *testing.T, open Opener) {
	s := migrated(t, open)
	var ks []store.Job
	for i := range 5 {
		ks = append(ks, enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0.Add(time.Duration(i-10) * time.Second)}))
	}
	other := enqueue(t, s, store.NewJob{Kind: "other", RunAt: jobT0.Add(-time.Hour)})
	got := claim(t, s, "w", jobT0, time.Minute, 2, "k")
	if len(got) != 2 || got[0].ID != ks[0].ID || got[1].ID != ks[1].ID {
		t.Fatalf("claimed %v, want the two oldest of kind k", ids(got))
	}
	got = claim(t, s, "w", jobT0, time.Minute, 10, "k")
	if len(got) != 3 {
		t.Fatalf("claimed %d, want the 3 left of kind k", len(got))
	}
	got = claim(t, s, "w", jobT0, time.Minute, 10, "nope", "other")
	if len(got) != 1 || got[0].ID != other.ID {
		t.Fatalf("claimed %v, want only the job of kind other", ids(got))
	}
}

func testJobsRetryBackoff(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	j := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0, MaxAttempts: 3})
	c := claim(t, s, "w", jobT0, time.Minute, 1)[0]
	retry := jobT0.Add(4*time.Second + 250*time.Millisecond)
	f, err := s.FailJob(ctx, c.Lease(), "boom: "+strings.Repeat("é", 3000), jobT0.Add(time.Second), &retry)
	if err != nil {
		t.Fatalf("FailJob: %v", err)
	}
	if f.State != store.JobQueued || !f.NextAttemptAt.Equal(retry) || f.Attempts != 1 || f.LeaseExpiresAt != nil ||
		!strings.HasPrefix(f.LastError, "boom: é") || len(f.LastError) > 2000 || f.FinishedAt != nil {
		t.Fatalf("failed job %+v", f)
	}
	if got := getJob(t, s, j.ID); got.LastError != f.LastError {
		t.Fatalf("stored error differs from the returned one")
	}
	wantErr(t, "FailJob twice under one lease", func() error { _, err := s.FailJob(ctx, c.Lease(), "x", jobT0, &retry); return err }(), store.ErrConflict)
	if got := claim(t, s, "w", retry.Add(-time.Microsecond), time.Minute, 1); len(got) != 0 {
		t.Fatalf("claimed before its retry time: %v", ids(got))
	}
	c2 := claim(t, s, "w", retry, time.Minute, 1)
	if len(c2) != 1 || c2[0].ID != j.ID || c2[0].Attempts != 2 || c2[0].LastError == "" {
		t.Fatalf("at the retry time claimed %+v, want attempt 2 keeping its last error", c2)
	}
	if err := s.CompleteJob(ctx, c2[0].Lease(), retry); err != nil {
		t.Fatal(err)
	}
}

func testJobsDeadAfterMax(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	j := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0, MaxAttempts: 2})
	at := jobT0
	for attempt := 1; attempt <= 2; attempt++ {
		c := claim(t, s, "w", at, time.Minute, 1)
		if len(c) != 1 || c[0].Attempts != attempt {
			t.Fatalf("attempt %d: claimed %+v", attempt, c)
		}
		retry := at.Add(time.Second) // asked for, but the last attempt buries the job anyway
		f, err := s.FailJob(ctx, c[0].Lease(), fmt.Sprintf("failure %d", attempt), at, &retry)
		if err != nil {
			t.Fatal(err)
		}
		want := store.JobQueued
		if attempt == 2 {
			want = store.JobDead
		}
		if f.State != want {
			t.Fatalf("after failure %d the job is %s, want %s", attempt, f.State, want)
		}
		at = retry
	}
	dead := getJob(t, s, j.ID)
	if dead.FinishedAt == nil || dead.LastError != "failure 2" || dead.Attempts != 2 {
		t.Fatalf("dead job %+v", dead)
	}
	if got := claim(t, s, "w", at.Add(time.Hour), time.Minute, 10); len(got) != 0 {
		t.Fatalf("a dead job was claimed: %v", ids(got))
	}
	// A failure without a retry time buries the job on its first attempt.
	p := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
	c := claim(t, s, "w", at, time.Minute, 1)[0]
	if f, err := s.FailJob(ctx, c.Lease(), "for good", at, nil); err != nil || f.State != store.JobDead || f.ID != p.ID {
		t.Fatalf("permanent failure: %+v %v", f, err)
	}
}

func testJobsLeaseExpiry(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	j := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0, MaxAttempts: 3})
	a := claim(t, s, "a", jobT0, 10*time.Second, 1)[0]
	if got := claim(t, s, "b", jobT0.Add(10*time.Second-time.Microsecond), 10*time.Second, 1); len(got) != 0 {
		t.Fatal("claimed before the lease ran out")
	}
	b := claim(t, s, "b", jobT0.Add(10*time.Second), 10*time.Second, 1)
	if len(b) != 1 || b[0].ID != j.ID || b[0].Attempts != 2 || b[0].LeaseOwner != "b" {
		t.Fatalf("after the lease ran out, b claimed %+v", b)
	}
	// a comes back late: it holds nothing any more.
	wantErr(t, "late CompleteJob", s.CompleteJob(ctx, a.Lease(), jobT0.Add(11*time.Second)), store.ErrConflict)
	wantErr(t, "late ExtendJobLease", s.ExtendJobLease(ctx, a.Lease(), jobT0, jobT0.Add(time.Hour)), store.ErrConflict)
	_, err := s.FailJob(ctx, a.Lease(), "late", jobT0, nil)
	wantErr(t, "late FailJob", err, store.ErrConflict)
	if err := s.CompleteJob(ctx, b[0].Lease(), jobT0.Add(12*time.Second)); err != nil {
		t.Fatalf("b completes: %v", err)
	}
	if got := getJob(t, s, j.ID); got.State != store.JobDone || got.LeaseOwner != "b" {
		t.Fatalf("job %+v", got)
	}
}

func testJobsLeaseExpiryLastAttempt(t *testing.T, open Opener) {
	s := migrated(t, open)
	j := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0, MaxAttempts: 1})
	claim(t, s, "gone", jobT0, time.Second, 1)
	if got := claim(t, s, "b", jobT0.Add(time.Second), time.Second, 1); len(got) != 0 {
		t.Fatalf("a job out of attempts was claimed again: %+v", got)
	}
	dead := getJob(t, s, j.ID)
	if dead.State != store.JobDead || dead.FinishedAt == nil || !strings.Contains(dead.LastError, "gone") || !strings.Contains(dead.LastError, "ran out") {
		t.Fatalf("job whose last lease ran out: %+v", dead)
	}
}

func testJobsExtendLease(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
	a := claim(t, s, "a", jobT0, 10*time.Second, 1)[0]
	if err := s.ExtendJobLease(ctx, a.Lease(), jobT0.Add(8*time.Second), jobT0.Add(18*time.Second)); err != nil {
		t.Fatalf("ExtendJobLease: %v", err)
	}
	if got := claim(t, s, "b", jobT0.Add(15*time.Second), time.Second, 1); len(got) != 0 {
		t.Fatal("claimed a job whose lease was extended")
	}
	// A lease that ran out but that nobody took is still the holder's to extend.
	if err := s.ExtendJobLease(ctx, a.Lease(), jobT0.Add(20*time.Second), jobT0.Add(30*time.Second)); err != nil {
		t.Fatalf("extending a lapsed lease nobody took: %v", err)
	}
	if got := getJob(t, s, a.ID); !got.LeaseExpiresAt.Equal(jobT0.Add(30*time.Second)) || got.Attempts != 1 {
		t.Fatalf("job %+v", got)
	}
}

func testJobsCompleteInTx(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
	j := claim(t, s, "w", jobT0, time.Minute, 1)[0]
	sentinel := fmt.Errorf("the effect failed")
	err := s.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.CompleteJob(ctx, j.Lease(), jobT0); err != nil {
			return err
		}
		return sentinel
	})
	if err != sentinel {
		t.Fatalf("Tx: %v", err)
	}
	if got := getJob(t, s, j.ID); got.State != store.JobRunning {
		t.Fatalf("a completion rolled back left the job %s", got.State)
	}
	if err := s.Tx(ctx, func(tx *store.Tx) error { return tx.CompleteJob(ctx, j.Lease(), jobT0) }); err != nil {
		t.Fatal(err)
	}
	if got := getJob(t, s, j.ID); got.State != store.JobDone {
		t.Fatalf("job is %s after its completion committed", got.State)
	}
}

func testJobsDedupe(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	first := enqueue(t, s, store.NewJob{Kind: "k", DedupeKey: "purge@10:00", RunAt: jobT0})
	dup, created, err := s.EnqueueJob(ctx, store.NewJob{Kind: "k", DedupeKey: "purge@10:00", RunAt: jobT0.Add(time.Hour)})
	if err != nil || created || dup.ID != first.ID || !dup.NextAttemptAt.Equal(jobT0) {
		t.Fatalf("duplicate enqueue: %+v created=%v %v", dup, created, err)
	}
	j := claim(t, s, "w", jobT0, time.Minute, 10)[0]
	if err := s.CompleteJob(ctx, j.Lease(), jobT0); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.EnqueueJob(ctx, store.NewJob{Kind: "k", DedupeKey: "purge@10:00"}); err != nil || created {
		t.Fatalf("a done job's key still dedupes: created=%v %v", created, err)
	}
	enqueue(t, s, store.NewJob{Kind: "k", DedupeKey: "purge@11:00", RunAt: jobT0})
	// Without a key, jobs never collide; at once, one key makes one row.
	enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
	enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := map[store.JobID]int{}
	for range 8 {
		wg.Go(func() {
			j, c, err := s.EnqueueJob(ctx, store.NewJob{Kind: "k", DedupeKey: "race", RunAt: jobT0})
			if err != nil {
				t.Errorf("EnqueueJob: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if c {
				made[j.ID]++
			}
		})
	}
	wg.Wait()
	if len(made) != 1 {
		t.Fatalf("8 concurrent enqueues with one key created %v", made)
	}
	all := must[[]store.Job](t, "ListJobs")(s.ListJobs(ctx, store.JobFilter{Kind: "k"}))
	if len(all) != 5 {
		t.Fatalf("%d rows, want 5", len(all))
	}
}

func testJobsList(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	var dead []store.JobID
	for i := range 5 {
		enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
		j := claim(t, s, "w", jobT0, time.Minute, 1)[0]
		if _, err := s.FailJob(ctx, j.Lease(), fmt.Sprintf("e%d", i), jobT0, nil); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, j.ID)
		enqueue(t, s, store.NewJob{Kind: "other", RunAt: jobT0.Add(time.Hour)})
	}
	var got []store.JobID
	var before store.JobID
	for {
		page := must[[]store.Job](t, "ListJobs")(s.ListJobs(ctx, store.JobFilter{State: store.JobDead, BeforeID: before, Limit: 2}))
		for _, j := range page {
			if j.State != store.JobDead {
				t.Fatalf("listed a %s job under dead", j.State)
			}
			got = append(got, j.ID)
		}
		if len(page) < 2 {
			break
		}
		before = page[len(page)-1].ID
	}
	if len(got) != 5 {
		t.Fatalf("listed %d dead jobs, want 5", len(got))
	}
	for i := range got {
		if got[i] != dead[len(dead)-1-i] {
			t.Fatalf("dead jobs listed %v, want newest first %v", got, dead)
		}
	}
	queued := must[[]store.Job](t, "ListJobs")(s.ListJobs(ctx, store.JobFilter{State: store.JobQueued, Kind: "other"}))
	if len(queued) != 5 {
		t.Fatalf("%d queued jobs of kind other, want 5", len(queued))
	}
	_, err := s.ListJobs(ctx, store.JobFilter{State: "sleeping"})
	wantErr(t, "ListJobs unknown state", err, store.ErrInvalid)
	_, err = s.ListJobs(ctx, store.JobFilter{BeforeID: "nope"})
	wantErr(t, "ListJobs bad cursor", err, store.ErrInvalid)
}

func testJobsRequeue(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0, MaxAttempts: 1})
	j := claim(t, s, "w", jobT0, time.Minute, 1)[0]
	retry := jobT0.Add(time.Second)
	if f, err := s.FailJob(ctx, j.Lease(), "nope", jobT0, &retry); err != nil || f.State != store.JobDead {
		t.Fatalf("FailJob on the only attempt: %+v %v", f, err)
	}
	r, err := s.RequeueJob(ctx, j.ID, jobT0.Add(time.Minute))
	if err != nil || r.State != store.JobQueued || r.Attempts != 0 || r.FinishedAt != nil || r.LastError != "nope" {
		t.Fatalf("RequeueJob: %+v %v", r, err)
	}
	_, err = s.RequeueJob(ctx, j.ID, jobT0)
	wantErr(t, "RequeueJob of a queued job", err, store.ErrConflict)
	c := claim(t, s, "w", jobT0.Add(time.Minute), time.Minute, 1)
	if len(c) != 1 || c[0].Attempts != 1 {
		t.Fatalf("requeued job claimed as %+v", c)
	}
}

func testJobsPurge(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	finish := func(at time.Time, dead bool) store.JobID {
		enqueue(t, s, store.NewJob{Kind: "k", RunAt: at})
		j := claim(t, s, "w", at, time.Minute, 1)[0]
		if dead {
			if _, err := s.FailJob(ctx, j.Lease(), "x", at, nil); err != nil {
				t.Fatal(err)
			}
		} else if err := s.CompleteJob(ctx, j.Lease(), at); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	oldDone := finish(jobT0.Add(-48*time.Hour), false)
	newDone := finish(jobT0.Add(-time.Hour), false)
	oldDead := finish(jobT0.Add(-40*24*time.Hour), true)
	newDead := finish(jobT0.Add(-48*time.Hour), true)
	queued := enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0.Add(-100 * 24 * time.Hour)})
	n, err := s.PurgeJobs(ctx, jobT0.Add(-24*time.Hour), jobT0.Add(-30*24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("PurgeJobs = %d, %v; want 2", n, err)
	}
	for id, want := range map[store.JobID]bool{oldDone: false, newDone: true, oldDead: false, newDead: true, queued.ID: true} {
		_, err := s.GetJob(ctx, id)
		if (err == nil) != want {
			t.Fatalf("job %s kept=%v after the purge, want %v (%v)", id, err == nil, want, err)
		}
	}
}

// testJobsClaimConcurrent has workers claim one batch of jobs at once: every job is claimed
// exactly once (SKIP LOCKED on PostgreSQL, the single writer on SQLite).
func testJobsClaimConcurrent(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	const n = 120
	err := s.Tx(ctx, func(tx *store.Tx) error {
		for range n {
			if _, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: "k", RunAt: jobT0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[store.JobID]string{}
	var wg sync.WaitGroup
	for w := range 6 {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				js, err := s.ClaimJobs(ctx, store.ClaimJobs{Owner: owner, Kinds: []string{"k"}, Now: jobT0, Lease: time.Minute, Limit: 7})
				if err != nil {
					t.Errorf("ClaimJobs: %v", err)
					return
				}
				if len(js) == 0 {
					return
				}
				mu.Lock()
				for _, j := range js {
					if prev, dup := seen[j.ID]; dup {
						t.Errorf("job %s claimed by %s and %s", j.ID, prev, owner)
					}
					seen[j.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), n)
	}
}

func testJobsRefused(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	for _, nj := range []store.NewJob{
		{},
		{Kind: "k", Payload: json.RawMessage(`{"a":`)},
		{Kind: "k", MaxAttempts: -1},
		{Kind: strings.Repeat("k", 201)},
	} {
		_, _, err := s.EnqueueJob(ctx, nj)
		wantErr(t, fmt.Sprintf("EnqueueJob(%+v)", nj), err, store.ErrInvalid)
	}
	for _, c := range []store.ClaimJobs{
		{Kinds: []string{"k"}, Now: jobT0, Lease: time.Second},
		{Owner: "w", Now: jobT0, Lease: time.Second},
		{Owner: "w", Kinds: []string{"k"}, Now: jobT0},
	} {
		_, err := s.ClaimJobs(ctx, c)
		wantErr(t, fmt.Sprintf("ClaimJobs(%+v)", c), err, store.ErrInvalid)
	}
	_, err := s.GetJob(ctx, "not-a-uuid")
	wantErr(t, "GetJob bad id", err, store.ErrNotFound)
}

// testJobsCompleteMany: CompleteJobs completes the jobs still held under their leases in one
// call, says which leases were lost, accepts a repeat, and writes nothing of a rolled-back Tx.
func testJobsCompleteMany(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	for range 4 {
		enqueue(t, s, store.NewJob{Kind: "k", RunAt: jobT0})
	}
	got := claim(t, s, "w1", jobT0, 10*time.Second, 10)
	if len(got) != 4 {
		t.Fatalf("claimed %d jobs, want 4", len(got))
	}
	// Every lease of w1 runs out and w2 takes the jobs.
	taken := claim(t, s, "w2", jobT0.Add(time.Minute), 10*time.Second, 10)
	if len(taken) != 4 {
		t.Fatalf("w2 claimed %d, want 4 (every lease ran out)", len(taken))
	}
	// w1 lost all four. w2's leases of three of them complete (first in a rolled-back Tx, then
	// for real, one of them twice); w1's stale lease of the fourth is refused.
	ls := []store.JobLease{taken[0].Lease(), taken[1].Lease(), taken[2].Lease(), got[3].Lease()}
	errRollback := fmt.Errorf("roll back")
	err := s.Tx(ctx, func(tx *store.Tx) error {
		errs, err := tx.CompleteJobs(ctx, ls, jobT0.Add(time.Minute))
		if err != nil {
			return err
		}
		if errs[0] != nil || errs[1] != nil || errs[2] != nil {
			t.Errorf("held leases: %v", errs)
		}
		wantErr(t, "a lost lease", errs[3], store.ErrConflict)
		return errRollback
	})
	if err != errRollback {
		t.Fatalf("Tx: %v", err)
	}
	if j := getJob(t, s, taken[0].ID); j.State != store.JobRunning {
		t.Fatalf("a rolled-back completion stuck: %+v", j)
	}
	if _, err := s.CompleteJobs(ctx, ls[2:3], jobT0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	errs, err := s.CompleteJobs(ctx, ls, jobT0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("held leases and a repeat: %v", errs)
	}
	wantErr(t, "a lost lease", errs[3], store.ErrConflict)
	for i, l := range ls[:3] {
		j := getJob(t, s, l.ID)
		want := jobT0.Add(2 * time.Minute)
		if i == 2 {
			want = jobT0.Add(time.Minute) // completed before: the repeat changes nothing
		}
		if j.State != store.JobDone || j.LeaseOwner != "w2" || j.FinishedAt == nil || !j.FinishedAt.Equal(want) {
			t.Fatalf("job %d: %+v", i, j)
		}
	}
	if j := getJob(t, s, got[3].ID); j.State != store.JobRunning || j.LeaseOwner != "w2" {
		t.Fatalf("the job whose lease was lost: %+v", j)
	}
	if errs, err := s.CompleteJobs(ctx, nil, jobT0); err != nil || len(errs) != 0 {
		t.Fatalf("no leases: %v %v", errs, err)
	}
}
