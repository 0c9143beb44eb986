package stt

import "sync"

// frameRing is the bounded queue between Stream.Write (the engine's frame path) and the
// goroutine that talks to the provider. Its slots own their sample buffers, so pushing a frame
// is a copy into memory allocated once: no allocation in steady state. A slot's buffer is
// allocated the first time it is used, and an emptied ring starts again at slot 0, so a call
// holds buffers only for as many frames as it ever queued at once (a batch, normally), not for
// the whole capacity, which is there for a reconnect. When full, the oldest
// frame is dropped (and counted) so that latency stays bounded and the newest audio, which
// decides endpointing, survives.
//
// It also decides when the sender must be woken, so that the frame path does not wake it on
// every frame. Frames are coalesced into messages of about batch samples while latency does not
// matter (speech, and silence long after it). A silent frame that follows a voiced one by less
// than tail samples is urgent: the provider's endpointing decides the end of the turn from that
// audio, so it is due at once, alone. push reports a wake-up only when a message is due (a full
// batch or an urgent frame) or when the sender said it was idle, and at most once until the
// sender has taken everything due (take), so a busy sender is not woken again for nothing.
//
// Queued frames are contiguous on the engine's timeline (only the oldest frame is ever dropped),
// so one take never spans a gap: a gap falls between two messages, before the frame at the head.
//
// The mutex is held only to copy frames in or out; nobody does I/O or encoding under it.
type frameRing struct {
	mu      sync.Mutex
	slots   []frameSlot
	head, n int
	next    int64  // engine offset (samples) of the next frame pushed
	dropped uint64 // frames overwritten while queued

	frame int   // samples of one frame: a slot's buffer size
	batch int   // queued samples that make a message due (≥ 1)
	tail  int64 // samples after the last voiced frame during which silent frames are urgent

	queued    int   // samples queued
	voicedEnd int64 // engine offset just past the last voiced frame pushed; -1 before any
	signalled bool  // a wake-up is outstanding: the sender will take again before it rests
	idle      bool  // the sender has no timer armed: wake it on the next push
}

type frameSlot struct {
	pcm    []int16
	voiced bool
	urgent bool  // a silent frame in the tail after speech: send at once, alone
	off    int64 // engine offset of the frame's first sample
}

// frameBatch is one message taken from the ring: contiguous frames, in order.
type frameBatch struct {
	pcm    []int16 // the frames' samples, concatenated
	off    int64   // engine offset of pcm[0]
	frames int     // how many frames pcm holds
	urgent bool    // a tail frame, taken alone
}

// newFrameRing returns a ring of size slots, each sized for frameSamples samples when first used. A
// message is due once batchSamples are queued (batchSamples ≤ frameSamples sends every frame
// as it comes); silent frames less than tailSamples after the end of a voiced frame are
// due at once, alone (tailSamples 0 disables the tail).
func newFrameRing(size, frameSamples, batchSamples int, tailSamples int64) *frameRing {
	if size < 1 {
		size = 1
	}
	r := &frameRing{slots: make([]frameSlot, size), batch: max(batchSamples, 1), tail: tailSamples, voicedEnd: -1, idle: true}
	r.frame = frameSamples
	return r
}

// push copies pcm into the ring and reports whether the sender must be woken.
func (r *frameRing) push(pcm []int16, voiced bool) (wake bool) {
	r.mu.Lock()
	if r.n == len(r.slots) {
		r.queued -= len(r.slots[r.head].pcm)
		r.head = (r.head + 1) % len(r.slots)
		r.n--
		r.dropped++
	}
	s := &r.slots[(r.head+r.n)%len(r.slots)]
	if s.pcm == nil {
		s.pcm = make([]int16, 0, max(r.frame, len(pcm)))
	}
	s.pcm = append(s.pcm[:0], pcm...)
	s.voiced = voiced
	s.off = r.next
	s.urgent = !voiced && r.voicedEnd >= 0 && s.off < r.voicedEnd+r.tail
	r.next += int64(len(pcm))
	if voiced {
		r.voicedEnd = r.next
	}
	r.queued += len(pcm)
	r.n++
	if !r.signalled && (s.urgent || r.queued >= r.batch || r.idle) {
		r.signalled, wake = true, true
	}
	r.mu.Unlock()
	return wake
}

// take moves the next message into b (its buffer is reused, grown if too small) and reports
// whether there was one. A message is due when it is an urgent frame (taken alone), a full
// batch, or frames queued ahead of an urgent one; with all, whatever is queued is due (in
// messages of at most a batch). When nothing is due, take clears the outstanding wake-up, so the
// caller must call it until it returns false before it rests, and then rest knowing that the
// next due message wakes it. A false return with all also marks the sender idle (the next push
// wakes it); one without all marks it busy (it keeps a timer armed for a stuck partial batch).
func (r *frameRing) take(b *frameBatch, all bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.signalled, r.idle = false, all
		return false
	}
	k, sum := 0, 0
	if r.slots[r.head].urgent {
		k, sum = 1, len(r.slots[r.head].pcm)
	} else {
		for k < r.n && sum < r.batch {
			s := &r.slots[(r.head+k)%len(r.slots)]
			if s.urgent {
				break
			}
			sum += len(s.pcm)
			k++
		}
		if !all && sum < r.batch && k == r.n {
			r.signalled, r.idle = false, false // a partial batch: not due yet
			return false
		}
	}
	b.pcm = b.pcm[:0]
	b.off, b.frames, b.urgent = r.slots[r.head].off, k, r.slots[r.head].urgent
	for range k {
		s := &r.slots[r.head]
		b.pcm = append(b.pcm, s.pcm...)
		r.head = (r.head + 1) % len(r.slots)
		r.n--
	}
	if r.n == 0 {
		r.head = 0 // reuse the slots already allocated
	}
	r.queued -= sum
	return true
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
