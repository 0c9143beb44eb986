package sip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// frameFunc receives a 20 ms frame at media.PipelineRate. It runs on a media goroutine, must
// not block and must not keep the frame.
type frameFunc func(f *media.Frame)

// Timing of the send path.
const (
	frameDur = media.FrameDuration
	// fillAfter is how long after the last real audio the leg starts sending silence itself, so
	// that the peer (and every NAT and SBC between) sees RTP all through the call.
	fillAfter = 3 * frameDur
)

// legMedia is the audio of one call leg: an RTP endpoint, the encoder toward the peer and the
// receive chain from it, RFC 4733 events both ways, and the inactivity watch.
//
// The send path (sendFrame, called by the engine's pacer or a bridge) encodes and writes one
// packet under a mutex held only for that; it allocates nothing.
//
// The receive side is media.Playout, the receive chain the browser path uses too (issue 20's
// one playout chain): the endpoint's read goroutine hands each packet over as it arrives
// (onPacket → Playout.Push: telephone-events split off to the DTMF sink, G.711 and G.722 of
// other ptimes cut to 20 ms, a packet next in sequence decoded and given to the sink at once),
// and the process's shared media clock (media.SharedClock: a few goroutines for every call, no
// goroutine or timer per leg) ticks the leg every 20 ms (Tick → Playout.Step: concealment of a
// lost packet, comfort noise or silence while the caller sends nothing). The tick also keeps
// RTP flowing with silence (or a filler source such as ringback) while nobody sends audio, and
// watches for inactivity. The leg reads no clock of its own but now (time.Now unless a test
// sets it) and the clock's ticks.
type legMedia struct {
	log     *slog.Logger
	ports   *media.PortPair
	local   netip.AddrPort // advertised RTP address
	timeout time.Duration  // RTP inactivity timeout; <= 0 disables
	wg      *sync.WaitGroup
	track   func() bool      // counts the leg's clock registration in wg, unless the owner is closing
	now     func() time.Time // the send path's clock and the inactivity watch's start

	ep      *media.RTPEndpoint
	started atomic.Bool
	closed  atomic.Bool
	// awaitAck holds every packet back until the ACK of an inbound call's 200: an INVITE's
	// SDP may name any address, and only the ACK shows that its sender takes the call. The
	// endpoint starts without a remote; acked gives it the signalled one (guarded by txMu).
	awaitAck   atomic.Bool
	ackRemote  netip.AddrPort
	ackRemoteC netip.AddrPort

	txMu   sync.Mutex
	tx     txState
	keys   *sdesKeys // the SRTP keys in use (issue 21), guarded by txMu
	rekeys uint64    // times they changed after the start, guarded by txMu
	// srtpFail is what runs when every packet fails SRTP (srtp.go); srtpFailed once it ran.
	srtpFail   atomic.Pointer[func()]
	srtpFailed atomic.Bool

	// The receive chain (made by start): the endpoint's read goroutine pushes the packets, the
	// clock's ticks step it. It calls toSink (m.deliverFrame) and m.deliverDTMF.
	play   atomic.Pointer[media.Playout]
	toSink func(*media.Frame)

	// Owned by the clock's ticks (tickMu).
	tickMu  sync.Mutex
	unclock func()       // removes the leg from the shared clock
	stopped bool         // close ran: no more ticks
	fillF   *media.Frame // the filler's frame, made when a filler is first set
	ticks   uint64
	steps   media.StepSchedule // the 20 ms steps due at a tick (catch-up after a late wake-up)
	rxSince time.Time          // the start, or the peer's resumption: inactivity counts from it or the last packet

	receiving atomic.Bool
	sink      atomic.Pointer[frameFunc]
	filler    atomic.Pointer[frameFunc] // produces the frame sent while no audio flows
	dtmfSink  atomic.Pointer[func(rune)]

	renego    chan Negotiated
	timedOut  chan struct{}
	timeoutMu sync.Once
	// The owner's hook for the timeout (onTimeout), guarded by hookMu.
	hookMu       sync.Mutex
	timeoutHook  func()
	timedOutFlag bool
	quit         chan struct{}
	closeOnce    sync.Once
}

