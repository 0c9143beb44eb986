package media

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
)

// Errors of the RTP endpoint.
var (
	// ErrEndpointClosed is returned by reads and writes on a closed RTPEndpoint.
	ErrEndpointClosed = errors.New("media: RTP endpoint closed")
	// ErrNoRemote is returned by writes before any remote address is known: none was signalled
	// and no packet has been received to latch onto.
	ErrNoRemote = errors.New("media: RTP endpoint has no remote address yet")
	// ErrInvalidRTPConfig is returned by NewRTPEndpoint for an unusable RTPConfig.
	ErrInvalidRTPConfig = errors.New("media: invalid RTP endpoint config")
)

// Defaults of RTPConfig.
const (
	DefaultInactivityTimeout = 30 * time.Second
	DefaultRTCPInterval      = 5 * time.Second // RFC 3550 §6.2 minimum interval
	DefaultRTPQueueSize      = 16              // 320 ms of 20 ms packets
	DefaultTalkspurtGap      = 60 * time.Millisecond
)

// RTPConfig configures an RTPEndpoint.
type RTPConfig struct {
	// Ports are the bound sockets. Required. The endpoint takes ownership: Close closes them
	// and returns them to their PortAllocator. A nil Ports.RTCP multiplexes RTCP on the RTP
	// socket (RFC 5761).
	Ports *PortPair
	// Remote is the signalled remote RTP address (SDP c= and m=). It may be left zero: the
	// endpoint then sends nothing until it has latched onto the first packet received.
	Remote netip.AddrPort
	// RemoteRTCP is the signalled remote RTCP address (SDP a=rtcp, RFC 3605). Zero means the
	// RTP address with port+1, or the RTP address itself when RTCP is multiplexed.
	RemoteRTCP netip.AddrPort

	// PayloadType is the negotiated RTP payload type of the audio codec (0..127).
	PayloadType uint8
	// ClockRate is the RTP clock rate of that codec in Hz (8000 for G.711; 48000 for Opus).
	// Zero means 8000.
	ClockRate uint32
	// SSRC is the endpoint's synchronization source; zero picks a random one (RFC 3550 §8).
	SSRC uint32
	// CNAME is the RTCP canonical name (RFC 3550 §6.5.1); empty picks a random one.
	CNAME string

	// QueueSize is the capacity of the receive ring in packets. Zero means
	// DefaultRTPQueueSize. When the owner does not drain it in time, packets are dropped and
	// counted in RTPStats.Dropped; the read loop never waits.
	QueueSize int
	// OnPacket, when set, receives every accepted packet on the endpoint's read goroutine as it
	// arrives, instead of the receive ring (ReadPacket and TryReadPacket then find nothing): the
	// owner handles it without a hand-off to another goroutine, so no wake-up and no queueing
	// delay is added. The packet and its payload are valid only during the call; OnPacket must
	// not block and must not call Close.
	OnPacket func(p *RTPPacket)
	// InactivityTimeout is how long without accepted RTP before Inactive is closed. Zero means
	// DefaultInactivityTimeout; negative disables the check.
	InactivityTimeout time.Duration
	// RTCPInterval is the mean interval between RTCP reports, randomized to [0.5, 1.5] times
	// it (RFC 3550 §6.3.1). Zero means DefaultRTCPInterval; negative sends no periodic reports.
	RTCPInterval time.Duration
	// TalkspurtGap: a send that comes more than the previous packet's duration plus this late
	// starts a new talkspurt (marker bit set, timestamp advanced by the elapsed time, RFC 3551
	// §4.1). Zero means DefaultTalkspurtGap.
	TalkspurtGap time.Duration
	// LatchAfter is how many consecutive packets from one source address (with one SSRC) make
	// the endpoint latch onto it before it has latched at all. Zero means 1.
	LatchAfter int
	// RelatchAfter is how many consecutive packets carrying the latched SSRC from a new source
	// address move the latch there (NAT rebinding). Zero means 3.
	RelatchAfter int

	// SRTP, when set, protects the stream (RFC 3711): packets are encrypted and authenticated
	// on the way out, and on the way in a packet that fails authentication is dropped and
	// counted in RTPStats.SRTPFailed. SetSRTP changes it (re-keying). issue 21.
	SRTP *SRTP

	// Logger receives the endpoint's log lines; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests inject a fake one.
	Now func() time.Time
}

