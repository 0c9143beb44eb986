// Package bus is what Parley nodes share with each other: publish/subscribe channels (commands
// to the node that owns a conversation, live transcript lines), keys with a time to live
// (conversation ownership, idempotency locks), atomic counters (concurrent calls) and GCRA
// rate limits.
//
// Bus is the embedding of small interfaces (PubSub, Keys, Counters, Limiter), so that a
// consumer can ask for only the part it uses. There are two implementations of Bus, held to
// one conformance suite (package bustest): Memory, in-process, for a single node with nothing
// else installed; and Redis, for many nodes (DESIGN.md, "Many nodes"). Open picks one from
// PARLEY_REDIS_URL.
//
// The bus must never:
//   - block a publisher on a slow subscriber: each subscription has a bounded buffer, and when
//     it is full new messages for that subscription are dropped and counted (Subscription.Dropped);
//   - hang when Redis is unreachable: every Redis operation is bounded by dial, read and write
//     timeouts and by the caller's context, and returns a wrapped error;
//   - hold durable state: what it keeps may vanish (TTL, restart, eviction); the store
//     (PostgreSQL or SQLite) is the record.
//
// Pub/sub is fire-and-forget, as in Redis (https://redis.io/docs/latest/develop/pubsub/): a
// message reaches the subscriptions that exist when it is published, in publish order per
// channel, and is lost for a subscription that is reconnecting or full.
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bus is everything nodes share: the embedding of the small interfaces below, plus Ping and
// Close. All methods are safe for concurrent use. Keys and channels must not be empty. A ttl
// is never negative; 0 means no expiry wherever a ttl is accepted. Values are copied: the
// caller may reuse its slices after a call returns.
//
// A consumer that needs one part takes that part (a job worker takes a PubSub; a rate-limit
// middleware a Limiter), so that what it touches is visible in its type.
type Bus interface {
	PubSub
	Keys
	Counters
	Limiter

	// Ping checks that the bus can be reached (always nil for Memory until Close).
	Ping(ctx context.Context) error
	// Close ends every subscription (closing their Messages channels), stops the bus's
	// goroutines and releases connections. It is safe to call more than once; later calls
	// return nil, and other methods then return an error wrapping ErrClosed.
	Close() error
}

// PubSub is fire-and-forget publish/subscribe (see the package comment).
type PubSub interface {
	// Publish sends payload to every current subscription of channel. It does not wait for
	// subscribers to read, and succeeds when nobody listens.
	Publish(ctx context.Context, channel string, payload []byte) error
	// Subscribe listens on channels. The subscription is confirmed before Subscribe returns,
	// so a Publish that starts after it returns is received. ctx bounds only the subscribing;
	// the subscription lives until its Close or the Bus's Close.
	Subscribe(ctx context.Context, channels ...string) (Subscription, error)
}

// Keys are values with an optional time to live: ownership records and locks.
type Keys interface {
	// SetNX sets key to value only if no live key exists; it reports whether it did.
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// Set sets key to value, replacing any value and any previous ttl.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Get returns the value of a live key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key; removing a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// CompareAndDelete removes key only if it holds value (releasing a lock only if still
	// ours) and reports whether it did.
	CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error)
	// Refresh sets key's ttl only if it holds value (extending a lock only if still ours) and
	// reports whether it did.
	Refresh(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
}

// Counters are atomic integers (concurrent calls).
type Counters interface {
	// IncrBy adds delta to the integer at key (a missing key counts as 0) and returns the new
	// value. A ttl > 0 is set on every call; ttl 0 leaves the key's ttl as it was. Keys are
	// shared with Set/Get: the value is stored as base-10 text, and IncrBy on text that is not
	// an integer returns an error wrapping ErrNotInteger.
	IncrBy(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error)
}

