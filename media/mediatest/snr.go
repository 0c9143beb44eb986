package mediatest

import "math"

// SNR compares signal with reference and returns the signal-to-noise ratio in dB, where the
// "noise" is whatever in signal is not the reference. It first finds the delay (in samples,
// between -maxDelay and maxDelay; positive when signal lags reference) at which the two
// correlate best, then scales the reference by the least-squares gain, so a delayed, louder or
// softer copy still reads as clean. An exact copy reads +Inf.
func SNR(signal, reference []int16, maxDelay int) (snrDB float64, delay int) {
	if len(signal) == 0 || len(reference) == 0 {
		return math.Inf(-1), 0
	}
	best := math.Inf(-1)
	for d := -maxDelay; d <= maxDelay; d++ {
		var c float64
		for i := range reference {
			j := i + d
			if j < 0 || j >= len(signal) {
				continue
			}
			c += float64(signal[j]) * float64(reference[i])
		}
		if c > best {
			best, delay = c, d
		}
	}
	var sr, rr, ss float64
	for i := range reference {
		j := i + delay
		if j < 0 || j >= len(signal) {
			continue
		}
		s, r := float64(signal[j]), float64(reference[i])
		sr += s * r
		rr += r * r
		ss += s * s
	}
	if rr == 0 {
		return math.Inf(-1), delay
	}
	g := sr / rr
	sig := g * g * rr
	noise := ss - 2*g*sr + g*g*rr
	if noise <= sig*1e-15 {
		return math.Inf(1), delay
	}
	return 10 * math.Log10(sig/noise), delay
}
