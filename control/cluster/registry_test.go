package cluster

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/internal/testenv"
)

// Two registries on the same bus find each other; after one closes, the other forgets it.
func TestRegistriesFindEachOther(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var b1, b2 bus.Bus
			ctx := context.Background()
			if backend == "memory" {
				m := bus.NewMemory()
				b1, b2 = m, m
			} else {
				url := testenv.RedisURL(t)
				var err error
				if b1, err = bus.Open(ctx, url, nil); err != nil {
					t.Fatal(err)
				}
				if b2, err = bus.Open(ctx, url, nil); err != nil {
					t.Fatal(err)
				}
			}
			defer b1.Close()
			defer b2.Close()
			id := time.Now().Format("150405.000000")
			r1 := New(b1, Options{NodeID: "a-" + id, Roles: "api", Interval: 100 * time.Millisecond})
			r2 := New(b2, Options{NodeID: "b-" + id, Roles: "media,worker", Interval: 100 * time.Millisecond})
			if err := r1.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r2.Start(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { p := r1.Peers(); return len(p) == 1 && p[0].ID == "b-"+id && p[0].Roles == "media,worker" })
			waitFor(t, func() bool { p := r2.Peers(); return len(p) == 1 && p[0].ID == "a-"+id })
			r2.Close()
			r2.Close() // idempotent
			waitFor(t, func() bool { return len(r1.Peers()) == 0 })
			r1.Close()
		})
	}
}

func TestCloseWithoutStart(t *testing.T) {
	r := New(bus.NewMemory(), Options{NodeID: "x"})
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close without Start hangs")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDead (issue 22 item 9): a node unseen for three heartbeats is dead; one heard is not;
// nothing is dead before this registry has listened for three heartbeats. The clock is
// injected: the heartbeats are driven by hand through the bus.
func TestDead(t *testing.T) {
	ctx := context.Background()
	b := bus.NewMemory()
	defer b.Close()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := New(b, Options{NodeID: "a", Interval: time.Hour, Now: clock}) // its own ticker never fires
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	beat := func(id string) {
		raw, _ := json.Marshal(Node{ID: id, Roles: "media"})
		if err := b.Publish(ctx, Channel, raw); err != nil {
			t.Fatal(err)
		}
	}
	beat("b")
	waitFor(t, func() bool { return len(r.Peers()) == 1 })
	if r.Dead("b") || r.Dead("ghost") || r.Dead("a") {
		t.Fatal("dead before three heartbeats of listening")
	}
	advance(2 * time.Hour)
	if r.Dead("b") || r.Dead("ghost") {
		t.Fatal("dead before three heartbeats of listening")
	}
	beat("b")
	waitFor(t, func() bool { p := r.Peers(); return len(p) == 1 && p[0].LastSeen.Equal(clock()) })
	advance(90 * time.Minute) // listening for 3.5 heartbeats; b heard 1.5 ago
	if r.Dead("b") || !r.Dead("ghost") || r.Dead("a") || r.Dead("") {
		t.Fatalf("b dead %v, ghost dead %v", r.Dead("b"), r.Dead("ghost"))
	}
	advance(2 * time.Hour) // b unseen for 3.5 heartbeats
	if !r.Dead("b") || len(r.Peers()) != 0 {
		t.Fatalf("b unseen for 3.5 heartbeats: dead %v, peers %v", r.Dead("b"), r.Peers())
	}
	beat("b") // it comes back
	waitFor(t, func() bool { return !r.Dead("b") })
}
