package mediatest

import (
	"math"
	"testing"
)

func TestResampleKeepsPassbandAndRemovesAliases(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{22050, 16000}, {16000, 8000}, {8000, 16000}, {16000, 48000}} {
		in := Sine(tc.from/2, tc.from, 1000, -6)
		out := Resample(in, tc.from, tc.to)
		if want := len(in) * tc.to / tc.from; len(out) != want {
			t.Errorf("%d→%d: %d samples, want %d", tc.from, tc.to, len(out), want)
		}
		// Skip the filter's edges.
		mid := out[len(out)/8 : len(out)*7/8]
		if got := DetectTone(mid, tc.to, 1000); math.Abs(got+6) > 0.2 {
			t.Errorf("%d→%d: 1 kHz tone at %.2f dBFS, want -6", tc.from, tc.to, got)
		}
	}
	// 9 kHz at 22050 Hz is above the 8 kHz Nyquist of 16 kHz: it must be filtered, not aliased
	// to 7 kHz.
	out := Resample(Sine(11025, 22050, 9000, -6), 22050, 16000)
	if got := LevelDBFS(out[1000 : len(out)-1000]); got > -50 {
		t.Errorf("9 kHz tone survived downsampling at %.1f dBFS", got)
	}
	if Resample(nil, 8000, 16000) != nil || Resample([]int16{1}, 0, 8000) != nil {
		t.Error("degenerate input should give nil")
	}
}
