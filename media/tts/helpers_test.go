package tts_test

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/tts"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// goertzel returns the amplitude (0..1 of full scale) of the freq Hz component of pcm.
func goertzel(pcm []int16, rate int, freq float64) float64 {
	if len(pcm) == 0 {
		return 0
	}
	w := 2 * math.Pi * freq / float64(rate)
	coeff := 2 * math.Cos(w)
	var s1, s2 float64
	for _, v := range pcm {
		s := float64(v)/32768 + coeff*s1 - s2
		s2, s1 = s1, s
	}
	power := s1*s1 + s2*s2 - coeff*s1*s2
	return 2 * math.Sqrt(math.Max(power, 0)) / float64(len(pcm))
}

func rms(pcm []int16) float64 {
	if len(pcm) == 0 {
		return 0
	}
	var sum float64
	for _, v := range pcm {
		f := float64(v) / 32768
		sum += f * f
	}
	return math.Sqrt(sum / float64(len(pcm)))
}

// readAll drains s in 20 ms reads at 16 kHz and reports the time the first samples arrived.
func readAll(t testing.TB, s tts.Stream) (pcm []int16, first time.Time, err error) {
	t.Helper()
	buf := make([]int16, 320)
	for {
		n, err := s.Read(buf)
		if n > 0 && first.IsZero() {
			first = time.Now()
		}
		pcm = append(pcm, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return pcm, first, nil
		}
		if err != nil {
			return pcm, first, err
		}
	}
}

// assertTone checks that pcm is dominated by a tone at hz with about the given amplitude.
func assertTone(t testing.TB, pcm []int16, rate int, hz, amp float64) {
	t.Helper()
	// Skip the filter's start-up, measure the middle.
	mid := pcm[len(pcm)/4 : 3*len(pcm)/4]
	got := goertzel(mid, rate, hz)
	if math.Abs(got-amp) > 0.05 {
		t.Errorf("%v Hz amplitude %.3f, want %.3f", hz, got, amp)
	}
	for _, other := range []float64{hz / 2, hz * 2, 1000, 3000} {
		if o := goertzel(mid, rate, other); o > got/20 {
			t.Errorf("%v Hz at %.3f next to the %v Hz tone at %.3f", other, o, hz, got)
		}
	}
}

func within(t testing.TB, what string, got, want, lo, hi time.Duration) {
	t.Helper()
	if got < want-lo || got > want+hi {
		t.Errorf("%s = %v, want %v (-%v/+%v)", what, got, want, lo, hi)
	}
}

// loadSlack is the upper tolerance on wall-clock latencies: the lower bounds are tight (no
// event may come before the configured latency), but a loaded CI machine may be late.
const loadSlack = 300 * time.Millisecond
