package mediatest

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Arrivals is a network pattern for playout tests: At[i] is when the i-th 20 ms packet of a
// stream arrives, from the start of the test (negative: lost). The same pattern run through
// every receive path shows whether they conceal alike.
type Arrivals struct {
	Name string
	At   []time.Duration
}

// ArrivalPhases are the phases of the 20 ms clock against the packets' slots that the patterns
// are run at (Baseline sums over them).
var ArrivalPhases = []time.Duration{0, 5 * time.Millisecond, 13 * time.Millisecond, 19 * time.Millisecond}

// ArrivalPatterns returns the jitter and loss patterns of n packets (20 ms each, the first due
// at 100 ms) that the receive paths are compared on: steady, uniform jitter of ±8 and ±20 ms,
// a late packet in every ten, 1 % of packets held up 60 ms, 5 % loss, a lost second, sender
// clocks 0.5 % slow and fast, and ±8 ms jitter read in batches every 20 ms. They are
// deterministic (fixed seeds).
func ArrivalPatterns(n int) []Arrivals {
	const frame = 20 * time.Millisecond
	slot := func(i int) time.Duration { return 100*time.Millisecond + time.Duration(i)*frame }
	make1 := func(name string, seed uint64, at func(rng *rand.Rand, i int) time.Duration) Arrivals {
		rng := rand.New(rand.NewPCG(seed, 7))
		a := Arrivals{Name: name, At: make([]time.Duration, n)}
		for i := range a.At {
			a.At[i] = at(rng, i)
		}
		return a
	}
	uniform := func(rng *rand.Rand, ms float64) time.Duration {
		return time.Duration((rng.Float64()*2 - 1) * ms * float64(time.Millisecond))
	}
	return []Arrivals{
		make1("steady", 1, func(rng *rand.Rand, i int) time.Duration { return slot(i) + uniform(rng, 1) }),
		make1("jitter ±8 ms", 2, func(rng *rand.Rand, i int) time.Duration { return slot(i) + uniform(rng, 8) }),
		make1("jitter ±20 ms", 3, func(rng *rand.Rand, i int) time.Duration { return slot(i) + 20*time.Millisecond + uniform(rng, 20) }),
		make1("bursts", 4, func(rng *rand.Rand, i int) time.Duration {
			if i%10 == 5 {
				return slot(i) + 25*time.Millisecond // late, arrives with the next one
			}
			return slot(i) + uniform(rng, 1)
		}),
		make1("spikes 1% +60 ms", 5, func(rng *rand.Rand, i int) time.Duration {
			if rng.IntN(100) == 0 {
				return slot(i) + 60*time.Millisecond
			}
			return slot(i) + uniform(rng, 2)
		}),
		make1("5% loss", 6, func(rng *rand.Rand, i int) time.Duration {
			if i%20 == 7 {
				return -1
			}
			return slot(i) + uniform(rng, 1)
		}),
		make1("1 s lost", 7, func(rng *rand.Rand, i int) time.Duration {
			if i >= n*3/10 && i < n*3/10+50 {
				return -1
			}
			return slot(i) + uniform(rng, 1)
		}),
		make1("sender clock 0.5% slow", 8, func(_ *rand.Rand, i int) time.Duration { return slot(i) * 1005 / 1000 }),
		make1("sender clock 0.5% fast", 9, func(_ *rand.Rand, i int) time.Duration { return slot(i) * 995 / 1000 }),
		make1("jitter ±8 ms, reads every 20 ms", 10, func(rng *rand.Rand, i int) time.Duration {
			const period, phase = 20 * time.Millisecond, 7 * time.Millisecond
			a := slot(i) + uniform(rng, 8)
			return ((a-phase)/period+1)*period + phase // the next read after arrival
		}),
	}
}

// Drive plays the pattern against a 20 ms clock that ticks at phase, 20+phase, … ms: tick is
// called for each tick up to the last arrival, and arrive for each packet in order of
// arrival (index, time), a tick at the same time as an arrival going first. Lost packets are
// left out.
func (a Arrivals) Drive(phase time.Duration, tick func(at time.Duration), arrive func(i int, at time.Duration)) {
	at := phase
	for _, i := range a.ArrivalOrder() {
		for ; at <= a.At[i]; at += 20 * time.Millisecond {
			tick(at)
		}
		arrive(i, a.At[i])
	}
}

// ArrivalOrder returns the indexes of a's packets in order of arrival, the lost ones left out.
func (a Arrivals) ArrivalOrder() []int {
	var order []int
	for i, t := range a.At {
		if t >= 0 {
			order = append(order, i)
		}
	}
	// Insertion sort keeps equal arrivals in sending order (the patterns are nearly sorted).
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && a.At[order[j]] < a.At[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	return order
}

// Baseline is what a receive path concealed over one of the ArrivalPatterns(1000), summed over
// the clock phases 0, 5, 13 and 19 ms (4,000 frames), before the SIP leg and the browser track
// shared one receive chain (issue 20; measured at commit 9f9d34d): SIP is the leg's eager
// playout, WebRTC the track's arrival-driven schedule over a paced jitter buffer.
type Baseline struct{ SIP, WebRTC uint64 }

// ArrivalBaselines are the Baselines by pattern name. Concealment must not rise above them.
var ArrivalBaselines = map[string]Baseline{
	"steady":                          {SIP: 0, WebRTC: 4},
	"jitter ±8 ms":                    {SIP: 0, WebRTC: 16},
	"jitter ±20 ms":                   {SIP: 4, WebRTC: 158},
	"bursts":                          {SIP: 100, WebRTC: 23},
	"spikes 1% +60 ms":                {SIP: 44, WebRTC: 45},
	"5% loss":                         {SIP: 200, WebRTC: 203},
	"1 s lost":                        {SIP: 124, WebRTC: 34},
	"sender clock 0.5% slow":          {SIP: 0, WebRTC: 4},
	"sender clock 0.5% fast":          {SIP: 0, WebRTC: 4},
	"jitter ±8 ms, reads every 20 ms": {SIP: 0, WebRTC: 12},
}

// Tally sums what a receive path did with one arrival pattern over the clock phases.
type Tally struct{ Concealed, Played, Late uint64 }

// Add counts one run.
func (s *Tally) Add(concealed, played, late uint64) {
	s.Concealed += concealed
	s.Played += played
	s.Late += late
}

// Check logs the tally of pattern and fails t when the concealment rose above before.
func (s Tally) Check(t testing.TB, pattern string, before uint64) {
	t.Helper()
	t.Logf("%-34s concealed %3d in 4,000 frames (before: %3d) played %d late %d", pattern, s.Concealed, before, s.Played, s.Late)
	if s.Concealed > before {
		t.Errorf("%s: %d frames concealed in 4,000, %d before", pattern, s.Concealed, before)
	}
}
