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

	"github.com/parley-voice/parley/control/fault"
)

// TypeBase prefixes the type URI of each problem code (RFC 9457 §3.1.1); the domain layer names
// types through fault.TypeBase, which is the same string.
const TypeBase = fault.TypeBase

// Document is the JSON body of a problem.
type Document struct {
	Type      string             `json:"type"`
	Title     string             `json:"title"`
	Status    int                `json:"status"`
	Code      string             `json:"code"`
	Detail    string             `json:"detail"`
	RequestID string             `json:"request_id"`
	Errors    []fault.FieldError `json:"errors,omitempty"`
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

// Write renders err as a problem document. Errors that are not *Error become a 500 whose cause is
// logged with the request id.
func Write(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var pe *fault.Error
	if !errors.As(err, &pe) {
		pe = &fault.Error{Status: http.StatusInternalServerError, Code: fault.Internal,
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
