package media

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/codec"
)

// RecordFormat is the file format of a recording.
type RecordFormat uint8

const (
	// RecordWAV is 16-bit PCM WAV, stereo: the caller on the left channel, the agent on the right.
	RecordWAV RecordFormat = iota
	// RecordOggOpus is Ogg/Opus (RFC 7845), mono: caller and agent mixed. (The Opus encoder is
	// mono.)
	RecordOggOpus
)

func (f RecordFormat) String() string {
	switch f {
	case RecordWAV:
		return "wav"
	case RecordOggOpus:
		return "ogg/opus"
	}
	return fmt.Sprintf("RecordFormat(%d)", uint8(f))
}

// RecordChannel says whose audio a frame is.
type RecordChannel uint8

const (
	RecordCaller RecordChannel = iota // the remote party: left channel
	RecordAgent                       // Parley's voice: right channel
)

// RecorderOptions configures a Recorder.
type RecorderOptions struct {
	// Format of the file. Default RecordWAV.
	Format RecordFormat
	// Rate is the sample rate of the frames and of the file, in Hz. Default PipelineRate. Ogg/Opus
	// needs 8000, 12000, 16000, 24000 or 48000.
	Rate int
	// Queue is how many 20 ms frames (of either channel) may wait for the writer goroutine;
	// beyond that, frames are dropped and counted. Default 100 (one second of both channels).
	Queue int
	// BufferSize is the size of the write buffer in bytes. Default 32 KiB.
	BufferSize int
	// SyncEvery is how much audio is written between checkpoints. At a checkpoint the buffer is
	// flushed and, for WAV, the RIFF and data sizes in the header are patched, so a crash leaves
	// a file that is valid up to the last checkpoint. Default 1 s.
	SyncEvery time.Duration
	// Fsync also asks the operating system to put the file on disk at every checkpoint (when the
	// writer has a Sync method), so that a machine crash, not only a process crash, keeps it.
	Fsync bool
	// MaxSkew is the timing tolerance of the two channels. Each frame is placed on the call's
	// timeline by the time Write was called: within MaxSkew of where its channel's previous frame
	// ended, it follows it without a gap (absorbing scheduling jitter); later than that, the
	// channel was silent in between. A channel with nothing queued is taken as silent once the
	// other has run MaxSkew ahead. Default 100 ms.
	MaxSkew time.Duration
	// Now is the clock that timestamps frames; default time.Now.
	Now func() time.Time
	// OpusBitrate is the Opus bit rate in bit/s. Default 24000 at 16 kHz and below, 32000 above.
	OpusBitrate int
	// OnError, if set, is called once, from the recorder's goroutine, when the recording fails
	// (a write error such as a full disk). The recording stops; the call goes on.
	OnError func(error)
}

// RecorderStats is a snapshot of a Recorder's counters.
type RecorderStats struct {
	Frames  uint64        // frames accepted by Write
	Dropped uint64        // frames dropped: queue full, wrong rate or size, or after a failure or Close
	Written time.Duration // audio handed to the file (both channels advance together)
	Durable time.Duration // audio covered by the last checkpoint: what a crash would leave
	Bytes   int64         // bytes of the file written so far
}

// ErrRecordingTooLong is reported when a WAV recording reaches the 4 GiB limit of RIFF sizes.
var ErrRecordingTooLong = errors.New("media: recording reached the WAV size limit")

