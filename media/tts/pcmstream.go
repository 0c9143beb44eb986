package tts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// sampleFormat is how a source encodes its samples.
type sampleFormat int

const (
	formatLinear16 sampleFormat = iota // 16-bit signed little-endian
	formatMulaw                        // G.711 µ-law, one byte per sample
)

// mulawTable decodes G.711 µ-law (ITU-T G.711 §2), built from the formula once. Parley's codec
// package has its own; this package must not depend on it.
var mulawTable = func() (t [256]int16) {
	for i := range t {
		u := ^byte(i)
		exp := (u >> 4) & 0x07
		v := ((int(u&0x0F) << 3) + 0x84) << exp
		v -= 0x84
		if u&0x80 != 0 {
			v = -v
		}
		t[i] = int16(v)
	}
	return t
}()

// chunkSource yields encoded audio one provider read at a time.
type chunkSource interface {
	// next returns the bytes of one read (valid until the next call) and, with or after the
	// last bytes, an error (io.EOF at the normal end).
	next() ([]byte, error)
	// rate returns the source's sample rate, 0 while not yet known (WAV before its header).
	rate() int
}

// readerSource reads an io.Reader into a fixed buffer: one Read per next.
type readerSource struct {
	r   io.Reader
	buf []byte
	hz  int
}

func (s *readerSource) next() ([]byte, error) {
	n, err := s.r.Read(s.buf)
	return s.buf[:n], err
}

func (s *readerSource) rate() int { return s.hz }

// stallWatch cancels a stream whose provider goes quiet. It only runs while the stream is
// waiting on the provider (inside a source read), so a consumer that pauses reading (its
// output queue is full) is never mistaken for a stalled provider. Before the first audio byte
// the limit is a deadline (request start + first-byte timeout); after it, a per-read gap.
type stallWatch struct {
	t        *time.Timer
	fired    atomic.Bool
	deadline time.Time     // first-byte deadline
	stall    time.Duration // gap allowed once audio flows
	got      bool          // first byte seen (owned by the reader)
}

// newStallWatch arms the watch for the request itself (until the answer's headers).
func newStallWatch(firstByte time.Duration, cancel context.CancelFunc) *stallWatch {
	w := &stallWatch{deadline: time.Now().Add(firstByte)}
	w.t = time.AfterFunc(firstByte, func() {
		w.fired.Store(true)
		cancel()
	})
	return w
}

// arm starts the clock before a read from the provider (no allocation).
func (w *stallWatch) arm() {
	d := w.stall
	if !w.got {
		d = max(time.Until(w.deadline), time.Millisecond)
	}
	w.t.Reset(d)
}

// disarm stops the clock after a read returned.
func (w *stallWatch) disarm() { w.t.Stop() }

// pcmStream turns a chunkSource into a Stream: it decodes (joining a 16-bit sample split across
// reads), resamples to the requested rate and hands out samples. One source read per refill;
// all buffers are sized at the first read and reused.
type pcmStream struct {
	provider string
	src      chunkSource
	format   sampleFormat
	outRate  int

	rs      *resampler // nil when source rate == outRate
	rsReady bool
	carry   byte
	carried bool
	mid     []int16 // decoded samples at the source rate
	out     []int16 // samples ready for Read
	tail    []int16 // the resampler's flushed tail
	outPos  int
	err     error // sticky end: io.EOF or a failure

	watch    *stallWatch // nil when the source cannot stall
	gotFirst bool

	cancel   context.CancelFunc // cancels the request or process
	closed   atomic.Bool
	closeFn  func() error // releases the body or process
	closeMu  sync.Once
	closeErr error

	// finishFn, if set, runs once at the source's end and may replace the error (espeak-ng
	// exit status).
	finishFn func(err error) error

	marks *aligner // nil unless the provider sends alignment
}

