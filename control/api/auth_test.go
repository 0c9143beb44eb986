package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

func newTestStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestAuthentication(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	org, _, _, err := st.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	_, live, err := st.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "expiring", Scopes: Scopes, AllProjects: true, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	_, test, err := st.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "test", Test: true, Scopes: Scopes, AllProjects: true})
	if err != nil {
		t.Fatal(err)
	}
	revokedKey, revoked, err := st.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "to revoke", Scopes: Scopes, AllProjects: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeKey(ctx, revokedKey.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := &API{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var h http.Handler = a.Routes()
	_ = now

	cases := []struct {
		name   string
		header string
		extra  map[string]string
		later  bool
		status int
		code   string
	}{
		{"live ok", "Bearer " + live, nil, false, 200, ""},
		{"test ok", "Bearer " + test, nil, false, 200, ""},
		{"missing", "", nil, false, 401, fault.CodeMissingKey},
		{"wrong scheme", "Basic " + live, nil, false, 401, fault.CodeMalformedKey},
		{"mistyped", "Bearer sk_live_short", nil, false, 401, fault.CodeMalformedKey},
		{"unknown", "Bearer sk_live_" + "Z1234567890123456789012345678901234567890", nil, false, 401, fault.CodeUnknownKey},
		{"revoked", "Bearer " + revoked, nil, false, 401, fault.CodeRevokedKey},
		{"expired", "Bearer " + live, nil, true, 401, fault.CodeExpiredKey},
		{"live from browser (Origin)", "Bearer " + live, map[string]string{"Origin": "https://shop.example"}, false, 403, fault.CodeLiveBrowser},
		{"live from Node's fetch (sec-fetch-mode cors, no Origin)", "Bearer " + live, map[string]string{"Sec-Fetch-Mode": "cors"}, false, 200, ""},
		{"live from a page of the service's own origin", "Bearer " + live, map[string]string{"Origin": "http://example.com", "Sec-Fetch-Mode": "cors"}, false, 200, ""},
		{"live with same-origin fetch", "Bearer " + live, map[string]string{"Sec-Fetch-Mode": "same-origin"}, false, 200, ""},
		{"test from browser", "Bearer " + test, map[string]string{"Origin": "https://shop.example"}, false, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auth := &Authenticator{Store: st, Log: a.Log}
			if tc.later {
				auth.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			}
			h = auth.Middleware(a.handler(opByID(t, "getMe")))
			req := httptest.NewRequest("GET", "/v1/me", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			for k, v := range tc.extra {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var body map[string]any
			json.Unmarshal(rec.Body.Bytes(), &body)
			if tc.code != "" && body["code"] != tc.code {
				t.Fatalf("code %v, want %s", body["code"], tc.code)
			}
			if tc.status == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tc.status == 200 {
				k := body["key"].(map[string]any)
				if body["organization"].(map[string]any)["id"] != string(org.ID) || len(k["scopes"].([]any)) != len(Scopes) || k["all_projects"] != true {
					t.Fatalf("me: %v", body)
				}
			}
		})
	}
}

// opByID returns the declared operation with id.
func opByID(t *testing.T, id string) *operation {
	t.Helper()
	for _, op := range operations() {
		if op.ID == id {
			return op
		}
	}
	t.Fatalf("no operation %s", id)
	return nil
}