// Recorder streams a call to a file while it happens.
//
// Write takes one channel's frame from the media path, stamped with the time of the call: it
// copies it into a bounded queue and returns at once; if the queue is full the frame is dropped
// and counted, so the media path never waits on the disk. A goroutine of the recorder's own
// drains the queue, places the frames of both channels on one timeline (see
// RecorderOptions.MaxSkew; the agent, silent between turns, sends no frames then) and writes
// through a fixed buffer, so the recording is never held in memory. Every SyncEvery of audio it
// checkpoints the file (see RecorderOptions.SyncEvery). A write error stops the recording and is
// reported through OnError and Err; it never panics and never blocks the caller.
//
// Close drains the queue, finishes the file and waits for the goroutine; it is safe to call more
// than once. Canceling the context given at creation does the same as Close, without waiting.
type Recorder struct {
	o       RecorderOptions
	frameN  int
	w       io.WriteSeeker
	closer  io.Closer // the file, when the recorder opened it
	bw      *bufio.Writer
	stopped chan struct{}
	done    chan struct{}
	once    sync.Once

	// The queue: Queue slots of frameN samples each.
	mu       sync.Mutex
	start    time.Time
	paused   bool      // Pause: writes are dropped and the timeline stands still
	pausedAt time.Time // when the pause began
	slots    []int16
	slotN    []int32
	slotCh   []RecordChannel
	slotT    []int64 // the timeline frame at which Write was called
	head     int
	count    int
	notify   chan struct{}
	closed   bool

	failed  atomic.Bool
	errMu   sync.Mutex
	err     error
	frames  atomic.Uint64
	dropped atomic.Uint64
	written atomic.Int64 // stereo sample frames
	durable atomic.Int64
	bytes   atomic.Int64

	// Writer-goroutine state.
	fifo      [2]recFIFO
	tol       int64 // MaxSkew in frames
	pos       int64 // timeline frame written next
	latest    int64 // latest arrival frame seen
	nextSlot  [2]int64
	silence   []int16
	out       []byte // one output frame, encoded
	dataBytes int64  // WAV: bytes of the data chunk
	sinceSync int64  // sample frames since the last checkpoint
	syncN     int64

	// Ogg/Opus.
	ogg     *oggWriter
	enc     *codec.OpusEncoder
	mixer   *Mixer
	mono    []int16
	packet  []byte
	preSkip int64 // 48 kHz samples
	granule int64 // 48 kHz samples encoded (pre-skip included)
}

