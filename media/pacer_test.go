package media

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/mediatest"
)

// pacerRig runs a Pacer on a manual clock and records what the sink receives.
type pacerRig struct {
	t      *testing.T
	clk    *mediatest.Clock
	p      *Pacer
	start  time.Time
	mu     sync.Mutex
	sends  []time.Duration // clock time of each send, relative to start
	first  []int16         // first sample of each frame sent
	levels []float64       // RMS dBFS of each frame
	cancel context.CancelFunc
	done   chan error
}

func newPacerRig(t *testing.T, o PacerOptions) *pacerRig {
	t.Helper()
	r := &pacerRig{t: t, start: time.Unix(1_000_000, 0)}
	r.clk = mediatest.NewClock(r.start)
	o.Now = r.clk.Now
	o.NewTimer = func(d time.Duration) PacerTimer { return r.clk.NewTimer(d) }
	o.Sink = func(f *Frame) {
		if f.N != SamplesPerFrame(f.Rate) {
			t.Errorf("sink got a frame of %d samples at %d Hz", f.N, f.Rate)
		}
		r.mu.Lock()
		r.sends = append(r.sends, r.clk.Now().Sub(r.start))
		r.first = append(r.first, f.Samples[0])
		r.levels = append(r.levels, mediatest.LevelDBFS(f.PCM()))
		r.mu.Unlock()
	}
	p, err := NewPacer(o)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(r.stop)
	r.waitFor(func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.running })
	return r
}

func (r *pacerRig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		r.t.Error("Run did not return after cancel")
	}
}

// advance moves the clock and waits until the pacer has handled the timer it fired (if any).
func (r *pacerRig) advance(d time.Duration) {
	r.t.Helper()
	r.waitArmedIfActive()
	before := r.p.Stats().Ticks
	armed := r.clk.Armed() > 0
	r.clk.Advance(d)
	if armed {
		r.waitFor(func() bool {
			// The timer fired if its deadline passed; then a tick must follow.
			return r.p.Stats().Ticks > before || r.clk.Armed() > 0
		})
	}
}

// waitArmedIfActive waits until Run has armed its timer for an active schedule.
func (r *pacerRig) waitArmedIfActive() {
	r.t.Helper()
	r.waitFor(func() bool {
		r.p.mu.Lock()
		active := r.p.active
		r.p.mu.Unlock()
		return !active || r.clk.Armed() > 0
	})
}

func (r *pacerRig) waitFor(cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatal("timed out waiting for the pacer")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (r *pacerRig) sent() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.sends...)
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// numbered returns a 16 kHz frame whose samples all equal v.
func numbered(v int16) *Frame {
	f := &Frame{}
	f.Init(16000)
	for i := range f.N {
		f.Samples[i] = v
	}
	return f
}

func TestPacerFirstFrameAtOnceThenEvery20ms(t *testing.T) {
	r := newPacerRig(t, PacerOptions{})
	r.advance(7 * time.Millisecond) // idle: nothing happens
	for i := range 5 {
		if !r.p.Enqueue(numbered(int16(i + 1))) {
			t.Fatal("enqueue refused")
		}
		if i == 0 {
			// Sent inside Enqueue, before it returned.
			if got := r.sent(); !equalDurations(got, ms(7)) {
				t.Fatalf("first frame sent at %v, want at once (7 ms)", got)
			}
		}
	}
	for range 6 {
		r.advance(20 * time.Millisecond)
	}
	if got := r.sent(); !equalDurations(got, ms(7, 27, 47, 67, 87)) {
		t.Fatalf("sent at %v", got)
	}
	r.mu.Lock()
	for i, v := range r.first {
		if v != int16(i+1) {
			t.Errorf("frame %d carries %d: out of order", i, v)
		}
	}
	r.mu.Unlock()
	st := r.p.Stats()
	if st.Sent != 5 || st.Played != 100*time.Millisecond || st.Queued != 0 || st.Comfort != 0 {
		t.Errorf("stats %+v", st)
	}
	// Idle again: the next audio goes out at once, not on a 20 ms boundary of the old schedule.
	r.advance(13 * time.Millisecond)
	r.p.Enqueue(numbered(9))
	if got := r.sent(); got[len(got)-1] != 140*time.Millisecond {
		t.Fatalf("after idle, sent at %v, want 140 ms", got[len(got)-1])
	}
}

