package webrtc

import (
	"sync"

	"github.com/parley-voice/parley/media"
)

// frameRingSize bounds a listener's queue per side: 160 ms. Beyond it the oldest frame is
// dropped, so clock drift between the call and the listener's pump never builds delay.
const frameRingSize = 8

// frameRing is a small fixed queue of frames between a media goroutine (a tap) and a
// listener's pump. Put copies the frame and never waits beyond a short lock; nothing allocates.
type frameRing struct {
	mu      sync.Mutex
	buf     [frameRingSize]media.Frame
	head, n int
	dropped uint64
}

// Put copies f in, dropping the oldest frame when full.
func (r *frameRing) Put(f *media.Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == frameRingSize {
		r.head = (r.head + 1) % frameRingSize
		r.n--
		r.dropped++
	}
	dst := &r.buf[(r.head+r.n)%frameRingSize]
	dst.Rate, dst.N = f.Rate, copy(dst.Samples[:], f.PCM())
	r.n++
}

// Get copies the oldest frame into dst; false when empty.
func (r *frameRing) Get(dst *media.Frame) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return false
	}
	src := &r.buf[r.head]
	dst.Rate, dst.N = src.Rate, copy(dst.Samples[:], src.PCM())
	r.head = (r.head + 1) % frameRingSize
	r.n--
	return true
}

// Len returns how many frames wait.
func (r *frameRing) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
