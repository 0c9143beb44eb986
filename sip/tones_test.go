package sip

import (
	"errors"
	"io"
	"testing"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
)

func TestRingback(t *testing.T) {
	rb := newRingback(media.PipelineRate)
	var f media.Frame
	var on, off []int16
	for i := 0; i < 300; i++ { // 6 s: one cadence
		rb.fill(&f)
		if i < 100 {
			on = append(on, f.PCM()...)
		} else if i >= 110 {
			off = append(off, f.PCM()...)
		}
	}
	for _, hz := range []float64{440, 480} {
		if l := mediatest.DetectTone(on, media.PipelineRate, hz); l < -25 {
			t.Errorf("%v Hz at %.1f dBFS while ringing", hz, l)
		}
	}
	if l := mediatest.LevelDBFS(off); l > -90 {
		t.Errorf("the 4 s pause is at %.1f dBFS", l)
	}
}

func TestChime(t *testing.T) {
	c := newChime(media.PipelineRate)
	var all []int16
	buf := make([]int16, 333)
	for {
		n, err := c.read(buf)
		all = append(all, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(all) != 3*(media.PipelineRate/4+media.PipelineRate/10) {
		t.Fatalf("chime of %d samples", len(all))
	}
	if l := mediatest.DetectTone(all[:media.PipelineRate/4], media.PipelineRate, 660); l < -20 {
		t.Errorf("first tone at %.1f dBFS", l)
	}
}

func BenchmarkRingback(b *testing.B) {
	rb := newRingback(media.PipelineRate)
	var f media.Frame
	b.ReportAllocs()
	for b.Loop() {
		rb.fill(&f)
	}
}
