package webrtc

import (
	"testing"

	"github.com/parley-voice/parley/media"
)

func TestFrameRing(t *testing.T) {
	var r frameRing
	var f, out media.Frame
	if r.Get(&out) {
		t.Fatal("got a frame from an empty ring")
	}
	for i := 0; i < frameRingSize+3; i++ {
		f.Init(media.PipelineRate)
		f.Samples[0] = int16(i)
		r.Put(&f)
	}
	if r.Len() != frameRingSize || r.dropped != 3 {
		t.Fatalf("len %d dropped %d", r.Len(), r.dropped)
	}
	for want := 3; want < frameRingSize+3; want++ {
		if !r.Get(&out) || out.Samples[0] != int16(want) || out.N != 320 || out.Rate != media.PipelineRate {
			t.Fatalf("got sample %d (N %d), want %d: not the oldest first", out.Samples[0], out.N, want)
		}
	}
	if r.Get(&out) {
		t.Fatal("ring not empty")
	}
}

func BenchmarkFrameRing(b *testing.B) {
	var r frameRing
	var f, out media.Frame
	f.Init(media.PipelineRate)
	b.ReportAllocs()
	for b.Loop() {
		r.Put(&f)
		r.Get(&out)
	}
}
