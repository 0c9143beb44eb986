package media

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// manualTickers is a ClockOptions.NewTicker whose tickers fire when the test says.
type manualTickers struct {
	mu  sync.Mutex
	all []*manualTicker
}

type manualTicker struct {
	ch      chan time.Time
	stopped atomic.Bool
}

func (m *manualTickers) new(time.Duration) ClockSource {
	t := &manualTicker{ch: make(chan time.Time)}
	m.mu.Lock()
	m.all = append(m.all, t)
	m.mu.Unlock()
	return t
}

func (t *manualTicker) C() <-chan time.Time { return t.ch }
func (t *manualTicker) Stop()               { t.stopped.Store(true) }

// fire waits until n tickers are live (the shards' goroutines start on their own), makes each
// tick once and waits until each tick was taken.
func (m *manualTickers) fire(t *testing.T, n int) {
	t.Helper()
	var live []*manualTicker
	waitUntil(t, "the shards' tickers", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		live = live[:0]
		for _, tk := range m.all {
			if !tk.stopped.Load() {
				live = append(live, tk)
			}
		}
		return len(live) == n
	})
	for _, tk := range live {
		select {
		case tk.ch <- time.Time{}:
		case <-time.After(5 * time.Second):
			t.Fatal("a shard did not take its tick")
		}
	}
}

type countTicker struct{ n atomic.Int64 }

func (c *countTicker) Tick(time.Time) { c.n.Add(1) }

// The clock ticks what is registered, spreads it over its shards, and its goroutines end when
// nothing is left to tick.
func TestClockTicksRegistered(t *testing.T) {
	var m manualTickers
	now := time.Unix(1000, 0)
	c := NewClock(ClockOptions{Shards: 2, NewTicker: m.new, Now: func() time.Time { return now }})
	if c.Running() != 0 {
		t.Fatal("a goroutine before any ticker")
	}
	var a, b, d countTicker
	ra, rb := c.Add(&a), c.Add(&b)
	if c.Running() != 2 || c.Len() != 2 {
		t.Fatalf("%d shards running for %d tickers, want 2 and 2", c.Running(), c.Len())
	}
	m.fire(t, 2)
	waitUntil(t, "one tick each", func() bool { return a.n.Load() == 1 && b.n.Load() == 1 })
	rd := c.Add(&d) // third: shares a shard
	rb()
	rb()
	m.fire(t, 2)
	waitUntil(t, "second tick", func() bool { return a.n.Load() == 2 && d.n.Load() == 1 })
	if b.n.Load() != 1 {
		t.Fatal("a removed ticker was ticked")
	}
	ra()
	rd()
	// b's shard found itself empty at the second tick and ended; the other ends at this one.
	waitUntil(t, "the empty shard to end", func() bool { return c.Running() == 1 })
	m.fire(t, 1)
	waitUntil(t, "the shards to end", func() bool { return c.Running() == 0 })
	m.mu.Lock()
	for i, tk := range m.all {
		if !tk.stopped.Load() {
			t.Errorf("ticker %d not stopped", i)
		}
	}
	m.mu.Unlock()
	// A new ticker starts a shard again.
	var e countTicker
	defer c.Add(&e)()
	if c.Running() != 1 {
		t.Fatalf("%d shards running", c.Running())
	}
	m.fire(t, 1)
	waitUntil(t, "a tick after the restart", func() bool { return e.n.Load() == 1 })
}

