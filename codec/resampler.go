package codec

import (
	"fmt"
	"math"
)

// Resampler converts a mono 16-bit PCM stream between 8, 16, 24 and 48 kHz in any direction. It
// is a rational polyphase FIR resampler (up by L, filter, down by M, computed without the zero
// samples) whose linear-phase low-pass prototype is a Kaiser-windowed sinc designed at
// construction:
//
//   - passband flat to 85% of the lower Nyquist frequency (3.4 kHz when one side is 8 kHz,
//     6.8 kHz at 16 kHz), designed ripple about 0.002 dB (tests hold it within ±0.005 dB on
//     the filter, ±0.01 dB on tones);
//   - stopband attenuated by at least 70 dB (72 to 76 dB as designed). Downsampling, it starts
//     at the new Nyquist frequency, so nothing above it aliases into the output. Upsampling, it
//     starts where the first image of the passband lands (the input rate minus the passband
//     edge: 4.6 kHz from 8 kHz), so no image of the passband survives, while input between 85%
//     and 100% of its Nyquist frequency, which telephone audio does not carry, leaves a partial
//     image in the band just above. The cut-off then sits exactly at the input Nyquist
//     frequency, which makes the prototype an L-th-band filter: every L-th output is the input
//     sample itself (a half-band filter at 8→16 kHz), and the wider transition halves the
//     length of the other branches;
//   - group delay Delay() output samples: 32 at 8→16 kHz (2 ms), 31 at 16→8 kHz (3.9 ms),
//     48 at 16→48 kHz (1 ms), 31 at 48→16 kHz (1.9 ms).
//
// Each polyphase branch stores only its non-zero taps, as float32 computed once. A branch that
// is its own mirror image (every branch when L ≤ 2) adds the two samples that share a
// coefficient before multiplying, which halves the multiplications. The inner loops are
// written for the Go compiler, which does not vectorise: fixed-size kernels for the upsampling
// branches, eight taps per step with no bounds checks for the long decimation filters.
//
// State (the last input samples and the filter phase) is kept across calls, so a stream cut
// into frames of any size gives exactly the output of the whole stream at once, without clicks
// at frame edges. 20 ms in gives exactly 20 ms out. It computes in float32 and never allocates
// after NewResampler. Not safe for concurrent use.
type Resampler struct {
	inRate, outRate int
	l, m            int              // output/input = l/m, in lowest terms
	taps            int              // input samples spanned by the prototype per output
	hist            int              // samples of history kept at the start of buf
	slack           int              // samples past the newest that windows read (against zero taps)
	branch          []resampleBranch // one per filter phase
	buf             []float32        // hist samples of history, then up to block new samples, then slack
	phase           int              // filter phase of the next output, 0..l-1
	next            int              // index in buf, less hist, of the next output's window start
	delay           int
	half            bool // ×2 by a 16-pair half-band: run takes the halfband loop
}

// resampleBranch is one polyphase branch: the output of phase p is computed from the samples
// off..off+n-1 of its window.
type resampleBranch struct {
	off, n int
	adv    int          // input samples to move the window by after this output
	next   int          // phase of the following output
	kind   resampleKind // how coef applies to the samples
	coef   []float32
}

type resampleKind uint8

const (
	// resampleDot: coef has n taps in window order (oldest sample first), n a multiple of 8.
	resampleDot resampleKind = iota
	// resampleSym: the taps are symmetric; coef holds the n/2 (a multiple of 8) coefficients
	// shared by the samples j and n-1-j, the outermost first. An odd centre tap appears as a
	// pair of the centre sample with itself, at half weight.
	resampleSym
	// resampleCopy: a single tap (the input sample itself, for an L-th-band filter).
	resampleCopy
)

const (
	resampleBlock       = 960  // input samples converted per inner pass (20 ms at 48 kHz)
	resampleStopbandDB  = 70.0 // minimum stopband attenuation of the prototype
	resamplePassbandEnd = 0.85 // passband edge as a fraction of the lower Nyquist frequency
)

