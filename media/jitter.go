package media

import (
	"fmt"
	"sync"
	"time"
)

// PopStatus says what JitterBuffer.Pop produced for one playout tick.
type PopStatus uint8

const (
	// PopEmpty means there is nothing to play and nothing to conceal: the stream has not
	// started, the buffer is still filling to its target depth, or it has drained because the
	// sender went quiet (silence suppression, hold, end of stream). Play silence or comfort noise.
	PopEmpty PopStatus = iota
	// PopPacket means the payload is the next packet: decode it.
	PopPacket
	// PopMissing means a frame is due but its packet is not here: conceal one frame (packet loss
	// concealment). When the following packet is already buffered, the payload holds a copy of
	// it so that a codec with in-band forward error correction (Opus, RFC 6716 §2.1.7) can
	// rebuild the missing frame from it (codec.Concealer); otherwise the payload is empty.
	PopMissing
)

func (s PopStatus) String() string {
	switch s {
	case PopEmpty:
		return "empty"
	case PopPacket:
		return "packet"
	case PopMissing:
		return "missing"
	}
	return fmt.Sprintf("PopStatus(%d)", uint8(s))
}

// JitterOptions configures a JitterBuffer.
type JitterOptions struct {
	// ClockRate is the RTP clock rate of the payload format in Hz (8000 for PCMU/PCMA and
	// G.722, 48000 for Opus). Required.
	ClockRate uint32
	// FrameSamples is the RTP timestamp increment of one packet, e.g. 160 for 20 ms at 8 kHz or
	// 960 for 20 ms of Opus. Pop must be called once per packet duration. Required.
	FrameSamples uint32
	// Min and Max bound the playout delay (the buffer's target depth). Defaults: 20 ms and 200 ms.
	Min, Max time.Duration
	// MaxPayload is the largest payload kept, in bytes; larger ones are dropped and counted.
	// Default 1500 (an Ethernet MTU; a 20 ms Opus frame is at most 1275 bytes, RFC 6716 §3.4).
	MaxPayload int
	// Now is the clock used to time arrivals (for the interarrival jitter estimate) and the
	// start of playout. Default time.Now.
	Now func() time.Time
}

// JitterStats is a snapshot of a JitterBuffer's counters. Counters are cumulative over the
// buffer's life, across resets.
type JitterStats struct {
	// Depth is the current target playout delay, between Min and Max.
	Depth time.Duration
	// Buffered is the number of packets waiting to be played.
	Buffered int
	// Jitter is the interarrival jitter estimate of RFC 3550 §6.4.1 (Appendix A.8).
	Jitter time.Duration

	Received   uint64 // packets accepted into the buffer
	Played     uint64 // PopPacket results
	Concealed  uint64 // PopMissing results (lost packets and underruns alike)
	Lost       uint64 // packets not here when their turn came (each also concealed)
	Late       uint64 // packets that arrived after their turn, discarded
	Duplicates uint64 // copies of a packet already held or played, discarded
	Reordered  uint64 // packets that arrived after a packet with a higher sequence number
	Dropped    uint64 // packets discarded to bound the delay, or too large, or after a sequence jump
	Resets     uint64 // restarts on a new SSRC or a confirmed sequence-number jump
	TSJumps    uint64 // timestamp discontinuities that were kept out of the jitter estimate
}

// Slot states.
const (
	jbEmpty  uint8 = iota
	jbHeld         // waiting to be played
	jbPlayed       // played (kept to recognise duplicates)
	jbMissed       // its turn came and went without it
)

type jbSlot struct {
	ext   int64 // extended sequence number
	n     int32 // payload length
	state uint8
}

// Tuning of the adaptation (all in frames or pops unless said).
const (
	jbMaxDropout  = 3000 // RFC 3550 A.1: a forward jump beyond this is a restart candidate
	jbMaxMisorder = 100  // RFC 3550 A.1: a backward step beyond this is a restart candidate
	jbWindow      = 25   // pops per adaptation window (0.5 s at 20 ms)
	jbCalm        = 2 * time.Second
	jbJitterGain  = 3.0 // target delay = one frame + jbJitterGain × RFC 3550 jitter
)

