package media

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The FFT agrees with a direct DFT, at both sizes (the 8 kHz one has a radix-2 pass first).
func TestVADFFTMatchesDFT(t *testing.T) {
	for _, n := range []int{256, 512} {
		var f vadFFT
		f.init(n)
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		x := make([]float64, n)
		x32 := make([]float32, n)
		w := make([]float32, n)
		for i := range x {
			x[i] = rng.Float64()*2 - 1
			x32[i], w[i] = float32(x[i]), 1
		}
		got := f.realPower(x32, w)
		if len(got) != n/2+1 {
			t.Fatalf("n=%d: %d bins, want %d", n, len(got), n/2+1)
		}
		for k := 0; k <= n/2; k++ {
			var sr, si float64
			for i, v := range x {
				a := -2 * math.Pi * float64(k*i) / float64(n)
				sr += v * math.Cos(a)
				si += v * math.Sin(a)
			}
			want := sr*sr + si*si
			if math.Abs(float64(got[k])-want) > 1e-3*max(want, 1) {
				t.Fatalf("n=%d bin %d: power %g, want %g", n, k, got[k], want)
			}
		}
	}
}

// A pure tone lands in its bin: a cheap check that the window is applied sample by sample.
func TestVADFFTWindowedTone(t *testing.T) {
	const n = 512
	var f vadFFT
	f.init(n)
	x := make([]float32, n)
	w := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Cos(2 * math.Pi * 40 * float64(i) / n))
		w[i] = float32(0.5 - 0.5*math.Cos(2*math.Pi*(float64(i)+0.5)/n))
	}
	p := f.realPower(x, w)
	for k, v := range p {
		switch {
		case k == 40 && math.Abs(float64(v)/(n*n/16)-1) > 1e-3:
			t.Fatalf("bin 40: power %g, want %g", v, float64(n*n/16))
		case (k < 39 || k > 41) && v > 1e-6*n*n:
			t.Fatalf("bin %d: leakage %g", k, v)
		}
	}
}
