package api

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
)

func TestCursor(t *testing.T) {
	op := &operation{ID: "listThings"}
	c := &call{op: op, query: map[string]string{"kind": "faq", "limit": "2"}}
	p, err := pageOf(c)
	if err != nil || p.limit != 2 || p.after != "" {
		t.Fatalf("first page: %+v %v", p, err)
	}
	items := []string{"a", "b", "c"}
	l := makeList(p, items, func(s string) string { return s })
	if len(l.Data) != 2 || !l.HasMore || l.NextCursor == nil {
		t.Fatalf("list: %+v", l)
	}
	// The cursor reads back with the same filters, whatever the limit.
	c2 := &call{op: op, query: map[string]string{"kind": "faq", "limit": "50", "cursor": *l.NextCursor}}
	if p2, err := pageOf(c2); err != nil || p2.after != "b" || p2.limit != 50 {
		t.Fatalf("next page: %+v %v", p2, err)
	}
	cases := []struct {
		name  string
		query map[string]string
		op    string
		code  string
	}{
		{"other filter", map[string]string{"kind": "desk", "cursor": *l.NextCursor}, "listThings", fault.CodeCursorMismatch},
		{"filter dropped", map[string]string{"cursor": *l.NextCursor}, "listThings", fault.CodeCursorMismatch},
		{"other list", map[string]string{"kind": "faq", "cursor": *l.NextCursor}, "listOthers", fault.CodeInvalidCursor},
		{"not base64", map[string]string{"cursor": "%%%"}, "listThings", fault.CodeInvalidCursor},
		{"not JSON", map[string]string{"cursor": base64.RawURLEncoding.EncodeToString([]byte("x"))}, "listThings", fault.CodeInvalidCursor},
		{"empty position", map[string]string{"cursor": base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"o":"listThings"}`))}, "listThings", fault.CodeInvalidCursor},
	}
	for _, tc := range cases {
		_, err := pageOf(&call{op: &operation{ID: tc.op}, query: tc.query})
		var pe *fault.Error
		if !errors.As(err, &pe) || pe.Code != tc.code || pe.Status != 422 {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if l := makeList(page{limit: 5}, []string(nil), func(s string) string { return s }); l.Data == nil || l.HasMore || l.NextCursor != nil {
		t.Fatalf("empty list: %+v", l)
	}
}

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"/agents/{agent_id}", "/agents/x", true},
		{"/agents/{agent_id}", "/agents/x/definition", false},
		{"/agents", "/agents/", true},
		{"/me", "/you", false},
	}
	for _, c := range cases {
		if got := matchPattern(c.pattern, c.path); got != c.want {
			t.Errorf("matchPattern(%q, %q) = %v", c.pattern, c.path, got)
		}
	}
}

func TestRateLimitHelpers(t *testing.T) {
	if l := perMinute(600); l.Capacity() != 600 || l.Interval() != 100*time.Millisecond {
		t.Fatalf("perMinute(600) = %+v", l)
	}
	for d, want := range map[time.Duration]int{0: 0, -time.Second: 0, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8::1]:4242"
	if ip := clientIP(r); ip != "2001:db8::1" {
		t.Fatalf("clientIP = %q", ip)
	}
}

// TestRateLimitBusDown: when the bus cannot be reached the request passes (limits fail open),
// and an Idempotency-Key cannot be honoured (503).
func TestRateLimitBusDown(t *testing.T) {
	st := migrate(t, store.Options{DataDir: t.TempDir()})
	m := bus.NewMemory()
	w := newWorld(t, st, worldOpts{bus: m, keyRate: 5})
	m.Close()
	w.limited = false // no headers without a bus
	w.must(t, http.StatusOK, req{method: "GET", path: "/v1/me", key: kLive})
	w.fails(t, http.StatusServiceUnavailable, fault.CodeServiceUnavailable, req{method: "POST", path: "/v1/agents", key: kLive,
		header: map[string]string{idemHeader: "k"}, body: map[string]any{"project_id": w.p1.ID, "definition": definition("X", "faq", "inbound")}})
}

// FuzzCreateAgentBody sends arbitrary bodies to POST /v1/agents: the answer is always 201 or a
// 4xx problem document, never a 5xx or a panic.
func FuzzCreateAgentBody(f *testing.F) {
	f.Add([]byte(`{"project_id": "P", "definition": {"format": "service.agent/1", "agent": {"name": "A", "kind": "faq", "direction": "inbound", "channels": ["chat"], "system_prompt": "Hi {{x}}"}}}`))
	f.Add([]byte(`{"project_id": "P", "name": null, "definition": {"format": "service.agent/1", "agent": {"name": "A", "kind": "desk"}}}`))
	f.Add([]byte(`{"project_id": 1`))
	f.Add([]byte(`[]`))
	st := migrate(f, store.Options{DataDir: f.TempDir()})
	w := newWorld(f, st, worldOpts{})
	f.Fuzz(func(t *testing.T, body []byte) {
		body = []byte(replaceP(string(body), string(w.p1.ID)))
		r := httptest.NewRequest("POST", "/v1/agents", bytesReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+w.keys[kLive])
		rec := httptest.NewRecorder()
		w.h.ServeHTTP(rec, r)
		if rec.Code != 201 && (rec.Code < 400 || rec.Code >= 500) {
			t.Fatalf("body %q: answered %d %s", body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("body %q: %d is not a problem document", body, rec.Code)
		}
	})
}

func replaceP(s, id string) string { return strings.ReplaceAll(s, `"P"`, `"`+id+`"`) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
