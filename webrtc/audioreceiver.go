package webrtc

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// rtpReader is where an audioReceiver reads packets (*pion.TrackRemote) and RTCP
// (*pion.RTPReceiver).
type rtpReader interface {
	Read(b []byte) (int, interceptor.Attributes, error)
}

// Playout timing of a receive path (see audioReceiver).
const (
	// playoutEarly is how long before its slot a packet's arrival may produce the slot's frame.
	playoutEarly = 10 * time.Millisecond
	// playoutLate is how long past its slot a frame waits for its packet before the playout
	// clock produces it without (Opus DTX, loss, a late packet). The clock ticks every 20 ms at
	// its own phase, so the wait is 10 to 30 ms.
	playoutLate = 10 * time.Millisecond
	// playoutMaxLag: a schedule further behind than this restarts from now rather than
	// producing a burst of frames.
	playoutMaxLag = 3 * media.FrameDuration
	// playoutMaxStep bounds how far one arrival moves the schedule towards it.
	playoutMaxStep = 2 * time.Millisecond
	// playoutGain is the share of an arrival's offset from its slot that the schedule follows.
	playoutGain = 8 // 1/8
)

// audioReceiverStats count what an audioReceiver did.
type audioReceiverStats struct {
	Packets     uint64 // RTP packets received
	Frames      uint64 // frames delivered
	ClockFrames uint64 // of which the playout clock produced (nothing arrived in time)
}

// audioReceiver is the receive path of one browser track: RTP → jitter buffer → decode (Opus
// at 48 kHz with FEC and loss concealment, or PCMU) → resample → 16 kHz 20 ms frames, handed to
// deliver once per 20 ms, with the statistics for RTCP receiver reports (RFC 3550 §6.4).
//
// Playout follows a 20 ms schedule that the packets themselves drive: the reader goroutine
// pushes each packet and, when the packet's slot is due (from playoutEarly before to
// playoutLate after), produces the frame at once; every arrival also pulls the schedule a little
// towards it (a first-order loop), so it follows the sender's clock and keeps the packets
// centred on their slots. The browser's packets and the frames therefore share one goroutine
// wake-up per 20 ms, and a jitter buffer between them still absorbs bursts and reordering. When
// nothing arrives (Opus DTX during the caller's silences, loss) the service's playoutClock
// produces the overdue frames itself (catchUp, on the clock's goroutine): the engine keeps
// getting silence, not a hole, so endpointing hears the caller stop. A call has no playout
// goroutine or timer of its own.
//
// A mutex held for the buffer work and delivery (no I/O) serializes the reader and the clock;
// deliver must not block and must not call back into the receiver. Nothing allocates per packet
// or frame.
type audioReceiver struct {
	mu       sync.Mutex
	rx       *media.RTPReceiver
	pkt      media.RTPPacket
	frame    media.Frame
	deliver  func(*media.Frame)
	forward  func(*rtp.Packet) // SFU listeners of this track; must not keep the packet
	stats    receptionStats
	now      func() time.Duration // the monotonic media clock
	late     time.Duration        // playoutLate, plus the socket's read period when reads are batched
	early    time.Duration        // playoutEarly, plus the socket's read period when reads are batched
	period   time.Duration        // the socket's read period when reads are batched, else 0
	arriving bool                 // Receive is handling the packet that arrived at arrival
	arrival  time.Duration
	started  bool          // a packet arrived: the schedule runs
	next     time.Duration // when the next frame is due
	closed   bool
	closeErr error

	due         atomic.Int64 // next + late once started, for the clock's lock-free check
	lastRTP     atomic.Int64 // arrival of the last packet on the media clock; 0 before any
	packets     atomic.Uint64
	frames      atomic.Uint64
	clockFrames atomic.Uint64
}

func newAudioReceiver(c Codec, pt uint8, deliver func(*media.Frame)) (*audioReceiver, error) {
	return newAudioReceiverClock(c, pt, deliver, monoNow)
}

// newAudioReceiverClock is newAudioReceiver on the media clock now (tests simulate time).
func newAudioReceiverClock(c Codec, pt uint8, deliver func(*media.Frame), now func() time.Duration) (*audioReceiver, error) {
	var info codec.Info
	switch c {
	case CodecOpus:
		info = codec.Opus
	case CodecPCMU:
		info = codec.PCMU
	default:
		return nil, fmt.Errorf("webrtc: cannot receive codec %q", c)
	}
	info.PayloadType = pt
	r := &audioReceiver{deliver: deliver, stats: newReceptionStats(uint32(info.ClockRate)), now: now, late: playoutLate, early: playoutEarly}
	rx, err := media.NewRTPReceiver(media.RTPReceiverConfig{
		Codec: info, OutputRate: media.PipelineRate, MinDelay: 20 * time.Millisecond, MaxDelay: 120 * time.Millisecond,
		Now: r.jitterNow,
	})
	if err != nil {
		return nil, err
	}
	r.rx = rx
	r.due.Store(math.MaxInt64)
	return r, nil
}

// jitterNow is the jitter buffer's clock (it runs under mu): the arrival Receive is handling,
// else the media clock.
func (r *audioReceiver) jitterNow() time.Time {
	if r.arriving {
		return monoEpoch.Add(r.arrival)
	}
	return monoEpoch.Add(r.now())
}

