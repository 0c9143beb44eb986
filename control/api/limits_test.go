package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

var _ = register(
	scenario{"Idempotency", testIdempotency},
	scenario{"IdempotencyAcrossNodes", testIdempotencyAcrossNodes},
	scenario{"RateLimits", testRateLimits},
	scenario{"RateLimitsAcrossNodes", testRateLimitsAcrossNodes},
)

func testIdempotency(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	body := map[string]any{"project_id": w.p1.ID, "definition": definition("Support", "faq", "inbound")}
	create := func(key, idem string, body any) req {
		return req{method: "POST", path: "/v1/agents", key: key, body: body, header: map[string]string{idemHeader: idem}}
	}
	first := w.must(t, 201, create(kLive, "k-1", body))
	if first.Header.Get(replayedHeader) != "" {
		t.Fatal("first answer marked as replayed")
	}
	again := w.must(t, 201, create(kLive, "k-1", body))
	if !bytes.Equal(first.Body, again.Body) || again.Header.Get(replayedHeader) != "true" || again.Header.Get("Location") != first.Header.Get("Location") {
		t.Fatalf("replay differs:\n%s\n%s (%v)", first.Body, again.Body, again.Header)
	}
	// The same JSON written differently is the same request.
	reordered := fmt.Sprintf(`{ "definition": %s,
		"project_id": %q }`, mustJSON(t, body["definition"]), w.p1.ID)
	if r := w.must(t, 201, create(kLive, "k-1", reordered)); !bytes.Equal(r.Body, first.Body) {
		t.Fatalf("reordered body not replayed: %s", r)
	}
	if l := w.must(t, 200, req{method: "GET", path: "/v1/agents", key: kLive}); len(l.JSON["data"].([]any)) != 1 {
		t.Fatalf("the replay made another agent: %s", l)
	}
	// Another request with the key is refused.
	other := map[string]any{"project_id": w.p1.ID, "definition": definition("Sales", "faq", "inbound")}
	w.fails(t, 422, fault.CodeIdempotencyReused, create(kLive, "k-1", other))
	// Keys are scoped by key mode, as Stripe scopes them: the same key from a test key is a
	// request of its own, and does not disturb the live one.
	testOne := w.must(t, 201, create(kTest, "k-1", map[string]any{"project_id": w.p1.ID, "definition": definition("Test mode", "faq", "inbound")}))
	if testOne.Header.Get(replayedHeader) != "" || testOne.Str("id") == first.Str("id") {
		t.Fatalf("a test-key request replayed the live one: %s", testOne)
	}
	if r := w.must(t, 201, create(kLive, "k-1", body)); !bytes.Equal(r.Body, first.Body) {
		t.Fatalf("the live key's answer changed after a test-key request with its key: %s", r)
	}
	// Keys are scoped to the operation: the same key publishes.
	id := first.Str("id")
	pub := req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive, header: map[string]string{idemHeader: "k-1"}}
	p1 := w.must(t, 201, pub)
	p2 := w.must(t, 201, pub)
	if !bytes.Equal(p1.Body, p2.Body) || p2.Header.Get(replayedHeader) != "true" {
		t.Fatalf("publish replay: %s / %s", p1, p2)
	}
	if v := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + id + "/versions", key: kLive}); len(v.JSON["data"].([]any)) != 1 {
		t.Fatalf("a replayed publish published again: %s", v)
	}
	// Malformed keys.
	w.fails(t, 400, fault.CodeIdempotencyTooLong, create(kLive, strings.Repeat("k", 121), body))
	w.must(t, 201, create(kLive, strings.Repeat("k", 120), map[string]any{"project_id": w.p1.ID, "definition": definition("Long key", "faq", "inbound")}))
	w.fails(t, 400, fault.CodeIdempotencyInvalid, create(kLive, "clé", body))
	// A request still in progress (its lock held, as by another node) gets 409.
	if ok, err := w.bus.SetNX(ctx, idemLockKey(w.org.ID, "live:createAgent", "k-busy"), []byte("other"), time.Minute); !ok || err != nil {
		t.Fatalf("take lock: %v %v", ok, err)
	}
	busy := w.fails(t, 409, fault.CodeIdempotencyInUse, create(kLive, "k-busy", body))
	if busy.Header.Get("Retry-After") == "" {
		t.Fatal("409 in use without Retry-After")
	}
	// An answer that is not 2xx is not kept: the fixed request goes through with the same key.
	bad := map[string]any{"project_id": w.p1.ID, "definition": definition("Fixed", "faq", "inbound", func(a map[string]any) { a["kind"] = "robot" })}
	w.fails(t, 422, fault.CodeInvalidDefinition, create(kLive, "k-2", bad))
	fixed := map[string]any{"project_id": w.p1.ID, "definition": definition("Fixed", "faq", "inbound")}
	w.must(t, 201, create(kLive, "k-2", fixed))
	// Kept 24 hours: a day later the key is new again.
	later := time.Now().Add(25 * time.Hour)
	w.now.Store(&later)
	fresh := w.must(t, 201, create(kLive, "k-1", body))
	if fresh.Header.Get(replayedHeader) != "" || fresh.Str("id") == id {
		t.Fatalf("an expired key replayed: %s", fresh)
	}
	if n, err := w.st.PurgeIdempotency(ctx, later); err != nil || n < 2 {
		t.Fatalf("PurgeIdempotency = %d, %v", n, err)
	}
}