// Limiter is GCRA rate limiting.
type Limiter interface {
	// Allow takes one cell from the GCRA bucket at key under l (see Limit). Rate limit state
	// lives apart from the keys of Set/Get, so the same key string may be used in both.
	Allow(ctx context.Context, key string, l Limit) (Decision, error)
}

// Subscription receives the messages of the channels it was opened on.
type Subscription interface {
	// Messages delivers messages in publish order per channel. It is closed by Close (of the
	// subscription or of its Bus). Payloads belong to the receiver.
	Messages() <-chan Message
	// Dropped counts messages lost because the buffer was full when they arrived.
	Dropped() uint64
	// Close unsubscribes and closes Messages. It is idempotent and leaves no goroutine behind.
	Close() error
}

// Message is one published payload and the channel it was published on.
type Message struct {
	Channel string
	Payload []byte
}

// Compile-time checks.
var (
	_ Bus = (*Memory)(nil)
	_ Bus = (*Redis)(nil)
	// Each part on its own is what narrow consumers hold.
	_ PubSub   = Bus(nil)
	_ Keys     = Bus(nil)
	_ Counters = Bus(nil)
	_ Limiter  = Bus(nil)
)

// Open returns the bus named by rawURL (PARLEY_REDIS_URL): "" gives the in-process Memory bus;
// redis://… or rediss://… (TLS) gives a Redis bus, after a PING bounded by ctx has succeeded.
// The URL is read by redis.ParseURL, so query options such as dial_timeout or read_timeout
// apply; unset timeouts get the bounded defaults of NewRedis. Any other scheme is an error
// naming it. logger may be nil.
func Open(ctx context.Context, rawURL string, logger *slog.Logger, opts ...Option) (Bus, error) {
	if rawURL == "" {
		mopts := make([]MemoryOption, 0, len(opts)+1)
		mopts = append(mopts, WithLogger(logger))
		for _, o := range opts {
			mopts = append(mopts, o)
		}
		return NewMemory(mopts...), nil
	}
	ro, err := parseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	ropts := make([]RedisOption, 0, len(opts)+1)
	ropts = append(ropts, WithLogger(logger))
	for _, o := range opts {
		ropts = append(ropts, o)
	}
	r := NewRedis(ro, ropts...)
	if err := r.Ping(ctx); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// parseRedisURL turns a redis:// or rediss:// URL into client options (NewRedis bounds the
// timeouts it leaves unset). Its errors never repeat the URL, which may hold a password.
func parseRedisURL(rawURL string) (*redis.Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: bus URL does not parse: %v", ErrInvalid, err)
	}
	switch u.Scheme {
	case "redis", "rediss":
	default:
		return nil, fmt.Errorf(`%w: bus URL scheme %q is not supported (want redis:// or rediss://, or "" for in-process)`, ErrInvalid, u.Scheme)
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: bus URL: %v", ErrInvalid, err)
	}
	return o, nil
}

// checkKey validates the arguments every keyed operation shares.
func checkKey(op, key string, ttl time.Duration) error {
	if key == "" {
		return fmt.Errorf("%w: %s: empty key or channel name", ErrInvalid, op)
	}
	if ttl < 0 {
		return fmt.Errorf("%w: %s %q: negative ttl %s", ErrInvalid, op, key, ttl)
	}
	return nil
}

// checkChannels validates channel names and drops repeats, keeping the first order.
func checkChannels(channels []string) ([]string, error) {
	if len(channels) == 0 {
		return nil, fmt.Errorf("%w: subscribe: no channel", ErrInvalid)
	}
	out := make([]string, 0, len(channels))
	for _, c := range channels {
		if c == "" {
			return nil, fmt.Errorf("%w: subscribe: empty channel name", ErrInvalid)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// roundTTL rounds a positive ttl up to whole milliseconds, the resolution of Redis PX, so that
// both backends expire a key at the same moment.
func roundTTL(ttl time.Duration) time.Duration {
	if r := ttl % time.Millisecond; r != 0 {
		ttl += time.Millisecond - r
	}
	return ttl
}