// Read implements Stream.Read.
func (s *pcmStream) Read(buf []int16) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	for {
		if s.closed.Load() {
			return 0, ErrClosed
		}
		if s.outPos < len(s.out) {
			n := copy(buf, s.out[s.outPos:])
			s.outPos += n
			return n, nil
		}
		if s.err != nil {
			return 0, s.err
		}
		if s.watch != nil {
			s.watch.arm()
		}
		b, err := s.src.next()
		if s.watch != nil {
			s.watch.disarm()
		}
		if len(b) > 0 {
			if !s.gotFirst {
				s.gotFirst = true
				if s.watch != nil {
					s.watch.got = true
				}
			}
			if cerr := s.convert(b); cerr != nil {
				s.fail(cerr)
				continue
			}
		}
		if err != nil {
			s.fail(err)
		}
	}
}

// convert decodes and resamples one chunk into s.out.
func (s *pcmStream) convert(b []byte) error {
	if !s.rsReady {
		hz := s.src.rate()
		if hz == 0 {
			return errors.New("audio before its sample rate is known")
		}
		if hz != s.outRate {
			rs, err := newResampler(hz, s.outRate)
			if err != nil {
				return err
			}
			s.rs = rs
		}
		s.rsReady = true
	}
	s.mid = s.decode(b, s.mid[:0])
	s.out, s.outPos = s.resample(s.mid, s.out), 0
	return nil
}

func (s *pcmStream) decode(b []byte, dst []int16) []int16 {
	if s.format == formatMulaw {
		for _, u := range b {
			dst = append(dst, mulawTable[u])
		}
		return dst
	}
	if s.carried && len(b) > 0 {
		dst = append(dst, int16(uint16(s.carry)|uint16(b[0])<<8))
		b = b[1:]
		s.carried = false
	}
	for i := 0; i+1 < len(b); i += 2 {
		dst = append(dst, int16(uint16(b[i])|uint16(b[i+1])<<8))
	}
	if len(b)%2 == 1 {
		s.carry, s.carried = b[len(b)-1], true
	}
	return dst
}

func (s *pcmStream) resample(in, out []int16) []int16 {
	if s.rs == nil {
		return append(out[:0], in...)
	}
	if need := s.rs.maxOut(len(in)); cap(out) < need {
		out = make([]int16, 0, need)
	}
	return s.rs.process(in, out)
}

// fail records the end of the source: at io.EOF it flushes the resampler's tail.
func (s *pcmStream) fail(err error) {
	if s.watch != nil {
		s.watch.disarm()
	}
	if s.finishFn != nil {
		err = s.finishFn(err)
		s.finishFn = nil
	}
	switch {
	case errors.Is(err, io.EOF):
		if s.marks != nil {
			s.marks.finish()
		}
		if s.rs != nil {
			// The last chunk may still be unread: append the filter's tail after it.
			s.tail = s.rs.flush(s.tail)
			s.out = append(s.out, s.tail...)
		}
		s.err = io.EOF
	case s.closed.Load():
		s.err = ErrClosed
	case s.watch != nil && s.watch.fired.Load():
		what := "stalled mid-stream"
		if !s.gotFirst {
			what = "sent no audio"
		}
		s.err = &ProviderError{Provider: s.provider, Op: "read", Err: fmt.Errorf("%w: %s", ErrTimeout, what)}
	default:
		var pe *ProviderError
		if errors.As(err, &pe) {
			s.err = err
		} else {
			s.err = &ProviderError{Provider: s.provider, Op: "read", Err: err}
		}
	}
}

// Alignment implements Stream.Alignment.
func (s *pcmStream) Alignment() []Mark {
	if s.marks == nil {
		return nil
	}
	return s.marks.snapshot()
}

// Close implements Stream.Close.
func (s *pcmStream) Close() error {
	s.closeMu.Do(func() {
		s.closed.Store(true)
		if s.watch != nil {
			s.watch.disarm()
		}
		s.cancel()
		if s.closeFn != nil {
			s.closeErr = s.closeFn()
		}
	})
	return s.closeErr
}
