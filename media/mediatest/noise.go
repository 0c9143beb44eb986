package mediatest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Noise is a seeded noise generator: the same seed always gives the same samples.
type Noise struct {
	rng  *rand.Rand
	pink bool
	// Voss-McCartney state for pink noise: one white value per octave row.
	rows    [16]float64
	running float64
	counter uint32
}

// NewWhiteNoise returns a generator of Gaussian white noise.
func NewWhiteNoise(seed uint64) *Noise {
	return &Noise{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

// NewPinkNoise returns a generator of pink noise (power falling 3 dB per octave), made with the
// Voss-McCartney algorithm over 16 octave rows plus a white term.
func NewPinkNoise(seed uint64) *Noise {
	n := NewWhiteNoise(seed)
	n.pink = true
	for i := range n.rows {
		n.rows[i] = n.rng.NormFloat64()
		n.running += n.rows[i]
	}
	return n
}

// next returns one sample of unit-variance-ish noise (exact variance does not matter: Fill
// normalises the level).
func (n *Noise) next() float64 {
	if !n.pink {
		return n.rng.NormFloat64()
	}
	n.counter++
	// Update the row picked by the number of trailing zeros: row k changes every 2^k samples.
	k := 0
	for c := n.counter; c&1 == 0 && k < len(n.rows)-1; c >>= 1 {
		k++
	}
	v := n.rng.NormFloat64()
	n.running += v - n.rows[k]
	n.rows[k] = v
	return (n.running + n.rng.NormFloat64()) / math.Sqrt(float64(len(n.rows)+1))
}

// Fill writes len(dst) samples of noise at an RMS level of dBFS into dst. The level is exact
// over dst (it is normalised after generation), unless samples clip.
func (n *Noise) Fill(dst []int16, dBFS float64) {
	if len(dst) == 0 {
		return
	}
	buf := make([]float64, len(dst))
	var ss float64
	for i := range buf {
		buf[i] = n.next()
		ss += buf[i] * buf[i]
	}
	rms := math.Sqrt(ss / float64(len(buf)))
	if rms == 0 {
		clear(dst)
		return
	}
	g := DBToAmplitude(dBFS) * fullScale / math.Sqrt2 / rms
	for i, v := range buf {
		dst[i] = saturate(v * g)
	}
}

// WhiteNoise returns n samples of seeded Gaussian white noise at dBFS RMS.
func WhiteNoise(n int, dBFS float64, seed uint64) []int16 {
	out := make([]int16, n)
	NewWhiteNoise(seed).Fill(out, dBFS)
	return out
}

// PinkNoise returns n samples of seeded pink noise at dBFS RMS.
func PinkNoise(n int, dBFS float64, seed uint64) []int16 {
	out := make([]int16, n)
	NewPinkNoise(seed).Fill(out, dBFS)
	return out
}

// ActiveLevel returns the power (mean square, in sample units squared) of signal over its active
// part: the 20 ms frames (at rate Hz) whose energy is within 40 dB of the loudest frame, in the
// spirit of the active speech level of ITU-T P.56. Silent padding does not dilute it.
func ActiveLevel(signal []int16, rate int) float64 {
	fl := rate / 50
	if fl <= 0 || len(signal) == 0 {
		return 0
	}
	var maxE float64
	for i := 0; i+fl <= len(signal); i += fl {
		maxE = max(maxE, meanSquare(signal[i:i+fl]))
	}
	var sum float64
	var cnt int
	for i := 0; i+fl <= len(signal); i += fl {
		if e := meanSquare(signal[i : i+fl]); e > 0 && e >= maxE*1e-4 {
			sum += e
			cnt++
		}
	}
	if cnt == 0 {
		return 0
	}
	return sum / float64(cnt)
}

// MixAtSNR returns signal plus noise scaled so that the active level of signal (ActiveLevel at
// rate Hz) is snrDB above the power of noise. noise must be at least as long as signal; the
// result has the length of signal and saturates rather than wraps.
func MixAtSNR(signal, noise []int16, rate int, snrDB float64) ([]int16, error) {
	if len(noise) < len(signal) {
		return nil, fmt.Errorf("mediatest: noise has %d samples, signal %d", len(noise), len(signal))
	}
	ps := ActiveLevel(signal, rate)
	pn := meanSquare(noise[:len(signal)])
	if ps == 0 || pn == 0 {
		return nil, errors.New("mediatest: signal or noise is silent")
	}
	g := math.Sqrt(ps / pn / math.Pow(10, snrDB/10))
	out := make([]int16, len(signal))
	for i := range out {
		out[i] = saturate(float64(signal[i]) + g*float64(noise[i]))
	}
	return out, nil
}
