package bus_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/internal/testenv"
)

// openNode opens a Redis bus the way a node does: its own client, from the URL.
func openNode(t *testing.T, url, prefix string) bus.Bus {
	t.Helper()
	b, err := bus.Open(t.Context(), url, nil, bus.WithPrefix(prefix))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestRedisTwoNodes runs two separate Redis buses (two clients, as two nodes have) with one
// prefix, and a third with another prefix that must see nothing of theirs.
func TestRedisTwoNodes(t *testing.T) {
	url := testenv.RedisURL(t)
	prefix, otherPrefix := randomPrefix(t), randomPrefix(t)
	cleaner := newClient(t, url)
	t.Cleanup(func() {
		deleteKeys(t, cleaner, prefix)
		deleteKeys(t, cleaner, otherPrefix)
	})
	ctx := t.Context()
	a, b := openNode(t, url, prefix), openNode(t, url, prefix)
	other := openNode(t, url, otherPrefix)

	t.Run("PubSub", func(t *testing.T) {
		sb, err := b.Subscribe(ctx, "steer:conv1")
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		so, err := other.Subscribe(ctx, "steer:conv1")
		if err != nil {
			t.Fatal(err)
		}
		defer so.Close()
		if err := a.Publish(ctx, "steer:conv1", []byte(`{"say":"hello"}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-sb.Messages():
			if m.Channel != "steer:conv1" || string(m.Payload) != `{"say":"hello"}` {
				t.Errorf("node b got %s=%q", m.Channel, m.Payload)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("node b received nothing from node a")
		}
		// The other deployment shares the server, not the channel: prove it by a message of its own.
		if err := other.Publish(ctx, "steer:conv1", []byte("own")); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-so.Messages():
			if string(m.Payload) != "own" {
				t.Errorf("another prefix received %q from node a", m.Payload)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("other deployment received nothing")
		}
	})

	t.Run("Lock", func(t *testing.T) {
		if ok, err := a.SetNX(ctx, "owner:conv1", []byte("node-a"), time.Minute); err != nil || !ok {
			t.Fatalf("a SetNX = %v, %v", ok, err)
		}
		if ok, err := b.SetNX(ctx, "owner:conv1", []byte("node-b"), time.Minute); err != nil || ok {
			t.Fatalf("b SetNX on a's lock = %v, %v; want false", ok, err)
		}
		if ok, err := b.Refresh(ctx, "owner:conv1", []byte("node-b"), time.Hour); err != nil || ok {
			t.Fatalf("b Refresh of a's lock = %v, %v; want false", ok, err)
		}
		if ok, err := b.CompareAndDelete(ctx, "owner:conv1", []byte("node-b")); err != nil || ok {
			t.Fatalf("b CompareAndDelete of a's lock = %v, %v; want false", ok, err)
		}
		if v, err := b.Get(ctx, "owner:conv1"); err != nil || string(v) != "node-a" {
			t.Fatalf("b sees owner %q, %v", v, err)
		}
		if ok, err := other.SetNX(ctx, "owner:conv1", []byte("elsewhere"), time.Minute); err != nil || !ok {
			t.Fatalf("another prefix SetNX = %v, %v; want its own key", ok, err)
		}
		if ok, err := a.CompareAndDelete(ctx, "owner:conv1", []byte("node-a")); err != nil || !ok {
			t.Fatalf("a releases = %v, %v", ok, err)
		}
		if ok, err := b.SetNX(ctx, "owner:conv1", []byte("node-b"), time.Minute); err != nil || !ok {
			t.Fatalf("b SetNX after release = %v, %v; want true", ok, err)
		}
	})

	t.Run("SharedRateLimitAndCounter", func(t *testing.T) {
		l := bus.Limit{Rate: 1, Period: time.Hour, Burst: 2}
		for i, n := range []bus.Bus{a, b, a} {
			if d, err := n.Allow(ctx, "api:key1", l); err != nil || !d.Allowed || d.Remaining != 2-i {
				t.Fatalf("request %d = %+v, %v", i, d, err)
			}
		}
		for _, n := range []bus.Bus{a, b} {
			if d, err := n.Allow(ctx, "api:key1", l); err != nil || d.Allowed {
				t.Fatalf("4th request = %+v, %v; want refused on every node", d, err)
			}
		}
		if _, err := a.IncrBy(ctx, "calls", 3, time.Minute); err != nil {
			t.Fatal(err)
		}
		if n, err := b.IncrBy(ctx, "calls", -1, time.Minute); err != nil || n != 2 {
			t.Fatalf("b IncrBy = %d, %v; want 2", n, err)
		}
	})
}

// TestRedisDown: when the connection to Redis breaks, every operation returns an error at
// once; when it comes back, operations and existing subscriptions work again.
func TestRedisDown(t *testing.T) {
	target := testenv.RedisURL(t)
	p := startProxy(t, hostPort(t, target))
	url := "redis://" + p.addr() + "/15"
	prefix := randomPrefix(t)
	t.Cleanup(func() { deleteKeys(t, newClient(t, target), prefix) })
	b := openNode(t, url, prefix)
	ctx := t.Context()
	sub, err := b.Subscribe(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	p.stop() // Redis "goes away": connections drop and new ones are refused
	ops := map[string]func() error{
		"Ping":    func() error { return b.Ping(ctx) },
		"Get":     func() error { _, err := b.Get(ctx, "k"); return err },
		"SetNX":   func() error { _, err := b.SetNX(ctx, "k", nil, time.Second); return err },
		"Allow":   func() error { _, err := b.Allow(ctx, "k", bus.Limit{Rate: 1, Period: time.Second}); return err },
		"Publish": func() error { return b.Publish(ctx, "live", []byte("x")) },
		"Subscribe": func() error {
			s, err := b.Subscribe(ctx, "other")
			if err == nil {
				s.Close()
			}
			return err
		},
	}
	for name, op := range ops {
		start := time.Now()
		err := op()
		if err == nil {
			t.Errorf("%s with Redis down succeeded", name)
		} else if errors.Is(err, bus.ErrNotFound) || errors.Is(err, bus.ErrInvalid) {
			t.Errorf("%s with Redis down: %v, want a connection error", name, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s took %s to fail", name, el)
		}
	}

	p.restart(t)
	poll(t, 10*time.Second, "Ping to succeed after Redis is back", func() bool { return b.Ping(ctx) == nil })
	// The subscription reconnects and resubscribes by itself; messages published while it
	// was away are lost, so keep publishing until one arrives.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for {
		if err := b.Publish(ctx, "live", []byte("back")); err != nil {
			t.Fatalf("Publish after Redis is back: %v", err)
		}
		select {
		case m, ok := <-sub.Messages():
			if !ok {
				t.Fatal("subscription closed by the outage")
			}
			if string(m.Payload) != "back" {
				t.Fatalf("got %q", m.Payload)
			}
			return
		case <-deadline:
			t.Fatal("subscription did not recover after Redis came back")
		case <-tick.C:
		}
	}
}

// TestRedisUnresponsive: a server that accepts connections and never answers costs an
// operation its read timeout, never a hang.
func TestRedisUnresponsive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // hold it open, say nothing
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})

	b, err := bus.Open(t.Context(), "redis://"+l.Addr().String()+"/15?dial_timeout=200ms&read_timeout=200ms&write_timeout=200ms", nil)
	if err == nil {
		_ = b.Close()
		t.Fatal("Open of a silent server succeeded")
	}
	t.Logf("Open failed as expected: %v", err)

	// The bus without the PING of Open, with default timeouts and a caller's deadline.
	r := bus.NewRedis(mustParse(t, "redis://"+l.Addr().String()+"/15"))
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.Get(ctx, "k"); err == nil {
		t.Fatal("Get from a silent server succeeded")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Get took %s with a 300ms deadline", el)
	}
}

// proxy is a TCP relay to Redis that a test can stop and restart to simulate an outage.
type proxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
	laddr  string
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.laddr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) addr() string { return p.laddr }

func (p *proxy) serve(ln net.Listener) {
	p.ln = ln
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(u, c); _ = u.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, u); _ = c.Close() })
		}
	})
}

// stop closes the listener and every relayed connection, and waits for the relay goroutines.
func (p *proxy) stop() {
	if p.ln != nil {
		_ = p.ln.Close()
	}
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// restart listens again on the same address.
func (p *proxy) restart(t *testing.T) {
	ln, err := net.Listen("tcp", p.laddr)
	if err != nil {
		t.Fatalf("proxy restart on %s: %v", p.laddr, err)
	}
	p.serve(ln)
}

func benchRedis(b *testing.B) bus.Bus {
	url := testenv.RedisURL(b)
	prefix := randomPrefix(b)
	r, err := bus.Open(b.Context(), url, nil, bus.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = r.Close()
		deleteKeys(b, newClient(b, url), prefix)
	})
	return r
}

func BenchmarkRedisAllow(b *testing.B) {
	r := benchRedis(b)
	ctx := b.Context()
	l := bus.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Allow(ctx, "api:key", l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedisPublishReceive(b *testing.B) {
	r := benchRedis(b)
	ctx := b.Context()
	s, err := r.Subscribe(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 160)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Publish(ctx, "bench", payload); err != nil {
			b.Fatal(err)
		}
		<-s.Messages()
	}
}
