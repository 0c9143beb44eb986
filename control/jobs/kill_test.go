package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// Environment of a worker child process (see TestMain).
const (
	childEnv     = "PARLEY_JOBS_TEST_CHILD" // the worker's name; set only in children
	childURLEnv  = "PARLEY_JOBS_TEST_URL"
	killJobs     = 1000
	killLease    = 2 * time.Second
	killParallel = 8
)

// TestMain runs the test binary as a job worker when it is started as a child of
// TestKillWorkerExactlyOnce, and as the tests otherwise.
func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childWorker(name, os.Getenv(childURLEnv)))
	}
	os.Exit(m.Run())
}

// childWorker is one worker process: it runs "kill.effect" jobs until SIGTERM. Each job records
// that it ran (kill_runs, committed on its own, so it survives the process being killed), then
// writes its effect (kill_effects, keyed by the job id) in the transaction that completes it.
func childWorker(name, url string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, store.Options{URL: url, MaxConns: killParallel + 4})
	if err != nil {
		log.Error("open store", "err", err)
		return 2
	}
	defer st.Close()
	w := jobs.NewWorker(jobs.Options{Store: st, Owner: name, Concurrency: killParallel, Lease: killLease,
		PollInterval: 100 * time.Millisecond, Log: log})
	w.Register("kill.effect", func(ctx context.Context, j *jobs.Job) error {
		if _, err := st.DB().ExecContext(ctx, `INSERT INTO kill_runs (job_id, attempt, worker) VALUES ($1, $2, $3)`,
			string(j.ID), j.Attempt, name); err != nil {
			return err
		}
		return st.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.SQL().ExecContext(ctx, `INSERT INTO kill_effects (job_id, worker) VALUES ($1, $2)`, string(j.ID), name); err != nil {
				return err
			}
			// Work inside the transaction, so that a kill lands in the middle of some.
			if _, err := tx.SQL().ExecContext(ctx, `SELECT pg_sleep(0.02)`); err != nil {
				return err
			}
			return j.CompleteIn(ctx, tx)
		})
	})
	if err := w.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

// TestKillWorkerExactlyOnce runs 1,000 jobs on two worker processes sharing one PostgreSQL
// schema and kills one with SIGKILL in the middle of the batch. The jobs it held are claimed
// again by the other once their leases run out, and every job's effect (a row keyed by the
// job id, written in the transaction that marks the job done) exists exactly once.
func TestKillWorkerExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two worker processes; skipped with -short")
	}
	base := testenv.PostgresURL(t) // skips, or fails under PARLEY_REQUIRE_PEERS=1, without PostgreSQL
	url := pgSchema(t, base)
	s := openStore(t, store.Options{URL: url})
	db := s.DB()
	ctx := t.Context()
	for _, ddl := range []string{
		`CREATE TABLE kill_effects (job_id uuid PRIMARY KEY, worker text NOT NULL)`,
		`CREATE TABLE kill_runs (job_id uuid NOT NULL, attempt integer NOT NULL, worker text NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Tx(ctx, func(tx *store.Tx) error {
		for i := range killJobs {
			if _, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: "kill.effect", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var victimOut, survivorOut bytes.Buffer
	t.Cleanup(func() { // runs after the children's cleanups have stopped them
		if t.Failed() {
			t.Logf("victim's log:\n%s\nsurvivor's log:\n%s", &victimOut, &survivorOut)
		}
	})
	start := time.Now()
	victim := startChild(t, "victim", url, &victimOut)
	survivor := startChild(t, "survivor", url, &survivorOut)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// Kill the victim once both workers are busy and about a third of the batch is done.
	// It must hold leases when it dies (jobs mid-transaction), or nothing is left to claim again:
	// wait for a moment when it holds several (each job spends 20 ms in its transaction).
	poll(t, 60*time.Second, "both workers to be under way, the victim holding leases", func() bool {
		return count(`SELECT count(*) FROM kill_effects WHERE worker = 'victim'`) >= 50 &&
			count(`SELECT count(*) FROM kill_effects`) >= killJobs/3 &&
			count(`SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner LIKE 'victim/%'`) >= 3
	})
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	killedAt := time.Now()
	doneAtKill := count(`SELECT count(*) FROM jobs WHERE state = 'done'`)
	heldAtKill := count(`SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner LIKE 'victim/%'`)

	poll(t, 60*time.Second, "every job to finish", func() bool {
		return count(`SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')`) == 0
	})
	finished := time.Now()
	if err := survivor.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, survivor, 15*time.Second)

	effects, distinct := 0, 0
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT job_id) FROM kill_effects`).Scan(&effects, &distinct); err != nil {
		t.Fatal(err)
	}
	if effects != killJobs || distinct != killJobs {
		t.Fatalf("%d effects (%d distinct jobs), want exactly %d", effects, distinct, killJobs)
	}
	if n := count(`SELECT count(*) FROM jobs j LEFT JOIN kill_effects e ON e.job_id = j.id WHERE e.job_id IS NULL OR j.state <> 'done'`); n != 0 {
		t.Fatalf("%d jobs are not done with their effect", n)
	}
	reclaimed := count(`SELECT count(*) FROM jobs WHERE attempts > 1`)
	if reclaimed == 0 {
		t.Fatalf("no job was claimed again after the kill (the victim held %d at the kill)", heldAtKill)
	}
	if n := count(`SELECT count(*) FROM jobs WHERE attempts > 1 AND lease_owner NOT LIKE 'survivor/%'`); n != 0 {
		t.Fatalf("%d re-claimed jobs were finished by someone other than the survivor", n)
	}
	runs := count(`SELECT count(*) FROM kill_runs`)
	cutShort := count(`SELECT count(*) FROM kill_runs r WHERE r.worker = 'victim' AND NOT EXISTS
		(SELECT 1 FROM kill_effects e WHERE e.job_id = r.job_id AND e.worker = 'victim')`)
	byVictim := count(`SELECT count(*) FROM kill_effects WHERE worker = 'victim'`)
	t.Logf("%d jobs on 2 worker processes (%d slots each, lease %s): victim SIGKILLed after %s with %d jobs done, holding %d leases;"+
		" %d jobs re-claimed by the survivor after their leases ran out; %d handler runs in all, %d of them cut short by the kill"+
		" (their effects rolled back); effects: %d by the victim, %d by the survivor, %d distinct; all done %s after the kill (%s in all)",
		killJobs, killParallel, killLease, killedAt.Sub(start).Round(time.Millisecond), doneAtKill, heldAtKill,
		reclaimed, runs, cutShort, byVictim, effects-byVictim, distinct, finished.Sub(killedAt).Round(time.Millisecond),
		finished.Sub(start).Round(time.Millisecond))
	if runs != killJobs+cutShort {
		t.Fatalf("%d handler runs, want %d jobs + %d cut short by the kill", runs, killJobs, cutShort)
	}
}

// startChild starts the test binary as a worker process named name on url.
func startChild(t *testing.T, name, url string, out *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name, childURLEnv+"="+url)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// waitExit waits for cmd to exit with status 0.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker process: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("the worker process did not stop within %s of SIGTERM", within)
	}
}
