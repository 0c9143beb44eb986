package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"
)

func TestWriteProblem(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{"classified", fault.New(http.StatusConflict, "project_frozen", "The project is frozen."), 409, "project_frozen", ""},
		{"wrapped", errors.Join(errors.New("ctx"), &fault.Error{Status: 422, Code: "unknown_field", Detail: "x", Errors: []fault.FieldError{{Pointer: "/foo", Code: "unknown_field", Detail: "not taken"}}}), 422, "unknown_field", ""},
		{"rate", &fault.Error{Status: 429, Code: "rate_limited", Detail: "slow down", RetryAfter: 1500 * time.Millisecond}, 429, "rate_limited", "2"},
		{"plain", errors.New("db on fire"), 500, fault.Internal, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/v1/x", nil)
			req = req.WithContext(WithRequestID(req.Context(), "req_123"))
			Write(rec, req, nil, tc.err)
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("status %d type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			if rec.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", rec.Header().Get("Retry-After"), tc.retryAfter)
			}
			var doc Document
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Code != tc.code || doc.Status != tc.status || doc.RequestID != "req_123" || doc.Type != TypeBase+tc.code || doc.Title == "" || doc.Detail == "" {
				t.Errorf("doc = %+v", doc)
			}
			if tc.name == "plain" && doc.Detail == "db on fire" {
				t.Error("internal cause leaked into detail")
			}
			if tc.name == "wrapped" && (len(doc.Errors) != 1 || doc.Errors[0].Pointer != "/foo") {
				t.Errorf("errors = %+v", doc.Errors)
			}
		})
	}
}
