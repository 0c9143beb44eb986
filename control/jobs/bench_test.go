package jobs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// BenchmarkThroughput measures how fast one worker with 8 slots drains a queue of no-op jobs:
// the queue's own cost per job (claim under a lease, completion), reported as jobs/s.
func BenchmarkThroughput(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		benchThroughput(b, openStore(b, store.Options{DataDir: b.TempDir()}))
	})
	b.Run("postgres", func(b *testing.B) {
		benchThroughput(b, openStore(b, store.Options{URL: pgSchema(b, testenv.PostgresURL(b)), MaxConns: 12}))
	})
}

func benchThroughput(b *testing.B, s *store.Store) {
	ctx := context.Background()
	err := s.Tx(ctx, func(tx *store.Tx) error {
		for range b.N {
			if _, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: "noop"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	w := jobs.NewWorker(jobs.Options{Store: s, Concurrency: 8, PollInterval: 10 * time.Millisecond, Owner: "bench"})
	w.Register("noop", func(context.Context, *jobs.Job) error {
		if done.Add(1) == int64(b.N) {
			close(finished)
		}
		return nil
	})
	b.ResetTimer()
	start := time.Now()
	stop := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	go func() { _ = w.Run(wctx); close(stop) }()
	<-finished
	for w.Stats().Done < uint64(b.N) { // the last completions are being recorded
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-stop
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}
