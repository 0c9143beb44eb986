package stt

import (
	"testing"
)

// ringFrame returns a frame of n samples all equal to i, so a message shows which frames it holds.
func ringFrame(i, n int) []int16 {
	f := make([]int16, n)
	for j := range f {
		f[j] = int16(i)
	}
	return f
}

// frameIDs lists the frames in a taken message (frames of n samples made by ringFrame).
func frameIDs(b *frameBatch, n int) []int {
	var ids []int
	for i := 0; i < len(b.pcm); i += n {
		ids = append(ids, int(b.pcm[i]))
	}
	return ids
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFrameRingDropsOldest(t *testing.T) {
	r := newFrameRing(3, 2, 2, 0) // a message per frame
	for i := range 5 {
		r.push([]int16{int16(i), int16(i)}, i%2 == 0)
	}
	if r.len() != 3 || r.droppedCount() != 2 {
		t.Fatalf("len %d dropped %d", r.len(), r.droppedCount())
	}
	var b frameBatch
	for want := 2; want < 5; want++ {
		if !r.take(&b, false) || b.frames != 1 || b.pcm[0] != int16(want) || b.off != int64(2*want) {
			t.Fatalf("take = %+v, want frame %d", b, want)
		}
	}
	if r.take(&b, true) {
		t.Fatal("take from empty ring")
	}
}

// TestFrameRingBatchingPolicy walks the policy step by step: which push wakes the sender and
// which frames each message holds.
func TestFrameRingBatchingPolicy(t *testing.T) {
	const n = 4 // samples per frame
	// Messages of 5 frames; silent frames less than 3 frames after the last voiced one are urgent.
	r := newFrameRing(64, n, 5*n, 3*n)
	var b frameBatch
	r.take(&b, false) // the sender starts: nothing queued, it arms its timer
	id := 0
	push := func(voiced bool, wantWake bool) {
		t.Helper()
		if got := r.push(ringFrame(id, n), voiced); got != wantWake {
			t.Fatalf("push of frame %d (voiced %v): wake %v, want %v", id, voiced, got, wantWake)
		}
		id++
	}
	takes := func(all bool, want ...[]int) {
		t.Helper()
		for _, w := range want {
			if !r.take(&b, all) {
				t.Fatalf("nothing due, want frames %v", w)
			}
			if got := frameIDs(&b, n); !sameInts(got, w) || b.frames != len(w) || b.off != int64(w[0]*n) {
				t.Fatalf("took frames %v off %d (%d frames), want %v", got, b.off, b.frames, w)
			}
		}
		if r.take(&b, all) {
			t.Fatalf("took frames %v, want nothing due", frameIDs(&b, n))
		}
	}

	// Silence before any speech is batched: only the fifth frame wakes the sender.
	for range 4 {
		push(false, false)
	}
	push(false, true)
	takes(false, []int{0, 1, 2, 3, 4})

	// Speech is batched; a partial voiced batch goes out when the tail starts, then each
	// tail frame alone.
	for range 7 {
		push(true, id == 9) // frames 5..11, the batch 5..9 is due
	}
	takes(false, []int{5, 6, 7, 8, 9})
	push(false, true) // frame 12: the first tail frame (tail: frames 12..14)
	takes(false, []int{10, 11}, []int{12})
	// Two tail frames before the sender takes: one wake-up, two messages.
	push(false, true)
	push(false, false)
	takes(false, []int{13}, []int{14})

	// Past the tail: batched again.
	for range 4 {
		push(false, false) // 15..18
	}
	push(false, true) // 19
	takes(false, []int{15, 16, 17, 18, 19})

	// A partial batch is left until more frames come or the sender takes all (its timer fired,
	// Close); after that the sender is idle and the next push wakes it, due or not.
	push(false, false) // 20
	push(false, false) // 21
	takes(false)
	takes(true, []int{20, 21})
	push(false, true) // 22
	takes(false)      // the sender is busy again (timer armed)
	push(false, false)

	// Speech resumes: a voiced frame after silence joins the queued silence, and the silent frame
	// after it flushes them and goes alone.
	push(true, false) // 24
	push(false, true) // 25
	takes(false, []int{22, 23, 24}, []int{25})
}

// TestFrameRingGapStartsMessage: frames dropped from a partial batch leave a gap on the engine
// timeline; the next message starts after it, at the new head, and holds only contiguous frames.
func TestFrameRingGapStartsMessage(t *testing.T) {
	const n = 4
	r := newFrameRing(8, n, 5*n, 0)
	var b frameBatch
	for i := range 3 {
		r.push(ringFrame(i, n), true)
	}
	for i := 3; i < 13; i++ { // 13 frames into 8 slots: frames 0..4 are dropped
		r.push(ringFrame(i, n), true)
	}
	if r.droppedCount() != 5 {
		t.Fatalf("dropped %d", r.droppedCount())
	}
	if !r.take(&b, false) || !sameInts(frameIDs(&b, n), []int{5, 6, 7, 8, 9}) || b.off != 5*n {
		t.Fatalf("first message %v off %d", frameIDs(&b, n), b.off)
	}
	if r.take(&b, false) {
		t.Fatalf("partial batch %v taken", frameIDs(&b, n))
	}
	if !r.take(&b, true) || !sameInts(frameIDs(&b, n), []int{10, 11, 12}) || b.off != 10*n {
		t.Fatalf("rest %v off %d", frameIDs(&b, n), b.off)
	}
}

// TestFrameRingNoAllocs: push and take copy into memory allocated up front.
func TestFrameRingNoAllocs(t *testing.T) {
	r := newFrameRing(8, 320, 1600, 24000)
	frame := make([]int16, 320)
	b := frameBatch{pcm: make([]int16, 0, 1600+320)}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		r.push(frame, i%40 < 20)
		i++
		for r.take(&b, false) {
		}
	}); n != 0 {
		t.Errorf("%v allocs per push/take", n)
	}
}
