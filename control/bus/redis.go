package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Bus for many nodes, on one Redis server (go-redis v9).
//
// Every key and channel name gets the prefix (WithPrefix, default "parley:"); keys of
// Set/Get/IncrBy live under prefix+"kv:", rate-limit state under prefix+"rl:", and channels
// are prefix+name (Redis pub/sub ignores the database number, so the prefix is what keeps two
// deployments or tests apart).
//
// What must be atomic runs as a Lua script on the server (CompareAndDelete, Refresh, IncrBy
// with a ttl, Allow), sent with EVALSHA and falling back to EVAL when the server does not
// have it cached (redis.Script.Run). Allow reads the clock with TIME inside the script, so all
// nodes share the server's clock.
//
// Each subscription holds its own connection (go-redis PubSub). go-redis reads it into a Go
// channel, pings it when idle and reconnects and resubscribes after a failure (messages
// published meanwhile are lost, as with any Redis pub/sub). A forwarding goroutine moves
// messages into the subscription's bounded buffer, dropping and counting when it is full.
type Redis struct {
	client *redis.Client
	cfg    commonConfig

	closed    atomic.Bool
	closeOnce sync.Once

	mu   sync.Mutex
	subs map[*redisSubscription]struct{}
}

// Lua scripts for the operations that compare before they write.
var (
	cadScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)
	// ARGV[2] is the ttl in ms; 0 removes the expiry, as Set does.
	refreshScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1`)
	// INCRBY then PEXPIRE, all or nothing (a MULTI would still set the ttl when INCRBY
	// fails). The result is read back as a string: a Lua number would round above 2^53.
	incrScript = redis.NewScript(`
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('GET', KEYS[1])`)
	allowScript = redis.NewScript(gcraScript)
)

// NewRedis returns a Redis bus for the server that o describes, without contacting it (Open
// also pings). Timeouts that o leaves at zero get bounded defaults (dial, read and write
// 2 s, pool wait 3 s, one retry), and the caller's context deadline bounds every command.
func NewRedis(o *redis.Options, opts ...RedisOption) *Redis {
	cfg := redisConfig{commonConfig: defaultCommon()}
	for _, opt := range opts {
		if opt != nil {
			opt.applyRedis(&cfg)
		}
	}
	return &Redis{
		client: redis.NewClient(boundedOptions(o)),
		cfg:    cfg.commonConfig,
		subs:   make(map[*redisSubscription]struct{}),
	}
}

// Bounded defaults for a Redis client whose URL does not set them: an unreachable Redis
// costs a caller a few seconds at most, never a hang.
const (
	defaultDialTimeout  = 2 * time.Second
	defaultReadTimeout  = 2 * time.Second
	defaultWriteTimeout = 2 * time.Second
	defaultPoolTimeout  = 3 * time.Second
)

// boundedOptions copies o with bounded timeouts where o has none.
func boundedOptions(o *redis.Options) *redis.Options {
	c := *o
	setDefault(&c.DialTimeout, defaultDialTimeout)
	setDefault(&c.ReadTimeout, defaultReadTimeout)
	setDefault(&c.WriteTimeout, defaultWriteTimeout)
	setDefault(&c.PoolTimeout, defaultPoolTimeout)
	if c.MaxRetries == 0 {
		c.MaxRetries = 1
	}
	if c.DialerRetries == 0 {
		c.DialerRetries = 1
	}
	c.ContextTimeoutEnabled = true
	return &c
}

func (r *Redis) kvKey(key string) string { return r.cfg.prefix + "kv:" + key }
func (r *Redis) rlKey(key string) string { return r.cfg.prefix + "rl:" + key }

// check validates arguments and refuses work after Close.
func (r *Redis) check(op, key string, ttl time.Duration) error {
	if err := checkKey(op, key, ttl); err != nil {
		return err
	}
	if r.closed.Load() {
		return fmt.Errorf("bus: redis %s: %w", op, ErrClosed)
	}
	return nil
}

func wrap(op, key string, err error) error {
	return fmt.Errorf("bus: redis %s %q: %w", op, key, err)
}

// Publish implements Bus with PUBLISH.
func (r *Redis) Publish(ctx context.Context, channel string, payload []byte) error {
	if err := r.check("publish", channel, 0); err != nil {
		return err
	}
	if err := r.client.Publish(ctx, r.cfg.prefix+channel, payload).Err(); err != nil {
		return wrap("publish", channel, err)
	}
	return nil
}

// Subscribe implements Bus with SUBSCRIBE on a connection of its own. It returns once Redis
// has confirmed every channel, so a Publish made after it returns is received.
func (r *Redis) Subscribe(ctx context.Context, channels ...string) (Subscription, error) {
	chans, err := checkChannels(channels)
	if err != nil {
		return nil, err
	}
	if err := r.check("subscribe", chans[0], 0); err != nil {
		return nil, err
	}
	names := make([]string, len(chans))
	for i, c := range chans {
		names[i] = r.cfg.prefix + c
	}
	ps := r.client.Subscribe(ctx) // no channels yet: no I/O, so every error is seen below
	early, err := r.confirm(ctx, ps, names)
	if err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("bus: redis subscribe %q: %w", chans, err)
	}

	s := &redisSubscription{
		bus:  r,
		ps:   ps,
		out:  make(chan Message, r.cfg.buffer),
		done: make(chan struct{}),
	}
	for _, m := range early {
		s.deliver(m)
	}
	// Channel must come after the Receive calls in confirm (go-redis forbids mixing them).
	in := ps.Channel(redis.WithChannelSize(min(r.cfg.buffer, 256)))
	go s.forward(in)

	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		_ = s.Close()
		return nil, fmt.Errorf("bus: redis subscribe: %w", ErrClosed)
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	return s, nil
}

// confirm sends SUBSCRIBE and reads until Redis has confirmed every name (RESP "subscribe"
// replies, one per channel). Messages that arrive between two confirmations are kept.
func (r *Redis) confirm(ctx context.Context, ps *redis.PubSub, names []string) ([]*redis.Message, error) {
	if err := ps.Subscribe(ctx, names...); err != nil {
		return nil, err
	}
	wait := r.client.Options().ReadTimeout
	if wait <= 0 {
		wait = defaultReadTimeout
	}
	pending := make(map[string]bool, len(names))
	for _, n := range names {
		pending[n] = true
	}
	var early []*redis.Message
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				delete(pending, m.Channel)
			}
		case *redis.Message:
			early = append(early, m)
		}
	}
	return early, nil
}

// SetNX implements Bus with SET NX PX.
func (r *Redis) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := r.check("setnx", key, ttl); err != nil {
		return false, err
	}
	ok, err := r.client.SetNX(ctx, r.kvKey(key), value, roundTTL(ttl)).Result()
	if err != nil {
		return false, wrap("setnx", key, err)
	}
	return ok, nil
}

// Set implements Bus with SET (PX when ttl > 0).
func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := r.check("set", key, ttl); err != nil {
		return err
	}
	if err := r.client.Set(ctx, r.kvKey(key), value, roundTTL(ttl)).Err(); err != nil {
		return wrap("set", key, err)
	}
	return nil
}

// Get implements Bus with GET.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	if err := r.check("get", key, 0); err != nil {
		return nil, err
	}
	b, err := r.client.Get(ctx, r.kvKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, wrap("get", key, ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get", key, err)
	}
	return b, nil
}

// Delete implements Bus with DEL.
func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.check("delete", key, 0); err != nil {
		return err
	}
	if err := r.client.Del(ctx, r.kvKey(key)).Err(); err != nil {
		return wrap("delete", key, err)
	}
	return nil
}

// CompareAndDelete implements Bus with a GET-compare-DEL script.
func (r *Redis) CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error) {
	if err := r.check("compare-and-delete", key, 0); err != nil {
		return false, err
	}
	n, err := cadScript.Run(ctx, r.client, []string{r.kvKey(key)}, value).Int64()
	if err != nil {
		return false, wrap("compare-and-delete", key, err)
	}
	return n == 1, nil
}

// Refresh implements Bus with a GET-compare-PEXPIRE script.
func (r *Redis) Refresh(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := r.check("refresh", key, ttl); err != nil {
		return false, err
	}
	ms := roundTTL(ttl).Milliseconds()
	n, err := refreshScript.Run(ctx, r.client, []string{r.kvKey(key)}, value, ms).Int64()
	if err != nil {
		return false, wrap("refresh", key, err)
	}
	return n == 1, nil
}

// IncrBy implements Bus with INCRBY, or a script doing INCRBY and PEXPIRE when ttl > 0.
func (r *Redis) IncrBy(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	if err := r.check("incrby", key, ttl); err != nil {
		return 0, err
	}
	var (
		n   int64
		err error
	)
	if ttl == 0 {
		n, err = r.client.IncrBy(ctx, r.kvKey(key), delta).Result()
	} else {
		var s string
		s, err = incrScript.Run(ctx, r.client, []string{r.kvKey(key)}, delta, roundTTL(ttl).Milliseconds()).Text()
		if err == nil {
			n, err = strconv.ParseInt(s, 10, 64)
		}
	}
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && (strings.Contains(err.Error(), "not an integer") || strings.Contains(err.Error(), "overflow")) {
			err = fmt.Errorf("%w (%v)", ErrNotInteger, err)
		}
		return 0, wrap("incrby", key, err)
	}
	return n, nil
}

// Allow implements Bus with gcraScript, on the Redis server's clock, in microseconds.
func (r *Redis) Allow(ctx context.Context, key string, l Limit) (Decision, error) {
	if err := l.Validate(); err != nil {
		return Decision{}, err
	}
	if err := r.check("allow", key, 0); err != nil {
		return Decision{}, err
	}
	interval := int64(l.Interval() / time.Microsecond)
	v, err := allowScript.Run(ctx, r.client, []string{r.rlKey(key)}, interval, interval*int64(l.Capacity())).Int64Slice()
	if err != nil {
		return Decision{}, wrap("allow", key, err)
	}
	if len(v) != 4 {
		return Decision{}, wrap("allow", key, fmt.Errorf("gcra script returned %d values, want 4", len(v)))
	}
	return decision(l, v[0] == 1, v[1], v[2], v[3], time.Microsecond), nil
}

// Ping implements Bus with PING.
func (r *Redis) Ping(ctx context.Context) error {
	if r.closed.Load() {
		return fmt.Errorf("bus: redis ping: %w", ErrClosed)
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("bus: redis ping %s: %w", r.client.Options().Addr, err)
	}
	return nil
}

// Close implements Bus: it closes every subscription, then the client's connections. Only
// the first call can return an error.
func (r *Redis) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed.Store(true)
		subs := make([]*redisSubscription, 0, len(r.subs))
		for s := range r.subs {
			subs = append(subs, s)
		}
		r.mu.Unlock()
		for _, s := range subs {
			_ = s.Close()
		}
		if e := r.client.Close(); e != nil {
			err = fmt.Errorf("bus: redis close: %w", e)
		}
	})
	return err
}

// redisSubscription is a Redis subscription. Its forward goroutine owns out and closes it
// when go-redis closes its channel, which follows PubSub.Close; Close waits for it (done).
type redisSubscription struct {
	bus     *Redis
	ps      *redis.PubSub
	out     chan Message
	done    chan struct{}
	dropped atomic.Uint64
	warned  bool // only touched by the goroutine that delivers
	once    sync.Once
}

func (s *redisSubscription) Messages() <-chan Message { return s.out }
func (s *redisSubscription) Dropped() uint64          { return s.dropped.Load() }

func (s *redisSubscription) forward(in <-chan *redis.Message) {
	defer close(s.done)
	defer close(s.out)
	for m := range in {
		s.deliver(m)
	}
}

// deliver strips the prefix and queues m without ever waiting.
func (s *redisSubscription) deliver(m *redis.Message) {
	msg := Message{Channel: strings.TrimPrefix(m.Channel, s.bus.cfg.prefix), Payload: []byte(m.Payload)}
	select {
	case s.out <- msg:
	default:
		s.dropped.Add(1)
		if !s.warned {
			s.warned = true
			s.bus.cfg.logger.Warn("bus: subscriber too slow, dropping messages", "channel", msg.Channel, "buffer", s.bus.cfg.buffer)
		}
	}
}

// Close unsubscribes by closing the subscription's connection and waits for the forwarding
// goroutine to finish. Later calls return nil.
func (s *redisSubscription) Close() error {
	var err error
	s.once.Do(func() {
		if e := s.ps.Close(); e != nil {
			err = fmt.Errorf("bus: redis unsubscribe: %w", e)
		}
		<-s.done
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
	})
	return err
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}
