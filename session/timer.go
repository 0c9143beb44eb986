package session

import (
	"time"

	"github.com/parley-voice/parley/media"
)

// The conversation's time: the clock its timestamps are read from and the one-shot timers of its
// loop. Both come from Options (Now, NewTimer), so that turn-taking can be tested on a manual
// clock (media/mediatest) without sleeping; the default is the system's.

// sysTimer is a *time.Timer as a media.PacerTimer (the timer interface the repository already
// has: C, Reset, Stop with the semantics of Go 1.23's time.Timer).
type sysTimer struct{ t *time.Timer }

func newSysTimer(d time.Duration) media.PacerTimer { return sysTimer{time.NewTimer(d)} }

func (s sysTimer) C() <-chan time.Time        { return s.t.C }
func (s sysTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
func (s sysTimer) Stop() bool                 { return s.t.Stop() }

// timer is a stoppable one-shot timer whose channel is nil while it is not armed, so a select
// on an unarmed timer never fires. Its underlying timer is made on first use by newTimer (the
// conversation's).
type timer struct {
	newTimer func(time.Duration) media.PacerTimer
	t        media.PacerTimer
	on       bool
}

func (t *timer) set(d time.Duration) {
	if t.t == nil {
		t.t = t.newTimer(d)
	} else {
		t.t.Reset(d)
	}
	t.on = true
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
	t.on = false
}

func (t *timer) fired() { t.on = false }

func (t *timer) active() bool { return t.on }

func (t *timer) C() <-chan time.Time {
	if !t.on {
		return nil
	}
	return t.t.C()
}

// loopTimers returns every timer of the loop.
func (c *Conversation) loopTimers() [7]*timer {
	return [...]*timer{&c.tEndpoint, &c.tMaxWait, &c.tSilence, &c.tMaxDur, &c.tBarge, &c.tFiller, &c.tDTMF}
}
