package control

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// TestWorkerRunsConversationJobs starts a node with every role and checks that the worker runs
// each conversation job from the job queue: every periodic kind has a done run for its current
// period, and the scheduled-call dialler (every second) runs again in the next one.
func TestWorkerRunsConversationJobs(t *testing.T) {
	n, err := NewNode(context.Background(), testConfig(t), quietLog(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return")
		}
	}()
	done := func(kind string) int {
		js, err := n.Store.ListJobs(context.Background(), store.JobFilter{Kind: kind, State: store.JobDone})
		if err != nil {
			t.Fatal(err)
		}
		return len(js)
	}
	// Generous: under -race beside other packages' tests the first runs have taken 16 s.
	deadline := time.Now().Add(40 * time.Second)
	for _, k := range []string{kindDialDue, kindReapLost, kindReapDeadNodes, kindPurgeAttachments, kindPurgeAgents, kindPurgeIdempotency, kindPurgeJobs, kindPurgeAudit, kindEndIdleChats} {
		want := 1
		if k == kindDialDue || k == kindReapDeadNodes {
			want = 2
		}
		for done(k) < want {
			if time.Now().After(deadline) {
				all, _ := n.Store.ListJobs(context.Background(), store.JobFilter{Kind: k})
				var seen []string
				for _, j := range all {
					seen = append(seen, fmt.Sprintf("%s attempts=%d err=%q", j.State, j.Attempts, j.LastError))
				}
				t.Fatalf("%s: %d runs done, want %d; its jobs: %v", k, done(k), want, seen)
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}
	if dead, err := n.Store.ListJobs(context.Background(), store.JobFilter{State: store.JobDead}); err != nil || len(dead) != 0 {
		t.Fatalf("dead jobs %+v (%v)", dead, err)
	}
}
