package media

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// PacerTimer is the timer a Pacer waits on; *time.Timer fits it through an adapter, and tests
// give a manual clock's timer. Reset and Stop follow time.Timer of Go 1.23 and later: after
// either returns, no stale value is received from C.
type PacerTimer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// PacerOptions configures a Pacer.
type PacerOptions struct {
	// Sink receives each frame as it is due. It runs with the pacer's lock held, must not block
	// (it is the RTP writer: encode and send, or drop), must not keep the frame after it returns
	// and must not call the pacer back. Required.
	Sink func(f *Frame)
	// Rate is the sample rate of the frames, in Hz. Default PipelineRate.
	Rate int
	// Queue is the capacity of the queue, in frames. Default 100 (2 s).
	Queue int
	// ComfortNoise makes the pacer send low-level noise when it has no audio, instead of
	// nothing. ComfortNoiseDBFS sets its RMS level (default -65 dBFS).
	ComfortNoise     bool
	ComfortNoiseDBFS float64
	// MaxLag is how far the pacer may fall behind its schedule before it gives up catching up
	// (which would burst frames at the network) and restarts the schedule from now. Default
	// 60 ms (three frames).
	MaxLag time.Duration
	// Now and NewTimer are the clock; default the system's monotonic clock and time.NewTimer.
	Now      func() time.Time
	NewTimer func(d time.Duration) PacerTimer
}

// PacerStats is a snapshot of a Pacer's counters.
type PacerStats struct {
	Sent     uint64        // frames of audio sent
	Comfort  uint64        // frames of comfort noise sent
	Played   time.Duration // audio sent (comfort noise and padding excluded)
	Flushed  uint64        // frames dropped by Flush
	Rejected uint64        // frames refused because the queue was full or at the wrong rate
	Resyncs  uint64        // schedule restarts after falling more than MaxLag behind
	Ticks    uint64        // timer expiries handled
	Queued   int           // samples waiting
}

// ErrPacerRunning is returned by Run when the pacer already runs.
var ErrPacerRunning = errors.New("media: pacer is already running")

// Pacer plays audio out in real time: one frame every FrameDuration from a bounded queue,
// handed to a sink (the RTP writer).
//
// The schedule is anchored: frame n of a stretch of audio is due at start + n×20 ms on the
// monotonic clock, so timer lateness does not accumulate into drift; a timer that fires late
// sends what is due at once (at most MaxLag of it, then the schedule restarts). When the pacer
// is idle, the first frame of new audio goes out at once, inside Enqueue or WritePCM, and starts
// a new schedule; it does not wait for a tick. When the queue runs dry the pacer sends nothing
// (or comfort noise, if configured) and goes idle. Flush empties the queue at once (barge-in)
// and says how much was dropped, so the caller can tell how much of its text was heard.
//
// The queue is a fixed ring of samples: enqueueing never blocks, never grows the queue and
// never allocates; when it is full, Enqueue refuses and the producer must slow down. All
// methods are safe for concurrent use. The schedule advances either on a goroutine of its own
// (Run, with a timer per pacer) or on a shared Clock the pacer is added to (clock.Add(pacer):
// the clock calls Tick every 20 ms, and the pacer needs no goroutine), never both.
type Pacer struct {
	mu       sync.Mutex
	sink     func(*Frame)
	rate     int
	frameN   int
	frameDur time.Duration
	maxLag   time.Duration
	now      func() time.Time
	newTimer func(time.Duration) PacerTimer

	ring  []int16
	head  int // index of the oldest queued sample
	count int // queued samples
	pad   bool

	active    bool      // a schedule runs (Run should have the timer armed for next)
	audioIdle bool      // the last frame sent was not audio (comfort noise): new audio goes at once
	anchor    time.Time // start of the current schedule
	n         int64     // index of the next frame in the schedule
	next      time.Time // anchor + n×frameDur

	comfort bool
	cnAmp   float64
	cnState uint32
	out     Frame
	wake    chan struct{}
	running bool
	played  int64 // samples of audio sent
	st      PacerStats
}

