package codec

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var resampleRates = []int{8000, 16000, 24000, 48000}

// resampleFrames runs src through r in 20 ms frames.
func resampleFrames(t testing.TB, r *Resampler, src []int16) []int16 {
	frame := r.InRate() / 50
	out := make([]int16, 0, r.MaxOutLen(len(src)))
	buf := make([]int16, r.MaxOutLen(frame))
	for i := 0; i < len(src); i += frame {
		in := src[i:min(i+frame, len(src))]
		want := r.OutLen(len(in))
		n := r.Process(buf, in)
		if n != want {
			t.Fatalf("Process wrote %d, OutLen said %d", n, want)
		}
		out = append(out, buf[:n]...)
	}
	return out
}

func TestResamplerToneSNR(t *testing.T) {
	const amp, freq = 16000.0, 1000.0
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			t.Run(fmt.Sprintf("%dto%d", in, out), func(t *testing.T) {
				r, err := NewResampler(in, out)
				if err != nil {
					t.Fatal(err)
				}
				y := resampleFrames(t, r, tone(in, freq, amp, in/2, 0)) // 500 ms
				if len(y) != out/2 {
					t.Fatalf("got %d samples from 500 ms, want %d", len(y), out/2)
				}
				// The ideal output is the same tone, delayed by Delay() output samples. Skip
				// the start transient (twice the delay, plus 10 ms).
				d := r.Delay()
				skip := 2*d + out/100
				ideal := make([]int16, len(y))
				for k := range ideal {
					ideal[k] = int16(math.Round(amp * math.Sin(2*math.Pi*freq*float64(k-d)/float64(out))))
				}
				snr := snrDB(ideal[skip:], y[skip:])
				t.Logf("delay %d samples (%.2f ms), SNR %.1f dB", d, 1000*float64(d)/float64(out), snr)
				if snr < 60 {
					t.Errorf("SNR %.1f dB, want >= 60", snr)
				}
			})
		}
	}
}

func TestResamplerRejectsAboveNyquist(t *testing.T) {
	const amp = 16000.0
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			if in == out {
				continue
			}
			nyq := float64(min(in, out)) / 2
			// Downsampling: tones just above and well above the new Nyquist frequency must not
			// alias into the output. Upsampling: the images of an in-band tone must be gone.
			var freqs []float64
			if out < in {
				freqs = []float64{1.05 * nyq, 1.25 * nyq, min(1.9*nyq, float64(in)/2*0.95)}
			} else {
				freqs = []float64{0.5 * nyq, 0.8 * nyq}
			}
			for _, f := range freqs {
				t.Run(fmt.Sprintf("%dto%d/%gHz", in, out, f), func(t *testing.T) {
					r, _ := NewResampler(in, out)
					y := resampleFrames(t, r, tone(in, f, amp, in/2, 0))
					y = y[2*r.Delay()+out/100:]
					var stray float64 // output power that should not be there, relative to the tone
					if out < in {
						stray = rms(y) / (amp / math.Sqrt2)
					} else {
						// Images sit at in-f, in+f, 2in-f, ... up to the output Nyquist.
						var p float64
						for k := 1; float64(k*in)-f < float64(out)/2; k++ {
							for _, img := range []float64{float64(k*in) - f, float64(k*in) + f} {
								if img < float64(out)/2 {
									p += goertzelPower(y, out, img)
								}
							}
						}
						stray = math.Sqrt(p / goertzelPower(y, out, f))
					}
					att := -20 * math.Log10(stray)
					t.Logf("attenuation %.1f dB", att)
					if att < 50 {
						t.Errorf("unwanted output only %.1f dB down, want >= 50", att)
					}
				})
			}
		}
	}
}

