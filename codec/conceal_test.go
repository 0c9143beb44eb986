package codec

import "testing"

func TestFadeConcealerGainSteps(t *testing.T) {
	c := newFadeConcealer(8000)
	frame := make([]int16, 160)
	for i := range frame {
		frame[i] = 30000
	}
	c.remember(frame)
	out := make([]int16, 160)
	for lost := 0; lost < fadeFrames; lost++ {
		n, err := c.conceal(out)
		if err != nil || n != 160 {
			t.Fatalf("conceal: %d, %v", n, err)
		}
		// Linear fade from (fadeFrames-lost)/fadeFrames to (fadeFrames-lost-1)/fadeFrames.
		first := 30000 * float64(fadeFrames-lost) / fadeFrames
		last := 30000 * (float64(fadeFrames-lost) - float64(159)/160) / fadeFrames
		if d := float64(out[0]) - first; d > 2 || d < -2 {
			t.Errorf("frame %d starts at %d, want %.0f", lost, out[0], first)
		}
		if d := float64(out[159]) - last; d > 2 || d < -2 {
			t.Errorf("frame %d ends at %d, want %.0f", lost, out[159], last)
		}
	}
	// Shorter dst: the tail of the last frame, still fading out; longer dst: one frame only.
	c.remember(frame)
	if n, _ := c.conceal(out[:80]); n != 80 {
		t.Errorf("short dst: wrote %d, want 80", n)
	}
	c.remember(frame)
	if n, _ := c.conceal(make([]int16, 1000)); n != 160 {
		t.Errorf("long dst: wrote %d, want one frame of 160", n)
	}
	// Frames longer than the history keep their most recent part.
	long := make([]int16, maxConcealFrame+100)
	long[len(long)-1] = 1234
	c.remember(long)
	buf := make([]int16, maxConcealFrame)
	if n, _ := c.conceal(buf); n != maxConcealFrame || buf[n-1] == 0 {
		t.Errorf("long frame: n=%d, last sample %d", n, buf[n-1])
	}
}
