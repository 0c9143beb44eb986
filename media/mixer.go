package media

import (
	"fmt"
	"math"
	"time"
)

// MixerOptions configures a Mixer.
type MixerOptions struct {
	// Limiter enables the soft limiter: instead of clipping, the mix is turned down just enough
	// to keep its peaks under Threshold, and the gain recovers smoothly over Release.
	Limiter bool
	// Threshold is the limiter's ceiling in dBFS (peak). Default -1 dBFS.
	Threshold float64
	// Release is the time constant with which the limiter's gain returns to unity. Default 50 ms.
	Release time.Duration
	// Rate is the sample rate, needed to time the release. Default PipelineRate.
	Rate int
}

// Mixer sums N mono inputs into one without wrapping around: samples are accumulated in 32 bits
// and then either saturated to 16 bits (counted in Clipped) or, with the limiter on, scaled by
// a gain that drops at once when a peak would exceed the ceiling and recovers with the release
// time constant. It keeps only the limiter's gain between calls and allocates nothing. It is not
// safe for concurrent use.
type Mixer struct {
	limiter bool
	ceiling float32 // peak, in sample units
	release float32 // per-sample recovery coefficient
	gain    float32
	acc     [MaxFrameSamples]int32
	clipped uint64
}

// NewMixer returns a mixer.
func NewMixer(o MixerOptions) (*Mixer, error) {
	if o.Rate == 0 {
		o.Rate = PipelineRate
	}
	if o.Rate < 1000 || o.Rate > MaxFrameRate {
		return nil, fmt.Errorf("media: mixer rate %d Hz out of range", o.Rate)
	}
	if o.Threshold == 0 {
		o.Threshold = -1
	}
	if o.Threshold > 0 || o.Threshold < -40 {
		return nil, fmt.Errorf("media: limiter threshold %v dBFS out of range (-40 to 0)", o.Threshold)
	}
	if o.Release == 0 {
		o.Release = 50 * time.Millisecond
	}
	if o.Release < 0 {
		return nil, fmt.Errorf("media: limiter release %v is negative", o.Release)
	}
	samples := o.Release.Seconds() * float64(o.Rate)
	return &Mixer{
		limiter: o.Limiter,
		ceiling: float32(32767 * math.Pow(10, o.Threshold/20)),
		release: float32(1 - math.Exp(-1/max(samples, 1))),
		gain:    1,
	}, nil
}

// Mix writes the sum of inputs into dst, sample by sample; inputs shorter than dst count as
// silence past their end, and longer ones are cut. dst may be one of the inputs.
func (m *Mixer) Mix(dst []int16, inputs ...[]int16) {
	for off := 0; off < len(dst); off += len(m.acc) {
		n := min(len(dst)-off, len(m.acc))
		acc := m.acc[:n]
		clear(acc)
		for _, in := range inputs {
			if off >= len(in) {
				continue
			}
			in = in[off:min(len(in), off+n)]
			for i, v := range in {
				acc[i] += int32(v)
			}
		}
		out := dst[off : off+n]
		if m.limiter {
			m.limit(out, acc)
			continue
		}
		for i, v := range acc {
			out[i] = m.saturate(v)
		}
	}
}

func (m *Mixer) saturate(v int32) int16 {
	switch {
	case v > math.MaxInt16:
		m.clipped++
		return math.MaxInt16
	case v < math.MinInt16:
		m.clipped++
		return math.MinInt16
	}
	return int16(v)
}

func (m *Mixer) limit(out []int16, acc []int32) {
	g, ceil, rel := m.gain, m.ceiling, m.release
	for i, v := range acc {
		x := float32(v)
		a := x
		if a < 0 {
			a = -a
		}
		if a*g > ceil {
			g = ceil / a // attack at once: this peak lands exactly on the ceiling
		}
		out[i] = m.saturate(int32(x * g))
		if g < 1 {
			g += (1 - g) * rel
			if g > 1-1.0/32768 { // within one step of unity at full scale: let go
				g = 1
			}
		}
	}
	m.gain = g
}

// MixFrames mixes frames of one rate into dst, whose Rate and N are set to the inputs' rate and
// longest length. It is an error for the inputs to differ in rate.
func (m *Mixer) MixFrames(dst *Frame, inputs ...*Frame) error {
	rate, n := 0, 0
	for _, f := range inputs {
		if rate == 0 {
			rate = f.Rate
		} else if f.Rate != rate {
			return fmt.Errorf("media: cannot mix frames at %d and %d Hz", rate, f.Rate)
		}
		n = max(n, len(f.PCM()))
	}
	out := dst.Samples[:n]
	clear(m.acc[:n])
	for _, f := range inputs {
		for i, v := range f.PCM() {
			m.acc[i] += int32(v)
		}
	}
	if m.limiter {
		m.limit(out, m.acc[:n])
	} else {
		for i, v := range m.acc[:n] {
			out[i] = m.saturate(v)
		}
	}
	dst.Rate, dst.N = rate, n
	return nil
}

// Gain returns the limiter's current gain (1 when it is not limiting or is off).
func (m *Mixer) Gain() float64 { return float64(m.gain) }

// Clipped returns how many output samples were saturated.
func (m *Mixer) Clipped() uint64 { return m.clipped }