// A 16 kHz to 8 kHz resampler must remove a 5 kHz tone (the example of the requirement).
func TestResampler16to8Removes5kHz(t *testing.T) {
	r, _ := NewResampler(16000, 8000)
	y := resampleFrames(t, r, tone(16000, 5000, 20000, 16000, 0))
	y = y[200:]
	if att := -20 * math.Log10(rms(y)/(20000/math.Sqrt2)); att < 50 {
		t.Fatalf("5 kHz attenuated by %.1f dB, want >= 50", att)
	}
}

func TestResamplerFramingDoesNotMatter(t *testing.T) {
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			src := tone(in, 440, 12000, in/5, 0) // 200 ms
			whole, _ := NewResampler(in, out)
			ref := make([]int16, whole.MaxOutLen(len(src)))
			ref = ref[:whole.Process(ref, src)]

			for _, chunk := range []int{in / 50, 1, 7, 333} {
				r, _ := NewResampler(in, out)
				var got []int16
				buf := make([]int16, r.MaxOutLen(chunk))
				for i := 0; i < len(src); i += chunk {
					n := r.Process(buf, src[i:min(i+chunk, len(src))])
					got = append(got, buf[:n]...)
				}
				if len(got) != len(ref) {
					t.Fatalf("%d->%d in chunks of %d: %d samples, whole block gave %d", in, out, chunk, len(got), len(ref))
				}
				for k := range ref {
					if got[k] != ref[k] {
						t.Fatalf("%d->%d in chunks of %d: sample %d is %d, whole block gave %d", in, out, chunk, k, got[k], ref[k])
					}
				}
			}

			// No discontinuity: in steady state no step between neighbours exceeds the tone's
			// largest slope (plus rounding), including across frame edges.
			maxStep := 12000*2*math.Pi*440/float64(out)*1.01 + 2
			for k := 2*whole.Delay() + out/100; k < len(ref); k++ {
				if step := math.Abs(float64(ref[k]) - float64(ref[k-1])); step > maxStep {
					t.Fatalf("%d->%d: jump of %.0f at sample %d (max slope %.0f)", in, out, step, k, maxStep)
				}
			}
		}
	}
}

func TestResamplerLengthsAndReset(t *testing.T) {
	r, _ := NewResampler(48000, 8000)
	if got := r.OutLen(960); got != 160 {
		t.Fatalf("OutLen(960) = %d at 48->8, want 160", got)
	}
	buf := make([]int16, 1000)
	src := tone(48000, 1000, 10000, 960, 0)
	first := append([]int16(nil), buf[:r.Process(buf, src)]...)
	// Odd lengths: OutLen is exact and the total stays in step.
	total := 0
	for _, n := range []int{5, 1, 17, 937} {
		want := r.OutLen(n)
		got := r.Process(buf, src[:n])
		if got != want || got > r.MaxOutLen(n) {
			t.Fatalf("Process(%d) = %d, OutLen %d, MaxOutLen %d", n, got, want, r.MaxOutLen(n))
		}
		total += got
	}
	if total != 160 {
		t.Fatalf("960 samples in odd pieces gave %d, want 160", total)
	}
	r.Reset()
	again := buf[:r.Process(buf, src)]
	for i := range first {
		if first[i] != again[i] {
			t.Fatal("Reset did not return to the initial state")
		}
	}
	// A short dst loses the excess but stays in step.
	r.Reset()
	if n := r.Process(buf[:10], src); n != 10 {
		t.Fatalf("short dst: wrote %d, want 10", n)
	}
	if n := r.OutLen(960); n != 160 {
		t.Fatalf("after a short dst OutLen(960) = %d, want 160", n)
	}
}

func TestResamplerSameRateCopies(t *testing.T) {
	r, err := NewResampler(16000, 16000)
	if err != nil {
		t.Fatal(err)
	}
	src := tone(16000, 1000, 1000, 320, 0)
	dst := make([]int16, 320)
	if n := r.Process(dst, src); n != 320 || r.Delay() != 0 || snrDB(src, dst) != math.Inf(1) {
		t.Fatal("same-rate resampler should copy")
	}
}

