package procs

import (
	"context"
	"sync"
	"testing"
	"time"
)

// feeder observes windows of wall time at a given use in cores.
type feeder struct {
	a   *Adapter
	now time.Time
	cpu time.Duration
}

func newFeeder(o Options) *feeder {
	f := &feeder{a: New(o), now: time.Unix(1_800_000_000, 0)}
	f.a.Observe(f.now, 0)
	return f
}

func (f *feeder) window(w time.Duration, use float64) (int, bool) {
	f.now = f.now.Add(w)
	f.cpu += time.Duration(float64(w) * use)
	return f.a.Observe(f.now, f.cpu)
}

func TestAdapterGoesDownAfterQuietWindowsOnly(t *testing.T) {
	f := newFeeder(Options{Max: 2, Low: 0.25, High: 0.5, DownAfter: 4, Set: func(int) {}})
	// Three quiet windows, then a busy one: the count starts again.
	for i := range 3 {
		if n, ch := f.window(250*time.Millisecond, 0.1); n != 2 || ch {
			t.Fatalf("quiet window %d: %d %v, want to stay at 2", i, n, ch)
		}
	}
	if n, ch := f.window(250*time.Millisecond, 0.3); n != 2 || ch {
		t.Fatalf("a window between Low and High: %d %v", n, ch)
	}
	for i := range 3 {
		if n, ch := f.window(250*time.Millisecond, 0.2); n != 2 || ch {
			t.Fatalf("quiet window %d after the busy one: %d %v", i, n, ch)
		}
	}
	if n, ch := f.window(250*time.Millisecond, 0.2); n != 1 || !ch {
		t.Fatalf("fourth quiet window in a row: %d %v, want 1 and a change", n, ch)
	}
	if n, ch := f.window(250*time.Millisecond, 0.01); n != 1 || ch {
		t.Fatalf("quiet at 1: %d %v", n, ch)
	}
}

func TestAdapterGoesUpInOneBusyWindow(t *testing.T) {
	f := newFeeder(Options{Max: 4, Low: 0.25, High: 0.5, DownAfter: 2, Set: func(int) {}})
	f.window(time.Second, 0)
	if n, _ := f.window(time.Second, 0); n != 1 {
		t.Fatalf("after two idle windows: %d", n)
	}
	// Between Low and High at one P: stay (the hysteresis).
	if n, ch := f.window(250*time.Millisecond, 0.45); n != 1 || ch {
		t.Fatalf("0.45 cores at 1 P: %d %v", n, ch)
	}
	if n, ch := f.window(250*time.Millisecond, 0.51); n != 4 || !ch {
		t.Fatalf("0.51 cores at 1 P: %d %v, want back to 4", n, ch)
	}
	// A window of no wall time (a clock that did not move) changes nothing.
	if n, ch := f.a.Observe(f.now, f.cpu+time.Second); n != 4 || ch {
		t.Fatalf("zero-length window: %d %v", n, ch)
	}
}

func TestAdapterRunAppliesAndRestores(t *testing.T) {
	var mu sync.Mutex
	var sets []int
	var cpu time.Duration
	a := New(Options{Max: 2, Interval: time.Millisecond, DownAfter: 2,
		CPU: func() time.Duration { mu.Lock(); defer mu.Unlock(); return cpu },
		Set: func(n int) { mu.Lock(); sets = append(sets, n); mu.Unlock() }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	before := Changes()
	go func() { a.Run(ctx); close(done) }()
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		n := len(sets)
		mu.Unlock()
		if n >= 1 {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the idle process never went to one P")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(sets) != 2 || sets[0] != 1 || sets[1] != 2 {
		t.Fatalf("sets %v, want [1 2]: down when idle, back to Max when stopped", sets)
	}
	if Changes()-before != 2 {
		t.Fatalf("changes counted %d, want 2", Changes()-before)
	}
}

func TestAdapterOneProcessorDoesNothing(t *testing.T) {
	a := New(Options{Max: 1, Set: func(n int) { t.Errorf("set %d on a one-P machine", n) }})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	a.Run(ctx)
	if a.Procs() != 1 {
		t.Fatal(a.Procs())
	}
}

func TestProcessCPUMoves(t *testing.T) {
	c0 := processCPU()
	x := 0
	for i := range 50_000_000 {
		x += i ^ (x >> 3)
	}
	if c1 := processCPU(); c1 <= c0 {
		t.Fatalf("process CPU did not move: %v then %v (%d)", c0, c1, x)
	}
}

func TestSysmonEnv(t *testing.T) {
	for _, c := range []struct {
		in, want string
		add      bool
	}{
		{"", SysmonSetting, true},
		{"http2debug=1", "http2debug=1," + SysmonSetting, true},
		{"schedtrace=1000", "schedtrace=1000", false},
		{"madvdontneed=1, schedtrace=5", "madvdontneed=1, schedtrace=5", false},
	} {
		if got, add := SysmonEnv(c.in); got != c.want || add != c.add {
			t.Errorf("SysmonEnv(%q) = %q %v, want %q %v", c.in, got, add, c.want, c.add)
		}
	}
}
