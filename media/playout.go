package media

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/codec"
)

// PlayoutConfig configures a Playout.
type PlayoutConfig struct {
	// Codec is the audio payload format (see RTPReceiverConfig.Codec).
	Codec codec.Info
	// Decoder decodes Codec; nil means codec.NewDecoder (the Playout owns and closes it). A
	// decoder that is a codec.Concealer conceals lost packets itself (Opus PLC and FEC);
	// others get silence for them.
	Decoder codec.Decoder
	// DTMFPayloadType is the RFC 4733 telephone-event payload type (a dynamic one, 96–127);
	// zero or less when none was negotiated.
	DTMFPayloadType int
	// OutputRate is the rate of the frames given to the sink; zero means PipelineRate.
	OutputRate int
	// MaxDelay bounds how much the jitter buffer holds (default 200 ms).
	MaxDelay time.Duration
}

// PlayoutStats count what a Playout did.
type PlayoutStats struct {
	RTPReceiverStats
	Packets     uint64 // packets handed to Push, telephone-events included
	Delivered   uint64 // frames given to the sink
	ClockFrames uint64 // of which the clock made (concealment, comfort noise, silence)
	Skipped     uint64 // missing packets whose time the clock had already filled
	BadPtime    uint64 // Opus packets that were not 20 ms, dropped
}

// Playout is the receive chain shared by every channel (SIP legs and browser tracks): RTP
// packets in, 20 ms frames at OutputRate out to a sink, RFC 4733 digits out to a DTMF sink.
// It holds the jitter buffer and the decoder (RTPReceiver: decode, Opus FEC and packet loss
// concealment, RFC 3389 comfort noise, resampling), cuts G.711 and G.722 packets of other
// ptimes to 20 ms, and keeps the statistics.
//
// It has no clock of its own and never reads one: Push takes each packet with its arrival time
// (RTPPacket.ReceivedAt, the endpoint's clock) and Step or Tick is called by the owner's clock
// (the process's shared media clock in production, a manual one in tests) with that clock's
// time. Both may be called from different goroutines: a mutex held only for the buffer work
// and the sinks (no I/O) serializes them. The sinks must not block and must not call back into
// the Playout. In steady state nothing allocates.
//
// Playout is eager (see JitterBuffer.PopNext): a packet that is next in sequence is decoded
// and given to the sink at its arrival, whatever the buffer's depth, so the network's delay is
// the only one before the engine hears the caller. The clock owes the sink one frame per
// 20 ms step; while the packets are no more than playoutSlack frames behind it, it waits.
// Further behind, it gives a frame of its own: the concealment of a packet known to be lost (a
// later one is here), or comfort noise or silence while nothing newer has come (the sender is
// late, lost a stretch, or is quiet: the VAD hears the silence). When packets come back after
// such frames, the rest of the stretch's time by the sender's timestamps is given at once
// (fillGap), the missing packets whose time those frames stood for are skipped, not concealed
// again, and the clock's count restarts from the packets, as it does at the stream's first
// packet; and when the packets stay more than a frame behind the clock for a
// whole window (the sender's clock is slow, or the phase drifted) the count moves back to them.
// A late packet so gets the whole slack, 40 to 60 ms after its slot by the clock's phase.
//
// Why this algorithm: Parley had two receive paths, the SIP leg's eager playout (with a slack
// of two frames) and the browser track's arrival-driven schedule over a paced adaptive buffer
// (JitterBuffer.Pop, with a wait of 10 ms past each slot). Over the same 1,000-packet patterns
// at four clock phases (mediatest.ArrivalPatterns, TestPlayoutPatterns; 4,000 frames each),
// the paced one concealed 4 frames with ±1 ms of jitter, 16 with ±8 ms, 158 with ±20 ms and
// 4 with a sender clock 0.5 % off (it stretches to deepen itself and drops the packets that
// miss their slot), where the eager one concealed 0, 0, 4 and 0; and nothing downstream needs a
// steady pace (the recognizer and the VAD take audio as it comes; a bridged phone has its own
// jitter buffer), so the eager one also adds no delay. Where the eager one did worse, it is
// changed here: its slack of two frames is 20 to 40 ms past a packet's slot by the clock's
// phase, so one packet in ten 25 ms late cost 100 concealed frames (the paced one 23); with
// three frames (40 to 60 ms) it costs none, and a loss is concealed 20 ms later (the packets
// behind it wait up to 60 to 80 ms rather than 40 to 60). After a lost stretch it concealed
// the gap one frame per step while the packets behind it waited (124 concealed for a lost
// second, the paced one 34); now the gap is the silence already given, and none is concealed.
// A sender clock 0.5 % slow had 20 silence frames in 4,000 put into its speech (the clock's count of
// frames owed only ever grew); now none. Steps before the stream no longer eat into the
// slack either. The price of the slack: when the sender goes quiet without a word (Opus DTX;
// an RFC 3389 packet says so, but Opus sends none), the clock's first silence frame comes 40
// to 60 ms after the last packet's slot, where the paced path's came 10 to 30 ms after; the
// silence the VAD counts to end the caller's turn starts that much later. After an RFC 3389
// packet there is no slack: the comfort noise goes on at every step.
type Playout struct {
	mu       sync.Mutex
	rx       *RTPReceiver
	info     codec.Info
	sample   bool // G.711 or G.722: packets of other ptimes are cut to 20 ms
	dtmfPT   int
	dtmfRx   codec.DTMFReceiver
	dtmfLast time.Time
	dtmfOpen bool
	rebuf    *rebuffer // made for the first packet that is not 20 ms
	frame    Frame
	outRate  int
	maxDelay time.Duration

	at        time.Time // the time of the packet or step being handled: the jitter buffer's clock
	last      time.Time // arrival of the last packet
	due       uint64    // frames the clock owes the sink
	delivered uint64    // frames given to the sink
	filled    uint64    // frames the clock gave since the last packet's, while nothing was known lost
	flowing   bool      // a packet's frame was delivered: the clock's count follows the packets
	// The sender's timeline: the newest audio or comfort-noise packet pushed (see fillGap).
	havePrev bool
	prevSSRC uint32
	prevSeq  uint16
	prevEnd  uint32       // the RTP timestamp just after its audio
	winSteps int          // steps in the current window (playoutWindow)
	winMin   uint64       // the least the packets were behind the clock in the window, in frames
	winClock bool         // the clock gave frames of its own in the window
	steps    StepSchedule // Tick's

	sink     func(*Frame)
	dtmfSink func(rune)
	st       PlayoutStats
	closed   bool
}

