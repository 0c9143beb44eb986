package bench

import (
	"context"
	"sort"
	"sync"
	"time"
)

// maxSamples bounds what a ProcSampler keeps (at 4 samples a second, over an hour).
const maxSamples = 16384

// Snapshot is one reading of every watched process and of the machine.
type Snapshot struct {
	At      time.Time           `json:"at"`
	Procs   map[string]ProcStat `json:"procs"`
	Machine MachineCPU          `json:"machine"`
}

// Usage is what happened between two snapshots.
type Usage struct {
	Wall time.Duration `json:"wall_ns"`
	// CPU and Cores per watched process name: CPU time used, and its average in cores.
	CPU   map[string]time.Duration `json:"cpu_ns"`
	Cores map[string]float64       `json:"cores"`
	// MachineBusy is the fraction of all cores' time that was busy.
	MachineBusy float64 `json:"machine_busy"`
}

// Between returns the usage from a to b. Processes missing from either snapshot are left out.
func Between(a, b Snapshot) Usage {
	u := Usage{Wall: b.At.Sub(a.At), CPU: map[string]time.Duration{}, Cores: map[string]float64{},
		MachineBusy: BusyFraction(a.Machine, b.Machine)}
	for name, pa := range a.Procs {
		pb, ok := b.Procs[name]
		if !ok || pa.PID != pb.PID {
			continue
		}
		u.CPU[name] = pb.CPU - pa.CPU
		u.Cores[name] = Cores(pa, pb)
	}
	return u
}

// ProcSampler reads /proc for a set of named processes at a fixed interval, keeping the
// samples (for peak memory), and takes snapshots on demand (for CPU over a window). It reads
// only /proc and never signals or waits for the processes it watches.
type ProcSampler struct {
	every time.Duration
	pids  map[string]int

	mu      sync.Mutex
	samples map[string][]ProcStat
	errs    map[string]error

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewProcSampler watches pids by name (for example "parley", "fakes", "harness") every every
// (default 250 ms). Start begins the periodic samples; Snapshot works without it.
func NewProcSampler(every time.Duration, pids map[string]int) *ProcSampler {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	cp := make(map[string]int, len(pids))
	for k, v := range pids {
		cp[k] = v
	}
	return &ProcSampler{every: every, pids: cp, samples: map[string][]ProcStat{}, errs: map[string]error{}}
}

// SetPID watches pid under name from now on (a process that was restarted).
func (s *ProcSampler) SetPID(name string, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids[name] = pid
}

func (s *ProcSampler) watched() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := make(map[string]int, len(s.pids))
	for k, v := range s.pids {
		cp[k] = v
	}
	return cp
}

// Start samples until ctx ends or Close is called.
func (s *ProcSampler) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tk := time.NewTicker(s.every)
		defer tk.Stop()
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
}

// Close stops sampling and waits for the sampler's goroutine. It is idempotent.
func (s *ProcSampler) Close() {
	s.once.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
	})
	s.wg.Wait()
}

func (s *ProcSampler) sample() {
	for name, pid := range s.watched() {
		st, err := ReadProcStat(pid)
		s.mu.Lock()
		if err != nil {
			s.errs[name] = err
		} else if len(s.samples[name]) < maxSamples {
			s.samples[name] = append(s.samples[name], st)
		}
		s.mu.Unlock()
	}
}

// Snapshot reads every watched process and the machine now. A process that cannot be read
// (it has exited) is left out, and its error kept for Err.
func (s *ProcSampler) Snapshot() Snapshot {
	snap := Snapshot{Procs: map[string]ProcStat{}}
	for name, pid := range s.watched() {
		st, err := ReadProcStat(pid)
		if err != nil {
			s.mu.Lock()
			s.errs[name] = err
			s.mu.Unlock()
			continue
		}
		snap.Procs[name] = st
	}
	snap.Machine, _ = ReadMachineCPU()
	snap.At = time.Now()
	return snap
}

// PeakRSS returns the largest RSS sampled for name between from and to (0 when none).
func (s *ProcSampler) PeakRSS(name string, from, to time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var peak int64
	for _, st := range s.samples[name] {
		if !st.At.Before(from) && !st.At.After(to) && st.RSS > peak {
			peak = st.RSS
		}
	}
	return peak
}

// CPUBetween returns the CPU time name used between its first sample at or after from and its
// last sample at or before to, and the time between those two samples; false when fewer than
// two samples (of one process) fall in the window.
func (s *ProcSampler) CPUBetween(name string, from, to time.Time) (cpu, span time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first, last *ProcStat
	for i := range s.samples[name] {
		st := &s.samples[name][i]
		if st.At.Before(from) || st.At.After(to) {
			continue
		}
		if first == nil {
			first = st
		}
		last = st
	}
	if first == nil || last == first || first.PID != last.PID {
		return 0, 0, false
	}
	return last.CPU - first.CPU, last.At.Sub(first.At), true
}

// MedianRSS returns the median RSS sampled for name between from and to (0 when none).
func (s *ProcSampler) MedianRSS(name string, from, to time.Time) int64 {
	s.mu.Lock()
	var v []int64
	for _, st := range s.samples[name] {
		if !st.At.Before(from) && !st.At.After(to) {
			v = append(v, st.RSS)
		}
	}
	s.mu.Unlock()
	if len(v) == 0 {
		return 0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}

// Samples returns how many samples were kept for name.
func (s *ProcSampler) Samples(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.samples[name])
}

// Err returns the last error reading name, if any.
func (s *ProcSampler) Err(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs[name]
}