// A pacer on a shared clock: the first frame of a stretch goes out at once; the next ones at
// the clock's ticks, when due; a tick with nothing due sends nothing.
func TestClockDrivesPacer(t *testing.T) {
	var m manualTickers
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(d time.Duration) { mu.Lock(); now = time.Unix(1000, 0).Add(d); mu.Unlock() }
	c := NewClock(ClockOptions{Shards: 1, NewTicker: m.new, Now: clock})
	var sent atomic.Int64
	p, err := NewPacer(PacerOptions{Sink: func(*Frame) { sent.Add(1) }, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Add(p)()
	var f Frame
	f.Init(PipelineRate)
	for i := range f.Samples[:f.N] {
		f.Samples[i] = 1000
	}
	for range 3 {
		if !p.Enqueue(&f) {
			t.Fatal("refused")
		}
	}
	if sent.Load() != 1 {
		t.Fatalf("%d frames at once, want 1", sent.Load())
	}
	for _, step := range []struct {
		at   time.Duration
		want int64
	}{
		{5 * time.Millisecond, 1},  // the clock's phase: not due yet
		{25 * time.Millisecond, 2}, // frame 2 was due at 20 ms
		{45 * time.Millisecond, 3},
		{65 * time.Millisecond, 3}, // dry: the pacer goes idle
	} {
		set(step.at)
		m.fire(t, 1)
		m.fire(t, 1) // the second fire returns once the first tick's work is done
		if got := sent.Load(); got != step.want {
			t.Fatalf("at %v: %d frames sent, want %d", step.at, got, step.want)
		}
	}
	if st := p.Stats(); st.Sent != 3 || st.Resyncs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The process's shared clock holds no goroutine once its streams are gone (real time).
func TestSharedClockIdleHoldsNothing(t *testing.T) {
	c := SharedClock()
	if c != SharedClock() {
		t.Fatal("two shared clocks")
	}
	var x countTicker
	remove := c.Add(&x)
	waitUntil(t, "a real tick", func() bool { return x.n.Load() >= 1 })
	remove()
	waitUntil(t, "the shared clock's goroutines to end", func() bool { return c.Running() == 0 })
}

// BenchmarkClockTick is one tick of a shard over 200 pacers, 100 of them playing (each sends a
// frame to a sink that drops it): the clock's own cost per call per 20 ms is ns/op / 200.
func BenchmarkClockTick(b *testing.B) {
	var m manualTickers
	c := NewClock(ClockOptions{Shards: 1, NewTicker: m.new})
	sh := c.shards[0]
	start := time.Now()
	var f Frame
	f.Init(PipelineRate)
	for i := range 200 {
		p, err := NewPacer(PacerOptions{Sink: func(*Frame) {}, Queue: 3000})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Add(p)()
		if i%2 == 0 {
			for range 3000 {
				p.Enqueue(&f)
			}
		}
	}
	b.ReportAllocs()
	at := start
	for i := 0; b.Loop(); i++ {
		at = at.Add(FrameDuration)
		sh.tick(at)
		if i%2900 == 2899 {
			b.StopTimer()
			for _, t := range sh.subs {
				p := t.(*Pacer)
				for p.Pending() < 50*time.Second {
					p.Enqueue(&f)
				}
			}
			b.StartTimer()
		}
	}
}

// BenchmarkPacing200 plays 200 streams of 20 ms frames in real time for one second per op, each
// frame going to a sink that does a G.711-sized piece of work (µ-law encoding of 160 samples),
// paced either by a goroutine and a timer per stream (Pacer.Run, as calls were paced before) or
// by one shared Clock. cores/stream is the process's CPU time (user and system) per stream per
// second; ctxsw/s/stream the context switches. The streams are all playing: it is the cost of
// pacing while agents talk.
func BenchmarkPacing200(b *testing.B) {
	const streams = 200
	for _, mode := range []string{"goroutine-per-stream", "shared-clock"} {
		b.Run(mode, func(b *testing.B) {
			var sink atomic.Uint64
			var f Frame
			f.Init(8000)
			for i := range f.Samples[:f.N] {
				f.Samples[i] = int16(i * 97)
			}
			work := func(fr *Frame) {
				var x uint64
				for _, v := range fr.PCM() {
					x += uint64(linearToMulawForBench(v))
				}
				sink.Add(x)
			}
			clock := NewClock(ClockOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var pacers []*Pacer
			for range streams {
				p, err := NewPacer(PacerOptions{Sink: work, Rate: 8000, Queue: 3000})
				if err != nil {
					b.Fatal(err)
				}
				pacers = append(pacers, p)
				if mode == "shared-clock" {
					defer clock.Add(p)()
				} else {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_ = p.Run(ctx)
					}()
				}
			}
			defer func() { cancel(); wg.Wait() }()
			fill := func() {
				for _, p := range pacers {
					for p.Pending() < 30*time.Second {
						p.Enqueue(&f)
					}
				}
			}
			fill()
			sentAll := func() (n uint64) {
				for _, p := range pacers {
					n += p.Stats().Sent
				}
				return n
			}
			var cpu time.Duration
			var ctxsw int64
			var window time.Duration
			var sent uint64
			for b.Loop() {
				fill()
				s0 := sentAll()
				var r0, r1 syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
				t0 := time.Now()
				time.Sleep(time.Second) // measuring a fixed window of real-time pacing
				window += time.Since(t0)
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
				cpu += time.Duration(r1.Utime.Nano() - r0.Utime.Nano() + r1.Stime.Nano() - r0.Stime.Nano())
				ctxsw += r1.Nvcsw - r0.Nvcsw + r1.Nivcsw - r0.Nivcsw
				sent += sentAll() - s0
			}
			perStream := window.Seconds() * streams
			b.ReportMetric(cpu.Seconds()/perStream, "cores/stream")
			b.ReportMetric(float64(ctxsw)/perStream, "ctxsw/s/stream")
			b.ReportMetric(float64(sent)/perStream, "frames/s/stream")
		})
	}
}

// linearToMulawForBench is a µ-law encoder (G.711 §2) for BenchmarkPacing200's sink work
// (media must not import codec's tests; the work only has to be of the right size).
func linearToMulawForBench(s int16) byte {
	v := int(s)
	sign := 0
	if v < 0 {
		v, sign = -v, 0x80
	}
	v = min(v, 32635) + 0x84
	exp := 7
	for mask := 0x4000; v&mask == 0 && exp > 0; mask >>= 1 {
		exp--
	}
	return ^byte(sign | exp<<4 | (v>>(exp+3))&0x0F)
}

// A StepSchedule gives one step per 20 ms of the clock's time: none early, several after a
// late wake-up (at most CatchUpSteps), and one after a stall, from which it starts again.
func TestStepSchedule(t *testing.T) {
	var s StepSchedule
	t0 := time.Unix(50, 0)
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{0, 1}, {10 * time.Millisecond, 0}, {20 * time.Millisecond, 1},
		{95 * time.Millisecond, 3},                // woke late: the steps of 40, 60 and 80 ms
		{100 * time.Millisecond, 1},               // 100 ms
		{200 * time.Millisecond, CatchUpSteps},    // 120 … 200 ms
		{10 * time.Second, 1},                     // a stall: one step, the schedule restarts
		{10*time.Second + 19*time.Millisecond, 0}, // …from 10 s
		{10*time.Second + 20*time.Millisecond, 1},
	} {
		if got := s.Due(t0.Add(tc.at)); got != tc.want {
			t.Errorf("at %v: %d steps due, want %d", tc.at, got, tc.want)
		}
	}
}
