package bus

import (
	"log/slog"
	"time"
)

// Defaults for the options below.
const (
	DefaultPrefix             = "parley:"
	DefaultSubscriptionBuffer = 1024
	DefaultSweepInterval      = time.Minute
)

// Option configures either backend (NewMemory, NewRedis, Open).
type Option interface {
	MemoryOption
	RedisOption
}

// MemoryOption configures the in-process bus (NewMemory).
type MemoryOption interface{ applyMemory(*memoryConfig) }

// RedisOption configures the Redis bus (NewRedis).
type RedisOption interface{ applyRedis(*redisConfig) }

type commonConfig struct {
	logger *slog.Logger
	buffer int
	prefix string
}

func defaultCommon() commonConfig {
	return commonConfig{logger: slog.New(slog.DiscardHandler), buffer: DefaultSubscriptionBuffer, prefix: DefaultPrefix}
}

type memoryConfig struct {
	commonConfig
	now   func() time.Time
	sweep time.Duration
}

type redisConfig struct {
	commonConfig
}

type commonOption func(*commonConfig)

func (o commonOption) applyMemory(c *memoryConfig) { o(&c.commonConfig) }
func (o commonOption) applyRedis(c *redisConfig)   { o(&c.commonConfig) }

type memoryOption func(*memoryConfig)

func (o memoryOption) applyMemory(c *memoryConfig) { o(c) }

// WithLogger sets where the bus reports what it cannot return as an error (a subscriber too
// slow to keep up). nil keeps the default, which discards.
func WithLogger(l *slog.Logger) Option {
	return commonOption(func(c *commonConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithSubscriptionBuffer sets how many messages a subscription holds for a reader that has
// not caught up (default 1024). Beyond that, new messages for that subscription are dropped
// and counted (Subscription.Dropped); a publisher never waits for a reader. n < 1 keeps the
// default.
func WithSubscriptionBuffer(n int) Option {
	return commonOption(func(c *commonConfig) {
		if n >= 1 {
			c.buffer = n
		}
	})
}

// WithPrefix sets the string put in front of every Redis key and channel name (default
// "parley:"), so that several deployments or test runs can share one Redis. The memory bus is
// private to its process, so there the prefix changes nothing.
func WithPrefix(p string) Option {
	return commonOption(func(c *commonConfig) { c.prefix = p })
}

// WithClock injects the clock the memory bus uses for TTLs and rate limits (default
// time.Now), so that tests can move time without sleeping.
func WithClock(now func() time.Time) MemoryOption {
	return memoryOption(func(c *memoryConfig) {
		if now != nil {
			c.now = now
		}
	})
}

// WithSweepInterval sets how often the memory bus removes expired keys that nobody read
// (default one minute; Get and SetNX never see an expired key whatever this is). d ≤ 0 turns
// the sweep goroutine off.
func WithSweepInterval(d time.Duration) MemoryOption {
	return memoryOption(func(c *memoryConfig) { c.sweep = d })
}
