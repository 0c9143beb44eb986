package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/store"
)

// wantsStream reports whether the client asked for server-sent events.
func wantsStream(r *http.Request, asked bool) bool {
	if asked {
		return true
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// sse writes server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html),
// each flushed at once.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	stream  bool // the client asked for a stream
	started bool // the first event was written
}

func newSSE(w http.ResponseWriter, stream bool) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), stream: stream}
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

func (s *sse) event(name string, v any) {
	s.start()
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	_ = s.rc.Flush()
}

// onDelta is the callback that streams each piece of a reply as a delta event; nil when the
// client asked for no stream.
func (s *sse) onDelta() func(string) {
	if !s.stream {
		return nil
	}
	return func(d string) { s.event("delta", map[string]string{"text": d}) }
}

// fail ends a started stream with an error event.
func (s *sse) fail(ctx context.Context, log *slog.Logger, err error) error {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		log.ErrorContext(ctx, "chat: the reply failed", "err", err, "request_id", problem.RequestID(ctx))
		fe = fault.E(fault.CodeInternal, "The reply failed; quote request_id %s to support.", problem.RequestID(ctx))
	}
	s.event("error", map[string]string{"code": fe.Code, "detail": fe.Detail})
	return nil
}

// keepStreamed keeps the JSON answer of a streamed reply for the request's Idempotency-Key, so
// that a retry gets the reply (as JSON, or as a stream of one done event).
func (a *API) keepStreamed(ctx context.Context, c *call, v any) {
	if c.idem == nil {
		return
	}
	ans, err := c.answerOf(v)
	if err == nil {
		sctx := context.WithoutCancel(ctx)
		err = a.Store.Tx(sctx, func(tx *store.Tx) error { return a.saveIdempotency(sctx, tx, c, ans) })
	}
	if err != nil {
		a.Log.WarnContext(ctx, "the answer of an Idempotency-Key was not stored", "err", err, "request_id", problem.RequestID(ctx))
	}
}
