package media

import (
	"fmt"
	"sync"
	"time"
)

const (
	// PipelineRate is the sample rate, in Hz, at which the conversation pipeline runs
	// (VAD, speech-to-text, text-to-speech, recording). Codecs resample to and from it.
	PipelineRate = 16000

	// FrameDuration is the length of one audio frame everywhere in Parley.
	FrameDuration = 20 * time.Millisecond

	// MaxFrameSamples is the number of samples in the largest frame: 20 ms at 48 kHz.
	MaxFrameSamples = 960

	// MaxFrameRate is the highest sample rate a Frame can carry.
	MaxFrameRate = 48000
)

// Frame is 20 ms of 16-bit signed mono PCM at Rate Hz. The samples live inline so that a
// Frame (and a ring or pool of them) never points at memory allocated per frame.
//
// The zero Frame is empty (Rate 0, N 0). Samples beyond N are garbage.
type Frame struct {
	// Rate is the sample rate in Hz.
	Rate int
	// N is the number of valid samples, normally SamplesPerFrame(Rate).
	N int
	// Samples holds the PCM; only Samples[:N] is meaningful.
	Samples [MaxFrameSamples]int16
}

// SamplesPerFrame returns how many samples one 20 ms frame holds at rate Hz
// (160 at 8 kHz, 320 at 16 kHz, 960 at 48 kHz). It returns 0 for rates that cannot be framed:
// not positive, above MaxFrameRate, or not a multiple of 50 Hz.
func SamplesPerFrame(rate int) int {
	if rate <= 0 || rate > MaxFrameRate || rate%50 != 0 {
		return 0
	}
	return rate / 50
}

// PCM returns the valid samples, Samples[:N]. It aliases the frame; it does not copy.
func (f *Frame) PCM() []int16 {
	n := f.N
	if n < 0 {
		n = 0
	}
	if n > MaxFrameSamples {
		n = MaxFrameSamples
	}
	return f.Samples[:n]
}

// Init prepares f to hold one full frame at rate Hz: it sets Rate and N and zeroes the samples.
func (f *Frame) Init(rate int) error {
	n := SamplesPerFrame(rate)
	if n == 0 {
		return fmt.Errorf("media: cannot frame sample rate %d Hz", rate)
	}
	f.Rate, f.N = rate, n
	clear(f.Samples[:n])
	return nil
}

// SetPCM copies pcm into f at rate Hz. pcm may be shorter than a full frame (the rest is not
// touched and N is len(pcm)); it is an error for it to be longer or for rate to be unframeable.
func (f *Frame) SetPCM(rate int, pcm []int16) error {
	n := SamplesPerFrame(rate)
	if n == 0 {
		return fmt.Errorf("media: cannot frame sample rate %d Hz", rate)
	}
	if len(pcm) > n {
		return fmt.Errorf("media: %d samples do not fit one %v frame at %d Hz (%d)", len(pcm), FrameDuration, rate, n)
	}
	f.Rate, f.N = rate, copy(f.Samples[:], pcm)
	return nil
}

// Duration returns how much audio the frame holds.
func (f *Frame) Duration() time.Duration {
	if f.Rate <= 0 {
		return 0
	}
	return time.Duration(f.N) * time.Second / time.Duration(f.Rate)
}

// FramePool is a bounded free list of frames. Get reuses a frame that was Put back and only
// allocates when the list is empty; Put keeps at most the pool's capacity and lets the garbage
// collector have the rest. In steady state (as many Puts as Gets) it allocates nothing.
// Unlike sync.Pool, it is never emptied by a garbage collection. It is safe for concurrent use.
type FramePool struct {
	mu   sync.Mutex
	free []*Frame
	news int64
}

// NewFramePool returns a pool that keeps up to capacity idle frames, preallocating prefill of
// them (prefill is clamped to capacity).
func NewFramePool(capacity, prefill int) *FramePool {
	if capacity < 1 {
		capacity = 1
	}
	prefill = min(max(prefill, 0), capacity)
	p := &FramePool{free: make([]*Frame, 0, capacity)}
	if prefill > 0 {
		block := make([]Frame, prefill)
		for i := range block {
			p.free = append(p.free, &block[i])
		}
	}
	return p
}

// Get returns an idle frame (Rate and N are 0; the samples are not cleared).
func (p *FramePool) Get() *Frame {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		f := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		f.Rate, f.N = 0, 0
		return f
	}
	p.news++
	p.mu.Unlock()
	return new(Frame)
}

// Put gives f back to the pool. The caller must not use f afterwards. Putting nil is a no-op.
func (p *FramePool) Put(f *Frame) {
	if f == nil {
		return
	}
	p.mu.Lock()
	if len(p.free) < cap(p.free) {
		p.free = append(p.free, f)
	}
	p.mu.Unlock()
}

// Idle returns how many frames wait in the pool.
func (p *FramePool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Allocated returns how many frames Get had to allocate because the pool was empty.
func (p *FramePool) Allocated() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.news
}
