package tts

import (
	"math"
	"slices"
	"testing"
)

func toneAt(rate int, hz, amp float64, n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(math.Round(amp * 32767 * math.Sin(2*math.Pi*hz*float64(i)/float64(rate))))
	}
	return out
}

// amplitude measures the hz component of pcm (Goertzel), 0..1 of full scale.
func amplitude(pcm []int16, rate int, hz float64) float64 {
	w := 2 * math.Pi * hz / float64(rate)
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for _, v := range pcm {
		s := float64(v)/32768 + c*s1 - s2
		s2, s1 = s1, s
	}
	return 2 * math.Sqrt(math.Max(s1*s1+s2*s2-c*s1*s2, 0)) / float64(len(pcm))
}

func resampleAll(t *testing.T, in []int16, from, to, chunk int) []int16 {
	t.Helper()
	r, err := newResampler(from, to)
	if err != nil {
		t.Fatal(err)
	}
	var out []int16
	buf := make([]int16, 0, r.maxOut(chunk))
	for i := 0; i < len(in); i += chunk {
		buf = r.process(in[i:min(i+chunk, len(in))], buf)
		out = append(out, buf...)
	}
	return append(out, r.flush(buf)...)
}

// TestResamplerKeepsTones: a passband tone keeps its frequency and level and the length
// follows the ratio, for every conversion the adapters use.
func TestResamplerKeepsTones(t *testing.T) {
	for _, tt := range []struct {
		from, to int
		hz       float64
	}{
		{24000, 16000, 440}, {24000, 16000, 3000}, {22050, 16000, 1000}, {8000, 16000, 440},
		{16000, 8000, 1000}, {44100, 16000, 2000}, {16000, 48000, 5000}, {24000, 8000, 300},
	} {
		in := toneAt(tt.from, tt.hz, 0.5, tt.from/2) // 0.5 s
		out := resampleAll(t, in, tt.from, tt.to, 333)
		want := len(in) * tt.to / tt.from
		if len(out) < want || len(out) > want+tt.to/500 {
			t.Errorf("%d→%d: %d samples, want ~%d", tt.from, tt.to, len(out), want)
		}
		mid := out[len(out)/4 : 3*len(out)/4]
		if a := amplitude(mid, tt.to, tt.hz); math.Abs(a-0.5) > 0.02 {
			t.Errorf("%d→%d: %v Hz at %.3f, want 0.5", tt.from, tt.to, tt.hz, a)
		}
	}
}

// TestResamplerRejectsAliases: a tone above the output Nyquist must not fold back.
func TestResamplerRejectsAliases(t *testing.T) {
	in := toneAt(24000, 10000, 0.5, 12000) // 10 kHz would alias to 6 kHz at 16 kHz
	out := resampleAll(t, in, 24000, 16000, 480)
	mid := out[len(out)/4 : 3*len(out)/4]
	if a := amplitude(mid, 16000, 6000); a > 0.5/300 { // ≥ 50 dB down
		t.Errorf("10 kHz aliased to 6 kHz at %.5f", a)
	}
	if r := rmsOf(mid); r > 0.5/100 {
		t.Errorf("stop-band tone leaks at RMS %.5f", r)
	}
}

func rmsOf(p []int16) float64 {
	var s float64
	for _, v := range p {
		s += float64(v) * float64(v) / (32768 * 32768)
	}
	return math.Sqrt(s / float64(len(p)))
}

// TestResamplerChunkingInvariant: any chunking gives the same samples as one piece.
func TestResamplerChunkingInvariant(t *testing.T) {
	in := toneAt(22050, 700, 0.4, 5000)
	whole := resampleAll(t, in, 22050, 16000, len(in))
	for _, chunk := range []int{1, 7, 160, 441, 1000} {
		if got := resampleAll(t, in, 22050, 16000, chunk); !slices.Equal(got, whole) {
			t.Errorf("chunk %d: %d samples differ from one-piece %d", chunk, len(got), len(whole))
		}
	}
}

func TestResamplerBadRates(t *testing.T) {
	for _, r := range [][2]int{{0, 16000}, {16000, -1}, {1 << 30, 8000}} {
		if _, err := newResampler(r[0], r[1]); err == nil {
			t.Errorf("%v accepted", r)
		}
	}
}

func TestResamplerNoAllocs(t *testing.T) {
	r, _ := newResampler(24000, 16000)
	in := toneAt(24000, 440, 0.3, 480)
	out := make([]int16, 0, r.maxOut(len(in)))
	r.process(in, out)
	if n := testing.AllocsPerRun(200, func() { out = r.process(in, out) }); n != 0 {
		t.Errorf("%v allocs per chunk", n)
	}
}

func BenchmarkResampler24to16(b *testing.B) {
	r, _ := newResampler(24000, 16000)
	in := toneAt(24000, 440, 0.3, 480) // 20 ms
	out := make([]int16, 0, r.maxOut(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		out = r.process(in, out)
	}
}