// Playout timing.
const (
	// playoutSlack is how many frames the packets may fall behind the clock (network jitter, a
	// reordered packet) before the clock gives the sink a frame of its own.
	playoutSlack = 3
	// playoutDTMFFlush reports a digit whose end packets were all lost (RFC 4733 §2.5.1.4
	// sends three).
	playoutDTMFFlush = 400 * time.Millisecond
	// playoutWindow is how many steps (0.5 s) the packets must stay behind the clock by more
	// than a frame before the clock's count moves back to them.
	playoutWindow = 25
)

// NewPlayout returns a receive chain for cfg.Codec.
func NewPlayout(cfg PlayoutConfig) (*Playout, error) {
	p := &Playout{outRate: cfg.OutputRate, maxDelay: cfg.MaxDelay, dtmfPT: -1}
	if p.maxDelay == 0 {
		p.maxDelay = 200 * time.Millisecond
	}
	if err := p.setCodec(cfg.Codec, cfg.Decoder); err != nil {
		return nil, err
	}
	p.dtmfPT = dtmfType(cfg.DTMFPayloadType)
	return p, nil
}

// SetCodec switches to another audio payload format (a renegotiation); the same format keeps
// the chain as it is. dtmfPT is the telephone-event payload type, zero or less for none.
func (p *Playout) SetCodec(info codec.Info, dtmfPT int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dtmfPT = dtmfType(dtmfPT)
	if p.closed || (p.rx != nil && strings.EqualFold(p.info.Name, info.Name) && p.info.PayloadType == info.PayloadType) {
		return nil
	}
	return p.setCodec(info, nil)
}

func (p *Playout) setCodec(info codec.Info, dec codec.Decoder) error {
	rx, err := NewRTPReceiver(RTPReceiverConfig{Codec: info, Decoder: dec, OutputRate: p.outRate,
		MinDelay: FrameDuration, MaxDelay: p.maxDelay, Now: p.now})
	if err != nil {
		return fmt.Errorf("media: playout for %s: %w", info.Name, err)
	}
	if p.rx != nil {
		p.st.RTPReceiverStats = p.rx.Stats() // the old chain's counters are folded in
		_ = p.rx.Close()
		rx.st = p.st.RTPReceiverStats
	}
	p.rx, p.info = rx, info
	n := strings.ToUpper(info.Name)
	p.sample = n == "PCMU" || n == "PCMA" || n == "G722"
	if p.rebuf != nil {
		p.rebuf.reset()
	}
	return nil
}

// dtmfType is the telephone-event payload type to match, -1 for none (payload type 0 is PCMU,
// never a telephone-event).
func dtmfType(pt int) int {
	if pt <= 0 {
		return -1
	}
	return pt
}

