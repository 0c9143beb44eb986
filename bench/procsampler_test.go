package bench

import (
	"context"
	"math"
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

// The mid-call split: CPU between the first and last samples inside a window, and the step's
// CPU divided into the steady state and setup plus teardown per call.
func TestMidCallSplit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewProcSampler(time.Second, nil)
	// 1 s of CPU a second before t0+3s (setup), then 0.1 s a second (the calls), then 1 s
	// more at the end (teardown).
	cpu := time.Duration(0)
	for i := 0; i <= 20; i++ {
		switch {
		case i <= 3 && i > 0, i > 17:
			cpu += time.Second
		case i > 3:
			cpu += 100 * time.Millisecond
		}
		s.samples["parley"] = append(s.samples["parley"], ProcStat{PID: 7, At: t0.Add(time.Duration(i) * time.Second), CPU: cpu})
	}
	if _, _, ok := s.CPUBetween("parley", t0.Add(30*time.Second), t0.Add(40*time.Second)); ok {
		t.Fatal("a window with no samples gave a figure")
	}
	got, span, ok := s.CPUBetween("parley", t0.Add(4*time.Second+time.Millisecond), t0.Add(17*time.Second))
	if !ok || span != 12*time.Second || got != 1200*time.Millisecond {
		t.Fatalf("CPUBetween = %v over %v, %v", got, span, ok)
	}
	r := &Runner{sampler: s}
	calls := []CallResult{
		{Answered: t0.Add(2 * time.Second), Ended: t0.Add(18 * time.Second)},
		{Answered: t0.Add(3 * time.Second), Ended: t0.Add(17 * time.Second)},
	}
	res := StepResult{ParleyCPU: cpu.Seconds(), CallSeconds: 16 + 14}
	r.midCall(&res, calls)
	// Window: 4 s (a second after the last answer) to 17 s (the first hang-up): 1.3 s of CPU
	// over 13 s for 2 calls, 0.05 cores per call.
	if res.MidCallSeconds != 13 || math.Abs(res.MidCallCoresPerCall-0.05) > 1e-9 {
		t.Fatalf("mid-call %v cores per call over %v s", res.MidCallCoresPerCall, res.MidCallSeconds)
	}
	// The step's 7.4 s less 0.05 × 30 call-seconds, per call: 2.95 s.
	if want := (cpu.Seconds() - 0.05*30) * 1000 / 2; math.Abs(res.SetupTeardownCPUms-want) > 1e-6 {
		t.Fatalf("setup and teardown %v ms per call, want %v", res.SetupTeardownCPUms, want)
	}
	// A call that never came up leaves no window.
	res = StepResult{ParleyCPU: 1, CallSeconds: 10}
	r.midCall(&res, append(calls, CallResult{}))
	if res.MidCallSeconds != 0 || res.SetupTeardownCPUms != 0 {
		t.Fatalf("a failed call still gave a window: %+v", res)
	}
}
