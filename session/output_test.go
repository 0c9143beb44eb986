package session

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
)

// manualTicks is a media clock's ticker that ticks when the test sends on it.
type manualTicks chan time.Time

func (m manualTicks) C() <-chan time.Time { return m }
func (m manualTicks) Stop()               {}

// TestOutputWaitRoom: a speaker that finds the queue full wakes once half of the queue has gone
// out on the media clock, not a frame before, and with no timer of its own; a cancelled wait
// returns false.
func TestOutputWaitRoom(t *testing.T) {
	c, err := New(Options{ID: "room", Agent: Agent{SystemPrompt: "x"}, LLM: stubLLM{}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(manualTicks)
	// Each tick reads one frame later than the last, so each sends exactly one frame.
	at := time.Now().Add(time.Hour)
	clock := media.NewClock(media.ClockOptions{Shards: 1,
		Now:       func() time.Time { at = at.Add(media.FrameDuration); return at },
		NewTicker: func(time.Duration) media.ClockSource { return ticks }})
	const queue = 6 // frames; a waiting speaker wakes after 3
	o := newOutput(c, nullPort{}, queue, clock)
	defer o.close()

	frame := make([]int16, media.SamplesPerFrame(media.PipelineRate))
	for n := 0; ; n++ {
		if n > 2*queue {
			t.Fatal("the queue never filled")
		}
		if k, ok := o.write(1, frame, n == 0); !ok {
			t.Fatal("write refused")
		} else if k == 0 {
			break
		}
	}
	step := int64(len(frame))
	sent0 := o.sentFrames()
	woke := make(chan bool, 1)
	go func() { woke <- o.waitRoom(context.Background()) }()
	waitFor(t, 5*time.Second, "the wait armed", func() bool { return o.roomAt.Load() != 0 })

	for i := int64(1); i <= 2; i++ {
		ticks <- time.Time{}
		waitFor(t, 5*time.Second, "a frame sent", func() bool { return o.sentFrames() == sent0+i*step })
	}
	select {
	case <-woke:
		t.Fatal("the speaker woke after 2 frames of a 6-frame queue")
	default:
	}
	ticks <- time.Time{}
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("waitRoom reported a cancelled wait")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the speaker did not wake after half the queue was sent")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { woke <- o.waitRoom(ctx) }()
	waitFor(t, 5*time.Second, "the wait armed", func() bool { return o.roomAt.Load() != 0 })
	cancel()
	if ok := <-woke; ok {
		t.Fatal("a cancelled wait reported room")
	}
	if o.roomAt.Load() != 0 {
		t.Fatal("a cancelled wait left its wake-up armed")
	}
}