// txState is the send side, guarded by legMedia.txMu.
type txState struct {
	info     codec.Info
	enc      codec.Encoder
	rs       *codec.Resampler // 16 kHz → the encoder's rate, nil when equal
	pt       uint8
	ticks    uint32 // RTP ticks per 20 ms
	rate     uint32 // RTP clock rate
	ptimeLen int    // bytes per packet for sample codecs when the peer's ptime is not 20 ms; 0 otherwise
	acc      []byte
	pcm      []int16
	pay      []byte
	sending  bool
	dtmf     bool // telephone-events are being sent: audio is held back
	dtmfPT   uint8
	hasDTMF  bool
	dtmfRate uint32

	ts       uint32
	sentAny  bool
	tsAt     time.Time // the clock time ts stands for (the nominal send time of its packet)
	lastReal time.Time // last audio that was not filler
	mark     bool
	errs     uint64
	packets  uint64
}

func newLegMedia(log *slog.Logger, ports *media.PortPair, local netip.AddrPort, timeout time.Duration, wg *sync.WaitGroup, track func() bool) *legMedia {
	if track == nil {
		track = func() bool { wg.Add(1); return true }
	}
	m := &legMedia{
		log: log, ports: ports, local: local, timeout: timeout, wg: wg, track: track, now: time.Now,
		renego:   make(chan Negotiated, 4),
		timedOut: make(chan struct{}),
		quit:     make(chan struct{}),
	}
	m.toSink = m.deliverFrame
	return m
}

// start creates the RTP endpoint for the negotiated stream and registers the leg with the shared
// media clock. Later negotiations go through apply.
func (m *legMedia) start(ctx context.Context, n Negotiated) error {
	if m.closed.Load() {
		return ErrClosed
	}
	if m.started.Load() {
		m.apply(n)
		return nil
	}
	remote, remoteRTCP := n.Remote, n.RemoteRTCP
	if m.awaitAck.Load() {
		m.txMu.Lock()
		m.ackRemote, m.ackRemoteC = remote, remoteRTCP
		m.txMu.Unlock()
		remote, remoteRTCP = netip.AddrPort{}, netip.AddrPort{}
	}
	var sec *media.SRTP
	if n.SRTP != nil { // issue 21
		var err error
		if sec, err = n.SRTP.contexts(); err != nil {
			return fmt.Errorf("sip: start SRTP: %w", err)
		}
		m.keys = n.SRTP
	}
	ep, err := media.NewRTPEndpoint(ctx, media.RTPConfig{
		SRTP:              sec,
		Ports:             m.ports,
		Remote:            remote,
		RemoteRTCP:        remoteRTCP,
		PayloadType:       n.Audio.PayloadType,
		ClockRate:         n.Audio.ClockRate,
		InactivityTimeout: -1, // the leg watches inactivity itself: hold must not count
		OnPacket:          m.onPacket,
		Logger:            m.log,
	})
	if err != nil {
		return fmt.Errorf("sip: start RTP: %w", err)
	}
	m.ep = ep
	if err := m.setTx(n); err != nil {
		ep.Close()
		return err
	}
	if err := m.setRx(n); err != nil {
		ep.Close()
		return err
	}
	if !m.track() {
		ep.Close()
		return ErrClosed
	}
	m.receiving.Store(n.Receiving())
	m.rxSince = m.now() // before the clock's first tick (Add orders them)
	m.started.Store(true)
	m.unclock = media.SharedClock().Add(m)
	return nil
}

// acked lets the media flow once the ACK arrived: the endpoint gets the signalled remote.
func (m *legMedia) acked() {
	m.txMu.Lock()
	defer m.txMu.Unlock()
	if !m.awaitAck.Swap(false) || m.ep == nil {
		return
	}
	m.ep.SetRemote(m.ackRemote, m.ackRemoteC)
}

