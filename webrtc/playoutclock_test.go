package webrtc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/pion/rtp"
)

// newIdleReceiver returns a receiver that has had one packet, at 0, and counts the frames it
// delivers.
func newIdleReceiver(t testing.TB) (*audioReceiver, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	r, err := newAudioReceiverClock(CodecPCMU, 0, func(*media.Frame) { n.Add(1) }, func() time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.Receive(&rtp.Packet{Header: rtp.Header{Version: 2}, Payload: make([]byte, 160)}, 0)
	return r, &n
}

// Every 20 ms the clock steps each receiver: one whose page went quiet gets a frame per step
// once the packets are more than the slack behind, and one that has not sent yet gets silence
// the same way; a clock that was held up gives one frame, not a burst.
func TestPlayoutClockStepsReceivers(t *testing.T) {
	c := newPlayoutClock()
	idle, nIdle := newIdleReceiver(t)
	var nNever atomic.Int64
	never, err := newAudioReceiver(CodecPCMU, 0, func(*media.Frame) { nNever.Add(1) }) // no packet yet
	if err != nil {
		t.Fatal(err)
	}
	defer never.Close()
	for _, r := range []*audioReceiver{idle, never} {
		defer c.add(r)()
	}
	var now time.Duration
	for range 10 {
		now += media.FrameDuration
		c.tick(now)
	}
	if got := nIdle.Load(); got != 1+7 { // the packet's frame, then one per step after three
		t.Errorf("quiet receiver: %d frames after ten steps, want 8", got)
	}
	if got := nNever.Load(); got != 7 {
		t.Errorf("receiver without packets: %d frames after ten steps, want 7", got)
	}
	c.tick(now + 10*time.Second)
	if got := nIdle.Load(); got != 9 {
		t.Errorf("after the clock was held up: %d frames, want 9 (one more, not a burst)", got)
	}
}

// The clock is a stream of the media clock while receivers are registered, and only then: its
// ticks produce the owed frames.
func TestPlayoutClockOnMediaClock(t *testing.T) {
	c := newPlayoutClock()
	c.clock = media.NewClock(media.ClockOptions{Period: time.Millisecond})
	var now atomic.Int64
	c.now = func() time.Duration { return time.Duration(now.Add(int64(media.FrameDuration))) }
	r, n := newIdleReceiver(t)
	r2, _ := newIdleReceiver(t)
	remove := c.add(r)
	remove2 := c.add(r2)
	if got := c.clock.Len(); got != 1 {
		t.Fatalf("%d streams on the media clock with two receivers, want 1", got)
	}
	waitFor(t, 5*time.Second, "the clock's frame", func() bool { return n.Load() >= 2 })
	remove()
	if got := c.clock.Len(); got != 1 {
		t.Fatalf("%d streams on the media clock with one receiver left, want 1", got)
	}
	remove2()
	remove2()
	if got := c.clock.Len(); got != 0 {
		t.Fatalf("%d streams on the media clock without receivers", got)
	}
	remove3 := c.add(r2)
	defer remove3()
	if got := c.clock.Len(); got != 1 {
		t.Fatalf("%d streams on the media clock after a new receiver, want 1", got)
	}
}

// BenchmarkPlayoutClockTick: one tick of 100 receivers whose packets are on time.
func BenchmarkPlayoutClockTick(b *testing.B) {
	c := newPlayoutClock()
	var rs []*audioReceiver
	for i := 0; i < 100; i++ {
		r, err := newAudioReceiver(CodecPCMU, 0, func(*media.Frame) {})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		defer c.add(r)()
		rs = append(rs, r)
	}
	p := rtp.Packet{Header: rtp.Header{Version: 2}, Payload: make([]byte, 160)}
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += media.FrameDuration
		p.SequenceNumber++
		p.Timestamp += 160
		b.StopTimer()
		for _, r := range rs {
			r.Receive(&p, now)
		}
		b.StartTimer()
		c.tick(now)
	}
}