// NewResampler returns a resampler from inRate to outRate, each 8000, 16000, 24000 or 48000.
// Equal rates give a pass-through copy.
func NewResampler(inRate, outRate int) (*Resampler, error) {
	for _, r := range []int{inRate, outRate} {
		switch r {
		case 8000, 16000, 24000, 48000:
		default:
			return nil, fmt.Errorf("%w: resampling rate %d (want 8000, 16000, 24000 or 48000)", ErrUnsupported, r)
		}
	}
	g := gcd(inRate, outRate)
	r := &Resampler{inRate: inRate, outRate: outRate, l: outRate / g, m: inRate / g}
	if r.l == 1 && r.m == 1 {
		return r, nil
	}
	r.design()
	b := r.branch
	if r.l == 2 && r.m == 1 {
		s, cp := b[0], b[1]
		if cp.kind == resampleSym {
			s, cp = cp, s
		}
		r.half = s.kind == resampleSym && len(s.coef) == 16 && s.n == 32 && cp.kind == resampleCopy && cp.coef[0] == 1
	}
	r.buf = make([]float32, r.hist+resampleBlock+r.slack)
	return r, nil
}

// resampleBands returns the passband and stopband edges in Hz for a conversion.
func resampleBands(inRate, outRate int) (pass, stop float64) {
	nyq := float64(min(inRate, outRate)) / 2
	pass = resamplePassbandEnd * nyq
	if outRate > inRate {
		// Only the images of the passband must go: the first lands at inRate - pass.
		return pass, min(float64(inRate)-pass, float64(outRate)/2)
	}
	return pass, nyq
}

// prototype returns the linear-phase low-pass prototype at the rate l×inRate, 2c+1 taps
// centred on index c, each polyphase branch scaled to unity gain at DC. The Kaiser window's
// shape is the sharpest that length allows for the transition band (Kaiser's formula solved
// for the attenuation). Taps that are zero in theory (the zero crossings of an L-th-band
// filter) are exactly zero.
func (r *Resampler) prototype(c int) []float64 {
	hi := float64(r.l * r.inRate) // rate of the (virtual) upsampled signal
	pass, stop := resampleBands(r.inRate, r.outRate)
	cutoff := (pass + stop) / 2 / hi // normalised to the high rate, cycles per sample
	a := 2.285*2*math.Pi*(stop-pass)/hi*float64(2*c) + 7.95
	beta := 0.1102 * (a - 8.7)
	h := make([]float64, 2*c+1)
	i0b := besselI0(beta)
	for t := 0; t <= c; t++ { // symmetric by construction
		x := 2 * cutoff * float64(t)
		sinc := 1.0
		if x != 0 {
			sinc = math.Sin(math.Pi*x) / (math.Pi * x)
			if math.Abs(x-math.Round(x)) < 1e-9 {
				sinc = 0 // a zero crossing of the sinc
			}
		}
		w := float64(t) / float64(c)
		v := 2 * cutoff * sinc * besselI0(beta*math.Sqrt(1-w*w)) / i0b
		h[c+t], h[c-t] = v, v
	}
	// Unity gain at DC for every branch, so that a constant input leaves no image.
	for p := 0; p < r.l; p++ {
		var sum float64
		for i := p; i < len(h); i += r.l {
			sum += h[i]
		}
		for i := p; i < len(h); i += r.l {
			h[i] /= sum
		}
	}
	return h
}

// resampleLayout is a filter bank before it is stored.
type resampleLayout struct {
	taps       int // the unpadded window
	branch     []resampleBranch
	coefs      [][]float64 // per branch, as the kernels read them
	starts     []int       // per branch, first window position, relative to the unpadded window
	padL, padR int
	cost       int // coefficients read per l outputs
}