// Late timers do not accumulate drift: the schedule stays anchored at start + n×20 ms.
func TestPacerAnchoredScheduleAndCatchUp(t *testing.T) {
	r := newPacerRig(t, PacerOptions{})
	for i := range 8 {
		r.p.Enqueue(numbered(int16(i)))
	}
	r.advance(25 * time.Millisecond) // frame 1 due at 20, the timer is 5 ms late
	r.advance(15 * time.Millisecond) // frame 2 due at 40: on time, not at 45
	r.advance(30 * time.Millisecond) // 70: frame 3 (due 60) late by 10
	r.advance(30 * time.Millisecond) // 100: frames 4 (80) and 5 (100) both due: catch up
	if got := r.sent(); !equalDurations(got, ms(0, 25, 40, 70, 100, 100)) {
		t.Fatalf("sent at %v", got)
	}
	// Fall 200 ms behind (a stalled process): one frame now and a new schedule, no burst.
	r.advance(200 * time.Millisecond)
	r.advance(20 * time.Millisecond)
	if got := r.sent(); !equalDurations(got, ms(0, 25, 40, 70, 100, 100, 300, 320)) {
		t.Fatalf("sent at %v", got)
	}
	if st := r.p.Stats(); st.Resyncs != 1 {
		t.Errorf("resyncs %d, want 1", st.Resyncs)
	}
}

func TestPacerBoundedQueueAndFlush(t *testing.T) {
	r := newPacerRig(t, PacerOptions{Queue: 4})
	ring := &r.p.ring[0]
	accepted := 0
	for i := range 10 {
		if r.p.Enqueue(numbered(int16(i))) {
			accepted++
		}
	}
	// The first frame left at once, so 1 + 4 fit.
	if accepted != 5 {
		t.Fatalf("accepted %d frames into a 4-frame queue (plus one sent at once)", accepted)
	}
	if st := r.p.Stats(); st.Rejected != 5 || st.Queued != 4*320 {
		t.Fatalf("stats %+v", st)
	}
	if &r.p.ring[0] != ring || len(r.p.ring) != 4*320 {
		t.Fatal("queue storage changed")
	}
	r.advance(20 * time.Millisecond)
	frames, samples := r.p.Flush()
	if frames != 3 || samples != 3*320 {
		t.Fatalf("Flush dropped %d frames, %d samples; want 3, 960", frames, samples)
	}
	if r.p.Pending() != 0 {
		t.Fatal("queue not empty after Flush")
	}
	for range 3 {
		r.advance(20 * time.Millisecond)
	}
	st := r.p.Stats()
	if st.Sent != 2 || st.Flushed != 3 || st.Played != 40*time.Millisecond {
		t.Fatalf("after flush: %+v", st)
	}
	// Frames at the wrong rate are refused.
	var f8 Frame
	f8.Init(8000)
	if r.p.Enqueue(&f8) {
		t.Fatal("accepted an 8 kHz frame into a 16 kHz pacer")
	}
	// The next utterance starts at once.
	r.p.Enqueue(numbered(42))
	if got := r.sent(); len(got) != 3 || got[2] != 80*time.Millisecond {
		t.Fatalf("after flush, sent at %v", got)
	}
}

