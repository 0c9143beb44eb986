package llm

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// errDrainTimeout ends the short wait for a finished body's last bytes.
var errDrainTimeout = errors.New("llm: drain timeout")

// drainTimeout bounds how long a finished stream waits for the server to end the HTTP response,
// so that the connection can go back to the keep-alive pool.
const drainTimeout = 250 * time.Millisecond

// Watchdog phases.
const (
	wdFirst int32 = iota // waiting for the first event: the first-token timeout applies
	wdIdle               // streaming: the idle timeout applies
	wdDrain              // the reply is complete: a short drain timeout applies
	wdStopped
)

// watchdog enforces a stream's first-token and idle timeouts with one timer and no goroutine of
// its own. When a timeout expires it cancels the request's context with ErrFirstTokenTimeout or
// ErrIdleTimeout as the cause; the blocked read then returns and the stream classifies the error.
// Activity only stores a timestamp; the timer re-arms itself lazily, so the per-event cost is one
// clock read.
type watchdog struct {
	first, idle time.Duration
	cancel      context.CancelCauseFunc
	base        time.Time
	phase       atomic.Int32
	last        atomic.Int64 // nanoseconds since base of the last activity
	t           *time.Timer
}

// newWatchdog starts the watchdog. With no first-token timeout it starts in the idle phase.
func newWatchdog(first, idle time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{first: first, idle: idle, cancel: cancel, base: time.Now()}
	switch {
	case first > 0:
		w.phase.Store(wdFirst)
		w.t = time.AfterFunc(first, w.fire)
	case idle > 0:
		w.phase.Store(wdIdle)
		w.t = time.AfterFunc(idle, w.fire)
	default:
		w.phase.Store(wdStopped)
		w.t = time.AfterFunc(time.Hour, w.fire)
		w.t.Stop()
	}
	return w
}

func (w *watchdog) now() int64 { return int64(time.Since(w.base)) }

func (w *watchdog) fire() {
	switch w.phase.Load() {
	case wdFirst:
		w.cancel(ErrFirstTokenTimeout)
	case wdIdle:
		quiet := time.Duration(w.now() - w.last.Load())
		if quiet >= w.idle {
			w.cancel(ErrIdleTimeout)
			return
		}
		w.t.Reset(w.idle - quiet)
	case wdDrain:
		w.cancel(errDrainTimeout)
	}
}

// activity records that bytes arrived.
func (w *watchdog) activity() {
	if w.phase.Load() == wdIdle {
		w.last.Store(w.now())
	}
}

// firstEvent switches from the first-token timeout to the idle timeout.
func (w *watchdog) firstEvent() {
	if w.phase.Load() != wdFirst {
		return
	}
	if w.idle <= 0 {
		w.stop()
		return
	}
	w.last.Store(w.now())
	w.phase.Store(wdIdle)
	w.t.Reset(w.idle)
}

// drain arms the short timeout used while reading the end of a finished response.
func (w *watchdog) drain() {
	w.phase.Store(wdDrain)
	w.t.Reset(drainTimeout)
}

// stop disarms the watchdog for good.
func (w *watchdog) stop() {
	w.phase.Store(wdStopped)
	w.t.Stop()
}
