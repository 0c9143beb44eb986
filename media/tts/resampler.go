package tts

import (
	"fmt"
	"math"
	"sync"
)

// resampler is a small streaming sample-rate converter for rational ratios (out/in = L/M after
// reduction): a polyphase FIR, i.e. conceptually upsample by L (zero stuffing), low-pass,
// downsample by M, computing only the outputs that are kept.
//
// The filter is a linear-phase windowed sinc (Kaiser window, β = 7) with its cut-off at 45 % of
// the lower of the two rates and about 24 taps per phase per unit of down-sampling ratio. That
// is modest — roughly 55-60 dB of stop-band rejection with a transition band from 0.45 to
// ~0.55 of the lower Nyquist — and is meant for speech on its way to a 16 kHz pipeline. Its
// group delay is half the filter length (under 1 ms at the rates used here); Flush emits the
// tail that delay holds back.
//
// Parley's codec package has the production resamplers; this one exists so that this package
// does not depend on it. It keeps its state between calls, so a stream can be fed in chunks of
// any size with the same result as in one piece, and it allocates nothing after construction.
type resampler struct {
	l, m  int       // interpolation and decimation factors (reduced)
	taps  int       // taps per phase
	coef  []float32 // phase-major: coef[p*taps+j] = h[p + j*l]
	buf   []float32 // input history and pending input; buf[0] is input index off
	phase int       // (output index * m) mod l for the next output
	next  int       // buf index of the newest input sample the next output needs
	zeros []int16   // flush input
}

type ratioKey struct{ in, out int }

var (
	coefMu    sync.Mutex
	coefCache = map[ratioKey]*polyphase{}
)

type polyphase struct {
	l, m, taps int
	coef       []float32
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// newResampler returns a converter from in to out Hz. Filters are designed once per ratio and
// shared (read-only) by every stream.
func newResampler(in, out int) (*resampler, error) {
	if in <= 0 || out <= 0 || in > 384000 || out > 384000 {
		return nil, fmt.Errorf("%w: cannot resample %d Hz → %d Hz", ErrInvalidOptions, in, out)
	}
	pp := design(in, out)
	r := &resampler{l: pp.l, m: pp.m, taps: pp.taps, coef: pp.coef}
	r.buf = make([]float32, pp.taps-1, 4096) // zero history before the first sample
	r.next = pp.taps - 1
	r.zeros = make([]int16, pp.taps)
	return r, nil
}

func design(in, out int) *polyphase {
	key := ratioKey{in, out}
	coefMu.Lock()
	defer coefMu.Unlock()
	if pp, ok := coefCache[key]; ok {
		return pp
	}
	g := gcd(in, out)
	l, m := out/g, in/g
	ratio := math.Max(1, float64(in)/float64(out))
	taps := int(math.Ceil(24 * ratio))
	n := taps * l
	// Cut-off in cycles per sample of the upsampled signal (rate l*in).
	fc := 0.45 * float64(min(in, out)) / float64(l*in)
	beta := 7.0
	i0b := besselI0(beta)
	h := make([]float64, n)
	centre := float64(n-1) / 2
	sum := 0.0
	for i := range h {
		x := float64(i) - centre
		s := 2 * fc
		if x != 0 {
			s = math.Sin(2*math.Pi*fc*x) / (math.Pi * x)
		}
		r := 2*float64(i)/float64(n-1) - 1
		w := besselI0(beta*math.Sqrt(math.Max(0, 1-r*r))) / i0b
		h[i] = s * w
		sum += h[i]
	}
	// Unity DC gain after zero-stuffing: the taps of each phase sum to ~1.
	scale := float64(l) / sum
	coef := make([]float32, n)
	for p := range l {
		for j := range taps {
			coef[p*taps+j] = float32(h[p+j*l] * scale)
		}
	}
	pp := &polyphase{l: l, m: m, taps: taps, coef: coef}
	coefCache[key] = pp
	return pp
}

// besselI0 is the zeroth-order modified Bessel function of the first kind (power series).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 50; k++ {
		term *= (x / (2 * float64(k))) * (x / (2 * float64(k)))
		sum += term
		if term < 1e-12*sum {
			break
		}
	}
	return sum
}

// maxOut is an upper bound of the outputs produced by feeding n more input samples.
func (r *resampler) maxOut(n int) int {
	pending := len(r.buf) - r.next
	return ((pending+n)*r.l)/r.m + 2
}

// process converts in, appending to out[:0]; out must have capacity maxOut(len(in)) to avoid
// allocating. It returns the converted samples.
func (r *resampler) process(in []int16, out []int16) []int16 {
	out = out[:0]
	for _, v := range in {
		r.buf = append(r.buf, float32(v))
	}
	taps, l, m := r.taps, r.l, r.m
	for r.next < len(r.buf) {
		c := r.coef[r.phase*taps : r.phase*taps+taps]
		x := r.buf[r.next-taps+1 : r.next+1]
		var acc float32
		for j, h := range c {
			acc += h * x[taps-1-j]
		}
		if acc > 32767 {
			acc = 32767
		} else if acc < -32768 {
			acc = -32768
		}
		out = append(out, int16(math.Round(float64(acc))))
		r.phase += m
		r.next += r.phase / l
		r.phase %= l
	}
	// Keep only the history the next output needs.
	if drop := r.next - (taps - 1); drop > 0 {
		if drop > len(r.buf) {
			drop = len(r.buf)
		}
		n := copy(r.buf, r.buf[drop:])
		r.buf = r.buf[:n]
		r.next -= drop
	}
	return out
}

// flush feeds enough silence to push out the samples the filter delay holds back.
func (r *resampler) flush(out []int16) []int16 {
	return r.process(r.zeros[:r.taps/2+1], out)
}