// JitterBuffer is an adaptive playout buffer of RTP payloads for one audio stream.
//
// Push stores packets as they arrive from the network, in any order; Pop is called once per
// packet duration (every 20 ms) by the playout clock and returns the next payload to decode, a
// request to conceal one frame, or nothing. The buffer reorders packets by sequence number
// (extended across 16-bit wraps as in RFC 3550 Appendix A.1), discards duplicates and packets
// that arrive after their turn, and restarts on a new SSRC or on a confirmed sequence jump.
//
// Its depth adapts between Min and Max: the target is one frame plus three times the
// interarrival jitter of RFC 3550 §6.4.1 (about 3.4 standard deviations of Gaussian delay
// variation), raised by one frame whenever a packet arrives late.
// The buffer grows by concealing a frame without advancing (on an underrun, or when the level
// stayed under the target for a whole window) and shrinks by discarding one frame when the
// network has been calm for two seconds and the level never fell to the target.
//
// Storage is fixed at construction (slots for a little more than twice Max, each of MaxPayload
// bytes): Push and Pop never allocate, and memory stays bounded whatever arrives. It is safe
// for one goroutine to Push while another Pops.
type JitterBuffer struct {
	mu sync.Mutex

	clockRate  float64
	frameTS    uint32
	frameDur   time.Duration
	minF, maxF int
	maxPayload int
	now        func() time.Time

	slots   []jbSlot
	payload []byte // len(slots) × maxPayload
	mask    int64

	started     bool // a stream (SSRC) is known
	playing     bool // prefetch is done
	ssrc        uint32
	next        int64 // extended sequence number of the next packet to play
	highest     int64
	haveHighest bool
	firstAt     time.Time // arrival of the first packet of the current fill
	badSeq      int32     // RFC 3550 A.1 probation: the sequence that would confirm a jump, or -1

	target      int     // target depth in frames
	jitter      float64 // RFC 3550 J, in timestamp units
	lastTransit float64
	haveTransit bool
	epoch       time.Time

	underruns       int // consecutive underrun pops
	winPops         int
	winMin, winMax  int
	lastDisturbance time.Time // last late packet or underrun

	st JitterStats
}

// NewJitterBuffer returns an empty buffer.
func NewJitterBuffer(o JitterOptions) (*JitterBuffer, error) {
	if o.ClockRate == 0 || o.FrameSamples == 0 {
		return nil, fmt.Errorf("media: jitter buffer needs ClockRate and FrameSamples (got %d, %d)", o.ClockRate, o.FrameSamples)
	}
	if o.Min == 0 {
		o.Min = 20 * time.Millisecond
	}
	if o.Max == 0 {
		o.Max = 200 * time.Millisecond
	}
	if o.Min < 0 || o.Max < o.Min {
		return nil, fmt.Errorf("media: jitter buffer bounds Min %v, Max %v are not ordered", o.Min, o.Max)
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = 1500
	}
	if o.MaxPayload < 0 || o.MaxPayload > 65535 {
		return nil, fmt.Errorf("media: jitter buffer MaxPayload %d out of range", o.MaxPayload)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	frameDur := time.Duration(uint64(o.FrameSamples) * uint64(time.Second) / uint64(o.ClockRate))
	if frameDur <= 0 || frameDur > time.Second {
		return nil, fmt.Errorf("media: jitter buffer packet duration %v (FrameSamples %d at %d Hz) out of range", frameDur, o.FrameSamples, o.ClockRate)
	}
	minF := max(1, int((o.Min+frameDur-1)/frameDur))
	maxF := max(minF, int(o.Max/frameDur))
	if maxF > 512 {
		return nil, fmt.Errorf("media: jitter buffer Max %v is %d packets; at most 512", o.Max, maxF)
	}
	n := 16
	for n < 2*maxF+8 {
		n *= 2
	}
	j := &JitterBuffer{
		clockRate:  float64(o.ClockRate),
		frameTS:    o.FrameSamples,
		frameDur:   frameDur,
		minF:       minF,
		maxF:       maxF,
		maxPayload: o.MaxPayload,
		now:        o.Now,
		slots:      make([]jbSlot, n),
		payload:    make([]byte, n*o.MaxPayload),
		mask:       int64(n - 1),
		target:     minF,
		badSeq:     -1,
	}
	j.epoch = o.Now()
	return j, nil
}

// Capacity returns the number of packet slots, fixed for the buffer's life.
func (j *JitterBuffer) Capacity() int { return len(j.slots) }

// Stats returns a snapshot of the counters.
func (j *JitterBuffer) Stats() JitterStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.st
	s.Depth = time.Duration(j.target) * j.frameDur
	s.Buffered = j.bufferedLocked()
	s.Jitter = time.Duration(j.jitter / j.clockRate * float64(time.Second))
	return s
}

