package stt

import "sync"

// frameRing is the bounded queue between Stream.Write (the engine's frame path) and the
// goroutine that talks to the provider. Its slots own their sample buffers, so pushing a frame
// is a copy into memory allocated once: no allocation in steady state. When full, the oldest
// frame is dropped (and counted) so that latency stays bounded and the newest audio, which
// decides endpointing, survives.
//
// The mutex is held only for a copy of one frame; nobody does I/O under it.
type frameRing struct {
	mu      sync.Mutex
	slots   []frameSlot
	head, n int
	next    int64  // engine offset (samples) of the next frame pushed
	dropped uint64 // frames overwritten while queued
}

type frameSlot struct {
	pcm    []int16
	voiced bool
	off    int64 // engine offset of the frame's first sample
}

// newFrameRing returns a ring of size slots, each pre-sized for frameSamples samples.
func newFrameRing(size, frameSamples int) *frameRing {
	if size < 1 {
		size = 1
	}
	r := &frameRing{slots: make([]frameSlot, size)}
	for i := range r.slots {
		r.slots[i].pcm = make([]int16, 0, frameSamples)
	}
	return r
}

// push copies pcm into the ring. It reports whether an older frame was dropped to make room.
func (r *frameRing) push(pcm []int16, voiced bool) (dropped bool) {
	r.mu.Lock()
	if r.n == len(r.slots) {
		r.head = (r.head + 1) % len(r.slots)
		r.n--
		r.dropped++
		dropped = true
	}
	s := &r.slots[(r.head+r.n)%len(r.slots)]
	s.pcm = append(s.pcm[:0], pcm...)
	s.voiced = voiced
	s.off = r.next
	r.next += int64(len(pcm))
	r.n++
	r.mu.Unlock()
	return dropped
}

// pop copies the oldest frame into dst (grown if too small) and returns it with its offset.
func (r *frameRing) pop(dst []int16) (pcm []int16, voiced bool, off int64, ok bool) {
	r.mu.Lock()
	if r.n == 0 {
		r.mu.Unlock()
		return dst[:0], false, 0, false
	}
	s := &r.slots[r.head]
	pcm = append(dst[:0], s.pcm...)
	voiced, off = s.voiced, s.off
	r.head = (r.head + 1) % len(r.slots)
	r.n--
	r.mu.Unlock()
	return pcm, voiced, off, true
}

// len returns the number of queued frames.
func (r *frameRing) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// droppedCount returns how many frames were overwritten.
func (r *frameRing) droppedCount() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}
