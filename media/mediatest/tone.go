package mediatest

import "math"

// fullScale is the amplitude of a 0 dBFS sine.
const fullScale = 32767.0

// Tone is a streaming sine generator: successive calls to Fill continue the waveform without a
// phase jump.
type Tone struct {
	// Freq is the frequency in Hz.
	Freq float64
	// Amplitude is the peak amplitude relative to full scale (1 = 0 dBFS).
	Amplitude float64
	// Rate is the sample rate in Hz.
	Rate int

	phase float64 // radians, in [0, 2π)
}

// NewTone returns a generator of a sine at freq Hz and level dBFS sampled at rate Hz.
func NewTone(freq, dBFS float64, rate int) *Tone {
	return &Tone{Freq: freq, Amplitude: DBToAmplitude(dBFS), Rate: rate}
}

// Fill writes the next len(dst) samples of the tone into dst.
func (g *Tone) Fill(dst []int16) {
	if g.Rate <= 0 {
		clear(dst)
		return
	}
	step := 2 * math.Pi * g.Freq / float64(g.Rate)
	a := g.Amplitude * fullScale
	for i := range dst {
		dst[i] = saturate(a * math.Sin(g.phase))
		g.phase += step
		if g.phase >= 2*math.Pi {
			g.phase -= 2 * math.Pi
		}
	}
}

// Sine returns n samples of a sine at freq Hz and level dBFS, sampled at rate Hz.
func Sine(n, rate int, freq, dBFS float64) []int16 {
	out := make([]int16, n)
	NewTone(freq, dBFS, rate).Fill(out)
	return out
}

// DBToAmplitude turns a level in dB relative to full scale into a linear amplitude (1 = full scale).
func DBToAmplitude(dB float64) float64 { return math.Pow(10, dB/20) }

// LevelDBFS returns the RMS level of pcm in dBFS (a full-scale sine reads 0 dBFS).
// Silence reads -Inf.
func LevelDBFS(pcm []int16) float64 {
	if len(pcm) == 0 {
		return math.Inf(-1)
	}
	return 10*math.Log10(meanSquare(pcm)) - 20*math.Log10(fullScale/math.Sqrt2)
}

func meanSquare(pcm []int16) float64 {
	if len(pcm) == 0 {
		return 0
	}
	var s float64
	for _, v := range pcm {
		f := float64(v)
		s += f * f
	}
	return s / float64(len(pcm))
}

func saturate(v float64) int16 {
	v = math.Round(v)
	switch {
	case v > math.MaxInt16:
		return math.MaxInt16
	case v < math.MinInt16:
		return math.MinInt16
	}
	return int16(v)
}
