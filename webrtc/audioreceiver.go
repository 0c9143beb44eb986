package webrtc

import (
	"fmt"
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

// audioReceiverStats count what an audioReceiver did.
type audioReceiverStats struct {
	Packets     uint64 // RTP packets received
	Frames      uint64 // frames delivered
	ClockFrames uint64 // of which the playout clock produced (nothing arrived in time)
}

// audioReceiver is the receive path of one browser track: a thin adapter from Pion's packets
// to media.Playout, the receive chain the SIP legs use too (issue 20's one playout chain: jitter
// buffer, decode of Opus at 48 kHz with FEC and loss concealment or PCMU, resampling to 16 kHz
// 20 ms frames), with the statistics for RTCP receiver reports (RFC 3550 §6.4) and the SFU
// forwarding of the caller's packets.
//
// The reader goroutine pushes each packet (Receive); a packet next in sequence is decoded and
// delivered at once, so the browser's packets and the frames share one goroutine wake-up per
// 20 ms. The service's playoutClock steps the chain every 20 ms (catchUp): when the packets
// fall behind (Opus DTX during the caller's silences, loss, a late packet) it produces the
// frames owed itself, so the engine keeps getting silence, not a hole, and endpointing hears the
// caller stop. A call has no playout goroutine or timer of its own. deliver must not block and
// must not call back into the receiver. Nothing allocates per packet or frame.
type audioReceiver struct {
	play    *media.Playout
	deliver func(*media.Frame)
	forward func(*rtp.Packet)    // SFU listeners of this track; must not keep the packet
	now     func() time.Duration // the monotonic media clock

	mu       sync.Mutex // guards what follows (Receive's bookkeeping, the RTCP statistics)
	pkt      media.RTPPacket
	stats    receptionStats
	period   time.Duration // the socket's read period when reads are batched, else 0
	next     time.Duration // batched reads: the earliest the next packet can have arrived
	started  bool
	closed   bool
	closeErr error

	lastRTP atomic.Int64 // arrival of the last packet on the media clock; 0 before any
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
	play, err := media.NewPlayout(media.PlayoutConfig{Codec: info, OutputRate: media.PipelineRate})
	if err != nil {
		return nil, err
	}
	play.SetSink(deliver)
	return &audioReceiver{play: play, deliver: deliver, stats: newReceptionStats(uint32(info.ClockRate)), now: now}, nil
}

// batchedReads tells the receiver that the socket is read once per period: a packet may reach
// the receiver up to a period after it arrived, and the packets of a period come together. The
// playout needs no change for it (a packet up to its slack of two to three frames late still
// plays), but the arrival of a packet is taken to be no earlier than a period before its read
// and no earlier than 20 ms after the previous packet's: the read's own time would show the
// reception statistics up to a period of jitter that the network did not add.
func (r *audioReceiver) batchedReads(period time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.period = period
}

// Receive takes one packet that arrived at `at` (media clock) into the playout, which delivers
// the frames now next in sequence.
func (r *audioReceiver) Receive(p *rtp.Packet, at time.Duration) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if r.period > 0 && r.started {
		// Read in a batch: it came at some time in the period before the read.
		at = min(max(r.next, at-r.period), at)
	}
	r.started, r.next = true, at+media.FrameDuration
	r.lastRTP.Store(int64(max(at, 1)))
	r.stats.update(p.SSRC, p.SequenceNumber, p.Timestamp, at)
	r.pkt.PayloadType = p.PayloadType
	r.pkt.Marker = p.Marker
	r.pkt.SequenceNumber = p.SequenceNumber
	r.pkt.Timestamp = p.Timestamp
	r.pkt.SSRC = p.SSRC
	r.pkt.ComfortNoise = p.PayloadType == media.PayloadTypeCN
	r.pkt.Payload = p.Payload
	r.pkt.ReceivedAt = monoEpoch.Add(at)
	r.play.Push(&r.pkt) // under mu: the reader is the only caller, mu only keeps pkt whole
	r.pkt.Payload = nil
	r.mu.Unlock()
}

// catchUp runs the playout's 20 ms steps due at now (the playout clock's path): the frames
// owed when the packets are behind.
func (r *audioReceiver) catchUp(now time.Duration) { r.play.Tick(monoEpoch.Add(now)) }

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
	st := r.play.Stats()
	return audioReceiverStats{Packets: st.Packets, Frames: st.Delivered, ClockFrames: st.ClockFrames}
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
		r.closeErr = r.play.Close()
	}
	return r.closeErr
}
