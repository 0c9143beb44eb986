package bus

import (
	"fmt"
	"math"
	"time"
)

// Limit is a rate limit for the generic cell rate algorithm (GCRA): Rate events per Period,
// plus Burst extra cells. One cell is earned every Period/Rate (the emission interval T); at
// most Burst+1 cells can be banked, so a key that has been idle may make Burst+1 requests at
// once and then one every T.
//
// For example {Rate: 100, Period: time.Minute, Burst: 99} admits 100 requests in a burst and
// then sustains 100 a minute.
type Limit struct {
	Rate   int           // events per Period; ≥ 1
	Period time.Duration // > 0
	Burst  int           // extra cells above one; ≥ 0
}

// maxWindow bounds Interval × Capacity so that the theoretical arrival time never overflows:
// nanoseconds since 1970 in an int64 (memory) and microseconds in a Lua double (Redis, exact
// below 2^53) both have more than two centuries of headroom.
const maxWindow = 100 * 365 * 24 * time.Hour

// Capacity is how many cells a full bucket holds: Burst + 1. It is Decision.Limit.
func (l Limit) Capacity() int { return l.Burst + 1 }

// Interval is the emission interval T = Period / Rate: the time that earns one cell.
func (l Limit) Interval() time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return l.Period / time.Duration(l.Rate)
}

// Validate reports whether l can be used. The emission interval must be at least a
// microsecond (the resolution of the Redis clock) and Interval × Capacity at most 100 years.
func (l Limit) Validate() error {
	switch {
	case l.Rate < 1:
		return fmt.Errorf("%w: limit rate %d must be at least 1", ErrInvalid, l.Rate)
	case l.Period <= 0:
		return fmt.Errorf("%w: limit period %s must be positive", ErrInvalid, l.Period)
	case l.Burst < 0:
		return fmt.Errorf("%w: limit burst %d must not be negative", ErrInvalid, l.Burst)
	case l.Interval() < time.Microsecond:
		return fmt.Errorf("%w: limit %d per %s is finer than one per microsecond", ErrInvalid, l.Rate, l.Period)
	case int64(l.Burst) >= int64(maxWindow/l.Interval()): // Capacity() > cells in maxWindow, without overflow
		return fmt.Errorf("%w: limit window (%d cells of %s) exceeds %s", ErrInvalid, l.Capacity(), l.Interval(), maxWindow)
	}
	return nil
}

// Decision is the outcome of one Allow. Its fields map onto the HTTP rate limit headers:
// Limit is the quota ("q" of RateLimit-Policy in draft-ietf-httpapi-ratelimit-headers, the
// bucket capacity), Remaining is "r", ResetAfter is "t" (time until the bucket is full again),
// and RetryAfter is the Retry-After header of RFC 9110 §10.2.3 when the request is refused.
type Decision struct {
	Allowed    bool
	Limit      int           // bucket capacity: Limit.Capacity()
	Remaining  int           // requests that would be allowed right now after this one
	RetryAfter time.Duration // > 0 only when refused: wait this long before the next request can pass
	ResetAfter time.Duration // time until the bucket is full (Remaining == Limit) if nothing else arrives
}

// gcraStep applies the virtual-scheduling form of GCRA (ITU-T I.371 annex A) to one request
// arriving at now. tat is the stored theoretical arrival time (anything ≤ now means idle),
// interval is T and tolerance is T × capacity. All values share one unit (nanoseconds for the
// memory bus); gcraScript below is the same algorithm in Lua, in microseconds, for Redis.
//
// A request conforms when tat+T-tolerance ≤ now; it then moves tat to max(tat, now)+T. A
// refused request changes nothing.
func gcraStep(now, tat, interval, tolerance int64) (newTAT int64, allowed bool, remaining, retryAfter, resetAfter int64) {
	if tat < now {
		tat = now
	}
	next := tat + interval
	allowAt := next - tolerance
	if now < allowAt {
		return tat, false, 0, allowAt - now, tat - now
	}
	return next, true, (tolerance - (next - now)) / interval, 0, next - now
}

// decision builds a Decision from a gcraStep result expressed in unit.
func decision(l Limit, allowed bool, remaining, retryAfter, resetAfter int64, unit time.Duration) Decision {
	return Decision{
		Allowed:    allowed,
		Limit:      l.Capacity(),
		Remaining:  int(min(remaining, math.MaxInt32)),
		RetryAfter: time.Duration(retryAfter) * unit,
		ResetAfter: time.Duration(resetAfter) * unit,
	}
}

// gcraScript is gcraStep run atomically inside Redis. It reads the clock with TIME on the
// server so that every node shares one clock, whatever their own clocks say. Scripts are
// replicated by their effects (the default since Redis 5, the only mode since 7), which makes
// a write after TIME legal; redis.replicate_commands turns that mode on for older servers.
// The TAT is stored as an integer count of microseconds (%.0f keeps all 16 digits; the
// default number format would round them) and expires when the bucket is full again.
//
// KEYS[1] = TAT key; ARGV[1] = T in µs; ARGV[2] = T × capacity in µs; ARGV[3], passed only
// by tests that compare this script with gcraStep, replaces the server clock (µs).
// Returns {allowed (0|1), remaining, retry_after µs, reset_after µs}.
const gcraScript = `
if redis.replicate_commands then redis.replicate_commands() end
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  local v = tonumber(stored)
  if v and v > now then tat = v end
end
local nxt = tat + interval
local allow_at = nxt - tolerance
if now < allow_at then
  return {0, 0, allow_at - now, tat - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.ceil((nxt - now) / 1000))
return {1, math.floor((tolerance - (nxt - now)) / interval), 0, nxt - now}
`