// layout splits the prototype h (centred on c) into polyphase branches.
func (r *Resampler) layout(h []float64, c int) resampleLayout {
	taps := (len(h) + r.l - 1) / r.l
	lay := resampleLayout{
		taps:   taps,
		branch: make([]resampleBranch, r.l),
		coefs:  make([][]float64, r.l),
		starts: make([]int, r.l),
	}
	for p := range lay.branch {
		// Phase p, tap j multiplies input x[n0-j] with h[p+j·l]; in window order (oldest
		// first) tap j sits at position taps-1-j. Keep the span of non-zero taps.
		win := make([]float64, taps)
		for j := 0; p+j*r.l < len(h); j++ {
			win[taps-1-j] = h[p+j*r.l]
		}
		lo, hi := 0, len(win)
		for lo < hi && win[lo] == 0 {
			lo++
		}
		for hi > lo && win[hi-1] == 0 {
			hi--
		}
		span := win[lo:hi]
		b := &lay.branch[p]
		b.adv, b.next = (p+r.m)/r.l, (p+r.m)%r.l
		// The mirror of tap p+j·l is 2c-p-j·l: the branch is its own mirror when
		// 2c-p ≡ p (mod l), and then its span is symmetric. Folded, it has ceil(n/2) pairs
		// (an odd centre pairs with itself at half weight); the kernels take multiples of 8,
		// so pad with zero taps, on both ends when folded, else at the old end.
		var k []float64
		switch {
		case len(span) == 1:
			b.kind = resampleCopy
			k = span
		case (2*c-2*p)%r.l == 0:
			b.kind = resampleSym
			pairs := (len(span) + 1) / 2
			pad := (8 - pairs%8) % 8
			k = make([]float64, pad, pad+pairs)
			k = append(k, span[:pairs]...)
			if len(span)%2 == 1 {
				k[len(k)-1] /= 2
			}
			lo -= pad
			hi += pad
		default:
			b.kind = resampleDot
			pad := (8 - len(span)%8) % 8
			k = append(make([]float64, pad), span...)
			lo -= pad
		}
		lay.coefs[p], lay.starts[p] = k, lo
		b.n = hi - lo
		lay.padL = max(lay.padL, -lo)
		lay.padR = max(lay.padR, hi-taps)
		lay.cost += len(k)
	}
	return lay
}

// design computes the polyphase filter bank. The length comes from Kaiser's estimate for the
// attenuation (plus a decibel, as the estimate runs about half a decibel short), centred on a
// multiple of m so that the delay is a whole number of output samples; then it grows while
// the kernels' padding absorbs the extra taps, which sharpens the filter for free.
func (r *Resampler) design() {
	hi := float64(r.l * r.inRate)
	pass, stop := resampleBands(r.inRate, r.outRate)
	a := resampleStopbandDB + 1
	n := int(math.Ceil((a-7.95)/(2.285*2*math.Pi*(stop-pass)/hi))) + 1
	c := (n/2 + r.m - 1) / r.m * r.m
	lay := r.layout(r.prototype(c), c)
	for {
		h := r.prototype(c + r.m)
		next := r.layout(h, c+r.m)
		if next.cost > lay.cost {
			break
		}
		c, lay = c+r.m, next
	}
	r.delay = c / r.m
	r.branch = lay.branch
	// Windows start padL before the unpadded window and reach padR past it (those samples
	// meet zero taps only, but must exist).
	r.taps = lay.taps
	r.hist = lay.padL + lay.taps - 1
	r.slack = lay.padR
	pool := make([]float32, 0, lay.cost)
	for p, k := range lay.coefs {
		b := &r.branch[p]
		b.off = lay.starts[p] + lay.padL
		start := len(pool)
		for _, v := range k {
			pool = append(pool, float32(v))
		}
		b.coef = pool[start:len(pool):len(pool)]
	}
}