// apply takes a renegotiation (re-INVITE, UPDATE, the answer after early media): new remote
// address, direction, codec.
func (m *legMedia) apply(n Negotiated) {
	if !m.started.Load() || m.closed.Load() {
		return
	}
	if n.Remote.IsValid() {
		m.ep.SetRemote(n.Remote, n.RemoteRTCP)
	}
	m.rekey(n.SRTP)
	if err := m.setTx(n); err != nil {
		m.log.Warn("sip: codec change on the send side failed", "err", err)
	}
	select {
	case m.renego <- n:
	default:
		m.log.Warn("sip: renegotiation dropped: too many at once")
	}
}

func isSampleCodec(info codec.Info) bool {
	n := strings.ToUpper(info.Name)
	return n == "PCMU" || n == "PCMA" || n == "G722"
}

// setTx (re)builds the send side for n.
func (m *legMedia) setTx(n Negotiated) error {
	m.txMu.Lock()
	defer m.txMu.Unlock()
	t := &m.tx
	if t.enc == nil || !strings.EqualFold(t.info.Name, n.Audio.Name) || t.info.SampleRate != n.Audio.SampleRate {
		enc, err := codec.NewEncoder(n.Audio)
		if err != nil {
			return fmt.Errorf("sip: encoder for %s: %w", n.Audio.Name, err)
		}
		var rs *codec.Resampler
		if enc.SampleRate() != media.PipelineRate {
			if rs, err = codec.NewResampler(media.PipelineRate, enc.SampleRate()); err != nil {
				closeCodec(enc)
				return err
			}
		}
		closeCodec(t.enc)
		t.enc, t.rs = enc, rs
		// Buffers for one frame of this encoder (with room for a resampler's jitter): a G.711
		// call holds 0.7 KB here rather than buffers sized for 48 kHz Opus.
		pcmN := media.SamplesPerFrame(enc.SampleRate()) + 64
		payN := media.MaxRTPPayload
		if isSampleCodec(n.Audio) {
			payN = pcmN // one byte per sample at most (G.711; G.722 packs two)
		}
		t.pcm, t.pay = make([]int16, pcmN), make([]byte, payN)
		t.acc = t.acc[:0]
		t.mark = true
	}
	t.info = n.Audio
	t.pt = n.Audio.PayloadType
	t.rate = n.Audio.ClockRate
	t.ticks = n.Audio.ClockRate / 50
	t.ptimeLen = 0
	if isSampleCodec(n.Audio) && n.Ptime != ourPtime && n.Ptime >= 10 && n.Ptime <= 60 && n.Ptime%10 == 0 {
		// G.711 and G.722 both carry 8 bytes per millisecond (RFC 3551 §4.5.2, §4.5.14).
		t.ptimeLen = 8 * n.Ptime
	}
	t.sending = n.Sending()
	t.hasDTMF, t.dtmfPT, t.dtmfRate = n.HasDTMF, n.DTMF.PayloadType, n.DTMF.ClockRate
	return nil
}

func closeCodec(c any) {
	if cl, ok := c.(interface{ Close() error }); ok && c != nil {
		cl.Close()
	}
}

// setRx builds the receive chain, or switches its codec; Tick calls it for renegotiations,
// start before the first tick.
func (m *legMedia) setRx(n Negotiated) error {
	dtmfPT := 0
	if n.HasDTMF {
		dtmfPT = int(n.DTMF.PayloadType)
	}
	if p := m.play.Load(); p != nil {
		if err := p.SetCodec(n.Audio, dtmfPT); err != nil {
			return fmt.Errorf("sip: receiver for %s: %w", n.Audio.Name, err)
		}
		return nil
	}
	p, err := media.NewPlayout(media.PlayoutConfig{Codec: n.Audio, DTMFPayloadType: dtmfPT})
	if err != nil {
		return fmt.Errorf("sip: receiver for %s: %w", n.Audio.Name, err)
	}
	p.SetSink(m.toSink)
	p.SetDTMFSink(m.deliverDTMF)
	m.play.Store(p)
	return nil
}

