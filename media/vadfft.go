package media

import (
	"math"
	"sync"
)

// vadFFT is a fixed-size real FFT for the VAD: an n/2-point complex FFT of the even/odd samples
// packed as real/imaginary parts, then the standard split into the spectrum of the n real
// samples, which yields only the power |X[k]|² the VAD needs.
//
// The complex FFT is decimation in time over bit-reversed input, run as radix-4 passes, each
// doing the work of two radix-2 stages with three complex multiplications per four points
// instead of four. The first pass (radix-4, or radix-2 when log2(n/2) is odd) has twiddles
// that are all 1 and reads the windowed samples straight from their bit-reversed places, so
// there is no separate windowing or permutation pass. The split handles bins k and n/2-k
// together from the same two complex values. Twiddles and the permutation are computed once
// per length and shared by every VAD of that length (they are constants: about 7 KB that each
// call would otherwise hold); a transform allocates nothing.
type vadFFT struct {
	n, m int // real length, complex length (n/2)
	q0   int // firstQuarter(m): 1 if the first pass is radix-4, 2 if radix-2
	*vadTables
	re, im [vadMaxFFT / 2]float32
	power  [vadMaxFFT/2 + 1]float32
}

// vadTables are the constants of one transform length, read-only once built.
type vadTables struct {
	rev [vadMaxFFT / 2]uint16
	// tw holds the radix-4 twiddles, pass after pass: for quarter-block size h, entries k < h
	// are W^k, W^2k, W^3k with W = exp(-2πi/4h).
	tw [vadMaxFFT / 2]vadTwiddle
	// sp holds exp(-2πik/n) for k ≤ n/4, the twiddles of the split.
	spRe, spIm [vadMaxFFT/4 + 1]float32
	// window is the analysis window of the VAD using this length (see NewVAD).
	window [vadMaxFFT]float32
}

var (
	vadTablesMu  sync.Mutex
	vadTablesFor = map[int]*vadTables{}
)

type vadTwiddle struct{ r1, i1, r2, i2, r3, i3 float32 }

func (f *vadFFT) init(n int) {
	f.n, f.m = n, n/2
	f.q0 = firstQuarter(f.m)
	vadTablesMu.Lock()
	defer vadTablesMu.Unlock()
	if t := vadTablesFor[n]; t != nil {
		f.vadTables = t
		return
	}
	f.vadTables = new(vadTables)
	vadTablesFor[n] = f.vadTables
	for i := range n {
		// Hann, and from sample units to full scale.
		f.window[i] = float32((0.5 - 0.5*math.Cos(2*math.Pi*(float64(i)+0.5)/float64(n))) / 32768)
	}
	bits := 0
	for 1<<bits < f.m {
		bits++
	}
	for i := range f.m {
		r := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		f.rev[i] = uint16(r)
	}
	off := 0
	for h := firstQuarter(f.m); 4*h <= f.m; h *= 4 {
		for k := range h {
			a := -2 * math.Pi * float64(k) / float64(4*h)
			f.tw[off+k] = vadTwiddle{
				float32(math.Cos(a)), float32(math.Sin(a)),
				float32(math.Cos(2 * a)), float32(math.Sin(2 * a)),
				float32(math.Cos(3 * a)), float32(math.Sin(3 * a)),
			}
		}
		off += h
	}
	for k := 0; k <= f.m/2; k++ {
		a := -2 * math.Pi * float64(k) / float64(n)
		f.spRe[k], f.spIm[k] = float32(math.Cos(a)), float32(math.Sin(a))
	}
}

// firstQuarter returns the quarter-block size of the first radix-4 pass: 1 (a pass with
// twiddles all 1), or 2 after a radix-2 pass when log2(m) is odd.
func firstQuarter(m int) int {
	odd := false
	for ; m > 1; m >>= 1 {
		odd = !odd
	}
	if odd {
		return 2
	}
	return 1
}

