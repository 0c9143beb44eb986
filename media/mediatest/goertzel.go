package mediatest

import "math"

// Goertzel returns the amplitude, relative to full scale, of the component of pcm at freq Hz
// (sampled at rate Hz). It evaluates the Hann-windowed discrete-time Fourier transform at exactly
// freq with the Goertzel recurrence, so a tone of amplitude A reads close to A whatever the
// length of pcm, and tones more than a few bins away (rate/len(pcm) Hz) barely leak in.
func Goertzel(pcm []int16, rate int, freq float64) float64 {
	n := len(pcm)
	if n < 2 || rate <= 0 {
		return 0
	}
	w := 2 * math.Pi * freq / float64(rate)
	coeff := 2 * math.Cos(w)
	var s1, s2, wsum float64
	for i, v := range pcm {
		win := 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n-1))
		wsum += win
		s0 := float64(v)*win + coeff*s1 - s2
		s2, s1 = s1, s0
	}
	re := s1 - s2*math.Cos(w)
	im := s2 * math.Sin(w)
	mag := math.Sqrt(re*re + im*im)
	return 2 * mag / wsum / fullScale
}

// DetectTone returns the level in dBFS of the tone at freq Hz in pcm (sampled at rate Hz):
// a full-scale sine at freq reads 0 dBFS, the same sine at half amplitude -6 dBFS. A signal
// with nothing at freq reads a large negative number (-Inf for digital silence).
func DetectTone(pcm []int16, rate int, freq float64) float64 {
	return 20 * math.Log10(Goertzel(pcm, rate, freq))
}
