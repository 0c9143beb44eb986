package bench

import (
	"context"
	"sync"
	"time"
)

// Ticker is a member of a Pacer: Tick runs once per frame period with the tick's time, on the
// pacer's goroutine; it must not block. Returning false removes the member.
type Ticker interface {
	Tick(at time.Time) bool
}

// lagBuckets is the lag histogram's resolution: 0.1 ms buckets up to 200 ms, then overflow.
const lagBuckets = 2000

// Pacer is the load generator's media clock: a few goroutines ("shards", with phases spread
// over the frame period) each wake every frame period on an absolute schedule and tick their
// members in turn. One clock for many calls costs far less than a timer per call, and its lag
// (how late each wake-up was) shows whether the generator keeps up: a saturated generator
// makes its own measurements wrong.
//
// A shard that falls more than five periods behind skips ahead and counts the skipped ticks.
type Pacer struct {
	period time.Duration
	shards []*pacerShard
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu   sync.Mutex
	next int
}

type pacerShard struct {
	mu      sync.Mutex
	members []Ticker
	adds    []Ticker
	hist    [lagBuckets + 1]uint32
	n       uint64
	max     time.Duration
	skipped uint64
}

// NewPacer starts shards (at least 1) clocks of period (default 20 ms).
func NewPacer(ctx context.Context, shards int, period time.Duration) *Pacer {
	if shards < 1 {
		shards = 1
	}
	if period <= 0 {
		period = 20 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Pacer{period: period, cancel: cancel}
	start := time.Now().Add(period)
	for i := 0; i < shards; i++ {
		sh := &pacerShard{}
		p.shards = append(p.shards, sh)
		p.wg.Add(1)
		go p.run(ctx, sh, start.Add(time.Duration(i)*period/time.Duration(shards)))
	}
	return p
}

// Add makes t tick from the next period on, on the next shard in turn.
func (p *Pacer) Add(t Ticker) {
	p.mu.Lock()
	sh := p.shards[p.next%len(p.shards)]
	p.next++
	p.mu.Unlock()
	sh.mu.Lock()
	sh.adds = append(sh.adds, t)
	sh.mu.Unlock()
}

// Close stops every shard and waits for them. Members are dropped without a last tick. It is
// idempotent.
func (p *Pacer) Close() {
	p.once.Do(p.cancel)
	p.wg.Wait()
}

func (p *Pacer) run(ctx context.Context, sh *pacerShard, next time.Time) {
	defer p.wg.Done()
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		sh.mu.Lock()
		sh.record(now.Sub(next))
		sh.members = append(sh.members, sh.adds...)
		sh.adds = sh.adds[:0]
		members := sh.members
		sh.mu.Unlock()
		kept := members[:0]
		for _, m := range members {
			if m.Tick(now) {
				kept = append(kept, m)
			}
		}
		clear(members[len(kept):])
		sh.mu.Lock()
		sh.members = kept
		next = next.Add(p.period)
		if behind := time.Since(next); behind > 5*p.period {
			skip := behind / p.period
			sh.skipped += uint64(skip)
			next = next.Add(skip * p.period)
		}
		sh.mu.Unlock()
		timer.Reset(time.Until(next))
	}
}

func (sh *pacerShard) record(lag time.Duration) {
	if lag < 0 {
		lag = 0
	}
	b := int(lag / (100 * time.Microsecond))
	if b > lagBuckets {
		b = lagBuckets
	}
	sh.hist[b]++
	sh.n++
	if lag > sh.max {
		sh.max = lag
	}
}

// PacerStats describe how late the pacer's ticks were: the generator's own health.
type PacerStats struct {
	Ticks   uint64  `json:"ticks"`
	P50     float64 `json:"lag_p50_ms"`
	P99     float64 `json:"lag_p99_ms"`
	Max     float64 `json:"lag_max_ms"`
	Skipped uint64  `json:"skipped_ticks"`
}

// Stats returns the lag statistics since the last Reset (percentiles to 0.1 ms; a lag over
// 200 ms counts as 200 ms in them, not in Max).
func (p *Pacer) Stats() PacerStats {
	var hist [lagBuckets + 1]uint64
	var st PacerStats
	var maxLag time.Duration
	for _, sh := range p.shards {
		sh.mu.Lock()
		for i, c := range sh.hist {
			hist[i] += uint64(c)
		}
		st.Ticks += sh.n
		st.Skipped += sh.skipped
		maxLag = max(maxLag, sh.max)
		sh.mu.Unlock()
	}
	st.Max = Ms(maxLag)
	q := func(f float64) float64 {
		if st.Ticks == 0 {
			return 0
		}
		rank := uint64(f*float64(st.Ticks-1)) + 1
		var seen uint64
		for i, c := range hist {
			seen += c
			if seen >= rank {
				return float64(i+1) / 10 // the bucket's upper edge
			}
		}
		return float64(lagBuckets) / 10
	}
	st.P50, st.P99 = q(0.5), q(0.99)
	return st
}

// Reset clears the lag statistics (at the start of a load step).
func (p *Pacer) Reset() {
	for _, sh := range p.shards {
		sh.mu.Lock()
		sh.hist = [lagBuckets + 1]uint32{}
		sh.n, sh.max, sh.skipped = 0, 0, 0
		sh.mu.Unlock()
	}
}

// Members returns how many members tick now (pending additions included).
func (p *Pacer) Members() int {
	n := 0
	for _, sh := range p.shards {
		sh.mu.Lock()
		n += len(sh.members) + len(sh.adds)
		sh.mu.Unlock()
	}
	return n
}
