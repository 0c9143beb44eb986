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
	// dtmfFlushAfter reports a digit whose end packets were all lost.
	dtmfFlushAfter = 400 * time.Millisecond
)

// legMedia is the audio of one call leg: an RTP endpoint, the encoder toward the peer and the
// receive chain (jitter buffer, decoder, resampler) from it, RFC 4733 events both ways, and the
// inactivity watch.
//
// The send path (sendFrame, called by the engine's pacer or a bridge) encodes and writes one
// packet under a mutex held only for that; it allocates nothing.
//
// The receive side plays out eagerly: the endpoint's read goroutine hands each packet over as
// it arrives (onPacket), and a packet that is next in sequence is decoded and given to the sink
// at once. Nothing downstream needs a steady pace (the recognizer and the VAD take audio as it
// comes; a bridged phone has its own jitter buffer), so the network's delay is the only one:
// no jitter-buffer depth and no wait for a 20 ms tick are added before the engine hears the
// caller. The process's shared media clock (media.SharedClock: a few goroutines for every call,
// no goroutine or timer per leg) ticks the leg every 20 ms (Tick): each step owes the sink one
// frame, and when the packets fall more than eagerSlack frames behind it gives a concealed frame
// for a packet known to be lost (so the ones behind it can go), or comfort noise or silence
// while the caller sends nothing (so the VAD hears the silence). It also keeps RTP flowing with
// silence (or a filler source such as ringback) while nobody sends audio, and watches for
// inactivity.
type legMedia struct {
	log     *slog.Logger
	ports   *media.PortPair
	local   netip.AddrPort // advertised RTP address
	timeout time.Duration  // RTP inactivity timeout; <= 0 disables
	wg      *sync.WaitGroup
	track   func() bool // counts the leg's clock registration in wg, unless the owner is closing

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

	// The receive chain, guarded by rxMu: the endpoint's read goroutine delivers the packets
	// that arrive in order, the clock's ticks conceal and fill.
	rxMu      sync.Mutex
	rx        *media.RTPReceiver
	rxInfo    codec.Info
	rxDTMFPT  int // -1: none
	dtmfRx    codec.DTMFReceiver
	dtmfLast  time.Time
	dtmfOpen  bool
	rebuf     *rebuffer // only for peers whose ptime is not 20 ms
	frame     media.Frame
	lastRx    time.Time
	due       uint64 // frames the clock owes the sink
	delivered uint64 // frames given to the sink

	// Owned by the clock's ticks (tickMu).
	tickMu   sync.Mutex
	unclock  func()       // removes the leg from the shared clock
	stopped  bool         // close ran: no more ticks
	fillF    *media.Frame // the filler's frame, made when a filler is first set
	ticks    uint64
	nextTick time.Time // when the next 20 ms step is due (catch-up after a late wake-up)

	receiving atomic.Bool
	sink      atomic.Pointer[frameFunc]
	filler    atomic.Pointer[frameFunc] // produces the frame sent while no audio flows
	dtmfSink  atomic.Pointer[func(rune)]
	rxFrames  atomic.Uint64
	rxPackets atomic.Uint64
	badPtime  atomic.Uint64

	statsMu sync.Mutex
	rxStats media.RTPReceiverStats

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
	return &legMedia{
		log: log, ports: ports, local: local, timeout: timeout, wg: wg, track: track,
		rxDTMFPT: -1,
		renego:   make(chan Negotiated, 4),
		timedOut: make(chan struct{}),
		quit:     make(chan struct{}),
	}
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
	m.rxMu.Lock()
	m.lastRx = time.Now()
	m.rxMu.Unlock()
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

// setRx (re)builds the receive chain; Tick calls it for renegotiations, start before the first
// tick.
func (m *legMedia) setRx(n Negotiated) error {
	m.rxMu.Lock()
	defer m.rxMu.Unlock()
	if m.rx == nil || !strings.EqualFold(m.rxInfo.Name, n.Audio.Name) || m.rxInfo.PayloadType != n.Audio.PayloadType {
		rx, err := media.NewRTPReceiver(media.RTPReceiverConfig{Codec: n.Audio, MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond})
		if err != nil {
			return fmt.Errorf("sip: receiver for %s: %w", n.Audio.Name, err)
		}
		if m.rx != nil {
			m.rx.Close()
		}
		m.rx, m.rxInfo = rx, n.Audio
		if m.rebuf != nil {
			m.rebuf.reset()
		}
	}
	m.rxDTMFPT = -1
	if n.HasDTMF {
		m.rxDTMFPT = int(n.DTMF.PayloadType)
	}
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
	m.rxMu.Lock()
	defer m.rxMu.Unlock()
	if f == nil {
		m.sink.Store(nil)
		return
	}
	m.sink.Store(&f)
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
	m.rxMu.Lock()
	defer m.rxMu.Unlock()
	if f == nil {
		m.dtmfSink.Store(nil)
		return
	}
	m.dtmfSink.Store(&f)
}

// sendFrame sends one 20 ms frame of real audio toward the peer. It never blocks on the network
// and allocates nothing.
func (m *legMedia) sendFrame(f *media.Frame) {
	if !m.started.Load() || f.Rate != media.PipelineRate {
		return
	}
	m.txMu.Lock()
	now := time.Now()
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
	start := time.Now()
	m.txMu.Unlock()
	defer func() {
		m.txMu.Lock()
		el := time.Since(start)
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
			m.renegotiated(n)
			continue
		default:
		}
		break
	}
	m.tick(now)
}

