// Package problem renders every API error as an RFC 9457 problem document
// (application/problem+json) with a stable code and the request's id.
//
// Errors classify themselves: an *Error knows its status and code, and Write turns any error into
// the wire form. Internal causes go to the log with the request id, never into detail. This package
// must never write anything but a problem document.
package problem

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// TypeBase prefixes the type URI of each problem code (RFC 9457 §3.1.1).
const TypeBase = "https://parley.dev/problems/"

// FieldError names one place in the request that does not fit: Pointer, an RFC 6901 JSON
// pointer into the JSON body, or Parameter, the name of a query parameter or header.
type FieldError struct {
	Pointer   string `json:"pointer"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
	Parameter string `json:"parameter,omitempty"`
}

// MarshalJSON writes pointer for a body error (even "", the whole body) and parameter instead
// for a parameter error.
func (f FieldError) MarshalJSON() ([]byte, error) {
	if f.Parameter != "" {
		return json.Marshal(struct {
			Parameter string `json:"parameter"`
			Code      string `json:"code"`
			Detail    string `json:"detail"`
		}{f.Parameter, f.Code, f.Detail})
	}
	type plain struct {
		Pointer string `json:"pointer"`
		Code    string `json:"code"`
		Detail  string `json:"detail"`
	}
	return json.Marshal(plain{f.Pointer, f.Code, f.Detail})
}

// Error is an API error that knows its HTTP status and stable code.
type Error struct {
	Status     int
	Code       string
	Detail     string
	Errors     []FieldError
	RetryAfter time.Duration
	// Extra members added to the document (for example "opens_at").
	Extra map[string]any
	// Cause is logged, never shown to the client.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Code + ": " + e.Detail + ": " + e.Cause.Error()
	}
	return e.Code + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an *Error with the status, code and detail.
func New(status int, code, detail string) *Error {
	return &Error{Status: status, Code: code, Detail: detail}
}

// Document is the JSON body of a problem.
type Document struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Code      string       `json:"code"`
	Detail    string       `json:"detail"`
	RequestID string       `json:"request_id"`
	Errors    []FieldError `json:"errors,omitempty"`
}

type ctxKey struct{}

// WithRequestID stores the request id in ctx.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// RequestID returns the request id stored in ctx, or "".
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(ctxKey{}).(string)
	return s
}

// Internal is the code of an unexpected fault on the service's side.
const Internal = "internal_error"

// Write renders err as a problem document. Errors that are not *Error become a 500 whose cause is
// logged with the request id.
func Write(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var pe *Error
	if !errors.As(err, &pe) {
		pe = &Error{Status: http.StatusInternalServerError, Code: Internal,
			Detail: "An unexpected error occurred on our side. Quote the request_id to support.", Cause: err}
	}
	rid := RequestID(r.Context())
	if pe.Status >= 500 && log != nil {
		log.ErrorContext(r.Context(), "request failed", "request_id", rid, "code", pe.Code, "status", pe.Status, "err", err)
	} else if pe.Cause != nil && log != nil {
		log.InfoContext(r.Context(), "request refused", "request_id", rid, "code", pe.Code, "status", pe.Status, "cause", pe.Cause)
	}
	doc := map[string]any{
		"type":       TypeBase + pe.Code,
		"title":      http.StatusText(pe.Status),
		"status":     pe.Status,
		"code":       pe.Code,
		"detail":     pe.Detail,
		"request_id": rid,
	}
	if len(pe.Errors) > 0 {
		doc["errors"] = pe.Errors
	}
	for k, v := range pe.Extra {
		if _, taken := doc[k]; !taken {
			doc[k] = v
		}
	}
	if pe.RetryAfter > 0 {
		secs := int((pe.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(pe.Status)
	_ = json.NewEncoder(w).Encode(doc)
}
