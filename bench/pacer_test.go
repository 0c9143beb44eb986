package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type countTicker struct {
	mu    sync.Mutex
	ticks []time.Time
	limit int
	done  chan struct{}
}

func (c *countTicker) Tick(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks = append(c.ticks, at)
	if len(c.ticks) == c.limit {
		close(c.done)
		return false
	}
	return true
}

func TestPacerTicksEveryPeriod(t *testing.T) {
	p := NewPacer(context.Background(), 3, 10*time.Millisecond)
	defer p.Close()
	var cs []*countTicker
	for i := 0; i < 6; i++ {
		c := &countTicker{limit: 20, done: make(chan struct{})}
		cs = append(cs, c)
		p.Add(c)
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatal("a member did not get 20 ticks in 10 s")
		}
	}
	for _, c := range cs {
		c.mu.Lock()
		span := c.ticks[len(c.ticks)-1].Sub(c.ticks[0])
		c.mu.Unlock()
		// 19 periods of 10 ms; generous bounds for a loaded CI machine.
		if span < 150*time.Millisecond || span > 400*time.Millisecond {
			t.Errorf("19 periods took %v", span)
		}
	}
	// Finished members are removed.
	deadline := time.Now().Add(5 * time.Second)
	for p.Members() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d members left", p.Members())
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := p.Stats()
	if st.Ticks < 20 || st.P50 <= 0 || st.P99 < st.P50 || st.Max < st.P50-0.1 {
		t.Errorf("stats %+v", st)
	}
	p.Reset()
	if p.Stats().Ticks != 0 {
		t.Error("Reset kept ticks")
	}
	p.Close()
	p.Close()
}

type slowTicker struct{ n atomic.Int32 }

func (s *slowTicker) Tick(time.Time) bool {
	if s.n.Add(1) == 1 {
		time.Sleep(150 * time.Millisecond) // a stalled generator, on purpose
	}
	return s.n.Load() < 5
}

func TestPacerCountsLagAndSkips(t *testing.T) {
	p := NewPacer(context.Background(), 1, 10*time.Millisecond)
	defer p.Close()
	s := &slowTicker{}
	p.Add(s)
	deadline := time.Now().Add(5 * time.Second)
	for s.n.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatal("ticks stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := p.Stats()
	if st.Skipped == 0 {
		t.Errorf("a 150 ms stall of a 10 ms clock skipped nothing: %+v", st)
	}
}