func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 64; k++ {
		term *= (x / (2 * float64(k))) * (x / (2 * float64(k)))
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// InRate returns the input sample rate.
func (r *Resampler) InRate() int { return r.inRate }

// OutRate returns the output sample rate.
func (r *Resampler) OutRate() int { return r.outRate }

// Delay returns the group delay in output samples: output sample k corresponds to input time
// k - Delay() (in output samples).
func (r *Resampler) Delay() int { return r.delay }

// outputs returns how many outputs n more input samples complete, given the state.
func (r *Resampler) outputs(n int) int {
	num := (n-r.next)*r.l - r.phase
	if num <= 0 {
		return 0
	}
	return (num + r.m - 1) / r.m
}

// OutLen returns exactly how many samples the next Process call with n input samples will
// write. It is never more than MaxOutLen(n), and a 20 ms frame gives exactly 20 ms.
func (r *Resampler) OutLen(n int) int {
	if r.buf == nil {
		return n
	}
	return r.outputs(n)
}

// MaxOutLen returns the most samples Process can write for n input samples, whatever the
// state: ceil(n × outRate / inRate). Size dst buffers with it.
func (r *Resampler) MaxOutLen(n int) int { return (n*r.l + r.m - 1) / r.m }

// Reset clears the history, as if the resampler were new.
func (r *Resampler) Reset() {
	clear(r.buf)
	r.phase, r.next = 0, 0
}

// Process resamples src, continuing the stream, writes the result to dst and returns the number
// of samples written, OutLen(len(src)). If dst is shorter than that, the samples that do not
// fit are dropped (the stream stays in step); size dst with OutLen or MaxOutLen.
func (r *Resampler) Process(dst, src []int16) int {
	if r.buf == nil {
		return copy(dst, src)
	}
	hist := r.hist
	written := 0
	for len(src) > 0 {
		chunk := min(len(src), resampleBlock)
		in := r.buf[hist : hist+chunk]
		for i, s := range src[:chunk] {
			in[i] = float32(s)
		}
		src = src[chunk:]
		// The outputs this chunk completes: compute those that fit in dst, then step the
		// state over all of them.
		cnt := r.outputs(chunk)
		if k := min(cnt, len(dst)-written); k > 0 {
			r.run(dst[written:written+k], r.buf[:hist+chunk+r.slack])
			written += k
		}
		adv := r.phase + cnt*r.m
		r.next += adv/r.l - chunk
		r.phase = adv % r.l
		copy(r.buf[:hist], r.buf[chunk:chunk+hist])
	}
	return written
}

// run writes len(out) outputs from the samples x, starting at the current state (which it does
// not change).
func (r *Resampler) run(out []int16, x []float32) {
	pos, phase := r.next, r.phase
	br := r.branch
	if r.half {
		halfband(out, x, pos, phase, br)
		return
	}
	for i := range out {
		b := &br[phase]
		w := x[pos+b.off : pos+b.off+b.n]
		var v float32
		switch b.kind {
		case resampleSym:
			if len(b.coef) == 16 && len(w) == 32 {
				v = symDot16((*[16]float32)(b.coef), (*[32]float32)(w))
			} else {
				h := len(b.coef)
				v = symDot(b.coef, w[:h], w[len(w)-h:])
			}
		case resampleCopy:
			v = b.coef[0] * w[0]
		default:
			if len(b.coef) == 32 && len(w) == 32 {
				v = dot32((*[32]float32)(b.coef), (*[32]float32)(w))
			} else {
				v = dot(b.coef, w)
			}
		}
		out[i] = toInt16(v)
		pos += b.adv
		phase = b.next
	}
}

// halfband is run for ×2 upsampling by a 16-pair half-band filter (8→16 and 24→48 kHz): of
// the two phases, one is the folded filter and the other a copy of the input sample.
func halfband(out []int16, x []float32, pos, phase int, br []resampleBranch) {
	symFirst := br[0].kind == resampleSym
	s, cp := &br[0], &br[1]
	if !symFirst {
		s, cp = cp, s
	}
	c := (*[16]float32)(s.coef)
	offS, offC := s.off, cp.off
	i := 0
	if phase == 1 && len(out) > 0 {
		if symFirst {
			out[0] = int16(x[pos+offC])
		} else {
			out[0] = toInt16(symDot16(c, (*[32]float32)(x[pos+offS:pos+offS+32])))
		}
		pos++
		i = 1
	}
	for ; i+1 < len(out); i += 2 {
		f := toInt16(symDot16(c, (*[32]float32)(x[pos+offS:pos+offS+32])))
		d := int16(x[pos+offC]) // an input sample, exactly
		if symFirst {
			out[i], out[i+1] = f, d
		} else {
			out[i], out[i+1] = d, f
		}
		pos++
	}
	if i < len(out) {
		if symFirst {
			out[i] = toInt16(symDot16(c, (*[32]float32)(x[pos+offS:pos+offS+32])))
		} else {
			out[i] = int16(x[pos+offC])
		}
	}
}

// The kernels below are written out for the Go compiler, which does not vectorise: constant
// indices into arrays need no bounds checks, and several independent sums keep the adder
// pipelines busy. The fixed-size ones cover the upsamplers (a 30-tap half-band branch from 8 or
// 24 kHz, 29-tap branches for ×3 and ×6); the loops take the long decimation filters.

// dot returns the inner product of a and b[:len(a)]; len(a) is a multiple of 8.
func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	for len(a) >= 8 && len(b) >= 8 {
		k, x := (*[8]float32)(a), (*[8]float32)(b)
		s0 += k[0]*x[0] + k[4]*x[4]
		s1 += k[1]*x[1] + k[5]*x[5]
		s2 += k[2]*x[2] + k[6]*x[6]
		s3 += k[3]*x[3] + k[7]*x[7]
		a, b = a[8:], b[8:]
	}
	return (s0 + s1) + (s2 + s3)
}