// RTPStats is a snapshot of an endpoint's counters and RTCP-derived quality figures.
type RTPStats struct {
	SSRC       uint32 // ours
	RemoteSSRC uint32 // the source we receive, 0 before the first packet
	// PayloadType is the negotiated send payload type; RemotePayloadType the payload type of the
	// last packet received.
	PayloadType       uint8
	RemotePayloadType uint8

	PacketsSent     uint64
	BytesSent       uint64 // payload octets, as in the SR octet count (RFC 3550 §6.4.1)
	PacketsReceived uint64
	BytesReceived   uint64 // payload octets

	// PacketsLost is the cumulative number of packets lost from the remote source (RFC 3550
	// A.3); negative when duplicates arrived. FractionLost is the fraction lost in the last
	// RTCP report interval (0..1). Jitter is the interarrival jitter (A.8).
	PacketsLost  int64
	FractionLost float64
	Jitter       time.Duration
	// RTT is the round-trip time computed from the remote's report on our last SR (§6.4.1);
	// zero until measured.
	RTT time.Duration
	// Remote* are what the remote reported about our stream in its last SR/RR.
	RemotePacketsLost  int64
	RemoteFractionLost float64
	RemoteJitter       time.Duration

	ComfortNoise uint64 // RFC 3389 packets received (delivered flagged)
	Dropped      uint64 // accepted packets dropped because the receive ring was full
	Malformed    uint64 // datagrams that were not valid RTP/RTCP
	SRTPFailed   uint64 // SRTP/SRTCP packets that failed authentication or replay checks (issue 21)
	Ignored      uint64 // packets from unrelated sources after latching
	RTCPSent     uint64
	RTCPReceived uint64

	// Latched is the address RTP is sent to after symmetric-RTP latching; zero until latched.
	Latched   netip.AddrPort
	RemoteBye bool // the remote sent an RTCP BYE
	Inactive  bool // the inactivity timeout fired
}

