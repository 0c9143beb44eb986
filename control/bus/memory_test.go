package bus

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestMemory(t *testing.T, opts ...MemoryOption) (*Memory, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	m := NewMemory(append([]MemoryOption{WithClock(clk.Now), WithSweepInterval(0)}, opts...)...)
	t.Cleanup(func() { _ = m.Close() })
	return m, clk
}

func TestMemoryTTLWithClock(t *testing.T) {
	ctx := t.Context()
	m, clk := newTestMemory(t)
	if ok, _ := m.SetNX(ctx, "lock", []byte("a"), 10*time.Second); !ok {
		t.Fatal("SetNX refused on an empty bus")
	}
	if err := m.Set(ctx, "sub-ms", []byte("x"), time.Microsecond); err != nil { // rounds up to 1ms, as Redis PX
		t.Fatal(err)
	}
	clk.Advance(999 * time.Microsecond)
	if _, err := m.Get(ctx, "sub-ms"); err != nil {
		t.Errorf("a 1µs ttl (rounded to 1ms) expired after 999µs: %v", err)
	}
	clk.Advance(10*time.Second - 999*time.Microsecond - time.Nanosecond) // 1ns before the ttl
	if _, err := m.Get(ctx, "lock"); err != nil {
		t.Fatalf("key gone 1ns before its ttl: %v", err)
	}
	if ok, _ := m.SetNX(ctx, "lock", []byte("b"), time.Second); ok {
		t.Fatal("SetNX took a live lock")
	}
	if ok, _ := m.Refresh(ctx, "lock", []byte("a"), 5*time.Second); !ok {
		t.Fatal("owner could not refresh")
	}
	clk.Advance(5*time.Second - time.Nanosecond)
	if _, err := m.Get(ctx, "lock"); err != nil {
		t.Fatalf("refreshed key gone early: %v", err)
	}
	clk.Advance(time.Nanosecond)
	if _, err := m.Get(ctx, "lock"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get at the ttl: %v, want ErrNotFound", err)
	}
	if ok, _ := m.Refresh(ctx, "lock", []byte("a"), time.Second); ok {
		t.Fatal("Refresh revived an expired key")
	}
	if ok, _ := m.SetNX(ctx, "lock", []byte("b"), time.Second); !ok {
		t.Fatal("SetNX refused after expiry")
	}

	// IncrBy: ttl > 0 is set each time; ttl 0 keeps it.
	if n, _ := m.IncrBy(ctx, "n", 1, time.Second); n != 1 {
		t.Fatalf("IncrBy = %d", n)
	}
	clk.Advance(900 * time.Millisecond)
	if n, _ := m.IncrBy(ctx, "n", 1, time.Second); n != 2 { // extended to +1s from here
		t.Fatalf("IncrBy = %d", n)
	}
	clk.Advance(900 * time.Millisecond)
	if n, _ := m.IncrBy(ctx, "n", 1, 0); n != 3 { // keeps the ttl: 100ms left
		t.Fatalf("IncrBy = %d", n)
	}
	clk.Advance(100 * time.Millisecond)
	if n, _ := m.IncrBy(ctx, "n", 1, 0); n != 1 {
		t.Fatalf("IncrBy after expiry = %d, want 1", n)
	}
}