// now is the jitter buffer's clock: the arrival or step being handled (it runs under mu).
func (p *Playout) now() time.Time { return p.at }

// SetSink routes the frames (nil drops them). When it returns, no frame is on its way to the
// previous sink: two owners handing a conversation over never feed it at once.
func (p *Playout) SetSink(f func(*Frame)) {
	p.mu.Lock()
	p.sink = f
	p.mu.Unlock()
}

// SetDTMFSink routes the RFC 4733 digits (nil drops them).
func (p *Playout) SetDTMFSink(f func(rune)) {
	p.mu.Lock()
	p.dtmfSink = f
	p.mu.Unlock()
}

// Push takes one packet that arrived at pkt.ReceivedAt: a telephone-event goes to the DTMF
// receiver (a digit to the DTMF sink), audio and comfort noise to the jitter buffer, and the
// frames that are now next in sequence straight to the sink. The payload is copied.
func (p *Playout) Push(pkt *RTPPacket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.at, p.last = pkt.ReceivedAt, pkt.ReceivedAt
	p.st.Packets++
	switch {
	case int(pkt.PayloadType) == p.dtmfPT:
		p.dtmfLast, p.dtmfOpen = pkt.ReceivedAt, true
		if d, _, ok := p.dtmfRx.Push(pkt.Timestamp, pkt.Payload); ok && p.dtmfSink != nil {
			p.dtmfSink(d)
		}
		return
	case pkt.PayloadType != p.info.PayloadType || pkt.ComfortNoise:
		if pkt.ComfortNoise {
			p.fillGap(pkt, p.info.ClockRate/50)
		}
		p.rx.Push(pkt)
	case p.sample:
		p.fillGap(pkt, uint32(len(pkt.Payload))) // G.711 and G.722: a byte per RTP tick
		if len(pkt.Payload) != 160 || p.rebuf != nil && p.rebuf.active {
			if p.rebuf == nil {
				p.rebuf = new(rebuffer) // only peers whose ptime is not 20 ms need it
			}
			p.rebuf.push(pkt, p.rx)
		} else {
			p.rx.Push(pkt)
		}
	default:
		if samples, err := codec.OpusPacketSamples(pkt.Payload, 48000); err == nil && samples != 960 {
			p.st.BadPtime++ // only 20 ms Opus packets fit the 20 ms pipeline
			return
		}
		p.fillGap(pkt, p.info.ClockRate/50)
		p.rx.Push(pkt)
	}
	p.deliverReady()
}

// fillGap takes the timeline of an audio or comfort-noise packet of dur RTP ticks. When it
// comes back after frames of the clock's own, the sender's timestamps say how long it was quiet
// (Opus DTX, RFC 3389) or lost, and the frames of that time the clock has not given yet (it
// waits out the slack before its first) are given now, before the packet's own, no more than
// the clock owes: a quiet stretch reaches the sink whole and on time, so that the VAD's count
// of silence, which ends the caller's turn, does not fall behind by the slack at each DTX
// packet. The frames are silence, or comfort noise after an RFC 3389 packet.
func (p *Playout) fillGap(pkt *RTPPacket, dur uint32) {
	newer := p.havePrev && pkt.SSRC == p.prevSSRC && int16(pkt.SequenceNumber-p.prevSeq) > 0
	if newer && p.filled > 0 && p.due > p.delivered {
		if d := int32(pkt.Timestamp - p.prevEnd); d > 0 {
			gap := uint64(d) / uint64(p.info.ClockRate/50)
			for n := min(gap-min(gap, p.filled), p.due-p.delivered); n > 0; n-- {
				p.rx.produce(&p.frame, nil, PopEmpty)
				p.st.ClockFrames++
				p.filled++
				p.deliver()
			}
		}
	}
	if newer || !p.havePrev || pkt.SSRC != p.prevSSRC {
		p.havePrev, p.prevSSRC, p.prevSeq, p.prevEnd = true, pkt.SSRC, pkt.SequenceNumber, pkt.Timestamp+dur
	}
}

// Step is one 20 ms step of the owner's clock at now: the frames the clock owes when the
// packets are more than playoutSlack behind, and the flush of a digit whose end was lost.
func (p *Playout) Step(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.stepLocked(now)
	}
}

// Tick runs the 20 ms steps due at now (StepSchedule: several when the clock woke late, one
// after a stall): for an owner whose clock may skip ticks and has nothing else to do on them.
func (p *Playout) Tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for range p.steps.Due(now) {
		p.stepLocked(now)
	}
}