// RTPEndpoint sends and receives one RTP audio stream over UDP, with RTCP (RFC 3550) and
// symmetric-RTP latching for NAT traversal.
//
// Sending: WriteSample stamps the SSRC (random), the sequence number (random start) and the
// timestamp, and sets the marker bit on the first packet of a talkspurt (RFC 3551 §4.1).
//
// Receiving: a read loop parses each datagram into a reused rtp.Packet and copies accepted
// packets into a bounded ring; the owner drains it with ReadPacket or TryReadPacket. When the ring
// is full the packet is dropped and counted. Comfort noise (RFC 3389) is delivered with
// RTPPacket.ComfortNoise set. Malformed datagrams are counted and ignored.
//
// Latching policy (symmetric RTP, RFC 4961; the "comedia" behaviour of SBCs): before any packet
// arrives, RTP goes to the signalled Remote. Until the endpoint has latched, every valid packet is
// delivered, and LatchAfter consecutive packets from one address with one SSRC latch the endpoint
// onto that address: RTP is then sent there, whatever was signalled. After latching, packets from
// other addresses are ignored and counted, unless they carry the latched SSRC (the remote moved,
// e.g. a NAT rebinding): those are delivered, and RelatchAfter consecutive ones with no packet
// from the latched address in between move the latch. SetRemote (a re-INVITE) clears the latch.
// Each latch logs "rtp latched" with from/to. RTCP is sent to the address RTCP arrives from once
// its sender SSRC matches the latched source ("rtcp latched").
//
// An RTPEndpoint is safe for concurrent use by one writer, one reader and any number of Stats
// callers. Close is idempotent and waits for the endpoint's goroutines.
type RTPEndpoint struct {
	log   *slog.Logger
	now   func() time.Time
	start time.Time // origin of arrival times in RTP units (A.8)

	ports    *PortPair
	rtpConn  *net.UDPConn
	rtcpConn *net.UDPConn // nil when multiplexed
	pt       uint8
	rate     uint32
	cname    string

	inactivityTimeout time.Duration
	rtcpInterval      time.Duration
	talkspurtGap      time.Duration
	latchAfter        int
	relatchAfter      int

	queue    *rtpQueue
	onPacket func(p *RTPPacket)

	// SRTP (issue 21): the contexts in use (nil: plain RTP), the buffers of the protected
	// packet sent (under txMu) and of the packets received (read loops), the failures.
	srtp       atomic.Pointer[SRTP]
	txEnc      []byte
	rxDec      []byte
	rtcpDec    []byte
	rtcpDecMu  sync.Mutex
	srtpFailed atomic.Uint64
	srtpWarned atomic.Bool
	cbPkt      RTPPacket // what onPacket receives, owned by the read loop

	// Destinations. Written by SetRemote and the read loops, read by the writers.
	remote           atomic.Pointer[netip.AddrPort]
	remoteRTCP       atomic.Pointer[netip.AddrPort]
	signalledRTP     netip.AddrPort // guarded by rtcpMu
	signalledRTCP    netip.AddrPort // guarded by rtcpMu
	remoteGeneration atomic.Uint64  // bumped by SetRemote so the read loop resets its latch

	// Send state, guarded by txMu.
	txMu        sync.Mutex
	txPkt       rtp.Packet
	txBuf       []byte
	ssrc        atomic.Uint32 // written under txMu, read anywhere
	seq         uint16
	ts          uint32 // timestamp of the last media packet sent (or the random start)
	sentAny     bool
	lastSendAt  time.Time
	lastTicks   uint32
	forceMarker bool
	pktsSent    uint64
	octetsSent  uint64
	sentSinceRR bool // sent since the previous RTCP report (SR vs RR, §6.4)
	sentPrevRR  bool // sent in the interval before that

	// Latch state, owned by the RTP read loop.
	latched     bool
	latchedAddr netip.AddrPort
	latchedSSRC uint32
	latchGen    uint64
	candAddr    netip.AddrPort
	candSSRC    uint32
	candCount   int
	rxPkt       rtp.Packet
	rxBuf       []byte
	rtcpRxBuf   []byte
	latchedPtr  atomic.Pointer[netip.AddrPort] // published copy of latchedAddr

	// Receive statistics and RTCP-derived figures, guarded by rxMu.
	rxMu               sync.Mutex
	rx                 rtpReception
	remotePT           uint8
	pktsRecv           uint64
	octetsRecv         uint64
	cnRecv             uint64
	rtt                time.Duration
	lastSR             uint32    // middle 32 bits of the NTP time of the remote's last SR
	lastSRAt           time.Time // its arrival
	lastSRSSRC         uint32
	remoteLost         int64
	remoteFraction     uint8
	remoteJitterTicks  uint32
	rtcpSent, rtcpRecv uint64

	malformed     atomic.Uint64
	ignored       atomic.Uint64
	lastRTP       atomic.Int64  // UnixNano of the last accepted RTP packet (endpoint clock)
	checks        atomic.Uint64 // inactivity checks run (tests poll it)
	inactiveFired atomic.Uint64

	rtcpMu sync.Mutex // serializes report building and sending

	// Housekeeping timers (RTCP reports, inactivity), guarded by hkMu.
	hkMu       sync.Mutex
	hkStopped  bool
	rtcpTimer  *time.Timer
	checkTimer *time.Timer

	inactive     chan struct{}
	inactiveOnce sync.Once
	bye          chan struct{}
	byeOnce      sync.Once

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	stopCtx   func() bool
	wg        sync.WaitGroup
}

// NewRTPEndpoint starts an endpoint on cfg.Ports. It stops, as if closed, when ctx is done.
func NewRTPEndpoint(ctx context.Context, cfg RTPConfig) (*RTPEndpoint, error) {
	e, err := newRTPEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	e.wg.Add(1)
	go e.readRTPLoop()
	e.startHousekeeping()
	if e.rtcpConn != nil {
		e.wg.Add(1)
		go e.readRTCPLoop()
	}
	// The context path uses close, not Close: it may run before stopCtx is assigned.
	e.stopCtx = context.AfterFunc(ctx, func() { e.close() })
	return e, nil
}

// queueSize is the receive ring's capacity: one slot when OnPacket takes the packets (the
// ring is then never used; its payload buffers would be memory held for nothing).
func queueSize(cfg RTPConfig) int {
	if cfg.OnPacket != nil {
		return 1
	}
	return cmp0(cfg.QueueSize, DefaultRTPQueueSize)
}

