package llm

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWatchdogFirstToken(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	w := newWatchdog(30*time.Millisecond, 0, cancel)
	defer w.stop()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrFirstTokenTimeout) {
		t.Fatal(context.Cause(ctx))
	}
}

func TestWatchdogIdleRearmsOnActivity(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	w := newWatchdog(time.Hour, 80*time.Millisecond, cancel)
	defer w.stop()
	w.firstEvent()
	// Keep it busy for longer than the idle timeout: it must not fire.
	traffic := time.NewTicker(5 * time.Millisecond) // simulated traffic
	start := time.Now()
	for time.Since(start) < 250*time.Millisecond {
		w.activity()
		if ctx.Err() != nil {
			t.Fatalf("fired despite activity: %v", context.Cause(ctx))
		}
		<-traffic.C
	}
	traffic.Stop()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("idle timeout never fired")
	}
	if !errors.Is(context.Cause(ctx), ErrIdleTimeout) {
		t.Fatal(context.Cause(ctx))
	}
}

func TestWatchdogStopAndNone(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	w := newWatchdog(20*time.Millisecond, 0, cancel)
	w.firstEvent() // no idle timeout: stops for good
	w2 := newWatchdog(0, 0, cancel)
	w2.activity()
	w2.stop()
	timer := time.NewTimer(100 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		t.Fatal("a stopped watchdog fired")
	case <-timer.C:
	}
	w.stop()
}
