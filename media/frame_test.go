package media

import (
	"sync"
	"testing"
	"time"
)

func TestSamplesPerFrame(t *testing.T) {
	for _, tc := range []struct{ rate, want int }{
		{8000, 160}, {16000, 320}, {24000, 480}, {48000, 960}, {22050, 441},
		{0, 0}, {-8000, 0}, {96000, 0}, {11025, 0},
	} {
		if got := SamplesPerFrame(tc.rate); got != tc.want {
			t.Errorf("SamplesPerFrame(%d) = %d, want %d", tc.rate, got, tc.want)
		}
	}
}

func TestFrameMethods(t *testing.T) {
	var f Frame
	if len(f.PCM()) != 0 || f.Duration() != 0 {
		t.Fatal("zero frame is not empty")
	}
	f.Samples[5] = 99
	if err := f.Init(16000); err != nil {
		t.Fatal(err)
	}
	if f.N != 320 || len(f.PCM()) != 320 || f.Samples[5] != 0 || f.Duration() != FrameDuration {
		t.Fatalf("Init: N %d, sample %d, duration %v", f.N, f.Samples[5], f.Duration())
	}
	if err := f.Init(44000 + 1); err == nil {
		t.Error("Init(44001): want an error")
	}
	if err := f.SetPCM(8000, []int16{1, 2, 3}); err != nil || f.N != 3 || f.Rate != 8000 || f.PCM()[2] != 3 {
		t.Fatalf("SetPCM: %v %+v", err, f.PCM())
	}
	if f.Duration() != 3*time.Second/8000 {
		t.Errorf("duration %v", f.Duration())
	}
	if err := f.SetPCM(8000, make([]int16, 161)); err == nil {
		t.Error("161 samples at 8 kHz: want an error")
	}
	if err := f.SetPCM(7, nil); err == nil {
		t.Error("rate 7: want an error")
	}
	f.N = -4 // corrupted by a caller: PCM must not panic
	if len(f.PCM()) != 0 {
		t.Error("negative N")
	}
	f.N = 5000
	if len(f.PCM()) != MaxFrameSamples {
		t.Error("oversized N")
	}
}

func TestFramePool(t *testing.T) {
	p := NewFramePool(4, 2)
	if p.Idle() != 2 {
		t.Fatalf("prefilled %d", p.Idle())
	}
	a, b, c := p.Get(), p.Get(), p.Get()
	if p.Allocated() != 1 {
		t.Errorf("allocated %d, want 1 (two were prefilled)", p.Allocated())
	}
	a.Init(16000)
	p.Put(a)
	if got := p.Get(); got != a || got.N != 0 || got.Rate != 0 {
		t.Errorf("Get did not reuse and reset the frame: %p %d %d", got, got.N, got.Rate)
	}
	for _, f := range []*Frame{a, b, c, new(Frame), new(Frame), nil} {
		p.Put(f)
	}
	if p.Idle() != 4 {
		t.Errorf("idle %d, want the capacity 4", p.Idle())
	}
	// Concurrent use (run with -race).
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				f := p.Get()
				f.Init(8000)
				p.Put(f)
			}
		})
	}
	wg.Wait()
	if p.Idle() > 4 {
		t.Errorf("idle %d beyond capacity", p.Idle())
	}
}

func BenchmarkFramePool(b *testing.B) {
	p := NewFramePool(16, 16)
	b.ReportAllocs()
	for range b.N {
		f := p.Get()
		f.Rate, f.N = PipelineRate, 320
		p.Put(f)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
}
