package stt_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/stt"
)

// segment is a stretch of generated test audio: a tone burst ("speech") or near silence.
type segment struct {
	dur    time.Duration
	speech bool
}

// burst generates 20 ms frames: speech is a 440 Hz + 1320 Hz tone with a little noise at
// about -12 dBFS, silence is noise at about -66 dBFS.
type burst struct {
	rate int
	n    int64
	rng  *rand.Rand
}

func newBurst(rate int) *burst { return &burst{rate: rate, rng: rand.New(rand.NewPCG(1, 2))} }

func (b *burst) frame(speech bool) []int16 {
	out := make([]int16, b.rate/50)
	for i := range out {
		t := float64(b.n) / float64(b.rate)
		b.n++
		noise := (b.rng.Float64()*2 - 1) * 0.0005
		v := noise
		if speech {
			v = 0.2*math.Sin(2*math.Pi*440*t) + 0.08*math.Sin(2*math.Pi*1320*t) + noise*10
		}
		out[i] = int16(v * 32767)
	}
	return out
}

// fed records when each 20 ms frame was written.
type fed struct {
	times     []time.Time
	speechEnd time.Duration // audio offset where the last speech ended
}

// wrote returns the wall time at which the frame holding audio offset d was written.
func (f fed) wrote(d time.Duration) time.Time {
	i := min(int(d/(20*time.Millisecond)), len(f.times)-1)
	return f.times[i]
}

// feed writes segments to s. With realTime it paces frames at 20 ms; otherwise it writes as
// fast as possible.
func feed(t testing.TB, s stt.Stream, rate int, realTime bool, segs ...segment) fed {
	t.Helper()
	b := newBurst(rate)
	var tick *time.Ticker
	if realTime {
		tick = time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	}
	var f fed
	var at time.Duration
	for _, sg := range segs {
		for range int(sg.dur / (20 * time.Millisecond)) {
			if tick != nil {
				<-tick.C
			}
			f.times = append(f.times, time.Now())
			if err := s.Write(b.frame(sg.speech), sg.speech); err != nil {
				t.Fatalf("Write: %v", err)
			}
			at += 20 * time.Millisecond
			if sg.speech {
				f.speechEnd = at
			}
		}
	}
	return f
}

// checkEndpointing asserts the end-of-speech latency of a recogniser fed in real time: the
// EndOfSpeech event comes endpointing + latency after the end of speech. It is measured in
// two parts so that a starved feeder (busy CI) does not count against the recogniser: from
// the end of speech to the frame that completes the endpointing silence is audio time; from
// that frame's write to the event must be the provider's latency.
func checkEndpointing(t testing.TB, f fed, eos stt.Event, endpointing, latency time.Duration) {
	t.Helper()
	if total := eos.At.Sub(f.wrote(f.speechEnd)); total < endpointing+latency-30*time.Millisecond {
		t.Errorf("EndOfSpeech %v after the end of speech: earlier than endpointing %v + latency %v", total, endpointing, latency)
	}
	decided := f.wrote(f.speechEnd + endpointing - 20*time.Millisecond)
	within(t, "end of endpointing silence → EndOfSpeech", eos.At.Sub(decided), latency, 15*time.Millisecond, loadSlack)
}

// collector drains a stream's events.
type collector struct {
	mu   sync.Mutex
	evs  []stt.Event
	done chan struct{}
}

func collect(s stt.Stream) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for e := range s.Events() {
			c.mu.Lock()
			c.evs = append(c.evs, e)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) events() []stt.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]stt.Event(nil), c.evs...)
}

// waitKind polls until an event of kind k (the n-th, 1-based) arrived, or fails at the
// deadline.
func (c *collector) waitKind(t testing.TB, k stt.EventKind, n int, timeout time.Duration) stt.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		seen := 0
		for _, e := range c.events() {
			if e.Kind == k {
				seen++
				if seen == n {
					return e
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v #%d within %v; events: %s", k, n, timeout, dump(c.events()))
		}
		time.Sleep(2 * time.Millisecond) // polling interval, bounded by the deadline above
	}
}

// waitClosed waits for the Events channel to close.
func (c *collector) waitClosed(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("Events not closed within %v", timeout)
	}
}

func (c *collector) count(k stt.EventKind) int {
	n := 0
	for _, e := range c.events() {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func dump(evs []stt.Event) string {
	s := ""
	for _, e := range evs {
		s += "\n  " + e.Kind.String() + " " + e.Text + " [" + e.Start.String() + "," + e.End.String() + "]"
		if e.Err != nil {
			s += " err=" + e.Err.Error()
		}
	}
	return s
}

// within fails unless got is in [want-lo, want+hi].
func within(t testing.TB, what string, got, want, lo, hi time.Duration) {
	t.Helper()
	if got < want-lo || got > want+hi {
		t.Errorf("%s = %v, want %v (-%v/+%v)", what, got, want, lo, hi)
	}
}

// pollUntil polls cond every 2 ms until it holds or the deadline passes.
func pollUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, bounded by the deadline above
	}
}

// loadSlack is the upper tolerance on wall-clock latencies: the lower bounds are tight (no
// event may come before the configured latency), but a loaded CI machine may be late.
const loadSlack = 300 * time.Millisecond
