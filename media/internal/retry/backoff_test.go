package retry

import (
	"context"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 100e6, Max: 1e9}
	if b.Delay(0) != 0 {
		t.Error("first retry must be immediate")
	}
	for attempt, max := range map[int]int64{1: 100e6, 2: 200e6, 3: 400e6, 10: 1e9} {
		for range 20 {
			d := int64(b.Delay(attempt))
			if d < max/2 || d > max {
				t.Errorf("delay(%d) = %d, want [%d,%d]", attempt, d, max/2, max)
			}
		}
	}
}

func TestWaitStops(t *testing.T) {
	if !Wait(context.Background(), nil, 0) {
		t.Error("a zero wait on a live context must pass")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Wait(ctx, nil, time.Hour) {
		t.Error("a cancelled context must stop the wait")
	}
	stop := make(chan struct{})
	close(stop)
	if Wait(context.Background(), stop, time.Hour) {
		t.Error("a closed stop channel must stop the wait")
	}
	if !Wait(context.Background(), nil, time.Millisecond) {
		t.Error("a short wait must pass")
	}
}