// CreateRecorder creates (or truncates) the file at path and records into it. The recorder
// closes the file when it is done.
func CreateRecorder(ctx context.Context, path string, o RecorderOptions) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600) // caller audio: the service's user only
	if err != nil {
		return nil, fmt.Errorf("media: creating recording: %w", err)
	}
	r, err := newRecorder(ctx, f, f, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// NewRecorder records into w, which must start empty at offset 0 (WAV seeks back to patch its
// header). The caller keeps ownership of w and closes it after Close.
func NewRecorder(ctx context.Context, w io.WriteSeeker, o RecorderOptions) (*Recorder, error) {
	return newRecorder(ctx, w, nil, o)
}

func newRecorder(ctx context.Context, w io.WriteSeeker, c io.Closer, o RecorderOptions) (*Recorder, error) {
	if o.Rate == 0 {
		o.Rate = PipelineRate
	}
	frameN := SamplesPerFrame(o.Rate)
	if frameN == 0 {
		return nil, fmt.Errorf("media: recorder cannot frame %d Hz", o.Rate)
	}
	if o.Queue == 0 {
		o.Queue = 100
	}
	if o.Queue < 1 || o.Queue > 6000 {
		return nil, fmt.Errorf("media: recorder queue of %d frames out of range (1 to 6000)", o.Queue)
	}
	if o.BufferSize == 0 {
		o.BufferSize = 32 << 10
	}
	if o.BufferSize < 4096 || o.BufferSize > 16<<20 {
		return nil, fmt.Errorf("media: recorder buffer of %d bytes out of range (4 KiB to 16 MiB)", o.BufferSize)
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = time.Second
	}
	if o.SyncEvery < FrameDuration {
		return nil, fmt.Errorf("media: recorder SyncEvery %v is shorter than a frame", o.SyncEvery)
	}
	if o.MaxSkew == 0 {
		o.MaxSkew = 100 * time.Millisecond
	}
	if o.MaxSkew < 0 || o.MaxSkew > 10*time.Second {
		return nil, fmt.Errorf("media: recorder MaxSkew %v out of range", o.MaxSkew)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Recorder{
		o:       o,
		frameN:  frameN,
		w:       w,
		closer:  c,
		bw:      bufio.NewWriterSize(w, o.BufferSize),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
		slots:   make([]int16, o.Queue*frameN),
		slotN:   make([]int32, o.Queue),
		slotCh:  make([]RecordChannel, o.Queue),
		slotT:   make([]int64, o.Queue),
		notify:  make(chan struct{}, 1),
		tol:     int64(o.MaxSkew / FrameDuration),
		silence: make([]int16, frameN),
		syncN:   int64(o.SyncEvery.Seconds() * float64(o.Rate)),
		start:   o.Now(),
	}
	for i := range r.fifo {
		r.fifo[i].init(int(r.tol)+4, frameN)
	}
	switch o.Format {
	case RecordWAV:
		r.out = make([]byte, 4*frameN)
	case RecordOggOpus:
		enc, err := codec.NewOpusEncoder(codec.OpusOptions{SampleRate: o.Rate, Bitrate: o.OpusBitrate, Signal: "voice"})
		if err != nil {
			return nil, fmt.Errorf("media: recorder: %w", err)
		}
		look, err := enc.Lookahead()
		if err != nil {
			enc.Close()
			return nil, fmt.Errorf("media: recorder: %w", err)
		}
		r.enc = enc
		r.mixer, _ = NewMixer(MixerOptions{Limiter: true, Rate: o.Rate})
		r.mono = make([]int16, frameN)
		r.packet = make([]byte, codec.OpusMaxPacket)
		r.preSkip = int64(look) * 48000 / int64(o.Rate)
		r.ogg = newOggWriter(recCounter{r}, rand.Uint32())
	default:
		return nil, fmt.Errorf("media: unknown recording format %v", o.Format)
	}
	go r.run(ctx)
	return r, nil
}

// Write queues one frame of channel ch, played or received just now, and reports whether it was
// taken. pcm holds at most one frame at the recorder's rate (a shorter one is padded with
// silence). It never blocks: when the queue is full, the recorder has failed or is closed, the
// frame is dropped and counted.
func (r *Recorder) Write(ch RecordChannel, pcm []int16) bool {
	if len(pcm) > r.frameN || ch > RecordAgent || r.failed.Load() {
		r.dropped.Add(1)
		return false
	}
	now := r.o.Now()
	r.mu.Lock()
	if r.paused {
		r.mu.Unlock()
		return false
	}
	at := int64(now.Sub(r.start) / FrameDuration)
	if r.closed || r.count == len(r.slotN) {
		r.mu.Unlock()
		r.dropped.Add(1)
		return false
	}
	i := (r.head + r.count) % len(r.slotN)
	copy(r.slots[i*r.frameN:], pcm)
	r.slotN[i] = int32(len(pcm))
	r.slotCh[i] = ch
	r.slotT[i] = at
	r.count++
	r.mu.Unlock()
	r.frames.Add(1)
	select {
	case r.notify <- struct{}{}:
	default:
	}
	return true
}

// Pause stops the recording's timeline (issue 22 item 4: a call on hold): frames written
// until Resume are dropped, and the time that passes is not in the recording. Pausing a
// paused recorder does nothing.
func (r *Recorder) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		r.paused, r.pausedAt = true, r.o.Now()
	}
}

// Resume takes the recording up again where Pause left it.
func (r *Recorder) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		r.paused = false
		r.start = r.start.Add(r.o.Now().Sub(r.pausedAt))
	}
}

// WriteFrame is Write for a Frame, which must be at the recorder's rate.
func (r *Recorder) WriteFrame(ch RecordChannel, f *Frame) bool {
	if f.Rate != r.o.Rate {
		r.dropped.Add(1)
		return false
	}
	return r.Write(ch, f.PCM())
}

