package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestMesh: a request to another node streams its replies back in order, a handler's
// sentinel error keeps its identity, a node that does not answer times out as unreachable,
// and a request to this node itself skips the bus. It runs on the in-process bus and on Redis.
func TestMesh(t *testing.T) {
	buses := map[string]func(t *testing.T) bus.Bus{
		"memory": func(t *testing.T) bus.Bus { return bus.NewMemory() },
		"redis": func(t *testing.T) bus.Bus {
			b, err := bus.Open(context.Background(), testenv.RedisURL(t), nil, bus.WithPrefix("meshtest:"+newCorrelation()+":"))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for name, open := range buses {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			defer b.Close()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a, z := newMesh(b, "a", log), newMesh(b, "z", log)
			z.handle("count", func(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
				var n int
				json.Unmarshal(body, &n)
				for i := range n {
					reply(i, false, nil)
				}
				reply("done", true, nil)
			})
			z.handle("busy", func(ctx context.Context, _ json.RawMessage, reply func(any, bool, error)) { reply(nil, true, ErrBusy) })
			a.handle("self", func(ctx context.Context, _ json.RawMessage, reply func(any, bool, error)) { reply("me", true, nil) })
			for _, m := range []*mesh{a, z} {
				if err := m.start(ctx); err != nil {
					t.Fatal(err)
				}
				defer m.close()
			}
			var got []string
			final, err := a.call(ctx, "z", "count", 5, func(b json.RawMessage) { got = append(got, string(b)) })
			if err != nil || string(final) != `"done"` || strings.Join(got, ",") != "0,1,2,3,4" {
				t.Fatalf("count: %s %v %v", final, got, err)
			}
			if _, err := a.call(ctx, "z", "busy", nil, nil); !errors.Is(err, ErrBusy) {
				t.Fatalf("busy: %v", err)
			}
			if _, err := a.call(ctx, "z", "nothing", nil, nil); err == nil || !strings.Contains(err.Error(), "unknown_request") {
				t.Fatalf("unknown kind: %v", err)
			}
			tctx, tcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer tcancel()
			if _, err := a.call(tctx, "nobody", "count", 1, nil); !errors.Is(err, ErrUnreachable) {
				t.Fatalf("a node that is not there: %v", err)
			}
			if final, err := a.call(ctx, "a", "self", nil, nil); err != nil || string(final) != `"me"` {
				t.Fatalf("self: %s %v", final, err)
			}
		})
	}
}
