package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// simulate runs a test-mode call: it rings, is answered, and the engine runs in text (with the
// test providers) while the simulated other side says its lines, one per turn, each after a
// pause, then hangs up. Nobody is rung and no audio flows, but the status flow, the transcript,
// the steering commands and the events are the real ones.
func (rt *Runtime) simulate(l *live, lines []string) {
	ctx := l.ctx
	c := l.conv
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return !l.stopped.Load()
		case <-ctx.Done():
			return false
		}
	}
	if !wait(rt.o.RingFor) {
		return
	}
	l.p.status(store.ConvRinging)
	if !wait(rt.o.RingFor) {
		return
	}
	sess, err := rt.build(ctx, c, false, l.p)
	if err != nil {
		rt.log.Warn("test call: cannot build the engine", "conversation", c.ID, "err", err)
		l.p.end(session.EndProviderError, session.Cost{})
		return
	}
	l.setEngine(sess, true)
	if err := sess.StartText(ctx); err != nil {
		l.stop(session.EndFailed)
		return
	}
	l.p.status(store.ConvInProgress)
	if l.stopped.Load() {
		// Stopped while it was being answered: the stop found no engine yet.
		l.stop(session.EndAPI)
		return
	}
	for _, line := range lines {
		if !wait(rt.o.CalleePace) {
			return
		}
		for {
			_, err := l.send(ctx, line, nil, nil)
			if errors.Is(err, ErrBusy) {
				if !wait(rt.o.CalleePace / 4) {
					return
				}
				continue
			}
			if err != nil {
				if l.stopped.Load() {
					return // a stop (end, transfer) cancelled the reply; it ends the call with its reason
				}
				if !errors.Is(err, ErrEnded) && !errors.Is(err, context.Canceled) {
					rt.log.Warn("test call: the agent could not answer", "conversation", c.ID, "err", err)
					if sess.EndReason() == "" {
						l.stop(session.EndProviderError)
					}
				}
				return
			}
			break
		}
		if sess.EndReason() != "" {
			return // the agent ended the call
		}
	}
	if wait(rt.o.CalleePace) {
		l.stop(session.EndCallerHungUp)
	}
}
