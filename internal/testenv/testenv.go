// Package testenv tells tests which external peers (programs and servers) are present.
//
// A test that needs a peer calls one of these helpers. When the peer is missing the test is
// skipped with a message naming it, unless PARLEY_REQUIRE_PEERS=1 is set (as CI does), in which
// case the test fails: CI must never pass by skipping. It must never be imported by non-test code.
package testenv

import (
	"context"
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
