package mediatest

import (
	"math"
	"testing"
)

func TestDetectToneSilenceAndMixture(t *testing.T) {
	if got := DetectTone(make([]int16, 800), 8000, 1000); !math.IsInf(got, -1) {
		t.Errorf("silence reads %v, want -Inf", got)
	}
	a := Sine(1600, 8000, 697, -10)
	b := Sine(1600, 8000, 1209, -16)
	mix := make([]int16, len(a))
	for i := range a {
		mix[i] = a[i] + b[i]
	}
	if got := DetectTone(mix, 8000, 697); math.Abs(got+10) > 0.2 {
		t.Errorf("697 Hz in DTMF pair: %.2f dBFS, want -10", got)
	}
	if got := DetectTone(mix, 8000, 1209); math.Abs(got+16) > 0.2 {
		t.Errorf("1209 Hz in DTMF pair: %.2f dBFS, want -16", got)
	}
	if got := DetectTone(mix, 8000, 941); got > -50 {
		t.Errorf("941 Hz absent but reads %.2f dBFS", got)
	}
}
