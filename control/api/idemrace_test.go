package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parley-voice/parley/control/fault"
)

var _ = register(scenario{"IdempotencyInUseEveryRoute", testIdempotencyInUseEveryRoute})

// testIdempotencyInUseEveryRoute: one behaviour for a request that arrives while another with
// the same Idempotency-Key is still in progress, on every operation that takes the header:
// 409 idempotency_key_in_use with Retry-After, before anything is done. (A duplicate that
// arrives after the first finished replays its answer: see Idempotency.) It is made from the
// operation table, so a new idempotent operation is covered as it is declared.
func testIdempotencyInUseEveryRoute(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	ctx := context.Background()
	covered := 0
	for _, op := range operations() {
		if op.Idempotency == idemNone {
			continue
		}
		key := "busy-" + op.ID
		// The first request holds the key's lock, as a request in progress on any node does.
		if ok, err := w.bus.SetNX(ctx, idemLockKey(w.org.ID, "live:"+op.ID, key), []byte("first"), time.Minute); !ok || err != nil {
			t.Fatalf("%s: take the lock: %v %v", op.ID, ok, err)
		}
		q := reachRequest(op, kLive, reachBody(t, op), func(string) string { return uuid.Must(uuid.NewV7()).String() })
		q.header = map[string]string{idemHeader: key}
		if op.Multipart {
			q.body = nil
		}
		r := w.do(t, q)
		if r.Status != http.StatusConflict || r.Code() != fault.CodeIdempotencyInUse || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s while the key is in use: %s (Retry-After %q), want 409 %s", op.Method, op.Path, r, r.Header.Get("Retry-After"), fault.CodeIdempotencyInUse)
		}
		covered++
	}
	if covered < 5 {
		t.Fatalf("only %d idempotent operations found", covered)
	}
}
