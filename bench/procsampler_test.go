package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestProcSampler(t *testing.T) {
	s := NewProcSampler(5*time.Millisecond, map[string]int{"self": os.Getpid(), "gone": 1 << 30})
	start := time.Now()
	before := s.Snapshot()
	s.Start(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for s.Samples("self") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d samples after 5 s", s.Samples("self"))
		}
		time.Sleep(5 * time.Millisecond) // polling the sampler's progress, bounded by the deadline
	}
	after := s.Snapshot()
	s.Close()
	s.Close() // idempotent
	n := s.Samples("self")
	if peak := s.PeakRSS("self", start, time.Now()); peak <= 0 {
		t.Errorf("peak RSS %d", peak)
	}
	if med := s.MedianRSS("self", start, time.Now()); med <= 0 || med > s.PeakRSS("self", start, time.Now()) {
		t.Errorf("median RSS %d", med)
	}
	if s.PeakRSS("self", time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)) != 0 {
		t.Error("a peak outside every sample")
	}
	if s.Err("gone") == nil {
		t.Error("no error kept for a process that does not exist")
	}
	if _, ok := after.Procs["gone"]; ok {
		t.Error("snapshot holds a process that does not exist")
	}
	u := Between(before, after)
	if u.Wall <= 0 || u.CPU["self"] < 0 || u.MachineBusy < 0 || u.MachineBusy > 1 {
		t.Errorf("usage %+v", u)
	}
	// Close waited for the sampling goroutine: a later sample cannot appear.
	if s.Samples("self") != n {
		t.Error("sampling went on after Close")
	}
}
