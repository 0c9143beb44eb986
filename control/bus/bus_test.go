package bus_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/bus/bustest"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestConformance runs the one suite against both backends.
func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		bustest.Run(t, func(t *testing.T) bus.Bus {
			b := bus.NewMemory(bus.WithSweepInterval(10 * time.Millisecond))
			t.Cleanup(func() { _ = b.Close() })
			return b
		})
	})
	t.Run("redis", func(t *testing.T) {
		bustest.Run(t, redisFactory(t))
	})
}

// redisFactory returns a newBus for bustest.Run: each bus gets a random prefix, so tests run
// in parallel on one Redis (db 15 by default) and alongside other packages, and its keys are
// deleted when the test ends.
func redisFactory(t *testing.T) func(t *testing.T) bus.Bus {
	url := testenv.RedisURL(t)
	cleaner := newClient(t, url)
	return func(t *testing.T) bus.Bus {
		prefix := randomPrefix(t)
		b, err := bus.Open(t.Context(), url, nil, bus.WithPrefix(prefix))
		if err != nil {
			t.Fatalf("Open(%s): %v", url, err)
		}
		t.Cleanup(func() {
			_ = b.Close()
			deleteKeys(t, cleaner, prefix)
		})
		return b
	}
}

// newClient returns a plain go-redis client for url, closed when t ends.
func newClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func randomPrefix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "parleytest:" + hex.EncodeToString(b[:]) + ":"
}

// deleteKeys removes every key under prefix and checks none is left.
func deleteKeys(t testing.TB, c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := c.Keys(ctx, prefix+"*").Result() // db 15 holds only test keys
	if err != nil {
		t.Errorf("cleanup: listing %s*: %v", prefix, err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("cleanup: deleting %d keys: %v", len(keys), err)
		}
	}
}

// TestOpen checks which URLs Open accepts, and that its errors name the problem without
// repeating a password.
func TestOpen(t *testing.T) {
	ctx := t.Context()
	b, err := bus.Open(ctx, "", nil)
	if err != nil {
		t.Fatalf(`Open(""): %v`, err)
	}
	if _, ok := b.(*bus.Memory); !ok {
		t.Errorf(`Open("") = %T, want *bus.Memory`, b)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		url, wantInErr string
	}{
		{"http://localhost:6379", `scheme "http"`},
		{"memory://", `scheme "memory"`},
		{"postgres://u:secret@db/x", `scheme "postgres"`},
		{"localhost:6379", `scheme "localhost"`},
		{"unix:///tmp/redis.sock", `scheme "unix"`},
		{"redis://:secret@localhost:6379/notanumber", "invalid database number"},
		{"redis://:secret@localhost:6379/1?bogus_option=1", "unexpected option"},
		{"redis://:secret@local host:6379", "invalid character"},
		{"redis://:secret@localhost:6379/0?dial_timeout=soon", "invalid dial_timeout"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			b, err := bus.Open(ctx, tc.url, nil)
			if err == nil {
				_ = b.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, bus.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantInErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q repeats the password", err)
			}
		})
	}
}

// TestOpenRedisUnreachable: a Redis that refuses connections fails Open quickly, with an error
// that names the address.
func TestOpenRedisUnreachable(t *testing.T) {
	addr := closedPort(t)
	start := time.Now()
	b, err := bus.Open(t.Context(), "redis://"+addr+"/15", nil)
	if err == nil {
		_ = b.Close()
		t.Fatal("Open of an unreachable Redis succeeded")
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Open took %s to fail", el)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name %s", err, addr)
	}
}

// closedPort returns a loopback address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func hostPort(t *testing.T, url string) string {
	t.Helper()
	return mustParse(t, url).Addr
}

func mustParse(t *testing.T, url string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// poll calls cond every few milliseconds until it is true, failing t at the deadline.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}