// newRTPEndpoint validates cfg and builds an endpoint without starting its goroutines.
func newRTPEndpoint(cfg RTPConfig) (*RTPEndpoint, error) {
	if cfg.Ports == nil || cfg.Ports.RTP == nil {
		return nil, fmt.Errorf("%w: Ports is required", ErrInvalidRTPConfig)
	}
	if cfg.PayloadType > 127 {
		return nil, fmt.Errorf("%w: payload type %d > 127", ErrInvalidRTPConfig, cfg.PayloadType)
	}
	if cfg.QueueSize < 0 || cfg.LatchAfter < 0 || cfg.RelatchAfter < 0 {
		return nil, fmt.Errorf("%w: negative QueueSize, LatchAfter or RelatchAfter", ErrInvalidRTPConfig)
	}
	e := &RTPEndpoint{
		log:               cfg.Logger,
		now:               cfg.Now,
		ports:             cfg.Ports,
		rtpConn:           cfg.Ports.RTP,
		rtcpConn:          cfg.Ports.RTCP,
		pt:                cfg.PayloadType,
		rate:              cmp0(cfg.ClockRate, 8000),
		cname:             cfg.CNAME,
		inactivityTimeout: cmp0(cfg.InactivityTimeout, DefaultInactivityTimeout),
		rtcpInterval:      cmp0(cfg.RTCPInterval, DefaultRTCPInterval),
		talkspurtGap:      cmp0(cfg.TalkspurtGap, DefaultTalkspurtGap),
		latchAfter:        cmp0(cfg.LatchAfter, 1),
		relatchAfter:      cmp0(cfg.RelatchAfter, 3),
		queue:             newRTPQueue(queueSize(cfg)),
		onPacket:          cfg.OnPacket,
		txBuf:             make([]byte, 12+MaxRTPPayload),
		rxBuf:             make([]byte, 2048),
		rtcpRxBuf:         make([]byte, 2048),
		txEnc:             make([]byte, 12+MaxRTPPayload+srtpOverhead),
		rxDec:             make([]byte, 2048),
		rtcpDec:           make([]byte, 2048),
		seq:               uint16(rand.Uint32()),
		ts:                rand.Uint32(),
		signalledRTCP:     unmapAddrPort(cfg.RemoteRTCP),
		inactive:          make(chan struct{}),
		bye:               make(chan struct{}),
		closing:           make(chan struct{}),
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	ssrc := cfg.SSRC
	for ssrc == 0 {
		ssrc = rand.Uint32()
	}
	e.ssrc.Store(ssrc)
	if e.cname == "" {
		e.cname = fmt.Sprintf("parley-%016x", rand.Uint64())
	}
	e.log = e.log.With("local", e.rtpConn.LocalAddr().String(), "ssrc", ssrc)
	if r := unmapAddrPort(cfg.Remote); r.IsValid() {
		e.remote.Store(&r)
		e.signalledRTP = r
	}
	e.start = e.now()
	e.lastRTP.Store(e.start.UnixNano())
	if cfg.SRTP != nil {
		e.srtp.Store(cfg.SRTP)
	}
	return e, nil
}

func cmp0[T int | uint32 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func unmapAddrPort(a netip.AddrPort) netip.AddrPort {
	if !a.IsValid() {
		return a
	}
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// LocalAddr returns the local RTP address.
func (e *RTPEndpoint) LocalAddr() netip.AddrPort {
	return unmapAddrPort(e.rtpConn.LocalAddr().(*net.UDPAddr).AddrPort())
}

// SSRC returns the endpoint's current synchronization source identifier.
func (e *RTPEndpoint) SSRC() uint32 { return e.ssrc.Load() }

// SetRemote changes the signalled remote addresses (a re-INVITE or UPDATE with new SDP) and
// clears the latch: RTP goes to remote until packets arrive to latch onto again. A zero rtcp
// means remote's port+1 (or remote itself when RTCP is multiplexed).
func (e *RTPEndpoint) SetRemote(remote, rtcp netip.AddrPort) {
	remote, rtcp = unmapAddrPort(remote), unmapAddrPort(rtcp)
	if remote.IsValid() {
		e.remote.Store(&remote)
	} else {
		e.remote.Store(nil)
	}
	e.rtcpMu.Lock()
	e.signalledRTP, e.signalledRTCP = remote, rtcp
	e.rtcpMu.Unlock()
	e.remoteRTCP.Store(nil)
	e.latchedPtr.Store(nil)
	e.remoteGeneration.Add(1)
}

// Inactive is closed, once, when no RTP has been accepted for the inactivity timeout.
func (e *RTPEndpoint) Inactive() <-chan struct{} { return e.inactive }

// RemoteBye is closed, once, when the remote source sends an RTCP BYE (RFC 3550 §6.6).
func (e *RTPEndpoint) RemoteBye() <-chan struct{} { return e.bye }

// Ready receives a value after packets were queued. A consumer that selects on it must then call
// TryReadPacket until it reports false.
func (e *RTPEndpoint) Ready() <-chan struct{} { return e.queue.ready }

// TryReadPacket copies the oldest queued packet into dst without waiting. It reports false when
// none is queued. It allocates nothing once dst.Payload has grown to the payload size.
func (e *RTPEndpoint) TryReadPacket(dst *RTPPacket) bool { return e.queue.pop(dst) }

// ReadPacket waits for the next packet and copies it into dst. It returns ctx.Err() when ctx is
// done, and ErrEndpointClosed once the endpoint is closed and the queue is drained.
func (e *RTPEndpoint) ReadPacket(ctx context.Context, dst *RTPPacket) error {
	for {
		if e.queue.pop(dst) {
			return nil
		}
		select {
		case <-e.queue.ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.closing:
			if e.queue.pop(dst) {
				return nil
			}
			return ErrEndpointClosed
		}
	}
}

// MarkTalkspurt makes the next WriteSample start a talkspurt: it carries the marker bit (RFC 3551
// §4.1). Call it when audio starts after silence that was sent as packets (for example when the
// agent starts speaking while the pacer was sending silence).
func (e *RTPEndpoint) MarkTalkspurt() {
	e.txMu.Lock()
	e.forceMarker = true
	e.txMu.Unlock()
}

// WriteSample sends payload, encoded with the negotiated payload type, covering ticks units of the
// RTP clock (160 for 20 ms of G.711). The timestamp advances by the previous packet's ticks;
// after a pause (a send more than the previous packet's duration plus TalkspurtGap late) it
// advances by the elapsed time instead and the packet carries the marker bit, as does the very
// first packet. It allocates nothing.
func (e *RTPEndpoint) WriteSample(payload []byte, ticks uint32) error {
	e.txMu.Lock()
	defer e.txMu.Unlock()
	now := e.now()
	marker := e.forceMarker || !e.sentAny
	ts := e.ts
	if e.sentAny {
		ts += e.lastTicks
		gap := now.Sub(e.lastSendAt)
		if gap > e.ticksToDuration(e.lastTicks)+e.talkspurtGap {
			// RFC 3550 §5.1: the timestamp follows the sampling clock through the pause.
			if elapsed := e.durationToTicks(gap); elapsed > e.lastTicks {
				ts = e.ts + elapsed
			}
			marker = true
		}
	}
	attempted, err := e.writeLocked(e.pt, marker, ts, payload)
	if attempted {
		// A packet the network refused is lost, not unsent: the media clock moves on.
		e.ts = ts
		e.sentAny = true
		e.forceMarker = false
		e.lastSendAt = now
		e.lastTicks = ticks
	}
	return err
}

// WriteRTP sends payload with an explicit payload type, marker and timestamp: for RFC 4733
// telephone-events, which repeat the event's start timestamp (take it from TimestampNow). The
// endpoint still stamps the SSRC and sequence number. The media timestamp of WriteSample is not
// touched, so audio resuming after an event continues on the sampling clock.
func (e *RTPEndpoint) WriteRTP(pt uint8, marker bool, timestamp uint32, payload []byte) error {
	if pt > 127 {
		return fmt.Errorf("media: RTP payload type %d > 127", pt)
	}
	e.txMu.Lock()
	defer e.txMu.Unlock()
	_, err := e.writeLocked(pt, marker, timestamp, payload)
	return err
}

// TimestampNow returns the RTP timestamp of the current instant on the endpoint's media clock.
func (e *RTPEndpoint) TimestampNow() uint32 {
	e.txMu.Lock()
	defer e.txMu.Unlock()
	return e.timestampAtLocked(e.now())
}

func (e *RTPEndpoint) timestampAtLocked(now time.Time) uint32 {
	if !e.sentAny {
		return e.ts
	}
	return e.ts + e.durationToTicks(now.Sub(e.lastSendAt))
}

// writeLocked stamps and sends one packet. attempted reports whether it was handed to the
// socket (its sequence number is then used up, even when the send failed). Callers hold txMu.
func (e *RTPEndpoint) writeLocked(pt uint8, marker bool, ts uint32, payload []byte) (attempted bool, err error) {
	select {
	case <-e.closing:
		return false, ErrEndpointClosed
	default:
	}
	if len(payload) > MaxRTPPayload {
		return false, fmt.Errorf("media: RTP payload of %d bytes > %d", len(payload), MaxRTPPayload)
	}
	dst := e.remote.Load()
	if dst == nil {
		return false, ErrNoRemote
	}
	e.txPkt.Header = rtp.Header{
		Version:        2,
		Marker:         marker,
		PayloadType:    pt,
		SequenceNumber: e.seq,
		Timestamp:      ts,
		SSRC:           e.ssrc.Load(),
		CSRC:           e.txPkt.CSRC[:0],
		Extensions:     e.txPkt.Extensions[:0],
	}
	e.txPkt.Payload = payload
	n, err := e.txPkt.MarshalTo(e.txBuf)
	e.txPkt.Payload = nil
	if err != nil {
		return false, fmt.Errorf("media: marshal RTP: %w", err)
	}
	e.seq++
	out := e.txBuf[:n]
	if s := e.srtp.Load(); s != nil {
		enc, err := s.protectRTP(e.txEnc[:0], out, &e.txPkt.Header)
		if err != nil {
			return true, fmt.Errorf("media: SRTP protect: %w", err)
		}
		out = enc
	}
	if _, err := e.rtpConn.WriteToUDPAddrPort(out, *dst); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return false, ErrEndpointClosed
		}
		return true, fmt.Errorf("media: send RTP to %s: %w", dst, err)
	}
	e.pktsSent++
	e.octetsSent += uint64(len(payload))
	e.sentSinceRR = true
	return true, nil
}

func (e *RTPEndpoint) durationToTicks(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	r := uint64(e.rate)
	return uint32(uint64(d/time.Second)*r + uint64(d%time.Second)*r/uint64(time.Second))
}

func (e *RTPEndpoint) ticksToDuration(t uint32) time.Duration {
	return time.Duration(uint64(t) * uint64(time.Second) / uint64(e.rate))
}

// readRTPLoop reads the RTP socket until it is closed. It never waits on the consumer.
//
// It reads one datagram per recvfrom (ReadFromUDPAddrPort), not in batches with recvmmsg
// (x/net/ipv4 ReadBatch): with one socket per call a queue rarely holds more than one packet,
// and BenchmarkUDPFlows500 (udpbatch_test.go) measured the plain path at ~210k packets per
// CPU-second with 0 allocations against ~160k and 2 allocations per packet batched at that depth;
// at depth 4 the two were even.
func (e *RTPEndpoint) readRTPLoop() {
	defer e.wg.Done()
	for {
		n, from, err := e.rtpConn.ReadFromUDPAddrPort(e.rxBuf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-e.closing:
				return
			default:
			}
			continue // a transient error (e.g. ICMP-induced); the next read decides
		}
		buf := e.rxBuf[:n]
		if n == len(e.rxBuf) {
			e.malformed.Add(1) // truncated: larger than any packet we accept
			continue
		}
		if e.rtcpConn == nil && isRTCP(buf) {
			e.handleRTCP(buf, unmapAddrPort(from))
			continue
		}
		e.handleRTP(buf, unmapAddrPort(from))
	}
}

