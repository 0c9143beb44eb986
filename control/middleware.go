package control

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/parley-voice/parley/control/problem"
)

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{8,64}$`)

// requestID gives every request an id: the caller's X-Request-Id when it is sane, else a new one.
// The id is echoed in X-Request-Id and stored in the context for problem documents and logs.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !requestIDPattern.MatchString(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = "req_" + hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(problem.WithRequestID(r.Context(), id)))
	})
}

// accessLog logs one line per request and feeds the HTTP metrics.
func accessLog(log *slog.Logger, m *metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			m.inFlight.Inc()
			defer m.inFlight.Dec()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			route := chi.RouteContext(r.Context()).RoutePattern()
			if route == "" {
				route = "unmatched"
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			d := time.Since(start)
			m.requests.WithLabelValues(r.Method, route, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(r.Method, route).Observe(d.Seconds())
			lvl := slog.LevelInfo
			if status >= 500 {
				lvl = slog.LevelError
			}
			log.LogAttrs(r.Context(), lvl, "http request",
				slog.String("request_id", problem.RequestID(r.Context())),
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
				slog.Int("status", status), slog.Int("bytes", ww.BytesWritten()),
				slog.Duration("duration", d), slog.String("remote", r.RemoteAddr))
		})
	}
}

// recoverer turns a panic into a 500 problem document carrying the request id.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.ErrorContext(r.Context(), "panic in handler", "request_id", problem.RequestID(r.Context()),
						"panic", fmt.Sprint(v), "stack", string(debugStack()))
					problem.Write(w, r, nil, fmt.Errorf("panic: %v", v))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// bodyLimit caps every request body; reading past it fails with *http.MaxBytesError, which the
// API's JSON decoder turns into a 413 problem.
func bodyLimit(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				problem.Write(w, r, nil, fault.New(http.StatusRequestEntityTooLarge, "body_too_large",
					fmt.Sprintf("The request body is larger than %d bytes.", n)))
				return
			}
			if r.Body != nil {
				r.Body = http.MaxBytesReader(w, r.Body, n)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// maxHeaderBytes is the most request-header bytes the API reads (names and values); the HTTP
// server reads up to serverMaxHeaderBytes so that larger headers still get a problem document
// rather than net/http's plain-text 431.
const (
	maxHeaderBytes       = 64 << 10
	serverMaxHeaderBytes = 4 << 20
)

// headerLimit answers 431 with a problem document when the request's headers are larger than
// maxHeaderBytes (RFC 6585 §5).
func headerLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 0
		for k, vs := range r.Header {
			for _, v := range vs {
				n += len(k) + len(v) + 4
			}
		}
		if n > maxHeaderBytes {
			problem.Write(w, r, nil, fault.E(fault.CodeHeadersTooLarge, "The request headers are %d bytes; at most %d are read.", n, maxHeaderBytes))
			return
		}
		next.ServeHTTP(w, r)
	})
}