// Reset forgets the current stream (its packets, sequence numbers and jitter history); the
// counters are kept. The next packet starts a new fill.
func (j *JitterBuffer) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.resetLocked()
}

func (j *JitterBuffer) resetLocked() {
	j.st.Dropped += uint64(j.bufferedLocked())
	clear(j.slots)
	j.started, j.playing, j.haveHighest, j.haveTransit = false, false, false, false
	j.badSeq = -1
	j.underruns = 0
	j.target = j.minF
	j.jitter = 0
	j.winPops = 0
}

func (j *JitterBuffer) bufferedLocked() int {
	if !j.started || !j.haveHighest {
		return 0
	}
	n := 0
	for e := max(j.next, j.highest-j.mask); e <= j.highest; e++ {
		if s := &j.slots[e&j.mask]; s.ext == e && s.state == jbHeld {
			n++
		}
	}
	return n
}

// Push stores one RTP packet (RFC 3550 §5.1 fields seq, ts, ssrc and marker) that has just
// arrived. The payload is copied; the caller keeps its buffer. Packets that are late,
// duplicated, too large or out of any plausible order are counted and dropped. A new ssrc
// restarts the buffer. ts feeds the jitter estimate. marker flags the first packet of a
// talkspurt: if playout is concealing while waiting for exactly that packet, the buffer refills
// to its target depth before playing it.
func (j *JitterBuffer) Push(seq uint16, ts uint32, ssrc uint32, marker bool, payload []byte) {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()

	if len(payload) > j.maxPayload {
		j.st.Dropped++
		return
	}
	if j.started && ssrc != j.ssrc {
		j.resetLocked()
		j.st.Resets++
	}
	if !j.started {
		j.startLocked(seq, ssrc, now)
	}

	delta := int64(int16(seq - uint16(j.highest)))
	ext := j.highest + delta
	if delta > jbMaxDropout || delta < -jbMaxMisorder {
		// RFC 3550 A.1: a big jump is believed only when the next packet follows it.
		if j.badSeq >= 0 && uint16(j.badSeq) == seq {
			j.resetLocked()
			j.st.Resets++
			j.startLocked(seq, ssrc, now)
			ext = j.highest
		} else {
			j.badSeq = int32(seq + 1)
			j.st.Dropped++
			return
		}
	}
	j.badSeq = -1

	if !j.playing && j.haveHighest && ext < j.next && j.highest-ext <= j.mask {
		// Still filling: an earlier packet moves the start back, unless its turn already came
		// (it was played or concealed before a drain).
		if s := &j.slots[ext&j.mask]; s.ext != ext || (s.state != jbPlayed && s.state != jbMissed) {
			j.next = ext
		}
	}
	if !j.playing && !j.haveHighest {
		j.next = ext
	}
	if ext < j.next {
		if s := &j.slots[ext&j.mask]; s.ext == ext && s.state == jbPlayed {
			j.st.Duplicates++
		} else {
			j.st.Late++
			j.lastDisturbance = now
			j.target = min(j.target+1, j.maxF)
		}
		return
	}
	if ext-j.next > j.mask {
		// Too far ahead to store: skip playout forward so that it fits (Pop bounds the delay
		// more tightly; this only guards the storage).
		j.skipLocked(ext - j.mask)
	}
	s := &j.slots[ext&j.mask]
	if s.ext == ext && s.state == jbHeld {
		j.st.Duplicates++
		return
	}
	if j.haveHighest && ext < j.highest {
		j.st.Reordered++
	}
	if !j.haveHighest || ext > j.highest {
		j.highest = ext
		j.haveHighest = true
	}
	*s = jbSlot{ext: ext, n: int32(len(payload)), state: jbHeld}
	off := int(ext&j.mask) * j.maxPayload
	copy(j.payload[off:off+j.maxPayload], payload)
	j.st.Received++
	if j.playing && j.underruns > 0 && marker && ext == j.next {
		// The packet we were concealing for starts a new talkspurt (RFC 3551 §4.1): the sender
		// was silent, not late. Refill to the target depth before playing it, so the
		// talkspurt gets the full protection against jitter.
		j.playing = false
		j.firstAt = time.Time{}
	}
	if !j.playing && j.firstAt.IsZero() {
		j.firstAt = now
	}

	j.updateJitterLocked(now, ts)
	want := j.demandLocked()
	if want > j.target {
		j.target = want
	}
}