// NewPacer returns an idle pacer.
func NewPacer(o PacerOptions) (*Pacer, error) {
	if o.Sink == nil {
		return nil, errors.New("media: pacer needs a Sink")
	}
	if o.Rate == 0 {
		o.Rate = PipelineRate
	}
	frameN := SamplesPerFrame(o.Rate)
	if frameN == 0 {
		return nil, fmt.Errorf("media: pacer cannot frame %d Hz", o.Rate)
	}
	if o.Queue == 0 {
		o.Queue = 100
	}
	if o.Queue < 1 || o.Queue > 3000 {
		return nil, fmt.Errorf("media: pacer queue of %d frames out of range (1 to 3000)", o.Queue)
	}
	if o.ComfortNoiseDBFS == 0 {
		o.ComfortNoiseDBFS = -65
	}
	if o.ComfortNoiseDBFS > 0 {
		return nil, fmt.Errorf("media: comfort noise at %v dBFS is above full scale", o.ComfortNoiseDBFS)
	}
	if o.MaxLag == 0 {
		o.MaxLag = 3 * FrameDuration
	}
	if o.MaxLag < 0 {
		return nil, fmt.Errorf("media: pacer MaxLag %v is negative", o.MaxLag)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewTimer == nil {
		o.NewTimer = func(d time.Duration) PacerTimer { return sysTimer{time.NewTimer(d)} }
	}
	return &Pacer{
		sink:      o.Sink,
		rate:      o.Rate,
		frameN:    frameN,
		frameDur:  FrameDuration,
		maxLag:    o.MaxLag,
		now:       o.Now,
		newTimer:  o.NewTimer,
		ring:      make([]int16, o.Queue*frameN),
		comfort:   o.ComfortNoise,
		cnAmp:     32767 * math.Pow(10, o.ComfortNoiseDBFS/20), // RMS of the uniform noise below = amp
		cnState:   0x9e3779b9,
		wake:      make(chan struct{}, 1),
		audioIdle: true,
	}, nil
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time        { return s.t.C }
func (s sysTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
func (s sysTimer) Stop() bool                 { return s.t.Stop() }

// Run drives the schedule until ctx is done; it returns nil then. The caller owns the goroutine
// that runs it. With comfort noise configured, noise starts at once.
func (p *Pacer) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return ErrPacerRunning
	}
	p.running = true
	if p.comfort && !p.active {
		// With comfort noise the schedule runs from the start.
		now := p.now()
		p.active, p.anchor, p.n, p.next = true, now, 0, now
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()

	timer := p.newTimer(time.Hour)
	timer.Stop()
	armed := false
	for {
		p.mu.Lock()
		active, next := p.active, p.next
		p.mu.Unlock()
		switch {
		case active:
			timer.Reset(next.Sub(p.now()))
			armed = true
		case armed:
			timer.Stop()
			armed = false
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-p.wake:
		case <-timer.C():
			armed = false
			p.tick()
		}
	}
}

// Tick sends every frame that is due at now: a shared Clock calls it (see ClockTicker). An idle
// pacer returns at once.
func (p *Pacer) Tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active && !now.Before(p.next) {
		p.tickLocked(now)
	}
}

// tick sends every frame that is due (Run's timer).
func (p *Pacer) tick() { p.tickAt(p.now()) }

// tickAt sends every frame that is due at now.
func (p *Pacer) tickAt(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tickLocked(now)
}

func (p *Pacer) tickLocked(now time.Time) {
	p.st.Ticks++
	for p.active && !now.Before(p.next) {
		if now.Sub(p.next) > p.maxLag {
			// Too far behind: bursting the backlog would only move the jitter to the far end.
			p.anchor, p.n, p.next = now, 0, now
			p.st.Resyncs++
		}
		switch {
		case p.sendableLocked():
			p.sendAudioLocked()
		case p.comfort:
			p.sendComfortLocked()
		default:
			p.active = false
			p.audioIdle = true
			return
		}
		p.n++
		p.next = p.anchor.Add(time.Duration(p.n) * p.frameDur)
	}
}

func (p *Pacer) sendableLocked() bool {
	return p.count >= p.frameN || (p.pad && p.count > 0)
}

func (p *Pacer) sendAudioLocked() {
	n := min(p.count, p.frameN)
	first := copy(p.out.Samples[:n], p.ring[p.head:min(p.head+n, len(p.ring))])
	copy(p.out.Samples[first:n], p.ring[:n-first])
	clear(p.out.Samples[n:p.frameN])
	p.head = (p.head + n) % len(p.ring)
	p.count -= n
	if p.count == 0 {
		p.head, p.pad = 0, false
	}
	p.out.Rate, p.out.N = p.rate, p.frameN
	p.played += int64(n)
	p.st.Sent++
	p.audioIdle = false
	p.sink(&p.out)
}

func (p *Pacer) sendComfortLocked() {
	// Uniform noise in [-a√3, a√3] has RMS a; a 32-bit xorshift is plenty.
	span := p.cnAmp * math.Sqrt(3)
	for i := range p.frameN {
		x := p.cnState
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p.cnState = x
		p.out.Samples[i] = int16((float64(x)/float64(math.MaxUint32)*2 - 1) * span)
	}
	p.out.Rate, p.out.N = p.rate, p.frameN
	p.st.Comfort++
	p.audioIdle = true
	p.sink(&p.out)
}

// startIfIdleLocked sends the first frame of new audio at once when no audio is playing, and
// anchors a new schedule on it.
func (p *Pacer) startIfIdleLocked() {
	if !p.audioIdle || !p.sendableLocked() {
		return
	}
	now := p.now()
	p.sendAudioLocked()
	p.active = true
	p.anchor, p.n = now, 1
	p.next = now.Add(p.frameDur)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Enqueue queues one frame (a copy is taken) and reports whether it was accepted: it is refused,
// without blocking, when the queue is full or the frame is not at the pacer's rate. A partial
// frame (N short of a whole frame) is queued as is and joins with what follows.
func (p *Pacer) Enqueue(f *Frame) bool {
	pcm := f.PCM()
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.Rate != p.rate || len(pcm) > len(p.ring)-p.count {
		p.st.Rejected++
		return false
	}
	p.writeLocked(pcm)
	p.startIfIdleLocked()
	return true
}

// WritePCM queues as many samples of pcm as fit and returns how many it took; the rest is the
// producer's to retry. Samples short of a whole frame wait for more audio or for Finish.
func (p *Pacer) WritePCM(pcm []int16) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(pcm), len(p.ring)-p.count)
	p.writeLocked(pcm[:n])
	p.startIfIdleLocked()
	return n
}