// TestIdempotencyKeyHeader checks the header rules, including an operation that requires it.
func TestIdempotencyKeyHeader(t *testing.T) {
	cases := []struct {
		values []string
		mode   idemMode
		code   string
		key    string
	}{
		{nil, idemOptional, "", ""},
		{nil, idemRequired, fault.CodeIdempotencyMissing, ""},
		{[]string{"abc-123"}, idemRequired, "", "abc-123"},
		{[]string{""}, idemRequired, fault.CodeIdempotencyInvalid, ""},
		{[]string{strings.Repeat("x", 121)}, idemOptional, fault.CodeIdempotencyTooLong, ""},
		{[]string{strings.Repeat("x", 120)}, idemOptional, "", strings.Repeat("x", 120)},
		{[]string{"a", "b"}, idemOptional, fault.CodeIdempotencyInvalid, ""},
		{[]string{"tab\there"}, idemOptional, fault.CodeIdempotencyInvalid, ""},
		{[]string{"spaces are fine ~!"}, idemOptional, "", "spaces are fine ~!"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/x", nil)
		for _, v := range c.values {
			r.Header.Add(idemHeader, v)
		}
		key, _, err := checkIdemKey(r, c.mode)
		code := ""
		if err != nil {
			code = err.(interface{ Error() string }).Error()
			code = strings.SplitN(code, ":", 2)[0]
		}
		if code != c.code || key != c.key {
			t.Errorf("%q (%v): key %q code %q, want %q %q", c.values, c.mode, key, code, c.key, c.code)
		}
	}
	// Through the shared checks: a required key is asked for before the body is looked at.
	st := migrate(t, store.Options{DataDir: t.TempDir()})
	w := newWorld(t, st, worldOpts{})
	op := &operation{ID: "requiredKey", Method: http.MethodPost, Path: "/required", Idempotency: idemRequired, Body: "AgentPublishRequest", BodyOptional: true,
		Status: 201, Handle: func(a *API, w http.ResponseWriter, r *http.Request) error {
			return a.change(w, r, func(*store.Tx, *auditor) (int, any, error) {
				return 201, map[string]any{"at": time.Now().UnixNano()}, nil
			})
		}}
	h := w.api.gate(w.api.handler(op))
	send := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/required", strings.NewReader(`{"note": "x"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+w.keys[kLive])
		if key != "" {
			r.Header.Set(idemHeader, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	if rec := send(""); rec.Code != 400 || !strings.Contains(rec.Body.String(), fault.CodeIdempotencyMissing) {
		t.Fatalf("without a key: %d %s", rec.Code, rec.Body)
	}
	a, b := send("once"), send("once")
	if a.Code != 201 || b.Code != 201 || a.Body.String() != b.Body.String() || b.Header().Get(replayedHeader) != "true" {
		t.Fatalf("required key: %d %s / %d %s", a.Code, a.Body, b.Code, b.Body)
	}
}

// redisBus opens a Redis bus with a prefix of its own, or skips.
func redisBus(t *testing.T, prefix string) bus.Bus {
	t.Helper()
	url := testenv.RedisURL(t)
	b, err := bus.Open(context.Background(), url, nil, bus.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// twoNodes returns two APIs over one store, each with its own Redis client (as two nodes).
func twoNodes(t *testing.T, st *store.Store, keyRate, orgRate int) (*world, *world) {
	prefix := "parley-test-" + randHex(6) + ":"
	a := newWorld(t, st, worldOpts{bus: redisBus(t, prefix), keyRate: keyRate, orgRate: orgRate})
	b := newWorld(t, st, worldOpts{bus: redisBus(t, prefix), keyRate: keyRate, orgRate: orgRate,
		org: &a.org, p1: &a.p1, p2: &a.p2, keys: a.keys, keyIDs: a.keyIDs})
	return a, b
}

func testIdempotencyAcrossNodes(t *testing.T, e engine) {
	st := e.open(t)
	a, b := twoNodes(t, st, 0, 0)
	ctx := context.Background()
	body := map[string]any{"project_id": a.p1.ID, "definition": definition("Racing", "faq", "inbound")}
	create := func(idem string) req {
		return req{method: "POST", path: "/v1/agents", key: kLive, body: body, header: map[string]string{idemHeader: idem}}
	}
	// A request in progress on node B (its lock in Redis) makes node A answer 409.
	if ok, err := b.bus.SetNX(ctx, idemLockKey(a.org.ID, "live:createAgent", "held"), []byte("b"), time.Minute); !ok || err != nil {
		t.Fatalf("lock on node b: %v %v", ok, err)
	}
	a.fails(t, 409, fault.CodeIdempotencyInUse, create("held"))
	// The same request sent to both nodes at once: one agent, every answer the same or 409.
	const n = 8
	var wg sync.WaitGroup
	answers := make([]*resp, n)
	for i := range n {
		node := a
		if i%2 == 1 {
			node = b
		}
		wg.Go(func() { answers[i] = node.do(t, create("race")) })
	}
	wg.Wait()
	var created []byte
	for _, r := range answers {
		switch r.Status {
		case 201:
			if created != nil && !bytes.Equal(created, r.Body) {
				t.Fatalf("two different 201 answers:\n%s\n%s", created, r.Body)
			}
			created = r.Body
		case 409:
			if r.Code() != fault.CodeIdempotencyInUse {
				t.Fatalf("409 %s", r)
			}
		default:
			t.Fatalf("racing request: %s", r)
		}
	}
	if created == nil {
		t.Fatal("no racing request succeeded")
	}
	agents, err := st.Agents().List(ctx, store.OrgScope(a.org.ID), store.AgentFilter{}, store.Page{})
	if err != nil || len(agents) != 1 {
		t.Fatalf("%d agents after the race (%v), want 1", len(agents), err)
	}
	// Afterwards either node replays it.
	for _, node := range []*world{a, b} {
		r := node.must(t, 201, create("race"))
		if !bytes.Equal(r.Body, created) || r.Header.Get(replayedHeader) != "true" {
			t.Fatalf("replay on a node: %s", r)
		}
	}
}

func testRateLimits(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{keyRate: 5, orgRate: 8})
	get := func(key string) *resp { return w.do(t, req{method: "GET", path: "/v1/me", key: key}) }
	for i := range 5 {
		r := get(kLive)
		if r.Status != 200 || r.Header.Get("RateLimit-Limit") != "5" || r.Header.Get("RateLimit-Remaining") != strconv.Itoa(4-i) ||
			r.Header.Get("RateLimit-Reset") == "" || r.Header.Get("RateLimit-Policy") != "5;w=60" {
			t.Fatalf("request %d: %s %v", i, r, r.Header)
		}
	}
	r := get(kLive)
	if r.Status != 429 || r.Code() != fault.CodeRateLimited || r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit-Remaining") != "0" || !strings.Contains(r.Str("detail"), "API key") {
		t.Fatalf("over the key limit: %s %v", r, r.Header)
	}
	if r.Header.Get("RateLimit-Reset") != r.Header.Get("Retry-After") {
		t.Fatalf("429 with RateLimit-Reset %q beside Retry-After %q: they must agree", r.Header.Get("RateLimit-Reset"), r.Header.Get("Retry-After"))
	}
	if s, _ := strconv.Atoi(r.Header.Get("Retry-After")); s < 1 || s > 12 {
		t.Fatalf("Retry-After = %q, want about 12 s (a minute / 5)", r.Header.Get("Retry-After"))
	}
	// Another key of the organization has its own bucket but shares the organization's.
	for range 3 {
		if r := get(kTest); r.Status != 200 {
			t.Fatalf("second key: %s", r)
		}
	}
	r = get(kNarrow)
	if r.Status != 429 || !strings.Contains(r.Str("detail"), "organization") || r.Header.Get("RateLimit-Limit") != "8" {
		t.Fatalf("over the organization limit: %s %v", r, r.Header)
	}
	// Failed authentication is limited by client address and carries the headers too.
	r = w.do(t, req{method: "GET", path: "/v1/me"})
	if r.Status != 401 || r.Header.Get("RateLimit-Remaining") == "" {
		t.Fatalf("401: %s %v", r, r.Header)
	}
	// Another organization is not affected.
	other := newWorld(t, st, worldOpts{bus: w.bus, keyRate: 5, orgRate: 8})
	other.must(t, 200, req{method: "GET", path: "/v1/agents", key: kLive})
}

func testRateLimitsAcrossNodes(t *testing.T, e engine) {
	st := e.open(t)
	a, b := twoNodes(t, st, 4, 0)
	for i := range 4 {
		node := a
		if i%2 == 1 {
			node = b
		}
		node.must(t, 200, req{method: "GET", path: "/v1/agents", key: kLive})
	}
	for _, node := range []*world{a, b} {
		r := node.fails(t, 429, fault.CodeRateLimited, req{method: "GET", path: "/v1/agents", key: kLive})
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", r.Header)
		}
	}
	a.must(t, 200, req{method: "GET", path: "/v1/agents", key: kTest})
	_ = fmt.Sprint()
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