func (e *RTPEndpoint) handleRTP(buf []byte, from netip.AddrPort) {
	if s := e.srtp.Load(); s != nil {
		if len(buf) < minSRTP {
			e.malformed.Add(1)
			return
		}
		dec, err := s.unprotectRTP(e.rxDec[:0], buf, &e.rxPkt.Header)
		if err != nil {
			e.srtpFail("srtp", err)
			return
		}
		buf = dec
	}
	if err := parseRTP(buf, &e.rxPkt); err != nil {
		e.malformed.Add(1)
		return
	}
	h := &e.rxPkt.Header
	if !e.accept(from, h.SSRC) {
		e.ignored.Add(1)
		return
	}
	now := e.now()
	e.lastRTP.Store(now.UnixNano())

	e.rxMu.Lock()
	if !e.rx.started || e.rx.ssrc != h.SSRC {
		e.rx.reset(h.SSRC, h.SequenceNumber)
	}
	e.rx.updateSeq(h.SequenceNumber)
	if h.PayloadType == e.pt || h.PayloadType == PayloadTypeCN {
		e.rx.updateJitter(e.durationToTicks(now.Sub(e.start)), h.Timestamp)
	}
	e.remotePT = h.PayloadType
	e.pktsRecv++
	e.octetsRecv += uint64(len(e.rxPkt.Payload))
	if h.PayloadType == PayloadTypeCN {
		e.cnRecv++
	}
	e.rxMu.Unlock()

	if h.SSRC == e.ssrc.Load() {
		e.resolveCollision(h.SSRC)
	}
	if e.onPacket != nil {
		c := &e.cbPkt
		c.PayloadType, c.Marker, c.SequenceNumber = h.PayloadType, h.Marker, h.SequenceNumber
		c.Timestamp, c.SSRC, c.ComfortNoise = h.Timestamp, h.SSRC, h.PayloadType == PayloadTypeCN
		c.Payload, c.ReceivedAt = e.rxPkt.Payload, now
		e.onPacket(c)
		c.Payload = nil
		return
	}
	e.queue.push(&e.rxPkt, now)
}

