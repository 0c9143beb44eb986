package mediatest

import (
	"math"
	"testing"
)

func TestToneLevelAndDetection(t *testing.T) {
	for _, tc := range []struct {
		rate       int
		freq, dBFS float64
	}{
		{8000, 440, -6},
		{16000, 1000, 0},
		{16000, 3000, -20},
		{48000, 12000, -40},
	} {
		pcm := Sine(tc.rate/2, tc.rate, tc.freq, tc.dBFS)
		if got := LevelDBFS(pcm); math.Abs(got-tc.dBFS) > 0.05 {
			t.Errorf("%v: RMS level %.3f dBFS, want %.1f", tc, got, tc.dBFS)
		}
		if got := DetectTone(pcm, tc.rate, tc.freq); math.Abs(got-tc.dBFS) > 0.1 {
			t.Errorf("%v: DetectTone %.3f dBFS, want %.1f", tc, got, tc.dBFS)
		}
		if got := DetectTone(pcm, tc.rate, tc.freq*1.5); got > tc.dBFS-50 {
			t.Errorf("%v: DetectTone off-frequency reads %.1f dBFS, want < %.1f", tc, got, tc.dBFS-50)
		}
	}
}

func TestToneStreamsWithoutPhaseJump(t *testing.T) {
	whole := Sine(1000, 16000, 697, -3)
	g := NewTone(697, -3, 16000)
	var parts []int16
	for _, n := range []int{1, 159, 320, 7, 513} {
		buf := make([]int16, n)
		g.Fill(buf)
		parts = append(parts, buf...)
	}
	for i := range whole {
		if d := int(whole[i]) - int(parts[i]); d < -1 || d > 1 {
			t.Fatalf("sample %d: streamed %d, whole %d", i, parts[i], whole[i])
		}
	}
}