func TestResamplerRejectsOtherRates(t *testing.T) {
	for _, pair := range [][2]int{{44100, 48000}, {8000, 11025}, {0, 8000}, {16000, -1}} {
		if _, err := NewResampler(pair[0], pair[1]); !errors.Is(err, ErrUnsupported) {
			t.Errorf("NewResampler(%d, %d): %v, want ErrUnsupported", pair[0], pair[1], err)
		}
	}
}

func BenchmarkResampler(b *testing.B) {
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			if in == out {
				continue
			}
			b.Run(fmt.Sprintf("%dto%d/20ms", in, out), func(b *testing.B) {
				r, _ := NewResampler(in, out)
				src := tone(in, 1000, 10000, in/50, 0)
				dst := make([]int16, r.MaxOutLen(len(src)))
				benchLoop(b, func() {
					r.Process(dst, src)
				})
			})
		}
	}
}

// The passband reaches 85% of the lower Nyquist frequency (3.4 kHz for telephone audio) with
// no audible change in level.
func TestResamplerPassbandIsFlat(t *testing.T) {
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			if in == out {
				continue
			}
			nyq := float64(min(in, out)) / 2
			for _, f := range []float64{100, 0.5 * nyq, 0.85 * nyq} {
				r, _ := NewResampler(in, out)
				const amp = 16000.0
				x := tone(in, f, amp, in/2, 0)
				y := resampleFrames(t, r, x)
				skip := 2*r.Delay() + out/100
				// Compare levels over 200 ms, which holds whole cycles of each f.
				gx := goertzelPower(x[in/10:in/5+in/10], in, f)
				gy := goertzelPower(y[skip:skip+out/5], out, f)
				gain := 10 * math.Log10(gy/gx)
				if math.Abs(gain) > 0.01 {
					t.Errorf("%d->%d at %.0f Hz: gain %.4f dB, want within ±0.01 dB", in, out, f, gain)
				}
			}
		}
	}
}

// impulseResponse rebuilds the prototype filter (at l × inRate) from the polyphase branches:
// tap p + j·l of the prototype multiplies input x[n0-j] in phase p.
func (r *Resampler) impulseResponse() []float64 {
	padL := r.hist - (r.taps - 1)
	h := make([]float64, r.l*r.taps)
	set := func(p, winPos int, v float64) {
		j := r.taps - 1 - (winPos - padL) // tap index j of window position winPos
		if v == 0 {
			return
		}
		h[p+j*r.l] += v
	}
	for p, b := range r.branch {
		switch b.kind {
		case resampleCopy:
			set(p, b.off, float64(b.coef[0]))
		case resampleSym:
			for i, c := range b.coef {
				set(p, b.off+i, float64(c))
				set(p, b.off+b.n-1-i, float64(c))
			}
		default:
			for i, c := range b.coef {
				set(p, b.off+i, float64(c))
			}
		}
	}
	return h
}

// The designed prototype meets the documented response, measured on the filter itself at 4000
// frequencies: passband ripple within ±0.005 dB up to 85% of the lower Nyquist frequency, and
// at least 70 dB of attenuation from where the stopband starts (the new Nyquist frequency
// downsampling, the first image of the passband upsampling) to the high rate's Nyquist.
func TestResamplerPrototypeResponse(t *testing.T) {
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			if in == out {
				continue
			}
			r, _ := NewResampler(in, out)
			h := r.impulseResponse()
			hi := float64(r.l * in)
			pass, stop := resampleBands(in, out)
			resp := func(f float64) float64 {
				var re, im float64
				for i, v := range h {
					a := -2 * math.Pi * f / hi * float64(i)
					re += v * math.Cos(a)
					im += v * math.Sin(a)
				}
				return math.Hypot(re, im) / float64(r.l)
			}
			var ripple, worst float64
			const steps = 2000
			for i := 0; i <= steps; i++ {
				f := pass * float64(i) / steps
				ripple = max(ripple, math.Abs(20*math.Log10(resp(f))))
				f = stop + (hi/2-stop)*float64(i)/steps
				worst = max(worst, resp(f))
			}
			att := -20 * math.Log10(worst)
			t.Logf("%5d->%5d: %d taps at %g kHz, ripple ±%.4f dB, stopband from %.0f Hz %.1f dB down, delay %d",
				in, out, len(h), hi/1000, ripple, stop, att, r.Delay())
			if ripple > 0.005 || att < resampleStopbandDB {
				t.Errorf("%d->%d: passband ripple ±%.4f dB (want ±0.005), stopband %.1f dB (want %.0f)",
					in, out, ripple, att, resampleStopbandDB)
			}
		}
	}
}

