// Package procs fits the Go scheduler to a media node's load (issue 20).
//
// A media node at low load works in short bursts: every 20 ms a few packets come in and a few
// frames go out, each passing through several goroutines (Pion hands an incoming packet from
// goroutine to goroutine four times). On a machine whose cores are otherwise idle, each hand-off
// made while another processor (P) is idle wakes an OS thread on another core to look for work,
// which finds none and sleeps again; and each system or cgo call made while the runtime's monitor
// thread (sysmon) is in its deep sleep wakes it, resetting its poll interval to 20 µs for the
// next millisecond. At 5 web calls that was about 1,400 context switches per second and 40 % of
// the process's CPU (perf: finish_task_switch, sysmon's nanosleep, futex and epoll waits).
//
// Two measures, both on by default in `parley serve` (PARLEY_LOW_LOAD_TUNING):
//   - [Adapter] runs the scheduler on one P while the process uses little CPU, and on every P
//     again as soon as it uses more (hysteresis: below Low cores for DownAfter windows in a row
//     to go down, above High in one window to go up).
//   - [SysmonEnv] names the GODEBUG setting that keeps sysmon out of its deep sleep; the runtime
//     reads GODEBUG only at start, so `parley serve` starts itself again with it (cmd/parley).
package procs

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
)

// Options tune an [Adapter]. The zero value of each field takes its default.
type Options struct {
	Max       int           // processors at load; default: runtime.GOMAXPROCS(0) when the adapter is made
	Interval  time.Duration // how often the process's CPU use is sampled; default 250 ms
	Low       float64       // cores: below this for DownAfter windows in a row, go to one P; default 0.25
	High      float64       // cores: above this in one window, go back to Max; default 0.5
	DownAfter int           // default 8 (2 s at the default interval)

	// CPU returns the process's CPU time so far (user + system); default getrusage(RUSAGE_SELF).
	// A negative answer (no such measure on this system) keeps the adapter at Max.
	CPU func() time.Duration
	// Set changes the number of processors; default runtime.GOMAXPROCS, and
	// runtime.SetDefaultGOMAXPROCS when going back to a Max that was the runtime's own default
	// (so that it keeps following the container's CPU limit).
	Set func(n int)
}

// Adapter decides the number of processors from the CPU the process used in each window.
type Adapter struct {
	o       Options
	procs   int
	quiet   int
	lastCPU time.Duration
	lastAt  time.Time
	started bool
}

// changes counts the adapter's changes of GOMAXPROCS in this process, for /metrics.
var changes atomic.Int64

// Changes is how many times an adapter changed GOMAXPROCS in this process.
func Changes() int64 { return changes.Load() }

// New returns an adapter at Max processors.
func New(o Options) *Adapter {
	if o.Max <= 0 {
		o.Max = runtime.GOMAXPROCS(0)
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.Low <= 0 {
		o.Low = 0.25
	}
	if o.High <= 0 {
		o.High = 0.5
	}
	if o.DownAfter <= 0 {
		o.DownAfter = 8
	}
	if o.CPU == nil {
		o.CPU = processCPU
	}
	if o.Set == nil {
		max := o.Max
		def := max == runtime.GOMAXPROCS(0)
		o.Set = func(n int) {
			if n == max && def {
				runtime.SetDefaultGOMAXPROCS()
				return
			}
			runtime.GOMAXPROCS(n)
		}
	}
	return &Adapter{o: o, procs: o.Max}
}

// Procs is the number of processors the adapter last chose.
func (a *Adapter) Procs() int { return a.procs }

// Observe takes the process's CPU time at now and returns the number of processors to run
// with, and whether that changed. The first observation only starts the first window.
func (a *Adapter) Observe(now time.Time, cpu time.Duration) (int, bool) {
	if !a.started {
		a.started, a.lastAt, a.lastCPU = true, now, cpu
		return a.procs, false
	}
	wall := now.Sub(a.lastAt)
	if wall <= 0 {
		return a.procs, false
	}
	used := float64(cpu-a.lastCPU) / float64(wall)
	a.lastAt, a.lastCPU = now, cpu
	switch {
	case a.procs > 1 && used < a.o.Low:
		a.quiet++
		if a.quiet >= a.o.DownAfter {
			a.procs, a.quiet = 1, 0
			return 1, true
		}
	case a.procs == 1 && used > a.o.High:
		a.procs, a.quiet = a.o.Max, 0
		return a.procs, true
	default:
		a.quiet = 0
	}
	return a.procs, false
}

// Run samples the process every Interval until ctx ends, applying each change; at the end it
// gives the process its Max processors back.
func (a *Adapter) Run(ctx context.Context) {
	cpu := a.o.CPU()
	if a.o.Max <= 1 || cpu < 0 {
		return // one processor, or no CPU time on this system: stay at Max
	}
	t := time.NewTicker(a.o.Interval)
	defer t.Stop()
	defer func() {
		if a.procs != a.o.Max {
			a.procs = a.o.Max
			a.o.Set(a.o.Max)
			changes.Add(1)
		}
	}()
	a.Observe(time.Now(), cpu)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n, changed := a.Observe(now, a.o.CPU()); changed {
				a.o.Set(n)
				changes.Add(1)
			}
		}
	}
}

// SysmonSetting is the GODEBUG setting that keeps the runtime's monitor thread out of its deep
// sleep. The runtime lets only a scheduler trace keep sysmon awake, so the trace's period is
// the largest the runtime takes (2^31-1 ms, 24.8 days): sysmon then sleeps at most 10 ms at a
// time instead of waking at 20 µs intervals after every burst, and prints one scheduler line
// (to stderr) per 24.8 days of the machine's uptime. A fatal panic also prints the scheduler's
// state before the goroutines' stacks.
const SysmonSetting = "schedtrace=2147483647"

// SysmonEnv returns GODEBUG's value with SysmonSetting added, and false when godebug already
// sets a scheduler trace (the operator's choice wins).
func SysmonEnv(godebug string) (string, bool) {
	for kv := range strings.SplitSeq(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(kv), "schedtrace=") {
			return godebug, false
		}
	}
	if godebug == "" {
		return SysmonSetting, true
	}
	return godebug + "," + SysmonSetting, true
}