// accept applies the latching policy documented on RTPEndpoint. It runs on the read loop only.
func (e *RTPEndpoint) accept(from netip.AddrPort, ssrc uint32) bool {
	if g := e.remoteGeneration.Load(); g != e.latchGen {
		e.latchGen = g
		e.latched = false
		e.candCount = 0
	}
	switch {
	case e.latched && from == e.latchedAddr:
		e.candCount = 0
		e.latchedSSRC = ssrc // the same address may restart with a new SSRC
		return true
	case !e.latched:
		e.observe(from, ssrc, e.latchAfter)
		return true
	case ssrc == e.latchedSSRC:
		e.observe(from, ssrc, e.relatchAfter)
		return true
	default:
		return false
	}
}

func (e *RTPEndpoint) observe(from netip.AddrPort, ssrc uint32, need int) {
	if e.candCount > 0 && from == e.candAddr && ssrc == e.candSSRC {
		e.candCount++
	} else {
		e.candAddr, e.candSSRC, e.candCount = from, ssrc, 1
	}
	if e.candCount < need {
		return
	}
	var prev netip.AddrPort
	if p := e.remote.Load(); p != nil {
		prev = *p
	}
	e.latched, e.latchedAddr, e.latchedSSRC, e.candCount = true, from, ssrc, 0
	to := from
	e.remote.Store(&to)
	published := from
	e.latchedPtr.Store(&published)
	e.log.Info("rtp latched", "from", prev.String(), "to", from.String(), "remote_ssrc", ssrc)
}

