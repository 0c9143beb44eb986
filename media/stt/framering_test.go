package stt

import (
	"testing"
)

func TestFrameRingDropsOldest(t *testing.T) {
	r := newFrameRing(3, 4)
	for i := range 5 {
		r.push([]int16{int16(i), int16(i)}, i%2 == 0)
	}
	if r.len() != 3 || r.droppedCount() != 2 {
		t.Fatalf("len %d dropped %d", r.len(), r.droppedCount())
	}
	var buf []int16
	for want := 2; want < 5; want++ {
		pcm, voiced, off, ok := r.pop(buf)
		if !ok || pcm[0] != int16(want) || voiced != (want%2 == 0) || off != int64(2*want) {
			t.Fatalf("pop = %v %v %d %v, want frame %d", pcm, voiced, off, ok, want)
		}
		buf = pcm
	}
	if _, _, _, ok := r.pop(buf); ok {
		t.Fatal("pop from empty ring")
	}
}

func TestFrameRingNoAllocs(t *testing.T) {
	r := newFrameRing(8, 320)
	frame := make([]int16, 320)
	dst := make([]int16, 0, 320)
	if n := testing.AllocsPerRun(1000, func() {
		r.push(frame, true)
		dst, _, _, _ = r.pop(dst)
	}); n != 0 {
		t.Errorf("%v allocs per push/pop", n)
	}
}
