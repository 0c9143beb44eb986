package codec

// G.722 (ITU-T G.722, 09/2012) at 64 kbit/s: the 16 kHz signal is split by a 24-tap quadrature
// mirror filter into a lower (0–4 kHz) and a higher (4–8 kHz) band at 8 kHz each; the lower band
// is coded with 6-bit ADPCM and the higher with 2-bit ADPCM (sub-band ADPCM, SB-ADPCM). One
// octet carries one pair of input samples: bits 7–6 the higher-band code IH, bits 5–0 the
// lower-band code IL. This is a fresh implementation of the block diagrams of G.722 §3–§4
// (blocks 1L–6L, 1H–6H and the shared predictor block 4), with the standard's tables; its
// bitstream and output are bit-exact with FFmpeg's G.722 (see TestG722InteropFFmpeg).
//
// The codec delay (transmit plus receive QMF) is 22 samples at 16 kHz; see G722Delay.

// G722Delay is the end-to-end algorithmic delay of an encode/decode round trip, in 16 kHz
// samples: the two 24-tap linear-phase QMF filters have 11.5 samples of group delay each, less
// the one sample by which the decoder's output pair leads the encoder's input pair.
const G722Delay = 22

// qmf is the QMF impulse response h(0..23), G.722 Table 11 (scaled by 2^13).
var qmf = [24]int{
	3, -11, -11, 53, 12, -156, 32, 362, -210, -805, 951, 3876,
	3876, 951, -805, -210, 362, 32, -156, 12, 53, -11, -11, 3,
}

// Lower-band quantiser (block 1L, QUANTL): decision levels q6 (G.722 Table 6, scaled by 2^12
// relative to the scale factor), and the 6-bit codes for negative and positive differences.
var (
	q6 = [31]int{
		0, 35, 72, 110, 150, 190, 233, 276, 323, 370, 422, 473, 530, 587, 650, 714,
		786, 858, 940, 1023, 1121, 1219, 1339, 1458, 1612, 1765, 1980, 2195, 2557, 2919, 0,
	}
	ilNeg = [31]int{
		0, 63, 62, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19,
		18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
	}
	ilPos = [31]int{
		0, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47,
		46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32,
	}
)

// Inverse quantisers: qm4 for the 4-bit truncated lower code that drives adaptation
// (block 2L, INVQAL), qm6 for the full 6-bit lower code that the decoder outputs (block 5L,
// INVQBL), qm2 for the higher band (block 2H, INVQAH). G.722 Tables 7, 9 and 10, scaled by 2^15.
var (
	qm4 = [16]int{
		0, -20456, -12896, -8968, -6288, -4240, -2584, -1200,
		20456, 12896, 8968, 6288, 4240, 2584, 1200, 0,
	}
	qm6 = [64]int{
		-136, -136, -136, -136, -24808, -21904, -19008, -16704,
		-14984, -13512, -12280, -11192, -10232, -9360, -8576, -7856,
		-7192, -6576, -6000, -5456, -4944, -4464, -4008, -3576,
		-3168, -2776, -2400, -2032, -1688, -1360, -1040, -728,
		24808, 21904, 19008, 16704, 14984, 13512, 12280, 11192,
		10232, 9360, 8576, 7856, 7192, 6576, 6000, 5456,
		4944, 4464, 4008, 3576, 3168, 2776, 2400, 2032,
		1688, 1360, 1040, 728, 432, 136, -432, -136,
	}
	qm2 = [4]int{-7408, -1616, 7408, 1616}
)

// Scale-factor adaptation (blocks 3L/3H, LOGSCL/LOGSCH and SCALEL/SCALEH): log-domain
// multipliers wl/wh indexed through rl42/rh2, and the inverse-log table ilb.
var (
	wl   = [8]int{-60, -30, 58, 172, 334, 538, 1198, 3042}
	rl42 = [16]int{0, 7, 6, 5, 4, 3, 2, 1, 7, 6, 5, 4, 3, 2, 1, 0}
	wh   = [3]int{0, -214, 798}
	rh2  = [4]int{2, 1, 2, 1}
	ilb  = [32]int{
		2048, 2093, 2139, 2186, 2233, 2282, 2332, 2383, 2435, 2489, 2543, 2599, 2656, 2714,
		2774, 2834, 2896, 2960, 3025, 3091, 3158, 3228, 3298, 3371, 3444, 3520, 3597, 3676,
		3756, 3838, 3922, 4008,
	}
)

func sat16(v int) int {
	if v > 32767 {
		return 32767
	}
	if v < -32768 {
		return -32768
	}
	return v
}

func clampInt(v, lo, hi int) int {
	if v > hi {
		return hi
	}
	if v < lo {
		return lo
	}
	return v
}

// sign returns -1 for a negative 16-bit value and 0 otherwise (the SG function of G.722).
func sign(v int) int { return v >> 15 }