// resolveCollision picks a new SSRC when the remote uses ours (RFC 3550 §8.2).
func (e *RTPEndpoint) resolveCollision(remote uint32) {
	e.txMu.Lock()
	old, ssrc := e.ssrc.Load(), e.ssrc.Load()
	for ssrc == remote || ssrc == 0 {
		ssrc = rand.Uint32()
	}
	e.ssrc.Store(ssrc)
	e.txMu.Unlock()
	e.log.Warn("rtp ssrc collision", "old_ssrc", old, "new_ssrc", ssrc)
}

// startHousekeeping arms the periodic RTCP report and the inactivity check as timers that run
// their work when they fire: an endpoint keeps no goroutine waiting for them (a call has enough
// goroutines already; each holds a stack).
func (e *RTPEndpoint) startHousekeeping() {
	e.hkMu.Lock()
	defer e.hkMu.Unlock()
	if e.rtcpInterval > 0 {
		e.rtcpTimer = time.AfterFunc(e.nextRTCPDelay(), e.rtcpDue)
	}
	if e.inactivityTimeout > 0 {
		e.checkTimer = time.AfterFunc(e.checkPeriod(), e.checkDue)
	}
}

// stopHousekeeping stops the timers; once it returns, none of their work runs again.
func (e *RTPEndpoint) stopHousekeeping() {
	e.hkMu.Lock()
	defer e.hkMu.Unlock()
	e.hkStopped = true
	if e.rtcpTimer != nil {
		e.rtcpTimer.Stop()
	}
	if e.checkTimer != nil {
		e.checkTimer.Stop()
	}
}

