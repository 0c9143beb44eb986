package bus

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is the in-process Bus: one node, nothing else installed. It keeps keys, counters and
// rate-limit state in maps under one mutex, with time read from an injectable clock (WithClock).
// Expired keys are invisible at once (lazy expiry on every access) and removed from memory by
// a sweep goroutine (WithSweepInterval) that Close stops and waits for.
//
// Publish hands each subscription its own copy of the payload through a buffered channel
// (WithSubscriptionBuffer, default 1024). It never waits: when a subscription's buffer is
// full the message is dropped for that subscription and counted, and the first drop is
// logged. Messages of one channel reach every subscription in one order, the order of Publish.
type Memory struct {
	now func() time.Time
	cfg commonConfig

	mu     sync.Mutex
	closed bool
	keys   map[string]memEntry
	tats   map[string]int64 // GCRA theoretical arrival times, UnixNano
	topics map[string]map[*memorySubscription]struct{}

	dropped atomic.Uint64
	stop    chan struct{}
	wg      sync.WaitGroup
}

type memEntry struct {
	value   []byte
	expires int64 // UnixNano; 0 = never
}

func (e memEntry) expired(now int64) bool { return e.expires != 0 && now >= e.expires }

// NewMemory returns an in-process bus. Close it to stop its sweep goroutine.
func NewMemory(opts ...MemoryOption) *Memory {
	cfg := memoryConfig{commonConfig: defaultCommon(), now: time.Now, sweep: DefaultSweepInterval}
	for _, o := range opts {
		if o != nil {
			o.applyMemory(&cfg)
		}
	}
	m := &Memory{
		now:    cfg.now,
		cfg:    cfg.commonConfig,
		keys:   make(map[string]memEntry),
		tats:   make(map[string]int64),
		topics: make(map[string]map[*memorySubscription]struct{}),
		stop:   make(chan struct{}),
	}
	if cfg.sweep > 0 {
		m.wg.Add(1)
		go m.sweepLoop(cfg.sweep)
	}
	return m
}

func (m *Memory) sweepLoop(every time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sweep()
		}
	}
}

// sweep removes expired keys and full rate-limit buckets and returns how many it removed.
func (m *Memory) sweep() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UnixNano()
	n := 0
	for k, e := range m.keys {
		if e.expired(now) {
			delete(m.keys, k)
			n++
		}
	}
	for k, tat := range m.tats {
		if tat <= now {
			delete(m.tats, k)
			n++
		}
	}
	return n
}

// lock takes the mutex after checking ctx, key and ttl, and fails once the bus is closed.
// On success the caller must unlock.
func (m *Memory) lock(ctx context.Context, op, key string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bus: memory %s: %w", op, err)
	}
	if err := checkKey(op, key, ttl); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("bus: memory %s: %w", op, ErrClosed)
	}
	return nil
}

// live returns the entry at key if it exists and has not expired, deleting it if it has.
func (m *Memory) live(key string, now int64) (memEntry, bool) {
	e, ok := m.keys[key]
	if ok && e.expired(now) {
		delete(m.keys, key)
		return memEntry{}, false
	}
	return e, ok
}

func expiry(now int64, ttl time.Duration) int64 {
	if ttl == 0 {
		return 0
	}
	return now + int64(roundTTL(ttl))
}

// Publish implements Bus.
func (m *Memory) Publish(ctx context.Context, channel string, payload []byte) error {
	if err := m.lock(ctx, "publish", channel, 0); err != nil {
		return err
	}
	var warn []*memorySubscription
	for s := range m.topics[channel] {
		select {
		case s.ch <- Message{Channel: channel, Payload: bytes.Clone(payload)}:
		default:
			s.dropped.Add(1)
			m.dropped.Add(1)
			if !s.warned {
				s.warned = true
				warn = append(warn, s)
			}
		}
	}
	m.mu.Unlock()
	for range warn {
		m.cfg.logger.Warn("bus: subscriber too slow, dropping messages", "channel", channel, "buffer", m.cfg.buffer)
	}
	return nil
}

// Subscribe implements Bus. The subscription is registered before Subscribe returns.
func (m *Memory) Subscribe(ctx context.Context, channels ...string) (Subscription, error) {
	chans, err := checkChannels(channels)
	if err != nil {
		return nil, err
	}
	if err := m.lock(ctx, "subscribe", chans[0], 0); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	s := &memorySubscription{m: m, channels: chans, ch: make(chan Message, m.cfg.buffer)}
	for _, c := range chans {
		subs := m.topics[c]
		if subs == nil {
			subs = make(map[*memorySubscription]struct{})
			m.topics[c] = subs
		}
		subs[s] = struct{}{}
	}
	return s, nil
}

