package codec

import (
	"math"
	"runtime"
	"syscall"
	"testing"
)

// tone returns n samples of a sine of freq Hz and amplitude amp at rate, starting at sample
// offset start (so consecutive calls continue the same wave).
func tone(rate int, freq, amp float64, n, start int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(math.Round(amp * math.Sin(2*math.Pi*freq*float64(start+i)/float64(rate))))
	}
	return out
}

// snrDB compares got with want sample by sample: signal power over error power, in dB.
func snrDB(want, got []int16) float64 {
	var sig, noise float64
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		sig += w * w
		noise += (w - g) * (w - g)
	}
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}

// energy is the sum of squares.
func energy(x []int16) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

// rms is the root mean square.
func rms(x []int16) float64 {
	if len(x) == 0 {
		return 0
	}
	return math.Sqrt(energy(x) / float64(len(x)))
}

// goertzelPower returns the power of x at freq (Hz, sampled at rate), normalised so that a
// full-length sine of amplitude A gives A²/2... approximately (for an integer number of cycles).
func goertzelPower(x []int16, rate int, freq float64) float64 {
	w := 2 * math.Pi * freq / float64(rate)
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for _, v := range x {
		s0 := float64(v) + c*s1 - s2
		s2, s1 = s1, s0
	}
	p := s1*s1 + s2*s2 - c*s1*s2
	n := float64(len(x))
	return 2 * p / (n * n)
}

// bestLag returns the lag in [0, maxLag] at which got best matches want (got[i+lag] ≈ want[i]).
func bestLag(want, got []int16, maxLag int) int {
	best, bestErr := 0, math.Inf(1)
	n := len(want) - maxLag
	for lag := 0; lag <= maxLag; lag++ {
		var e float64
		for i := 0; i < n; i++ {
			d := float64(want[i]) - float64(got[i+lag])
			e += d * d
		}
		if e < bestErr {
			best, bestErr = lag, e
		}
	}
	return best
}

// threadCPU returns the CPU time the calling OS thread has used, in nanoseconds.
func threadCPU() int64 {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchLoop runs body in b.Loop with allocation reporting, and also reports the CPU time the
// benchmark's thread spent per operation ("cpu-ns/op"). Unlike ns/op (wall time), that figure
// does not grow when other processes compete for the machine's cores.
func benchLoop(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	start := threadCPU()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
}