func (p *Playout) stepLocked(now time.Time) {
	p.at = now
	p.due++
	if p.delivered > p.due {
		p.due = p.delivered // packets came early or in a burst: the clock follows them
	}
	if lag := p.due - p.delivered; p.winSteps == 0 || lag < p.winMin {
		p.winMin = lag
	}
	p.winSteps++
	slack := uint64(playoutSlack)
	if p.rx.cnAmp >= 0 {
		slack = 0 // the sender said it is quiet (RFC 3389 §4): nothing is late, the noise goes on
	}
	for p.due > p.delivered+slack {
		p.winClock = true
		st, err := p.rx.ReadDue(&p.frame)
		if st == PopEmpty {
			p.filled++
		}
		p.st.ClockFrames++
		if err == nil || p.frame.N > 0 {
			p.deliver()
		} else {
			p.delivered++
		}
		p.deliverReady()
	}
	if p.winSteps >= playoutWindow {
		// The packets stayed more than a frame behind the clock for the whole window, with
		// no frame of the clock's own: the clock's phase or the sender's rate drifted, it is
		// not jitter. The count moves back so that the slack is whole again for a late packet
		// (it only ever grew before, one frame each time a packet came just after a step).
		if !p.winClock && p.winMin > 1 {
			p.due -= p.winMin - 1
		}
		p.winSteps, p.winClock = 0, false
	}
	if p.dtmfOpen && now.Sub(p.dtmfLast) > playoutDTMFFlush {
		p.dtmfOpen = false
		if d, _, ok := p.dtmfRx.Flush(); ok && p.dtmfSink != nil {
			p.dtmfSink(d)
		}
	}
}

// deliverReady gives the sink every frame whose packet is next in sequence. When the clock
// made frames of its own since the last packet's, the missing packets whose time they (and
// the slack) filled are skipped first, and the clock's count restarts from the packets.
func (p *Playout) deliverReady() {
	if p.filled > 0 {
		p.st.Skipped += uint64(p.rx.jb.SkipMissing(int(p.filled + playoutSlack)))
	}
	for {
		ok, err := p.rx.ReadNext(&p.frame)
		if !ok {
			return
		}
		if err == nil || p.frame.N > 0 {
			p.deliver()
		} else {
			p.delivered++
		}
		if p.filled > 0 || !p.flowing {
			// The stream starts, or comes back after frames of the clock's own: the count
			// restarts from the packets (steps before the stream must not eat the slack).
			p.filled, p.flowing = 0, true
			p.due = p.delivered
		}
	}
}

func (p *Playout) deliver() {
	p.delivered++
	p.st.Delivered++
	if p.sink != nil {
		p.sink(&p.frame)
	}
}

// LastPacket returns when the last packet arrived (zero before any).
func (p *Playout) LastPacket() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Stats returns the counters, with the receiver's and the jitter buffer's.
func (p *Playout) Stats() PlayoutStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.RTPReceiverStats = p.rx.Stats()
	return s
}

// Close releases the decoder. It is idempotent; Push and Step do nothing afterwards.
func (p *Playout) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.rx.Close()
}

// rebuffer cuts G.711 and G.722 packets of any ptime into 20 ms packets (160 bytes) for the
// 20 ms jitter buffer: both codecs carry 8 bytes and 8 timestamp ticks per millisecond, so a
// packet splits anywhere (RFC 3551 §4.5). A gap or reordering drops the partial packet.
type rebuffer struct {
	active bool
	buf    [2 * MaxRTPPayload]byte
	n      int
	ts     uint32 // timestamp of buf[0]
	seq    uint16
	ssrc   uint32
	out    RTPPacket
}

func (r *rebuffer) reset() { *r = rebuffer{} }

func (r *rebuffer) push(p *RTPPacket, rx *RTPReceiver) {
	if !r.active || p.SSRC != r.ssrc || p.Timestamp != r.ts+uint32(r.n) {
		r.active, r.ssrc, r.n, r.ts = true, p.SSRC, 0, p.Timestamp
	}
	if r.n+len(p.Payload) > len(r.buf) {
		r.n, r.ts = 0, p.Timestamp
	}
	r.n += copy(r.buf[r.n:], p.Payload)
	for r.n >= 160 {
		r.out.PayloadType = p.PayloadType
		r.out.SSRC = p.SSRC
		r.out.Timestamp = r.ts
		r.out.SequenceNumber = r.seq
		r.out.Marker = false
		r.out.ReceivedAt = p.ReceivedAt
		r.out.Payload = append(r.out.Payload[:0], r.buf[:160]...)
		rx.Push(&r.out)
		r.seq++
		r.ts += 160
		r.n = copy(r.buf[:], r.buf[160:r.n])
	}
}