func (j *JitterBuffer) startLocked(seq uint16, ssrc uint32, now time.Time) {
	j.started = true
	j.ssrc = ssrc
	// Offset so that extended numbers of early reordered packets stay positive.
	j.highest = int64(seq) + 1<<20
	j.haveHighest = false
	j.next = j.highest
	j.firstAt = time.Time{}
	j.lastDisturbance = now
}

// updateJitterLocked applies RFC 3550 §6.4.1 / A.8: J += (|D(i-1,i)| - J)/16, where D is the
// difference of relative transit times. A difference of more than a second is a discontinuity
// of the sender's timestamps (a new time base, a mixer switch): it re-anchors the transit time
// instead of poisoning the estimate.
func (j *JitterBuffer) updateJitterLocked(now time.Time, ts uint32) {
	arrival := float64(now.Sub(j.epoch)) / float64(time.Second) * j.clockRate
	// Unwrap ts against the previous transit by working in float with the 32-bit difference.
	transit := arrival - float64(ts)
	if j.haveTransit {
		d := transit - j.lastTransit
		// The 32-bit timestamp wraps: fold the difference into ±2^31.
		const wrap = 1 << 32
		for d > wrap/2 {
			d -= wrap
		}
		for d < -wrap/2 {
			d += wrap
		}
		if d < 0 {
			d = -d
		}
		if d > j.clockRate {
			j.st.TSJumps++
		} else {
			j.jitter += (d - j.jitter) / 16
		}
	}
	j.lastTransit = transit
	j.haveTransit = true
}

// demandLocked is the depth, in frames, that the current jitter estimate calls for.
func (j *JitterBuffer) demandLocked() int {
	d := float64(j.frameTS) + jbJitterGain*j.jitter
	f := int((d + float64(j.frameTS) - 1) / float64(j.frameTS))
	return min(max(f, j.minF), j.maxF)
}

// skipLocked moves the playout point forward to ext, counting what it passes. Only the
// positions that can still have a slot are visited, so a long jump costs no more than a short one.
func (j *JitterBuffer) skipLocked(to int64) {
	if end := j.next + j.mask + 1; to > end {
		if j.playing {
			j.st.Lost += uint64(to - end)
		}
		defer func() { j.next = to }()
		to = end
	}
	for ; j.next < to; j.next++ {
		s := &j.slots[j.next&j.mask]
		if s.ext == j.next && s.state == jbHeld {
			s.state = jbPlayed // recognise its duplicates
			j.st.Dropped++
		} else {
			*s = jbSlot{ext: j.next, state: jbMissed}
			if j.playing {
				j.st.Lost++
			}
		}
	}
}

// Pop returns what to play for the next packet duration. For PopPacket the payload is copied
// into dst (appended to dst[:0]; give it capacity MaxPayload to avoid allocating); for
// PopMissing it may hold the following packet (see PopMissing).
func (j *JitterBuffer) Pop(dst []byte) ([]byte, PopStatus) {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	dst = dst[:0]
	if !j.started || !j.haveHighest {
		return dst, PopEmpty
	}
	level := int(j.highest - j.next + 1)
	if level < 0 {
		level = 0
	}
	if !j.playing {
		if level == 0 {
			return dst, PopEmpty
		}
		waited := now.Sub(j.firstAt)
		if level < j.target && waited < time.Duration(j.target-1)*j.frameDur {
			return dst, PopEmpty
		}
		j.playing = true
		j.underruns = 0
		j.winPops, j.winMin, j.winMax = 0, level, level
	}

	// Bound the delay: never hold more than Max.
	if level > j.maxF {
		j.skipLocked(j.highest - int64(j.target) + 1)
		level = j.target
	}

	stretch := false
	if j.winPops == 0 {
		j.winMin, j.winMax = level, level
	}
	j.winMin = min(j.winMin, level)
	j.winMax = max(j.winMax, level)
	j.winPops++
	if j.winPops >= jbWindow {
		calm := now.Sub(j.lastDisturbance) >= jbCalm
		switch {
		case j.winMax < j.target:
			stretch = level > 0 // grow towards the target
		case calm && j.winMin > j.target:
			// Shrink by one frame: the level never came down to the target.
			j.skipLocked(j.next + 1)
			level--
		}
		if calm {
			if want := j.demandLocked(); want < j.target {
				j.target--
				j.lastDisturbance = now // at most one frame per calm period
			}
		}
		j.winPops = 0
	}

	if level == 0 {
		j.underruns++
		if j.underruns > j.maxF {
			// The sender went quiet: stop concealing, refill when packets come back.
			j.playing = false
			j.firstAt = time.Time{}
			return dst, PopEmpty
		}
		j.lastDisturbance = now
		j.st.Concealed++
		return dst, PopMissing
	}
	j.underruns = 0
	if stretch {
		j.st.Concealed++
		return dst, PopMissing
	}

	return j.playNextLocked(dst)
}