// SetNX implements Bus.
func (m *Memory) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := m.lock(ctx, "setnx", key, ttl); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	now := m.now().UnixNano()
	if _, ok := m.live(key, now); ok {
		return false, nil
	}
	m.keys[key] = memEntry{value: bytes.Clone(value), expires: expiry(now, ttl)}
	return true, nil
}

// Set implements Bus.
func (m *Memory) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := m.lock(ctx, "set", key, ttl); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.keys[key] = memEntry{value: bytes.Clone(value), expires: expiry(m.now().UnixNano(), ttl)}
	return nil
}

// Get implements Bus.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := m.lock(ctx, "get", key, 0); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	e, ok := m.live(key, m.now().UnixNano())
	if !ok {
		return nil, fmt.Errorf("bus: memory get %q: %w", key, ErrNotFound)
	}
	return bytes.Clone(e.value), nil
}

// Delete implements Bus.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := m.lock(ctx, "delete", key, 0); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.keys, key)
	return nil
}

// CompareAndDelete implements Bus.
func (m *Memory) CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error) {
	if err := m.lock(ctx, "compare-and-delete", key, 0); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	e, ok := m.live(key, m.now().UnixNano())
	if !ok || !bytes.Equal(e.value, value) {
		return false, nil
	}
	delete(m.keys, key)
	return true, nil
}

// Refresh implements Bus.
func (m *Memory) Refresh(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := m.lock(ctx, "refresh", key, ttl); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	now := m.now().UnixNano()
	e, ok := m.live(key, now)
	if !ok || !bytes.Equal(e.value, value) {
		return false, nil
	}
	e.expires = expiry(now, ttl)
	m.keys[key] = e
	return true, nil
}

// IncrBy implements Bus. Like Redis INCRBY, it accepts only the canonical base-10 form of a
// 64-bit integer ("42", "-7"; not "+7", "007" or " 7") and refuses to overflow.
func (m *Memory) IncrBy(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	if err := m.lock(ctx, "incrby", key, ttl); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	now := m.now().UnixNano()
	e, ok := m.live(key, now)
	var n int64
	if ok {
		var err error
		if n, err = parseCanonicalInt(e.value); err != nil {
			return 0, fmt.Errorf("bus: memory incrby %q: %w", key, err)
		}
	}
	if (delta > 0 && n > math.MaxInt64-delta) || (delta < 0 && n < math.MinInt64-delta) {
		return 0, fmt.Errorf("bus: memory incrby %q: %w: %d%+d overflows", key, ErrNotInteger, n, delta)
	}
	n += delta
	e.value = strconv.AppendInt(e.value[:0:0], n, 10)
	if ttl > 0 {
		e.expires = expiry(now, ttl)
	}
	m.keys[key] = e
	return n, nil
}

func parseCanonicalInt(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != string(b) {
		return 0, ErrNotInteger
	}
	return n, nil
}

// Allow implements Bus with gcraStep on the injected clock, in nanoseconds.
func (m *Memory) Allow(ctx context.Context, key string, l Limit) (Decision, error) {
	if err := l.Validate(); err != nil {
		return Decision{}, err
	}
	if err := m.lock(ctx, "allow", key, 0); err != nil {
		return Decision{}, err
	}
	now := m.now().UnixNano()
	interval := int64(l.Interval())
	tat, allowed, remaining, retry, reset := gcraStep(now, m.tats[key], interval, interval*int64(l.Capacity()))
	if allowed {
		m.tats[key] = tat
	}
	m.mu.Unlock()
	return decision(l, allowed, remaining, retry, reset, time.Nanosecond), nil
}

// Ping implements Bus.
func (m *Memory) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bus: memory ping: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("bus: memory ping: %w", ErrClosed)
	}
	return nil
}

// Dropped counts messages dropped across all subscriptions because their buffers were full.
func (m *Memory) Dropped() uint64 { return m.dropped.Load() }

// Close implements Bus.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for _, subs := range m.topics {
		for s := range subs {
			s.closeLocked()
		}
	}
	clear(m.topics)
	clear(m.keys)
	clear(m.tats)
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	return nil
}

// memorySubscription is a Memory subscription: a buffered channel registered under each of
// its channel names. All its mutable fields are guarded by the Memory's mutex.
type memorySubscription struct {
	m        *Memory
	channels []string
	ch       chan Message
	dropped  atomic.Uint64
	warned   bool
	closed   bool
}

func (s *memorySubscription) Messages() <-chan Message { return s.ch }
func (s *memorySubscription) Dropped() uint64          { return s.dropped.Load() }

func (s *memorySubscription) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	s.closeLocked()
	return nil
}

func (s *memorySubscription) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	for _, c := range s.channels {
		if subs := s.m.topics[c]; subs != nil {
			delete(subs, s)
			if len(subs) == 0 {
				delete(s.m.topics, c)
			}
		}
	}
	close(s.ch)
}