// onTimeout sets what runs (on a goroutine of its own) when RTP stops for longer than the
// timeout while the peer should be sending; at once when that already happened.
func (m *legMedia) onTimeout(f func()) {
	m.hookMu.Lock()
	m.timeoutHook = f
	fired := m.timedOutFlag
	m.hookMu.Unlock()
	if fired {
		go f()
	}
}

// setSink routes received frames (nil drops them). When it returns, no frame is on its way to
// the previous sink: two legs handing one conversation over never feed it at once.
func (m *legMedia) setSink(f frameFunc) {
	if f == nil {
		m.sink.Store(nil)
	} else {
		m.sink.Store(&f)
	}
	if p := m.play.Load(); p != nil {
		p.SetSink(m.toSink) // waits for a frame on its way to the previous sink
	}
}

// setFiller sets what is sent while no audio flows (nil: silence).
func (m *legMedia) setFiller(f frameFunc) {
	if f == nil {
		m.filler.Store(nil)
		return
	}
	m.filler.Store(&f)
}

func (m *legMedia) setDTMFSink(f func(rune)) {
	if f == nil {
		m.dtmfSink.Store(nil)
	} else {
		m.dtmfSink.Store(&f)
	}
	if p := m.play.Load(); p != nil {
		p.SetDTMFSink(m.deliverDTMF) // waits for a digit on its way to the previous sink
	}
}

// sendFrame sends one 20 ms frame of real audio toward the peer. It never blocks on the network
// and allocates nothing.
func (m *legMedia) sendFrame(f *media.Frame) {
	if !m.started.Load() || f.Rate != media.PipelineRate {
		return
	}
	m.txMu.Lock()
	now := m.now()
	m.tx.lastReal = now
	m.sendLocked(f.PCM(), now)
	m.txMu.Unlock()
}

// sendLocked encodes pcm (16 kHz) and writes it as one packet (or, for a peer ptime other than
// 20 ms, accumulates and writes whole packets). Callers hold txMu.
func (m *legMedia) sendLocked(pcm []int16, now time.Time) {
	t := &m.tx
	if !t.sending || t.dtmf || t.enc == nil || m.closed.Load() || m.awaitAck.Load() {
		return
	}
	if t.rs != nil {
		n := t.rs.Process(t.pcm, pcm)
		pcm = t.pcm[:n]
	}
	n, err := t.enc.Encode(t.pay, pcm)
	if err != nil {
		t.errs++
		return
	}
	marker := t.mark
	ts := t.ts
	if t.sentAny {
		// Each packet advances the timestamp by the audio it carries: the frames a late tick
		// missed are sent by its catch-up (tick), each one frame further, so a late tick adds
		// no time that was never played. Only a pause longer than a catch-up covers (hold,
		// a schedule restart) moves the timestamp on to the clock, once, with the marker bit
		// (RFC 3550 §5.1: the timestamp follows the sampling clock through a pause; RFC 3551
		// §4.1: the marker starts a talkspurt).
		ts += t.ticks
		t.tsAt = t.tsAt.Add(frameDur)
		if lag := now.Sub(t.tsAt); lag > pauseAfter {
			skip := lag / frameDur
			ts += uint32(skip) * t.ticks
			t.tsAt = t.tsAt.Add(skip * frameDur)
			marker = true
		}
	} else {
		t.tsAt = now
	}
	t.sentAny, t.mark, t.ts = true, false, ts
	if t.ptimeLen == 0 {
		if err := m.ep.WriteRTP(t.pt, marker, ts, t.pay[:n]); err != nil {
			t.errs++
		} else {
			t.packets++
		}
		return
	}
	// Repacketize to the peer's ptime. G.711 and G.722 split anywhere and carry one byte per
	// RTP tick (RFC 3551 §4.5.2, §4.5.14), so a byte offset is a timestamp offset.
	if marker {
		t.acc = t.acc[:0]
	}
	pktTS := ts - uint32(len(t.acc))
	if t.acc == nil {
		t.acc = make([]byte, 0, 4*media.MaxRTPPayload) // only peers with another ptime need it
	}
	t.acc = append(t.acc, t.pay[:n]...)
	for len(t.acc) >= t.ptimeLen {
		if err := m.ep.WriteRTP(t.pt, marker, pktTS, t.acc[:t.ptimeLen]); err != nil {
			t.errs++
		} else {
			t.packets++
		}
		marker = false
		pktTS += uint32(t.ptimeLen)
		t.acc = t.acc[:copy(t.acc, t.acc[t.ptimeLen:])]
	}
}