// realPower returns |X[k]|² for k = 0..n/2, X the spectrum of x[i]·w[i], i < n.
func (f *vadFFT) realPower(x, w []float32) []float32 {
	m := f.m
	x, w = x[:2*m], w[:2*m]
	re, im, rev := f.re[:m], f.im[:m], f.rev[:m]
	// The windowed samples go straight to their bit-reversed places, through the first pass,
	// whose twiddles are all 1: the four (or two) points of each block are the inputs r,
	// r+m/2, r+m/4 and r+3m/4 (or r and r+m/2), r the reversed index of the block's start.
	h := f.q0
	if h == 2 {
		for s := 0; s+1 < m; s += 2 {
			i, j := 2*int(rev[s]), 2*int(rev[s+1])
			ar, ai := x[i]*w[i], x[i+1]*w[i+1]
			br, bi := x[j]*w[j], x[j+1]*w[j+1]
			re[s], im[s], re[s+1], im[s+1] = ar+br, ai+bi, ar-br, ai-bi
		}
	} else {
		for s := 0; s+3 < m; s += 4 {
			i0, i1, i2, i3 := 2*int(rev[s]), 2*int(rev[s+1]), 2*int(rev[s+2]), 2*int(rev[s+3])
			ar, ai := x[i0]*w[i0], x[i0+1]*w[i0+1]
			br, bi := x[i1]*w[i1], x[i1+1]*w[i1+1]
			cr, ci := x[i2]*w[i2], x[i2+1]*w[i2+1]
			dr, di := x[i3]*w[i3], x[i3+1]*w[i3+1]
			a1r, a1i := ar+br, ai+bi
			a2r, a2i := ar-br, ai-bi
			ur, ui := cr+dr, ci+di
			vr, vi := cr-dr, ci-di
			q, p := (*[4]float32)(re[s:s+4]), (*[4]float32)(im[s:s+4])
			q[0], p[0] = a1r+ur, a1i+ui
			q[2], p[2] = a1r-ur, a1i-ui
			q[1], p[1] = a2r+vi, a2i-vr
			q[3], p[3] = a2r-vi, a2i+vr
		}
		h = 4
	}
	off := 0
	if h == 4 {
		off = 1 // the table's h = 1 entry was the first pass
	}
	for ; 4*h <= m; h *= 4 {
		tw := f.tw[off : off+h]
		off += h
		for s := 0; s < m; s += 4 * h {
			ar, ai := re[s:][:h], im[s:][:h]
			br, bi := re[s+h:][:h], im[s+h:][:h]
			cr, ci := re[s+2*h:][:h], im[s+2*h:][:h]
			dr, di := re[s+3*h:][:h], im[s+3*h:][:h]
			for k := range tw {
				t := &tw[k]
				// t0 = W²ᵏ·b, t1 = Wᵏ·c, t2 = W³ᵏ·d
				t0r := br[k]*t.r2 - bi[k]*t.i2
				t0i := br[k]*t.i2 + bi[k]*t.r2
				t1r := cr[k]*t.r1 - ci[k]*t.i1
				t1i := cr[k]*t.i1 + ci[k]*t.r1
				t2r := dr[k]*t.r3 - di[k]*t.i3
				t2i := dr[k]*t.i3 + di[k]*t.r3
				a1r, a1i := ar[k]+t0r, ai[k]+t0i
				a2r, a2i := ar[k]-t0r, ai[k]-t0i
				ur, ui := t1r+t2r, t1i+t2i
				vr, vi := t1r-t2r, t1i-t2i
				ar[k], ai[k] = a1r+ur, a1i+ui
				cr[k], ci[k] = a1r-ur, a1i-ui
				br[k], bi[k] = a2r+vi, a2i-vr // a2 - i·v
				dr[k], di[k] = a2r-vi, a2i+vr // a2 + i·v
			}
		}
	}
	// Split: with Z the transform of z[i] = x[2i] + i·x[2i+1], E = (Z[k] + conj Z[m-k])/2 and
	// O = (Z[k] - conj Z[m-k])/2i are the spectra of the even and odd samples, and
	// X[k] = E + Wᵏ·O, X[m-k] = conj(E - Wᵏ·O) with W = exp(-2πi/n). Below, e and o are 2E
	// and 2O, hence the quarter.
	p := f.power[:m+1]
	p[0] = (re[0] + im[0]) * (re[0] + im[0])
	p[m] = (re[0] - im[0]) * (re[0] - im[0])
	spRe, spIm := f.spRe[:m/2+1], f.spIm[:m/2+1]
	for k := 1; k <= m/2; k++ {
		j := m - k
		er, ei := re[k]+re[j], im[k]-im[j]
		dr, di := re[k]-re[j], im[k]+im[j]
		or, oi := di, -dr // (Z[k] - conj Z[j]) / i
		wr, wi := spRe[k], spIm[k]
		pr, pi := wr*or-wi*oi, wr*oi+wi*or
		xr, xi := er+pr, ei+pi
		yr, yi := er-pr, ei-pi
		p[k] = 0.25 * (xr*xr + xi*xi)
		p[j] = 0.25 * (yr*yr + yi*yi)
	}
	return p
}
