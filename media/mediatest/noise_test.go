package mediatest

import (
	"math"
	"slices"
	"testing"
)

func TestNoiseLevelAndSeed(t *testing.T) {
	for name, gen := range map[string]func(int, float64, uint64) []int16{"white": WhiteNoise, "pink": PinkNoise} {
		a := gen(16000, -20, 7)
		if got := LevelDBFS(a); math.Abs(got+20) > 0.05 {
			t.Errorf("%s: level %.3f dBFS, want -20", name, got)
		}
		if !slices.Equal(a, gen(16000, -20, 7)) {
			t.Errorf("%s: same seed gave different noise", name)
		}
		if slices.Equal(a, gen(16000, -20, 8)) {
			t.Errorf("%s: different seeds gave the same noise", name)
		}
	}
}

// Pink noise has most of its power at low frequencies, so its first difference (a high-pass)
// keeps far less of its power than white noise's does (which keeps twice its power).
func TestPinkNoiseIsLowHeavy(t *testing.T) {
	diffRatio := func(x []int16) float64 {
		d := make([]int16, len(x)-1)
		for i := range d {
			d[i] = x[i+1] - x[i]
		}
		return meanSquare(d) / meanSquare(x)
	}
	w := diffRatio(WhiteNoise(32000, -20, 1))
	p := diffRatio(PinkNoise(32000, -20, 1))
	if math.Abs(w-2) > 0.1 {
		t.Errorf("white noise difference/power = %.3f, want about 2", w)
	}
	if p > 0.5 {
		t.Errorf("pink noise difference/power = %.3f, want well under white's %.3f", p, w)
	}
}

func TestMixAtSNR(t *testing.T) {
	const rate = 16000
	sig := append(make([]int16, rate/2), Sine(rate, rate, 1000, -10)...) // half a second of silence first
	noise := WhiteNoise(len(sig), -30, 5)
	for _, snr := range []float64{0, 10, 20} {
		mixed, err := MixAtSNR(sig, noise, rate, snr)
		if err != nil {
			t.Fatal(err)
		}
		// The active level ignores the silent half second: measure on the tone part only.
		got, delay := SNR(mixed[rate/2:], sig[rate/2:], 0)
		if delay != 0 || math.Abs(got-snr) > 0.3 {
			t.Errorf("MixAtSNR %.0f dB: measured %.2f dB at delay %d", snr, got, delay)
		}
	}
	if _, err := MixAtSNR(sig, noise[:10], rate, 10); err == nil {
		t.Error("short noise: want an error")
	}
	if _, err := MixAtSNR(make([]int16, 100), noise, rate, 10); err == nil {
		t.Error("silent signal: want an error")
	}
}