// fill sends filler (or silence) when no real audio went out for fillAfter: RTP keeps flowing.
func (m *legMedia) fill(now time.Time) {
	m.txMu.Lock()
	defer m.txMu.Unlock()
	t := &m.tx
	if !t.sending || t.dtmf || now.Sub(t.lastReal) < fillAfter {
		return
	}
	if f := m.filler.Load(); f != nil {
		if m.fillF == nil {
			m.fillF = new(media.Frame)
		}
		m.fillF.Init(media.PipelineRate)
		(*f)(m.fillF)
		if m.fillF.Rate == media.PipelineRate {
			m.sendLocked(m.fillF.PCM(), now)
			return
		}
	}
	m.sendSilenceLocked(now)
}

// sendSilenceLocked sends one frame of digital silence, encoded at the codec's own rate: no
// resampling (a zero signal needs none; the resampler restarts at the next talkspurt).
func (m *legMedia) sendSilenceLocked(now time.Time) {
	t := &m.tx
	if t.enc == nil {
		return
	}
	rs := t.rs
	t.rs = nil
	n := t.enc.SampleRate() / 50
	clear(t.pcm[:n])
	m.sendLocked(t.pcm[:n], now)
	t.rs = rs
	if rs != nil {
		rs.Reset()
	}
}

