package sip

import (
	"io"
	"math"

	"github.com/parley-voice/parley/media"
)

// ringback generates the North American ringback tone (440 + 480 Hz, 2 s on, 4 s off; ANSI
// T1.401) at about -19 dBFS per tone. It allocates nothing.
type ringback struct {
	rate   int
	n      int // samples since the start of the cadence
	p1, p2 float64
}

func newRingback(rate int) *ringback { return &ringback{rate: rate} }

func (r *ringback) fill(f *media.Frame) {
	if f.Init(r.rate) != nil {
		return
	}
	on, period := 2*r.rate, 6*r.rate
	amp := 0.11 * 32767
	w1, w2 := 2*math.Pi*440/float64(r.rate), 2*math.Pi*480/float64(r.rate)
	for i := range f.Samples[:f.N] {
		if r.n%period < on {
			f.Samples[i] = int16(amp * (math.Sin(r.p1) + math.Sin(r.p2)))
		}
		r.p1 = math.Mod(r.p1+w1, 2*math.Pi)
		r.p2 = math.Mod(r.p2+w2, 2*math.Pi)
		r.n++
	}
}

// chime is the fixed briefing when no voice is configured: three rising tones.
type chime struct {
	rate int
	n    int
}

func newChime(rate int) *chime { return &chime{rate: rate} }

func (c *chime) read(dst []int16) (int, error) {
	toneLen := c.rate / 4 // 250 ms each, with 100 ms gaps
	gap := c.rate / 10
	total := 3 * (toneLen + gap)
	if c.n >= total {
		return 0, io.EOF
	}
	freqs := [3]float64{660, 880, 1100}
	k := 0
	for ; k < len(dst) && c.n < total; k++ {
		seg := c.n / (toneLen + gap)
		pos := c.n % (toneLen + gap)
		if pos < toneLen {
			dst[k] = int16(0.2 * 32767 * math.Sin(2*math.Pi*freqs[seg]*float64(pos)/float64(c.rate)))
		} else {
			dst[k] = 0
		}
		c.n++
	}
	return k, nil
}