// The unrolled kernels agree with a plain loop.
func TestResamplerKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 96)
	c := make([]float32, 48)
	for i := range x {
		x[i] = float32(rng.IntN(65536) - 32768)
	}
	for i := range c {
		c[i] = float32(rng.Float64() - 0.5)
	}
	near := func(name string, got float32, want float64) {
		t.Helper()
		if math.Abs(float64(got)-want) > 1e-4*max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	for _, n := range []int{8, 16, 24, 48} {
		var want float64
		for j := range n {
			want += float64(c[j]) * float64(x[j])
		}
		near(fmt.Sprintf("dot(%d)", n), dot(c[:n], x[:n]), want)
		// symDot over a window of 2n samples, and of 2n-1 (odd centre paired with itself).
		for _, w := range []int{2 * n, 2*n - 1} {
			want = 0
			for j := range n {
				want += float64(c[j]) * (float64(x[j]) + float64(x[w-1-j]))
			}
			near(fmt.Sprintf("symDot(%d pairs, %d samples)", n, w), symDot(c[:n], x[:n], x[w-n:w]), want)
		}
	}
	near("symDot16", symDot16((*[16]float32)(c[:16]), (*[32]float32)(x[:32])), float64(symDot(c[:16], x[:16], x[16:32])))
	near("dot32", dot32((*[32]float32)(c[:32]), (*[32]float32)(x[:32])), float64(dot(c[:32], x[:32])))
	for _, tc := range []struct {
		in   float32
		want int16
	}{{0, 0}, {0.49, 0}, {0.5, 1}, {-0.49, 0}, {-0.51, -1}, {-1.5, -1}, {1234.6, 1235}, {-1234.6, -1235},
		{32766.6, 32767}, {40000, 32767}, {-32767.7, -32768}, {-40000, -32768}} {
		if got := toInt16(tc.in); got != tc.want {
			t.Errorf("toInt16(%g) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A dst shorter than the output loses the excess, for every conversion (including the ×2
// half-band path), and the stream stays in step: later frames are as without the loss.
func TestResamplerShortDstStaysInStep(t *testing.T) {
	for _, in := range resampleRates {
		for _, out := range resampleRates {
			src := tone(in, 700, 9000, in/10, 0) // 100 ms
			ref := resampleFrames(t, mustResampler(t, in, out), src)
			r := mustResampler(t, in, out)
			frame := in / 50
			buf := make([]int16, r.MaxOutLen(frame))
			pos := 0
			for i := 0; i < len(src); i += frame {
				want := r.OutLen(frame)
				dst := buf
				if i == frame {
					dst = buf[:want-3] // the second frame loses its last 3 samples
				}
				n := r.Process(dst, src[i:i+frame])
				if n != len(dst) && n != want {
					t.Fatalf("%d->%d frame %d: wrote %d, want %d", in, out, i/frame, n, min(want, len(dst)))
				}
				for k := range n {
					if buf[k] != ref[pos+k] {
						t.Fatalf("%d->%d frame %d sample %d: %d, want %d", in, out, i/frame, k, buf[k], ref[pos+k])
					}
				}
				pos += want
			}
		}
	}
}

func mustResampler(t *testing.T, in, out int) *Resampler {
	t.Helper()
	r, err := NewResampler(in, out)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
