package media

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/mediatest"
)

func TestMixerSumsAndSaturates(t *testing.T) {
	m, err := NewMixer(MixerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		inputs [][]int16
		want   []int16
		clips  uint64
	}{
		{"sum", [][]int16{{1, 2, 3}, {10, -20, 30}}, []int16{11, -18, 33}, 0},
		{"no inputs", nil, []int16{0, 0, 0}, 0},
		{"positive overflow", [][]int16{{30000, 20000, 32767}, {30000, 12767, 1}}, []int16{32767, 32767, 32767}, 2},
		{"negative overflow", [][]int16{{-30000, -32768, -100}, {-30000, -1, 100}}, []int16{-32768, -32768, 0}, 2},
		{"shorter input", [][]int16{{5}, {1, 1, 1}}, []int16{6, 1, 1}, 0},
		{"longer input cut", [][]int16{{1, 1, 1, 1, 1}}, []int16{1, 1, 1}, 0},
		{"four", [][]int16{{1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {-6, 0, 32767}}, []int16{0, 6, 32767}, 1},
	} {
		before := m.Clipped()
		dst := make([]int16, 3)
		m.Mix(dst, tc.inputs...)
		if !slices.Equal(dst, tc.want) || m.Clipped()-before != tc.clips {
			t.Errorf("%s: got %v (%d clipped), want %v (%d)", tc.name, dst, m.Clipped()-before, tc.want, tc.clips)
		}
	}
	// Longer than one internal chunk, and in place.
	a := mediatest.Sine(3000, 16000, 440, -12)
	b := mediatest.Sine(3000, 16000, 1000, -12)
	want := make([]int16, 3000)
	for i := range want {
		want[i] = a[i] + b[i]
	}
	m.Mix(a, a, b)
	if !slices.Equal(a, want) {
		t.Error("in-place mix of 3000 samples differs from the sum")
	}
}

// The limiter keeps two in-phase full-scale tones under the ceiling without clipping and with
// far less distortion than saturation, and lets go afterwards.
func TestMixerLimiter(t *testing.T) {
	lim, err := NewMixer(MixerOptions{Limiter: true, Threshold: -1, Release: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sat, _ := NewMixer(MixerOptions{})
	tone := mediatest.Sine(16000, 16000, 300, -0.5)
	outL := make([]int16, len(tone))
	outS := make([]int16, len(tone))
	for off := 0; off < len(tone); off += 320 {
		lim.Mix(outL[off:off+320], tone[off:off+320], tone[off:off+320])
		sat.Mix(outS[off:off+320], tone[off:off+320], tone[off:off+320])
	}
	ceiling := int16(32767 * math.Pow(10, -1.0/20))
	for i, v := range outL {
		if v > ceiling+1 || v < -ceiling-1 {
			t.Fatalf("sample %d = %d over the -1 dBFS ceiling %d", i, v, ceiling)
		}
	}
	if lim.Clipped() != 0 {
		t.Errorf("limiter clipped %d samples", lim.Clipped())
	}
	// Distortion, measured after the attack settles: the limited signal is a scaled copy of the
	// tone plus a little gain ripple; the saturated one is a square-ish wave.
	snrL, _ := mediatest.SNR(outL[1600:], tone[1600:], 0)
	snrS, _ := mediatest.SNR(outS[1600:], tone[1600:], 0)
	t.Logf("signal-to-distortion: limiter %.1f dB, saturation %.1f dB (%d clipped)", snrL, snrS, sat.Clipped())
	if snrL < 20 || snrL < snrS+8 {
		t.Errorf("limiter SNR %.1f dB, saturation %.1f dB: want >= 20 and 8 dB better", snrL, snrS)
	}
	// Quiet input afterwards: the gain recovers to unity within a few release times.
	quiet := mediatest.Sine(320, 16000, 300, -30)
	out := make([]int16, 320)
	for range 30 { // 600 ms
		lim.Mix(out, quiet)
	}
	if g := lim.Gain(); g != 1 {
		t.Errorf("gain %.6f 600 ms after the peaks, want back to 1", g)
	}
	if !slices.Equal(out, quiet) {
		t.Error("a quiet single input is not passed through unchanged")
	}
}

func TestMixerFrames(t *testing.T) {
	m, _ := NewMixer(MixerOptions{})
	a, b := numbered(100), numbered(-30)
	b.N = 100
	var dst Frame
	if err := m.MixFrames(&dst, a, b); err != nil {
		t.Fatal(err)
	}
	if dst.Rate != 16000 || dst.N != 320 || dst.Samples[0] != 70 || dst.Samples[100] != 100 {
		t.Errorf("got rate %d N %d samples %d %d", dst.Rate, dst.N, dst.Samples[0], dst.Samples[100])
	}
	var c Frame
	c.Init(8000)
	if err := m.MixFrames(&dst, a, &c); err == nil {
		t.Error("mixing 16 and 8 kHz frames: want an error")
	}
	for name, o := range map[string]MixerOptions{
		"loud threshold": {Threshold: 1},
		"rate":           {Rate: 10},
		"release":        {Release: -time.Second},
	} {
		if _, err := NewMixer(o); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func BenchmarkMixer(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, limiter := range []bool{false, true} {
			b.Run(fmt.Sprintf("inputs=%d/limiter=%v", n, limiter), func(b *testing.B) {
				m, _ := NewMixer(MixerOptions{Limiter: limiter})
				ins := make([][]int16, n)
				for i := range ins {
					ins[i] = mediatest.Sine(320, 16000, float64(300*(i+1)), -6)
				}
				dst := make([]int16, 320)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if n == 2 {
						m.Mix(dst, ins[0], ins[1])
					} else {
						m.Mix(dst, ins[0], ins[1], ins[2], ins[3])
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
			})
		}
	}
}