// rtcpDue sends a periodic report and schedules the next.
func (e *RTPEndpoint) rtcpDue() {
	e.hkMu.Lock()
	defer e.hkMu.Unlock()
	if e.hkStopped {
		return
	}
	if err := e.sendReport(false); err != nil && !errors.Is(err, ErrNoRemote) {
		e.log.Debug("rtcp report not sent", "err", err)
	}
	e.rtcpTimer.Reset(e.nextRTCPDelay())
}

// checkDue checks for inactivity, until it has been reported once.
func (e *RTPEndpoint) checkDue() {
	e.hkMu.Lock()
	defer e.hkMu.Unlock()
	if e.hkStopped {
		return
	}
	if !e.checkInactivity() {
		e.checkTimer.Reset(e.checkPeriod())
	}
}

// checkPeriod is how often inactivity is checked: a quarter of the timeout, within [10ms, 1s].
func (e *RTPEndpoint) checkPeriod() time.Duration {
	return min(max(e.inactivityTimeout/4, 10*time.Millisecond), time.Second)
}

func (e *RTPEndpoint) nextRTCPDelay() time.Duration {
	// RFC 3550 §6.3.1: randomize to [0.5, 1.5] times the interval to avoid synchronization.
	return e.rtcpInterval/2 + rand.N(e.rtcpInterval)
}

func (e *RTPEndpoint) isInactive() bool {
	select {
	case <-e.inactive:
		return true
	default:
		return false
	}
}

// checkInactivity closes Inactive once no RTP was accepted for the timeout; it reports whether
// that has happened.
func (e *RTPEndpoint) checkInactivity() bool {
	e.checks.Add(1)
	idle := e.now().Sub(time.Unix(0, e.lastRTP.Load()))
	if idle < e.inactivityTimeout {
		return false
	}
	e.inactiveOnce.Do(func() {
		e.inactiveFired.Add(1)
		e.log.Info("rtp inactive", "idle", idle.String(), "timeout", e.inactivityTimeout.String())
		close(e.inactive)
	})
	return true
}

// Stats returns a snapshot of the endpoint's statistics.
func (e *RTPEndpoint) Stats() RTPStats {
	var s RTPStats
	e.txMu.Lock()
	s.SSRC = e.ssrc.Load()
	s.PacketsSent = e.pktsSent
	s.BytesSent = e.octetsSent
	e.txMu.Unlock()

	e.rxMu.Lock()
	s.PayloadType = e.pt
	s.RemotePayloadType = e.remotePT
	s.PacketsReceived = e.pktsRecv
	s.BytesReceived = e.octetsRecv
	if e.rx.started {
		s.RemoteSSRC = e.rx.ssrc
		s.PacketsLost = e.rx.cumulativeLost()
		s.FractionLost = float64(e.rx.fraction) / 256
		s.Jitter = e.ticksToDuration(e.rx.jitterTicks())
	}
	s.RTT = e.rtt
	s.RemotePacketsLost = e.remoteLost
	s.RemoteFractionLost = float64(e.remoteFraction) / 256
	s.RemoteJitter = e.ticksToDuration(e.remoteJitterTicks)
	s.ComfortNoise = e.cnRecv
	s.RTCPSent = e.rtcpSent
	s.RTCPReceived = e.rtcpRecv
	e.rxMu.Unlock()

	s.Dropped = e.queue.dropped.Load()
	s.Malformed = e.malformed.Load()
	s.SRTPFailed = e.srtpFailed.Load()
	s.Ignored = e.ignored.Load()
	if p := e.latchedPtr.Load(); p != nil {
		s.Latched = *p
	}
	select {
	case <-e.bye:
		s.RemoteBye = true
	default:
	}
	s.Inactive = e.isInactive()
	return s
}

// Close sends a final RTCP report with a BYE (RFC 3550 §6.6) if the endpoint took part in the
// session, closes the sockets (returning them to their allocator) and waits for the endpoint's
// goroutines. It is idempotent.
func (e *RTPEndpoint) Close() error {
	if e.stopCtx != nil {
		e.stopCtx()
	}
	return e.close()
}

func (e *RTPEndpoint) close() error {
	e.closeOnce.Do(func() {
		e.stopHousekeeping()
		if err := e.sendReport(true); err != nil && !errors.Is(err, ErrNoRemote) {
			e.log.Debug("rtcp bye not sent", "err", err)
		}
		close(e.closing)
		e.closeErr = e.ports.Close()
	})
	e.wg.Wait()
	return e.closeErr
}