// playNextLocked plays the position next: its packet when held (PopPacket), else one frame to
// conceal, with the following packet attached when it is here (PopMissing).
func (j *JitterBuffer) playNextLocked(dst []byte) ([]byte, PopStatus) {
	s := &j.slots[j.next&j.mask]
	if s.ext == j.next && s.state == jbHeld {
		off := int(j.next&j.mask) * j.maxPayload
		dst = append(dst, j.payload[off:off+int(s.n)]...)
		s.state = jbPlayed
		j.next++
		j.st.Played++
		return dst, PopPacket
	}
	*s = jbSlot{ext: j.next, state: jbMissed}
	j.next++
	j.st.Lost++
	j.st.Concealed++
	if f := &j.slots[j.next&j.mask]; f.ext == j.next && f.state == jbHeld {
		off := int(j.next&j.mask) * j.maxPayload
		dst = append(dst, j.payload[off:off+int(f.n)]...)
	}
	return dst, PopMissing
}

// PopNext returns the next packet in sequence when it is here, whatever the buffer's depth,
// and reports whether it was. It is the eager playout of a consumer that needs every frame as
// soon as it can have it and no steady pace (a recognizer and its voice activity detector): a
// packet that arrives in order leaves the buffer at once, so the only delay left is the
// network's. PopDue, called by the consumer's clock when a frame is owed, deals with the
// packets that are missing. Eager playout does not mix with Pop on the same stream.
func (j *JitterBuffer) PopNext(dst []byte) ([]byte, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	dst = dst[:0]
	if !j.started || !j.haveHighest {
		return dst, false
	}
	if s := &j.slots[j.next&j.mask]; s.ext != j.next || s.state != jbHeld {
		return dst, false
	}
	j.playing = true
	dst, _ = j.playNextLocked(dst)
	return dst, true
}

// PopDue is the clock's half of eager playout (see PopNext): the consumer owes a frame and
// PopNext had none. When a later packet is already here, the next one is counted lost and one
// frame is to be concealed (PopMissing, the payload holding the following packet when it is
// here, as Pop does); otherwise nothing is known to be missing (the sender is late or went
// quiet) and it returns PopEmpty without moving on, so that a late packet still plays.
func (j *JitterBuffer) PopDue(dst []byte) ([]byte, PopStatus) {
	j.mu.Lock()
	defer j.mu.Unlock()
	dst = dst[:0]
	if !j.started || !j.haveHighest || j.highest < j.next {
		return dst, PopEmpty
	}
	j.playing = true
	return j.playNextLocked(dst)
}

// SkipMissing moves eager playout past up to k positions whose packets are not here, each
// counted lost, stopping at the first packet that is here; it skips only while a later packet
// has come (the ones after the newest may still be on their way). It returns how many it
// skipped. A consumer whose clock already gave frames of its own in those packets' time (while
// nothing was known to be missing) skips them rather than concealing them a second time.
func (j *JitterBuffer) SkipMissing(k int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.started || !j.haveHighest {
		return 0
	}
	n := 0
	for ; n < k && j.next < j.highest; n++ {
		s := &j.slots[j.next&j.mask]
		if s.ext == j.next && s.state == jbHeld {
			break
		}
		*s = jbSlot{ext: j.next, state: jbMissed}
		j.next++
		j.st.Lost++
	}
	return n
}
