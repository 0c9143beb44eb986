package mediatest

import "math"

// Resample converts pcm from rate from to rate to with a windowed-sinc (Blackman, 16 zero
// crossings each side) low-pass interpolator whose cutoff sits just under the lower of the two
// Nyquist frequencies. It is meant for preparing test fixtures, not for the media path.
func Resample(pcm []int16, from, to int) []int16 {
	if from <= 0 || to <= 0 || len(pcm) == 0 {
		return nil
	}
	if from == to {
		return append([]int16(nil), pcm...)
	}
	const zeros = 16
	cutoff := 0.95 * math.Min(1, float64(to)/float64(from)) // relative to the input Nyquist
	half := float64(zeros) / cutoff                         // half width, input samples
	taps := 2*int(math.Ceil(half)) + 1
	kernel := func(x float64) float64 {
		if math.Abs(x) > half {
			return 0
		}
		w := 0.42 + 0.5*math.Cos(math.Pi*x/half) + 0.08*math.Cos(2*math.Pi*x/half)
		return cutoff * sinc(cutoff*x) * w
	}
	// Output sample k sits at input position k·from/to = base + phase/L with L = to/gcd: there
	// are only L distinct fractional phases, so the filter is tabulated once per phase.
	g := gcd(from, to)
	L, M := to/g, from/g
	var table []float64
	if L <= 4096 {
		table = make([]float64, L*taps)
		for p := range L {
			frac := float64(p) / float64(L)
			for i := range taps {
				table[p*taps+i] = kernel(float64(i-taps/2) - frac)
			}
		}
	}
	n := int(int64(len(pcm)) * int64(to) / int64(from))
	out := make([]int16, n)
	for k := range out {
		pos := int64(k) * int64(M)
		base, phase := int(pos/int64(L)), int(pos%int64(L))
		var acc float64
		for i := range taps {
			j := base + i - taps/2
			if j < 0 || j >= len(pcm) {
				continue
			}
			var c float64
			if table != nil {
				c = table[phase*taps+i]
			} else {
				c = kernel(float64(i-taps/2) - float64(phase)/float64(L))
			}
			acc += float64(pcm[j]) * c
		}
		out[k] = saturate(acc)
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}
