package cluster

import (
	"context"
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