// batchedReads widens the playout window for a socket read once per period: a packet may reach
// the receiver up to a period after it arrived, and the packets of a period come together (two
// of one call when its packets straddle a read). A frame waits that much longer before it is
// concealed, and an arrival may produce the frame of a slot up to that much further ahead, so
// that a pair delivered together plays as two frames rather than leaving the schedule behind
// the packets. And the arrival of a packet read on schedule is taken to be its slot: a read
// only says that the packet came in the period before it, and the read's own time would show
// the jitter buffer up to a period of jitter that the network did not add (it would deepen the
// buffer by as much, and conceal a frame each time it did).
func (r *audioReceiver) batchedReads(period time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.late, r.early, r.period = playoutLate+period, playoutEarly+period, period
}

// Push stores one packet that arrived at `at` (media clock) without producing a frame: Receive
// is the receive path; Push and Tick drive the receiver by hand.
func (r *audioReceiver) Push(p *rtp.Packet, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.pushLocked(p, at)
	}
}

// Tick produces one frame now and delivers it; before the first packet it does nothing.
func (r *audioReceiver) Tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started && !r.closed {
		r.playLocked()
		r.next += media.FrameDuration
		r.due.Store(int64(r.next + r.late))
	}
}

// Receive stores one packet that arrived at `at` and produces the frames that are due: the
// ones overdue by more than playoutLate (the clock had not got to them), then this slot's if
// it is no more than playoutEarly away.
func (r *audioReceiver) Receive(p *rtp.Packet, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.period > 0 && r.started {
		// Read in a batch: it came at some time in the period before the read; the schedule's
		// slot when that falls in the period.
		at = min(max(r.next, at-r.period), at)
	}
	r.arriving, r.arrival = true, at
	defer func() { r.arriving = false }()
	r.pushLocked(p, at)
	if at-r.next > playoutMaxLag {
		r.next = at // stalled for long: start again from now rather than burst
	}
	for r.next+r.late <= at {
		r.playLocked()
		r.next += media.FrameDuration
	}
	offset := at - r.next // > 0: the packet came after its slot
	if offset >= -r.early {
		r.playLocked()
		r.next += media.FrameDuration
	}
	r.next += min(max(offset/playoutGain, -playoutMaxStep), playoutMaxStep)
	r.due.Store(int64(r.next + r.late))
}

// catchUp produces the frames overdue at now by playoutLate or more (the playout clock's path).
func (r *audioReceiver) catchUp(now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || !r.started {
		return
	}
	if now-r.next > playoutMaxLag+r.late {
		r.next = now - r.late // this goroutine was held up: one frame now, not a burst
	}
	for r.next+r.late <= now {
		r.playLocked()
		r.clockFrames.Add(1)
		r.next += media.FrameDuration
	}
	r.due.Store(int64(r.next + r.late))
}

func (r *audioReceiver) pushLocked(p *rtp.Packet, at time.Duration) {
	if !r.started {
		r.started, r.next = true, at
	}
	r.lastRTP.Store(int64(max(at, 1)))
	r.packets.Add(1)
	r.stats.update(p.SSRC, p.SequenceNumber, p.Timestamp, at)
	r.pkt.PayloadType = p.PayloadType
	r.pkt.Marker = p.Marker
	r.pkt.SequenceNumber = p.SequenceNumber
	r.pkt.Timestamp = p.Timestamp
	r.pkt.SSRC = p.SSRC
	r.pkt.ComfortNoise = p.PayloadType == media.PayloadTypeCN
	r.pkt.Payload = p.Payload
	r.rx.Push(&r.pkt)
	r.pkt.Payload = nil
}

func (r *audioReceiver) playLocked() {
	_, _ = r.rx.ReadFrame(&r.frame) // errors come with a usable (concealed) frame
	r.frames.Add(1)
	r.deliver(&r.frame)
}

// overdue reports whether the next frame is overdue at now by playoutLate (lock-free).
func (r *audioReceiver) overdue(now time.Duration) bool { return int64(now) >= r.due.Load() }

// LastPacket returns when the last packet arrived (zero before any).
func (r *audioReceiver) LastPacket() time.Time {
	at := r.lastRTP.Load()
	if at == 0 {
		return time.Time{}
	}
	return monoEpoch.Add(time.Duration(at))
}

// Stats returns the packet and frame counts.
func (r *audioReceiver) Stats() audioReceiverStats {
	return audioReceiverStats{Packets: r.packets.Load(), Frames: r.frames.Load(), ClockFrames: r.clockFrames.Load()}
}

// receptionReport returns the RTCP reception report block for the stream (RFC 3550 §6.4.1)
// and starts a new report interval; false before the first packet.
func (r *audioReceiver) receptionReport() (rtcp.ReceptionReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.report(r.now())
}

// readLoop reads the track until it ends: each packet is forwarded to SFU listeners as it
// came, then received.
func (r *audioReceiver) readLoop(track rtpReader) {
	buf := make([]byte, 1500)
	var p rtp.Packet
	for {
		n, _, err := track.Read(buf)
		if err != nil {
			return // EOF or a closed pipe: the connection is closing
		}
		if p.Unmarshal(buf[:n]) != nil {
			continue
		}
		if r.forward != nil {
			r.forward(&p)
		}
		r.Receive(&p, r.now())
	}
}

// readRTCP reads the track's incoming RTCP until the connection closes, noting the sender's
// reports for the delay fields of the receiver reports (RFC 3550 §6.4.1).
func (r *audioReceiver) readRTCP(src rtpReader) {
	buf := make([]byte, 1500)
	for {
		n, _, err := src.Read(buf)
		if err != nil {
			return
		}
		at := r.now()
		r.mu.Lock()
		senderReports(buf[:n], func(ssrc uint32, ntp uint64) { r.stats.noteSR(ssrc, ntp, at) })
		r.mu.Unlock()
	}
}

// Close frees the decoder. It is idempotent.
func (r *audioReceiver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.closeErr = r.rx.Close()
	}
	return r.closeErr
}