// sendDTMF sends digits as RFC 4733 events (§2.5.1), holding audio back meanwhile. It returns
// when the digits were sent, ctx ended or the leg closed.
func (m *legMedia) sendDTMF(ctx context.Context, digits string) error {
	m.txMu.Lock()
	t := &m.tx
	if !m.started.Load() || !t.hasDTMF {
		m.txMu.Unlock()
		return errNoRFC4733
	}
	if t.dtmf {
		m.txMu.Unlock()
		return errors.New("sip: DTMF already being sent")
	}
	gen, err := codec.NewDTMFGenerator(t.dtmfRate, digits, 100, 100)
	if err != nil {
		m.txMu.Unlock()
		return err
	}
	t.dtmf = true
	base := t.ts + t.ticks
	audioRate, teRate, pt := t.rate, t.dtmfRate, t.dtmfPT
	start := m.now()
	m.txMu.Unlock()
	defer func() {
		m.txMu.Lock()
		el := m.now().Sub(start)
		m.tx.ts = base + uint32(int64(el/frameDur))*m.tx.ticks
		m.tx.tsAt = start.Add(el / frameDur * frameDur)
		m.tx.dtmf = false
		m.tx.mark = true
		m.txMu.Unlock()
	}()
	var buf [codec.DTMFEventLen]byte
	tk := time.NewTicker(frameDur)
	defer tk.Stop()
	for {
		n, marker, off, ok := gen.Next(buf[:])
		if !ok {
			return nil
		}
		if n > 0 {
			ts := base + uint32(uint64(off)*uint64(audioRate)/uint64(teRate))
			if err := m.ep.WriteRTP(pt, marker, ts, buf[:n]); err != nil && errors.Is(err, media.ErrEndpointClosed) {
				return ErrClosed
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.quit:
			return ErrClosed
		case <-tk.C:
		}
	}
}

var errNoRFC4733 = errors.New("sip: telephone-event not negotiated")

// Tick is the leg's 20 ms step on the shared media clock (media.ClockTicker): it takes the
// renegotiations queued by apply, then runs the steps due at now. It never blocks on the
// network; after close it does nothing.
func (m *legMedia) Tick(now time.Time) {
	m.tickMu.Lock()
	defer m.tickMu.Unlock()
	if m.stopped {
		return
	}
	for {
		select {
		case n := <-m.renego:
			m.renegotiated(n, now)
			continue
		default:
		}
		break
	}
	m.tick(now)
}

// renegotiated rebuilds the receive side for n (on the clock's tick at now).
func (m *legMedia) renegotiated(n Negotiated, now time.Time) {
	if err := m.setRx(n); err != nil {
		m.log.Warn("sip: codec change on the receive side failed", "err", err)
	}
	if was := m.receiving.Swap(n.Receiving()); !was {
		m.rxSince = now // the peer resumes: give it the full timeout
	}
}

// pauseAfter is how far the send clock may fall behind the timestamp before the stream counts
// as paused (more than a catch-up makes up for): then the timestamp jumps to the clock.
const pauseAfter = (media.CatchUpSteps + 1) * frameDur

// tick runs the 20 ms steps due at now (media.StepSchedule: a ticker drops ticks when its
// goroutine wakes late, so the steps follow the clock rather than the tick count).
func (m *legMedia) tick(now time.Time) {
	for range m.steps.Due(now) {
		m.step(now)
	}
}

// step is one 20 ms step of the leg: the receive chain's (the frames the clock owes when the
// packets are behind, DTMF flush), filler, inactivity.
func (m *legMedia) step(now time.Time) {
	m.ticks++
	play := m.play.Load()
	play.Step(now)
	if m.ticks%50 == 0 {
		m.checkSRTP() // issue 21
	}
	since := m.rxSince
	if last := play.LastPacket(); last.After(since) {
		since = last
	}
	idle := now.Sub(since)
	m.fill(now)
	if m.timeout > 0 && m.receiving.Load() && idle > m.timeout {
		m.timeoutMu.Do(func() {
			m.log.Info("sip: RTP inactivity timeout", "timeout", m.timeout.String())
			close(m.timedOut)
			m.hookMu.Lock()
			f := m.timeoutHook
			m.timedOutFlag = true
			m.hookMu.Unlock()
			if f != nil {
				go f() // it ends the leg, which waits for this goroutine
			}
		})
	}
}

// deliverFrame gives a frame of the receive chain to the sink (the chain serializes it with
// setSink).
func (m *legMedia) deliverFrame(f *media.Frame) {
	if s := m.sink.Load(); s != nil {
		(*s)(f)
	}
}

// onPacket takes one packet on the endpoint's read goroutine into the receive chain.
func (m *legMedia) onPacket(p *media.RTPPacket) {
	if m.closed.Load() {
		return
	}
	if play := m.play.Load(); play != nil {
		play.Push(p)
	}
}

func (m *legMedia) deliverDTMF(d rune) {
	if s := m.dtmfSink.Load(); s != nil {
		(*s)(d)
	}
}

// stats snapshots the leg's RTP statistics.
func (m *legMedia) stats() (media.RTPStats, media.RTPReceiverStats, codec.Info, uint64) {
	var st media.RTPStats
	if m.started.Load() {
		st = m.ep.Stats()
	}
	var rs media.RTPReceiverStats
	if p := m.play.Load(); p != nil {
		rs = p.Stats().RTPReceiverStats
	}
	m.txMu.Lock()
	info, errs := m.tx.info, m.tx.errs
	m.txMu.Unlock()
	return st, rs, info, errs
}

// close takes the leg off the clock (waiting for a tick under way) and closes the endpoint
// (returning the ports). It is idempotent.
func (m *legMedia) close() {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		close(m.quit)
		if m.started.Load() {
			m.unclock()
			m.tickMu.Lock()
			m.stopped = true
			m.tickMu.Unlock()
			m.wg.Done() // the clock's registration, counted by track in start
			m.ep.Close()
			if p := m.play.Load(); p != nil {
				_ = p.Close()
			}
			m.txMu.Lock()
			closeCodec(m.tx.enc)
			m.tx.enc = nil
			m.txMu.Unlock()
		} else if m.ports != nil {
			m.ports.Close()
		}
	})
}