// symDot returns the sum over j of c[j]·(lo[j] + hi[len(hi)-1-j]), the folded form of a
// symmetric filter: half the multiplications of dot. len(c) is a multiple of 8, and lo and hi
// are at least as long.
func symDot(c, lo, hi []float32) float32 {
	hi = hi[:len(c)]
	var s0, s1, s2, s3 float32
	for len(c) >= 8 && len(lo) >= 8 && len(hi) >= 8 {
		k, l, h := (*[8]float32)(c), (*[8]float32)(lo), (*[8]float32)(hi[len(hi)-8:])
		s0 += k[0]*(l[0]+h[7]) + k[4]*(l[4]+h[3])
		s1 += k[1]*(l[1]+h[6]) + k[5]*(l[5]+h[2])
		s2 += k[2]*(l[2]+h[5]) + k[6]*(l[6]+h[1])
		s3 += k[3]*(l[3]+h[4]) + k[7]*(l[7]+h[0])
		c, lo, hi = c[8:], lo[8:], hi[:len(hi)-8]
	}
	return (s0 + s1) + (s2 + s3)
}

// symDot16 is symDot for 16 pairs over a 32-sample window.
func symDot16(c *[16]float32, x *[32]float32) float32 {
	s0 := c[0]*(x[0]+x[31]) + c[1]*(x[1]+x[30])
	s1 := c[2]*(x[2]+x[29]) + c[3]*(x[3]+x[28])
	s2 := c[4]*(x[4]+x[27]) + c[5]*(x[5]+x[26])
	s3 := c[6]*(x[6]+x[25]) + c[7]*(x[7]+x[24])
	s0 += c[8]*(x[8]+x[23]) + c[9]*(x[9]+x[22])
	s1 += c[10]*(x[10]+x[21]) + c[11]*(x[11]+x[20])
	s2 += c[12]*(x[12]+x[19]) + c[13]*(x[13]+x[18])
	s3 += c[14]*(x[14]+x[17]) + c[15]*(x[15]+x[16])
	return (s0 + s1) + (s2 + s3)
}

// dot32 is dot for 32 taps.
func dot32(a, b *[32]float32) float32 {
	s0 := a[0]*b[0] + a[1]*b[1] + a[2]*b[2] + a[3]*b[3]
	s1 := a[4]*b[4] + a[5]*b[5] + a[6]*b[6] + a[7]*b[7]
	s2 := a[8]*b[8] + a[9]*b[9] + a[10]*b[10] + a[11]*b[11]
	s3 := a[12]*b[12] + a[13]*b[13] + a[14]*b[14] + a[15]*b[15]
	s0 += a[16]*b[16] + a[17]*b[17] + a[18]*b[18] + a[19]*b[19]
	s1 += a[20]*b[20] + a[21]*b[21] + a[22]*b[22] + a[23]*b[23]
	s2 += a[24]*b[24] + a[25]*b[25] + a[26]*b[26] + a[27]*b[27]
	s3 += a[28]*b[28] + a[29]*b[29] + a[30]*b[30] + a[31]*b[31]
	return (s0 + s1) + (s2 + s3)
}

// toInt16 rounds to the nearest integer (halves up) and saturates, without a data-dependent
// branch: after the clamp v+32768.5 is positive, so truncation is the floor.
func toInt16(v float32) int16 {
	if v > 32767 {
		v = 32767
	}
	if v < -32768 {
		v = -32768
	}
	return int16(int32(v+32768.5) - 32768)
}