func TestMemorySweep(t *testing.T) {
	ctx := t.Context()
	m, clk := newTestMemory(t)
	l := Limit{Rate: 1, Period: time.Second, Burst: 1}
	for i := range 10 {
		k := strconv.Itoa(i)
		if err := m.Set(ctx, k, []byte(k), time.Duration(i+1)*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Allow(ctx, k, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Set(ctx, "forever", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if n := m.sweep(); n != 0 {
		t.Fatalf("sweep removed %d live entries", n)
	}
	clk.Advance(5 * time.Second) // keys 0..4 expire; every bucket (1s to refill) is full
	if n := m.sweep(); n != 5+10 {
		t.Fatalf("sweep removed %d, want 5 keys and 10 buckets", n)
	}
	m.mu.Lock()
	left := len(m.keys)
	m.mu.Unlock()
	if left != 6 {
		t.Fatalf("%d keys left, want 6", left)
	}
}

// TestMemorySweepGoroutine: the sweep goroutine removes expired keys nobody reads.
func TestMemorySweepGoroutine(t *testing.T) {
	ctx := t.Context()
	clk := newFakeClock()
	m := NewMemory(WithClock(clk.Now), WithSweepInterval(time.Millisecond))
	defer m.Close()
	if err := m.Set(ctx, "k", []byte("v"), time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		n := len(m.keys)
		m.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sweep goroutine did not remove the expired key")
		}
		<-tick.C
	}
}

func TestMemoryAllowWithClock(t *testing.T) {
	ctx := t.Context()
	m, clk := newTestMemory(t)
	l := Limit{Rate: 10, Period: time.Second, Burst: 2} // T = 100ms, capacity 3
	type step struct {
		advance time.Duration
		want    Decision
	}
	steps := []step{
		{0, Decision{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 100 * time.Millisecond}},
		{0, Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 200 * time.Millisecond}},
		{0, Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 300 * time.Millisecond}},
		{0, Decision{Allowed: false, Limit: 3, RetryAfter: 100 * time.Millisecond, ResetAfter: 300 * time.Millisecond}},
		{99 * time.Millisecond, Decision{Allowed: false, Limit: 3, RetryAfter: time.Millisecond, ResetAfter: 201 * time.Millisecond}},
		{time.Millisecond, Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 300 * time.Millisecond}},
		{250 * time.Millisecond, Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 150 * time.Millisecond}},
		{time.Hour, Decision{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 100 * time.Millisecond}},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		got, err := m.Allow(ctx, "k", l)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want {
			t.Errorf("step %d (+%s): got %+v, want %+v", i, s.advance, got, s.want)
		}
	}
}

func TestMemorySlowSubscriber(t *testing.T) {
	ctx := t.Context()
	m, _ := newTestMemory(t, WithSubscriptionBuffer(4))
	slow, err := m.Subscribe(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := m.Subscribe(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := m.Publish(ctx, "c", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		<-fast.Messages() // keeps up
	}
	if d := slow.Dropped(); d != 6 {
		t.Errorf("slow Dropped = %d, want 6", d)
	}
	if d := fast.Dropped(); d != 0 {
		t.Errorf("fast Dropped = %d, want 0", d)
	}
	if d := m.Dropped(); d != 6 {
		t.Errorf("bus Dropped = %d, want 6", d)
	}
	for want := range 4 {
		if m := <-slow.Messages(); m.Payload[0] != byte(want) {
			t.Errorf("slow got %d, want %d (oldest kept)", m.Payload[0], want)
		}
	}
}

// TestMemoryCloseRace publishes, subscribes and closes concurrently; run with -race.
func TestMemoryCloseRace(t *testing.T) {
	ctx := t.Context()
	m := NewMemory(WithSweepInterval(time.Millisecond))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				s, err := m.Subscribe(ctx, "c")
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				_ = m.Publish(ctx, "c", []byte("x"))
				_ = s.Close()
			}
		})
	}
	wg.Go(func() {
		for range 1000 {
			if err := m.Publish(ctx, "c", []byte("y")); errors.Is(err, ErrClosed) {
				return
			}
		}
	})
	_ = m.Close()
	wg.Wait()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryContextFirst(t *testing.T) {
	m, _ := newTestMemory(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Allow(ctx, "k", Limit{Rate: 1, Period: time.Second}); !errors.Is(err, context.Canceled) {
		t.Errorf("Allow with a canceled context: %v", err)
	}
	if err := m.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping with a canceled context: %v", err)
	}
}

func BenchmarkMemoryPublishReceive(b *testing.B) {
	ctx := context.Background()
	m := NewMemory()
	defer m.Close()
	s, err := m.Subscribe(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 160) // a live transcript line
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Publish(ctx, "bench", payload); err != nil {
			b.Fatal(err)
		}
		<-s.Messages()
	}
}

func BenchmarkMemoryAllow(b *testing.B) {
	ctx := context.Background()
	m := NewMemory()
	defer m.Close()
	l := Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Allow(ctx, "api:key", l); err != nil {
			b.Fatal(err)
		}
	}
}
