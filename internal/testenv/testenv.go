// Package testenv tells tests which external peers (programs and servers) are present.
//
// A test that needs a peer calls one of these helpers. When the peer is missing the test is
// skipped with a message naming it, unless PARLEY_REQUIRE_PEERS=1 is set (as CI does), in which
// case the test fails: CI must never pass by skipping. It must never be imported by non-test code.
package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Required reports whether missing peers fail tests instead of skipping them.
func Required() bool { return os.Getenv("PARLEY_REQUIRE_PEERS") == "1" }

// Missing skips t (or fails it when peers are required) with a message naming what is missing.
func Missing(t testing.TB, what string) {
	t.Helper()
	if Required() {
		t.Fatalf("required peer missing: %s (PARLEY_REQUIRE_PEERS=1)", what)
	}
	t.Skipf("skipping: %s is not available here (set PARLEY_REQUIRE_PEERS=1 to make this fail)", what)
}

// NeedCommand returns the path of the named program or skips/fails t when it is not on PATH.
func NeedCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "program "+name)
	}
	return p
}

// PostgresURL returns the PostgreSQL URL for tests (PARLEY_TEST_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/test) after checking the server accepts TCP connections.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := env("PARLEY_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	needTCP(t, "PostgreSQL", u, "5432")
	return u
}

// RedisURL returns the Redis URL for tests (PARLEY_TEST_REDIS_URL, default
// redis://127.0.0.1:6379/15) after checking the server accepts TCP connections.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := env("PARLEY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
	needTCP(t, "Redis", u, "6379")
	return u
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func needTCP(t testing.TB, what, rawURL, defPort string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("bad %s test URL %q: %v", what, rawURL, err)
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = defPort
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		Missing(t, what+" at "+net.JoinHostPort(host, port))
		return
	}
	c.Close()
}

// RTPBase returns a random even port to start a test server's RTP range of span+1 ports at. The
// whole range lies in 20000–32767: above the 10000–20000 a server started with default settings
// uses, and below Linux's ephemeral range (32768–60999), so no port the kernel hands to a socket
// bound to port 0 (FreeUDPPort's, a peer's) ever falls inside it. Two tests' ranges may still
// overlap; the allocator skips a port another program holds.
func RTPBase(span int) int {
	const lo, hi = 20000, 32768
	if span < 1 || span >= hi-lo {
		panic("testenv.RTPBase: span out of 1..12767")
	}
	return lo + 2*rand.IntN((hi-lo-span)/2)
}

// FreeUDPPort returns a port on 127.0.0.1 that the kernel just handed out and that is free
// again: for a peer's SIP port it is free for UDP and TCP both; with pair, for a peer's media
// (sipp's -mp), it is even and the three ports after it are free too (sipp binds the audio port
// and the one two above it). Another program can take it before the peer binds it, but the
// kernel hands out ports at random from the ephemeral range, which RTPBase's ranges stay out of.
func FreeUDPPort(t testing.TB, pair bool) int {
	t.Helper()
	for range 100 {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		p := c.LocalAddr().(*net.UDPAddr).Port
		c.Close()
		if !pair {
			if l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				l.Close()
				return p
			}
			continue
		}
		if p%2 != 0 || p > 65000 || !udpFree(p+1, p+2, p+3) {
			continue
		}
		return p
	}
	t.Fatal("testenv: no free UDP port on 127.0.0.1 after 100 tries")
	return 0
}

func udpFree(ports ...int) bool {
	var held []*net.UDPConn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, p := range ports {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			return false
		}
		held = append(held, c)
	}
	return true
}