// g722Band is the adaptive state of one sub-band: the scale factor and the pole-zero
// predictor. Encoder and decoder run identical copies, kept in step by the transmitted codes.
type g722Band struct {
	nb  int    // logarithmic scale factor (NBL/NBH)
	det int    // linear scale factor (DETL/DETH)
	s   int    // predicted signal (SL/SH)
	sp  int    // pole-section prediction (SPL/SPH)
	sz  int    // zero-section prediction (SZL/SZH)
	a   [3]int // pole predictor coefficients a1, a2 (index 0 unused)
	b   [7]int // zero predictor coefficients b1..b6 (index 0 unused)
	d   [7]int // quantised difference signal, d[0] newest
	p   [3]int // partially reconstructed signal, p[0] newest
	r   [3]int // reconstructed signal, r[0] newest
}

// adaptScale updates the log scale factor with multiplier w, clamps it to limit, and computes
// the linear scale factor, shift being 8 for the lower band and 10 for the higher (SCALEL/H).
func (b *g722Band) adaptScale(w, limit, shift int) {
	b.nb = clampInt(b.nb*127>>7+w, 0, limit)
	frac := (b.nb >> 6) & 31
	e := shift - b.nb>>11
	v := ilb[frac]
	if e < 0 {
		v <<= -e
	} else {
		v >>= e
	}
	b.det = v << 2
}

// update is block 4: reconstruct, adapt the sixth-order zero and second-order pole predictor
// with the new quantised difference dq, and compute the next prediction.
func (b *g722Band) update(dq int) {
	b.d[0] = dq
	b.r[0] = sat16(b.s + dq)
	b.p[0] = sat16(b.sz + dq)

	// UPPOL2: second pole coefficient.
	g0, g1, g2 := sign(b.p[0]), sign(b.p[1]), sign(b.p[2])
	w := sat16(b.a[1] << 2)
	if g0 == g1 {
		w = -w
	}
	w = min(w, 32767) >> 7
	if g0 == g2 {
		w += 128
	} else {
		w -= 128
	}
	a2 := clampInt(w+(b.a[2]*32512)>>15, -12288, 12288)

	// UPPOL1: first pole coefficient, bounded by the stability limit 15360 - |a2|.
	a1 := b.a[1] * 32640 >> 15
	if g0 == g1 {
		a1 += 192
	} else {
		a1 -= 192
	}
	a1 = sat16(a1)
	lim := sat16(15360 - a2)
	a1 = clampInt(a1, -lim, lim)

	// UPZERO: zero coefficients, sign-sign adaptation with leakage.
	step := 128
	if dq == 0 {
		step = 0
	}
	gd := sign(dq)
	var bp [7]int
	for i := 1; i < 7; i++ {
		v := b.b[i] * 32640 >> 15
		if sign(b.d[i]) == gd {
			v += step
		} else {
			v -= step
		}
		bp[i] = sat16(v)
	}

	// DELAYA: age the state.
	for i := 6; i > 0; i-- {
		b.d[i] = b.d[i-1]
		b.b[i] = bp[i]
	}
	b.r[2], b.r[1] = b.r[1], b.r[0]
	b.p[2], b.p[1] = b.p[1], b.p[0]
	b.a[1], b.a[2] = a1, a2

	// FILTEP, FILTEZ, PREDIC.
	b.sp = sat16(b.a[1]*sat16(2*b.r[1])>>15 + b.a[2]*sat16(2*b.r[2])>>15)
	sz := 0
	for i := 6; i > 0; i-- {
		sz += b.b[i] * sat16(2*b.d[i]) >> 15
	}
	b.sz = sat16(sz)
	b.s = sat16(b.sp + b.sz)
}

func newG722Bands() (lo, hi g722Band) {
	lo.det, hi.det = 32, 8
	return lo, hi
}

// G722Encoder encodes 16 kHz PCM to G.722 at 64 kbit/s: one byte per two samples.
type G722Encoder struct {
	lo, hi g722Band
	x      [24]int // transmit QMF delay line, x[23] newest
}

// NewG722Encoder returns an encoder in the reset state of G.722 §3.
func NewG722Encoder() *G722Encoder {
	e := &G722Encoder{}
	e.lo, e.hi = newG722Bands()
	return e
}

// Reset returns the encoder to its initial state.
func (e *G722Encoder) Reset() { *e = G722Encoder{}; e.lo, e.hi = newG722Bands() }

// SampleRate returns 16000.
func (e *G722Encoder) SampleRate() int { return 16000 }

// Encode encodes pcm (an even number of 16 kHz samples) into len(pcm)/2 bytes of dst.
func (e *G722Encoder) Encode(dst []byte, pcm []int16) (int, error) {
	if len(pcm)%2 != 0 {
		return 0, ErrFrameSize
	}
	n := len(pcm) / 2
	if len(dst) < n {
		return 0, shortBuffer(len(dst), n)
	}
	dst = dst[:n]
	for j := range dst {
		copy(e.x[:22], e.x[2:])
		e.x[22], e.x[23] = int(pcm[2*j]), int(pcm[2*j+1])
		// Transmit QMF: sum and difference of the even- and odd-indexed taps.
		var sum, diff int
		for m, h := range qmf {
			v := h * e.x[23-m]
			sum += v
			if m&1 == 0 {
				diff += v
			} else {
				diff -= v
			}
		}
		dst[j] = byte(e.encodeHigh(diff>>14)<<6 | e.encodeLow(sum>>14))
	}
	return n, nil
}