func (p *Pacer) writeLocked(pcm []int16) {
	tail := (p.head + p.count) % len(p.ring)
	first := copy(p.ring[tail:], pcm)
	copy(p.ring, pcm[first:])
	p.count += len(pcm)
}

// Finish marks the end of a stretch of audio: a trailing partial frame is padded with silence
// and played rather than kept waiting for more samples.
func (p *Pacer) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count%p.frameN != 0 {
		p.pad = true
	}
	p.startIfIdleLocked()
}

// Flush drops everything queued (barge-in) and returns how many frames and samples it dropped.
// Once it returns, no queued audio is sent; the frame the sink may be sending right then was
// already counted as played.
func (p *Pacer) Flush() (frames, samples int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	samples = p.count
	frames = (samples + p.frameN - 1) / p.frameN
	p.head, p.count, p.pad = 0, 0, false
	p.st.Flushed += uint64(frames)
	return frames, samples
}

// Played returns how much audio has been sent (comfort noise and padding excluded).
func (p *Pacer) Played() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.playedLocked()
}

func (p *Pacer) playedLocked() time.Duration {
	return time.Duration(p.played) * time.Second / time.Duration(p.rate)
}

// Pending returns how much audio waits in the queue.
func (p *Pacer) Pending() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.count) * time.Second / time.Duration(p.rate)
}

// Stats returns a snapshot of the counters.
func (p *Pacer) Stats() PacerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.Played = p.playedLocked()
	s.Queued = p.count
	return s
}
