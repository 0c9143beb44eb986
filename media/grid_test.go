package media

import (
	"testing"
	"time"
)

func TestGridDelay(t *testing.T) {
	base := time.Unix(1_700_000_000, 0) // a whole second: on every 20 ms grid
	for _, c := range []struct {
		off, want time.Duration
	}{
		{0, 0},
		{time.Nanosecond, 20*time.Millisecond - time.Nanosecond},
		{7 * time.Millisecond, 13 * time.Millisecond},
		{20 * time.Millisecond, 0},
		{39*time.Millisecond + 999*time.Microsecond, time.Microsecond},
	} {
		if got := GridDelay(base.Add(c.off), 20*time.Millisecond); got != c.want {
			t.Errorf("GridDelay(+%v) = %v, want %v", c.off, got, c.want)
		}
	}
	if got := GridDelay(base.Add(3*time.Millisecond), 0); got != 0 {
		t.Errorf("a zero period: %v", got)
	}
}