// renegotiated rebuilds the receive side for n (on the clock's tick).
func (m *legMedia) renegotiated(n Negotiated) {
	if err := m.setRx(n); err != nil {
		m.log.Warn("sip: codec change on the receive side failed", "err", err)
	}
	if was := m.receiving.Swap(n.Receiving()); !was {
		m.rxMu.Lock()
		m.lastRx = time.Now() // the peer resumes: give it the full timeout
		m.rxMu.Unlock()
	}
}

// maxCatchUp bounds how many 20 ms steps one late wake-up runs; further behind, the schedule
// restarts (the frames are lost, as a jitter buffer would skip them).
const maxCatchUp = 5

// pauseAfter is how far the send clock may fall behind the timestamp before the stream counts
// as paused (more than a catch-up makes up for): then the timestamp jumps to the clock.
const pauseAfter = (maxCatchUp + 1) * frameDur

// tick runs the 20 ms steps due at now: a ticker drops ticks when its goroutine wakes late, so
// the steps follow the clock rather than the tick count.
func (m *legMedia) tick(now time.Time) {
	if m.nextTick.IsZero() || now.Sub(m.nextTick) > maxCatchUp*frameDur {
		m.nextTick = now
	}
	for k := 0; k < maxCatchUp && !now.Before(m.nextTick); k++ {
		m.step(now)
		m.nextTick = m.nextTick.Add(frameDur)
	}
}

// eagerSlack is how many frames the packets may fall behind the clock (network jitter, a
// reordered packet) before the clock gives the sink a frame of its own.
const eagerSlack = 2

// step is one 20 ms step of the receive side: the frame the clock owes when the packets are
// behind, DTMF flush, filler, stats, inactivity.
func (m *legMedia) step(now time.Time) {
	m.ticks++
	m.rxMu.Lock()
	m.due++
	if m.delivered > m.due {
		m.due = m.delivered // packets came early or in a burst: the clock follows them
	}
	for m.due > m.delivered+eagerSlack {
		// A concealed frame for a lost packet (then the packets held behind it), or comfort
		// noise or silence while the caller sends nothing.
		if _, err := m.rx.ReadDue(&m.frame); err == nil || m.frame.N > 0 {
			m.deliver()
		} else {
			m.delivered++
		}
		m.deliverReady()
	}
	if m.dtmfOpen && now.Sub(m.dtmfLast) > dtmfFlushAfter {
		m.dtmfOpen = false
		if d, _, ok := m.dtmfRx.Flush(); ok {
			m.deliverDTMF(d)
		}
	}
	if m.ticks%50 == 0 {
		m.checkSRTP() // issue 21
	}
	if m.ticks%10 == 0 {
		st := m.rx.Stats()
		m.statsMu.Lock()
		m.rxStats = st
		m.statsMu.Unlock()
	}
	idle := now.Sub(m.lastRx)
	m.rxMu.Unlock()
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

// deliver gives m.frame to the sink. Callers hold rxMu.
func (m *legMedia) deliver() {
	m.delivered++
	m.rxFrames.Add(1)
	if s := m.sink.Load(); s != nil {
		(*s)(&m.frame)
	}
}

// deliverReady gives the sink every frame whose packet is next in sequence. Callers hold rxMu.
func (m *legMedia) deliverReady() {
	for {
		ok, err := m.rx.ReadNext(&m.frame)
		if !ok {
			return
		}
		if err == nil || m.frame.N > 0 {
			m.deliver()
		} else {
			m.delivered++
		}
	}
}

// onPacket takes one packet on the endpoint's read goroutine: telephone-events to the DTMF
// receiver, audio to the jitter buffer (through the ptime rebuffer when needed), and what is
// now next in sequence straight to the sink.
func (m *legMedia) onPacket(p *media.RTPPacket) {
	if m.closed.Load() {
		return
	}
	m.rxMu.Lock()
	defer m.rxMu.Unlock()
	if m.rx == nil {
		return
	}
	now := p.ReceivedAt
	m.lastRx = now
	m.rxPackets.Add(1)
	switch {
	case int(p.PayloadType) == m.rxDTMFPT:
		m.dtmfLast, m.dtmfOpen = now, true
		if d, _, ok := m.dtmfRx.Push(p.Timestamp, p.Payload); ok {
			m.deliverDTMF(d)
		}
		return
	case p.PayloadType != m.rxInfo.PayloadType || p.ComfortNoise:
		m.rx.Push(p)
	case isSampleCodec(m.rxInfo):
		if len(p.Payload) != 160 || m.rebuf != nil && m.rebuf.active {
			if m.rebuf == nil {
				m.rebuf = new(rebuffer)
			}
			m.rebuf.push(p, m.rx)
		} else {
			m.rx.Push(p)
		}
	default:
		if samples, err := codec.OpusPacketSamples(p.Payload, 48000); err == nil && samples != 960 {
			m.badPtime.Add(1) // only 20 ms Opus packets fit the 20 ms pipeline
			return
		}
		m.rx.Push(p)
	}
	m.deliverReady()
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
	m.statsMu.Lock()
	rs := m.rxStats
	m.statsMu.Unlock()
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
			if m.rx != nil {
				m.rx.Close()
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

// rebuffer cuts G.711 and G.722 packets of any ptime into 20 ms packets (160 bytes) for the
// 20 ms jitter buffer: both codecs carry 8 bytes and 8 timestamp ticks per millisecond, so a
// packet splits anywhere (RFC 3551 §4.5). A gap or reordering drops the partial packet.
type rebuffer struct {
	active bool
	buf    [2 * media.MaxRTPPayload]byte
	n      int
	ts     uint32 // timestamp of buf[0]
	seq    uint16
	ssrc   uint32
	out    media.RTPPacket
}

func (r *rebuffer) reset() { *r = rebuffer{} }

func (r *rebuffer) push(p *media.RTPPacket, rx *media.RTPReceiver) {
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