// Err returns the error that stopped the recording, if any.
func (r *Recorder) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// Stats returns a snapshot of the counters.
func (r *Recorder) Stats() RecorderStats {
	rate := int64(r.o.Rate)
	return RecorderStats{
		Frames:  r.frames.Load(),
		Dropped: r.dropped.Load(),
		Written: time.Duration(r.written.Load() * int64(time.Second) / rate),
		Durable: time.Duration(r.durable.Load() * int64(time.Second) / rate),
		Bytes:   r.bytes.Load(),
	}
}

// Close stops taking frames, writes what is queued, finishes the file (final WAV sizes, or the
// last Ogg page with its end-of-stream flag) and closes it if the recorder opened it. It waits
// for the recorder's goroutine and returns the error that stopped the recording, if any. It is
// safe to call more than once.
func (r *Recorder) Close() error {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.stopped)
	})
	<-r.done
	return r.Err()
}

func (r *Recorder) fail(err error) {
	r.errMu.Lock()
	first := r.err == nil
	if first {
		r.err = err
	}
	r.errMu.Unlock()
	if first {
		r.failed.Store(true)
		if r.o.OnError != nil {
			r.o.OnError(err)
		}
	}
}

// run is the writer goroutine.
func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	if err := r.writeHeader(); err != nil {
		r.fail(err)
	}
	for {
		select {
		case <-r.notify:
			r.drain()
		case <-r.stopped:
			r.finish()
			return
		case <-ctx.Done():
			r.mu.Lock()
			r.closed = true
			r.mu.Unlock()
			r.finish()
			return
		}
	}
}

// drain places everything queued on the timeline and writes what is settled.
func (r *Recorder) drain() {
	for {
		r.mu.Lock()
		if r.count == 0 {
			r.mu.Unlock()
			return
		}
		i := r.head
		n := int(r.slotN[i])
		ch, at := r.slotCh[i], r.slotT[i]
		if r.failed.Load() {
			// Keep emptying the queue; write nothing.
			r.head = (r.head + 1) % len(r.slotN)
			r.count--
			r.mu.Unlock()
			continue
		}
		f := &r.fifo[ch]
		if f.full() {
			// The other channel lags beyond the FIFO: settle the oldest frame now.
			r.mu.Unlock()
			r.emit(true, false)
			continue
		}
		// Timeline slot: follow the channel's previous frame unless it came later than the
		// tolerance (then the channel was silent in between); never before what is written.
		slot := r.nextSlot[ch]
		if at > slot+r.tol {
			slot = at
		}
		slot = max(slot, r.pos)
		f.push(slot, r.slots[i*r.frameN:i*r.frameN+n])
		r.head = (r.head + 1) % len(r.slotN)
		r.count--
		r.mu.Unlock()
		r.nextSlot[ch] = slot + 1
		r.latest = max(r.latest, at)
		r.emit(false, false)
	}
}

// emit writes the timeline frames that are settled: both channels have their frame for the
// position or have moved past it, or one channel has nothing queued and the other has run more
// than the tolerance ahead (it is silent). force settles one frame whatever; final settles
// everything.
func (r *Recorder) emit(force, final bool) {
	for !r.failed.Load() {
		a, b := &r.fifo[0], &r.fifo[1]
		if a.count == 0 && b.count == 0 {
			return
		}
		if (a.count == 0 || b.count == 0) && !force && !final && r.pos+r.tol >= r.latest {
			return // the empty channel may still deliver a frame for this position
		}
		left, right := r.silence, r.silence
		if a.count > 0 && a.headSlot() == r.pos {
			left = a.head()
		}
		if b.count > 0 && b.headSlot() == r.pos {
			right = b.head()
		}
		if err := r.writeFrame(left, right); err != nil {
			r.fail(err)
			return
		}
		if a.count > 0 && a.headSlot() == r.pos {
			a.pop()
		}
		if b.count > 0 && b.headSlot() == r.pos {
			b.pop()
		}
		r.pos++
		if force {
			return
		}
	}
}

