package session

import "time"

// The loop's one-shot timers.

// timer is a stoppable one-shot timer whose channel is nil while it is not armed, so a select
// on an unarmed timer never fires.
type timer struct {
	t  *time.Timer
	on bool
}

func (t *timer) set(d time.Duration) {
	if t.t == nil {
		t.t = time.NewTimer(d)
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
	return t.t.C
}
