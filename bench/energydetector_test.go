package bench

import (
	"math"
	"testing"
	"time"
)

// tone returns n samples of a sine at freq Hz and amplitude amp (0–1 of full scale).
func tone(n, rate int, freq, amp float64) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(amp * 32767 * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return out
}

func TestLevelDBFS(t *testing.T) {
	square := make([]int16, 160)
	for i := range square {
		square[i] = 32767
		if i%2 == 1 {
			square[i] = -32767
		}
	}
	cases := []struct {
		name string
		pcm  []int16
		want float64
	}{
		{"full-scale square", square, 0},
		{"full-scale sine", tone(8000, 8000, 440, 1), -3.01},
		{"sine at 1%", tone(8000, 8000, 440, 0.01*math.Sqrt2), -40},
	}
	for _, c := range cases {
		if got := LevelDBFS(c.pcm); math.Abs(got-c.want) > 0.05 {
			t.Errorf("%s: %.2f dB, want %.2f", c.name, got, c.want)
		}
	}
	if !math.IsInf(LevelDBFS(make([]int16, 10)), -1) || !math.IsInf(LevelDBFS(nil), -1) {
		t.Error("silence is not -inf")
	}
}

// feed pushes pcm in 20 ms blocks starting at t0 and returns the events with their times.
func feed(d *EnergyDetector, t0 time.Time, pcm []int16, rate int) (onsets, offsets []time.Duration) {
	n := rate / 50
	for i := 0; i < len(pcm); i += n {
		j := min(i+n, len(pcm))
		at := t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
		switch ev, when := d.Push(at, pcm[i:j], rate); ev {
		case EnergyOnset:
			onsets = append(onsets, when.Sub(t0))
		case EnergyOffset:
			offsets = append(offsets, when.Sub(t0))
		}
	}
	return onsets, offsets
}

func TestEnergyDetectorKnownDelays(t *testing.T) {
	for _, rate := range []int{8000, 16000, 48000} {
		for _, delay := range []time.Duration{0, 5 * time.Millisecond, 135 * time.Millisecond, 1237 * time.Millisecond} {
			// silence, 800 ms of tone starting at delay, then 1 s of silence
			lead := int(int64(delay) * int64(rate) / int64(time.Second))
			body := tone(rate*8/10, rate, 300, 0.3)
			pcm := append(append(make([]int16, lead), body...), make([]int16, rate)...)
			d := NewEnergyDetector(0, 400*time.Millisecond)
			t0 := time.Unix(1000, 0)
			on, off := feed(d, t0, pcm, rate)
			if len(on) != 1 || len(off) != 1 {
				t.Fatalf("rate %d delay %v: onsets %v offsets %v", rate, delay, on, off)
			}
			// Onsets are found to the 5 ms block that holds the first loud samples.
			if e := on[0] - delay; e < -energyBlock || e > energyBlock {
				t.Errorf("rate %d: onset at %v, want %v ± 5 ms", rate, on[0], delay)
			}
			end := delay + 800*time.Millisecond
			if e := off[0] - end; e < -energyBlock || e > energyBlock {
				t.Errorf("rate %d: offset at %v, want %v ± 5 ms", rate, off[0], end)
			}
			if d.Active() {
				t.Error("still active after the offset")
			}
		}
	}
}

func TestEnergyDetectorHangoverBridgesGaps(t *testing.T) {
	rate := 16000
	word := tone(rate/4, rate, 200, 0.2)
	gap := make([]int16, rate/5) // 200 ms: shorter than the hangover
	pcm := append(append(append(append([]int16{}, word...), gap...), word...), make([]int16, rate)...)
	d := NewEnergyDetector(-40, 300*time.Millisecond)
	on, off := feed(d, time.Unix(0, 0), pcm, rate)
	if len(on) != 1 || len(off) != 1 {
		t.Fatalf("onsets %v offsets %v: the gap split the sound", on, off)
	}
	if want := 700 * time.Millisecond; off[0] < want-energyBlock || off[0] > want+energyBlock {
		t.Errorf("offset %v, want %v", off[0], want)
	}
}

func TestEnergyDetectorIgnoresQuietNoise(t *testing.T) {
	rate := 8000
	noise := tone(rate*2, rate, 1000, 0.005) // about -49 dB
	d := NewEnergyDetector(-40, 0)
	if on, off := feed(d, time.Unix(0, 0), noise, rate); len(on)+len(off) != 0 {
		t.Errorf("noise gave onsets %v offsets %v", on, off)
	}
}

func TestEnergyDetectorCheck(t *testing.T) {
	d := NewEnergyDetector(0, 100*time.Millisecond)
	t0 := time.Unix(50, 0)
	if ev, _ := d.Push(t0, tone(160, 8000, 400, 0.5), 8000); ev != EnergyOnset {
		t.Fatalf("no onset: %v", ev)
	}
	if ev, _ := d.Check(t0.Add(50 * time.Millisecond)); ev != EnergyNone {
		t.Fatal("offset before the hangover")
	}
	ev, at := d.Check(t0.Add(200 * time.Millisecond))
	if ev != EnergyOffset || !at.Equal(t0.Add(20*time.Millisecond)) {
		t.Fatalf("Check = %v at %v", ev, at.Sub(t0))
	}
	d.Reset()
	if d.Active() {
		t.Error("active after Reset")
	}
	if ev, _ := d.Push(t0, tone(160, 8000, 400, 0.5), 0); ev != EnergyNone {
		t.Error("a zero rate gave an event")
	}
}

func BenchmarkEnergyDetector(b *testing.B) {
	d := NewEnergyDetector(0, 0)
	pcm := tone(160, 8000, 400, 0.3)
	t0 := time.Unix(0, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d.Push(t0.Add(time.Duration(i)*20*time.Millisecond), pcm, 8000)
	}
}