// writeFrame writes one timeline frame and checkpoints when due.
func (r *Recorder) writeFrame(left, right []int16) error {
	var err error
	switch r.o.Format {
	case RecordWAV:
		err = r.writeWAVFrame(left, right)
	case RecordOggOpus:
		err = r.writeOpusFrame(left, right)
	}
	if err != nil {
		return err
	}
	n := int64(r.frameN)
	r.written.Add(n)
	r.sinceSync += n
	if r.sinceSync >= r.syncN {
		return r.checkpoint()
	}
	return nil
}

// recCounter writes to the recorder's buffer, counting bytes.
type recCounter struct{ r *Recorder }

func (c recCounter) Write(b []byte) (int, error) {
	if err := c.r.put(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (r *Recorder) put(b []byte) error {
	_, err := r.bw.Write(b)
	if err == nil {
		r.bytes.Add(int64(len(b)))
	}
	return err
}

// WAV (RIFF) layout: a 44-byte header, the RIFF size at offset 4 and the data size at 40.
const wavHeaderSize = 44

func (r *Recorder) writeHeader() error {
	if r.o.Format == RecordOggOpus {
		return r.writeOpusHeaders()
	}
	var h [wavHeaderSize]byte
	rate := uint32(r.o.Rate)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], 36)
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)     // fmt chunk size
	binary.LittleEndian.PutUint16(h[20:], 1)      // PCM
	binary.LittleEndian.PutUint16(h[22:], 2)      // channels
	binary.LittleEndian.PutUint32(h[24:], rate)   // sample rate
	binary.LittleEndian.PutUint32(h[28:], rate*4) // byte rate
	binary.LittleEndian.PutUint16(h[32:], 4)      // block align
	binary.LittleEndian.PutUint16(h[34:], 16)     // bits per sample
	copy(h[36:], "data")                          //
	binary.LittleEndian.PutUint32(h[40:], 0)      // data size, patched at checkpoints
	if err := r.put(h[:]); err != nil {
		return err
	}
	return r.checkpoint()
}

func (r *Recorder) writeWAVFrame(left, right []int16) error {
	if r.dataBytes+int64(len(r.out)) > 0xffffffff-36 {
		return ErrRecordingTooLong
	}
	clear(r.out)
	for i, v := range left {
		binary.LittleEndian.PutUint16(r.out[4*i:], uint16(v))
	}
	for i, v := range right {
		binary.LittleEndian.PutUint16(r.out[4*i+2:], uint16(v))
	}
	if err := r.put(r.out); err != nil {
		return err
	}
	r.dataBytes += int64(len(r.out))
	return nil
}

// checkpoint makes what was written so far valid on disk: flush the buffer and, for WAV, patch
// the sizes in the header and return to the end.
func (r *Recorder) checkpoint() error {
	if r.o.Format == RecordOggOpus {
		if err := r.ogg.flush(0); err != nil {
			return err
		}
	}
	if err := r.bw.Flush(); err != nil {
		return err
	}
	if r.o.Format == RecordWAV {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(36+r.dataBytes))
		if err := r.patch(4, b[:]); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b[:], uint32(r.dataBytes))
		if err := r.patch(40, b[:]); err != nil {
			return err
		}
		if _, err := r.w.Seek(0, io.SeekEnd); err != nil {
			return err
		}
	}
	if s, ok := r.w.(interface{ Sync() error }); ok && r.o.Fsync {
		if err := s.Sync(); err != nil {
			return err
		}
	}
	r.sinceSync = 0
	r.durable.Store(r.written.Load())
	return nil
}

func (r *Recorder) patch(off int64, b []byte) error {
	if _, err := r.w.Seek(off, io.SeekStart); err != nil {
		return err
	}
	_, err := r.w.Write(b)
	return err
}