func TestPacerWritePCMPartialAndFinish(t *testing.T) {
	r := newPacerRig(t, PacerOptions{Queue: 10})
	pcm := make([]int16, 500)
	for i := range pcm {
		pcm[i] = int16(i + 1)
	}
	if n := r.p.WritePCM(pcm); n != 500 {
		t.Fatalf("took %d", n)
	}
	if got := r.sent(); len(got) != 1 {
		t.Fatalf("one whole frame should go at once, sent %v", got)
	}
	r.advance(20 * time.Millisecond) // 180 samples: not a whole frame, not finished: idle
	if got := r.sent(); len(got) != 1 {
		t.Fatalf("a partial frame was sent before Finish: %v", got)
	}
	r.advance(5 * time.Millisecond)
	r.p.WritePCM(pcm[:200]) // 380: a whole frame, sent at once
	r.advance(3 * time.Millisecond)
	r.p.Finish() // 60 left: padded, and sent on the schedule (45 ms) since audio is playing
	r.advance(17 * time.Millisecond)
	r.advance(20 * time.Millisecond)
	got := r.sent()
	if !equalDurations(got, ms(0, 25, 45)) {
		t.Fatalf("sent at %v", got)
	}
	r.mu.Lock()
	if r.first[1] != 321 || r.first[2] != 141 {
		t.Errorf("frames start with %v", r.first)
	}
	r.mu.Unlock()
	if p := r.p.Played(); p != 700*time.Second/16000 {
		t.Errorf("played %v, want 43.75 ms (700 samples, padding excluded)", p)
	}
	big := make([]int16, 5000)
	if n := r.p.WritePCM(big); n != 3200 {
		t.Errorf("WritePCM into an empty 10-frame queue took %d, want 3200", n)
	}
}

func TestPacerComfortNoise(t *testing.T) {
	r := newPacerRig(t, PacerOptions{ComfortNoise: true, ComfortNoiseDBFS: -60})
	r.advance(0)
	r.advance(20 * time.Millisecond)
	r.advance(20 * time.Millisecond)
	r.advance(7 * time.Millisecond)
	r.p.Enqueue(numbered(1000))
	r.advance(20 * time.Millisecond)
	got := r.sent()
	// Noise at 0, 20, 40; audio at 47 at once (not at 60); then noise again on the new schedule.
	if !equalDurations(got, ms(0, 20, 40, 47, 67)) {
		t.Fatalf("sent at %v", got)
	}
	r.mu.Lock()
	for _, i := range []int{0, 1, 2, 4} {
		// +3 dB: the AES17 convention reads a full-scale sine as 0 dBFS.
		if l := r.levels[i] - 3.01; math.Abs(l+60) > 1.5 {
			t.Errorf("comfort noise frame %d at %.1f dBFS, want -60", i, l)
		}
	}
	r.mu.Unlock()
	st := r.p.Stats()
	if st.Comfort != 4 || st.Sent != 1 || st.Played != 20*time.Millisecond {
		t.Errorf("stats %+v", st)
	}
}

func TestPacerRunOnceAndOptions(t *testing.T) {
	r := newPacerRig(t, PacerOptions{})
	if err := r.p.Run(context.Background()); !errors.Is(err, ErrPacerRunning) {
		t.Errorf("second Run: %v", err)
	}
	for name, o := range map[string]PacerOptions{
		"no sink":    {},
		"bad rate":   {Sink: func(*Frame) {}, Rate: 11025},
		"huge queue": {Sink: func(*Frame) {}, Queue: 1 << 20},
		"loud noise": {Sink: func(*Frame) {}, ComfortNoiseDBFS: 3},
		"negative":   {Sink: func(*Frame) {}, MaxLag: -1},
	} {
		if _, err := NewPacer(o); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// With the real clock: frames leave about 20 ms apart and Run stops on cancel.
func TestPacerRealClock(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	p, err := NewPacer(PacerOptions{Sink: func(*Frame) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i := range 6 {
		p.Enqueue(numbered(int16(i)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Sent < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("sent %d of 6", p.Stats().Sent)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	total := at[5].Sub(at[0])
	// Five intervals of 20 ms; allow for a loaded machine but not for a lost schedule.
	if total < 95*time.Millisecond || total > time.Second {
		t.Errorf("6 frames took %v, want about 100 ms", total)
	}
}

func BenchmarkPacerEnqueueTick(b *testing.B) {
	t0 := time.Unix(0, 0)
	now := t0
	p, err := NewPacer(PacerOptions{
		Sink:     func(*Frame) {},
		Now:      func() time.Time { return now },
		NewTimer: func(time.Duration) PacerTimer { return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	f := numbered(7)
	p.Enqueue(f) // starts the schedule
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if !p.Enqueue(f) {
			b.Fatal("queue full")
		}
		now = now.Add(FrameDuration)
		p.tick()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
}