// encodeLow runs blocks 1L–4L on one lower-band sample and returns the 6-bit code.
func (e *G722Encoder) encodeLow(xl int) int {
	b := &e.lo
	el := sat16(xl - b.s)
	mag := el
	if el < 0 {
		mag = -(el + 1)
	}
	k := 30
	for i := 1; i < 30; i++ {
		if mag < q6[i]*b.det>>12 {
			k = i
			break
		}
	}
	il := ilPos[k]
	if el < 0 {
		il = ilNeg[k]
	}
	il4 := il >> 2
	dq := b.det * qm4[il4] >> 15
	b.adaptScale(wl[rl42[il4]], 18432, 8)
	b.update(dq)
	return il
}

// encodeHigh runs blocks 1H–4H on one higher-band sample and returns the 2-bit code.
func (e *G722Encoder) encodeHigh(xh int) int {
	b := &e.hi
	eh := sat16(xh - b.s)
	mag := eh
	if eh < 0 {
		mag = -(eh + 1)
	}
	var ih int
	switch big := mag >= 564*b.det>>12; {
	case eh < 0 && big:
		ih = 0
	case eh < 0:
		ih = 1
	case big:
		ih = 2
	default:
		ih = 3
	}
	dq := b.det * qm2[ih] >> 15
	b.adaptScale(wh[rh2[ih]], 22528, 10)
	b.update(dq)
	return ih
}

// G722Decoder decodes G.722 at 64 kbit/s to 16 kHz PCM: two samples per byte. It implements
// Concealer by repeating and fading the last frame.
type G722Decoder struct {
	lo, hi g722Band
	xd, xs [12]int // receive QMF delay lines of the difference and sum signals, [11] newest
	plc    fadeConcealer
}

// NewG722Decoder returns a decoder in the reset state of G.722 §3.
func NewG722Decoder() *G722Decoder {
	d := &G722Decoder{plc: newFadeConcealer(16000)}
	d.lo, d.hi = newG722Bands()
	return d
}

// Reset returns the decoder to its initial state.
func (d *G722Decoder) Reset() {
	*d = G722Decoder{plc: newFadeConcealer(16000)}
	d.lo, d.hi = newG722Bands()
}

// SampleRate returns 16000.
func (d *G722Decoder) SampleRate() int { return 16000 }

// Decode decodes payload into 2*len(payload) samples of dst. Every octet is a valid code, so
// only an empty payload or a short dst is an error.
func (d *G722Decoder) Decode(dst []int16, payload []byte) (int, error) {
	if len(payload) == 0 {
		return 0, ErrInvalidPacket
	}
	n := 2 * len(payload)
	if len(dst) < n {
		return 0, shortBuffer(len(dst), n)
	}
	dst = dst[:n]
	for j, c := range payload {
		rl := d.decodeLow(int(c & 0x3F))
		rh := d.decodeHigh(int(c >> 6))
		copy(d.xd[:11], d.xd[1:])
		copy(d.xs[:11], d.xs[1:])
		d.xd[11], d.xs[11] = rl-rh, rl+rh
		// Receive QMF: even taps on the difference, odd taps on the sum.
		var o1, o2 int
		for k := 0; k < 12; k++ {
			o1 += qmf[2*k] * d.xd[11-k]
			o2 += qmf[2*k+1] * d.xs[11-k]
		}
		dst[2*j] = int16(sat16(o1 >> 11))
		dst[2*j+1] = int16(sat16(o2 >> 11))
	}
	d.plc.remember(dst)
	return n, nil
}

// decodeLow runs blocks 5L, 6L, 2L, 3L and 4L on a 6-bit code and returns the reconstructed
// lower-band sample.
func (d *G722Decoder) decodeLow(il int) int {
	b := &d.lo
	rl := clampInt(b.s+b.det*qm6[il]>>15, -16384, 16383)
	il4 := il >> 2
	dq := b.det * qm4[il4] >> 15
	b.adaptScale(wl[rl42[il4]], 18432, 8)
	b.update(dq)
	return rl
}

// decodeHigh runs blocks 2H, 5H, 6H, 3H and 4H on a 2-bit code and returns the reconstructed
// higher-band sample.
func (d *G722Decoder) decodeHigh(ih int) int {
	b := &d.hi
	dq := b.det * qm2[ih] >> 15
	rh := clampInt(dq+b.s, -16384, 16383)
	b.adaptScale(wh[rh2[ih]], 22528, 10)
	b.update(dq)
	return rh
}

// Conceal repeats the last decoded frame, fading it out over three lost frames (next is
// ignored). The ADPCM state is left as it was, as in the simplest G.722 receivers.
func (d *G722Decoder) Conceal(dst []int16, next []byte) (int, error) {
	return d.plc.conceal(dst)
}