// writeOpusHeaders writes the identification and comment headers, each on its own page
// (RFC 7845 §3, §5.1, §5.2).
func (r *Recorder) writeOpusHeaders() error {
	var head [19]byte
	copy(head[0:], "OpusHead")
	head[8] = 1 // version
	head[9] = 1 // channels
	binary.LittleEndian.PutUint16(head[10:], uint16(r.preSkip))
	binary.LittleEndian.PutUint32(head[12:], uint32(r.o.Rate)) // input sample rate (informative)
	binary.LittleEndian.PutUint16(head[16:], 0)                // output gain
	head[18] = 0                                               // channel mapping family 0: mono/stereo
	if err := r.ogg.writePacket(head[:], 0); err != nil {
		return err
	}
	if err := r.ogg.flush(0); err != nil {
		return err
	}
	const vendor = "parley"
	var tags [8 + 4 + len(vendor) + 4]byte
	copy(tags[0:], "OpusTags")
	binary.LittleEndian.PutUint32(tags[8:], uint32(len(vendor)))
	copy(tags[12:], vendor)
	binary.LittleEndian.PutUint32(tags[12+len(vendor):], 0) // no user comments
	if err := r.ogg.writePacket(tags[:], 0); err != nil {
		return err
	}
	if err := r.ogg.flush(0); err != nil {
		return err
	}
	return r.checkpoint()
}

func (r *Recorder) writeOpusFrame(left, right []int16) error {
	r.mixer.Mix(r.mono, left, right)
	n, err := r.enc.Encode(r.packet, r.mono)
	if err != nil {
		return err
	}
	r.granule += int64(r.frameN) * 48000 / int64(r.o.Rate)
	if err := r.ogg.writePacket(r.packet[:n], r.granule); err != nil {
		return err
	}
	return nil
}

// finish drains the queue, writes what is left and closes the file.
func (r *Recorder) finish() {
	r.drain()
	r.emit(false, true)
	if !r.failed.Load() {
		if err := r.finalize(); err != nil {
			r.fail(err)
		}
	}
	if r.enc != nil {
		r.enc.Close()
	}
	if r.closer != nil {
		if err := r.closer.Close(); err != nil {
			r.fail(err)
		}
	}
	// Anything that raced in after the final drain is counted as dropped.
	r.mu.Lock()
	r.closed = true
	r.dropped.Add(uint64(r.count))
	r.count = 0
	r.mu.Unlock()
}

func (r *Recorder) finalize() error {
	if r.o.Format == RecordOggOpus {
		// Flush the encoder's lookahead with one frame of silence, then end the stream with the
		// granule position trimmed to the audio actually recorded (RFC 7845 §4.4).
		clear(r.mono)
		n, err := r.enc.Encode(r.packet, r.mono)
		if err != nil {
			return err
		}
		end := r.preSkip + r.written.Load()*48000/int64(r.o.Rate)
		if err := r.ogg.writePacket(r.packet[:n], end); err != nil {
			return err
		}
		if err := r.ogg.flush(oggEOS); err != nil {
			return err
		}
	}
	return r.checkpoint()
}

// recFIFO is one channel's frames waiting for their place on the timeline: a fixed ring of
// whole frames, each with its timeline slot.
type recFIFO struct {
	buf          []int16
	slot         []int64
	n            int
	first, count int
}

func (f *recFIFO) init(frames, n int) {
	f.buf = make([]int16, frames*n)
	f.slot = make([]int64, frames)
	f.n = n
}

func (f *recFIFO) full() bool      { return f.count == len(f.slot) }
func (f *recFIFO) headSlot() int64 { return f.slot[f.first] }
func (f *recFIFO) head() []int16   { return f.buf[f.first*f.n : (f.first+1)*f.n] }

func (f *recFIFO) pop() {
	f.first = (f.first + 1) % len(f.slot)
	f.count--
}

// push appends a frame at slot, padding a short one with silence.
func (f *recFIFO) push(slot int64, pcm []int16) {
	i := (f.first + f.count) % len(f.slot)
	dst := f.buf[i*f.n : (i+1)*f.n]
	clear(dst[copy(dst, pcm):])
	f.slot[i] = slot
	f.count++
}
