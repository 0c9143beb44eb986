package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/mediatest"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// ---- helpers shared by the media tests ----

// newRTPTestClock returns a manual clock for an endpoint's Now.
func newRTPTestClock() *mediatest.Clock {
	return mediatest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
}

// rtpWaitFor polls cond until it holds or a 5 s deadline passes.
func rtpWaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling interval, not a wait for an event
	}
}

func rtpListen(tb testing.TB) *net.UDPConn {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func rtpAddrOf(c *net.UDPConn) netip.AddrPort {
	return unmapAddrPort(c.LocalAddr().(*net.UDPAddr).AddrPort())
}

func rtpLoopbackAddr(port uint16) netip.AddrPort { return netip.AddrPortFrom(rtpLoopback, port) }

// rtpTestPorts returns an RTP and an RTCP socket on 127.0.0.1 with ports from the OS.
func rtpTestPorts(tb testing.TB) *PortPair {
	tb.Helper()
	return NewPortPair(rtpListen(tb), rtpListen(tb))
}

var rtpDiscardLog = slog.New(slog.DiscardHandler)

// rtpLogBuffer collects log output from several goroutines.
type rtpLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *rtpLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *rtpLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newRTPTestEndpoint(tb testing.TB, cfg RTPConfig) *RTPEndpoint {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = rtpDiscardLog
	}
	e, err := NewRTPEndpoint(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

// rtpEndpointPair returns two endpoints on 127.0.0.1 signalled to each other.
func rtpEndpointPair(tb testing.TB, edit func(a, b *RTPConfig)) (*RTPEndpoint, *RTPEndpoint) {
	tb.Helper()
	pa, pb := rtpTestPorts(tb), rtpTestPorts(tb)
	ca := RTPConfig{Ports: pa, Remote: rtpAddrOf(pb.RTP), RemoteRTCP: rtpAddrOf(pb.RTCP), SSRC: 0xa0a0a0a0}
	cb := RTPConfig{Ports: pb, Remote: rtpAddrOf(pa.RTP), RemoteRTCP: rtpAddrOf(pa.RTCP), SSRC: 0xb0b0b0b0}
	if edit != nil {
		edit(&ca, &cb)
	}
	return newRTPTestEndpoint(tb, ca), newRTPTestEndpoint(tb, cb)
}

func rtpRead(tb testing.TB, e *RTPEndpoint) RTPPacket {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p RTPPacket
	if err := e.ReadPacket(ctx, &p); err != nil {
		tb.Fatalf("ReadPacket: %v", err)
	}
	return p
}

// rtpReadRaw reads one datagram from c with a 5 s bound.
func rtpReadRaw(tb testing.TB, c *net.UDPConn) ([]byte, netip.AddrPort) {
	tb.Helper()
	buf := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		tb.Fatalf("read from %s: %v", c.LocalAddr(), err)
	}
	return buf[:n], unmapAddrPort(from)
}

func rtpReadRawRTP(tb testing.TB, c *net.UDPConn) rtp.Packet {
	tb.Helper()
	b, _ := rtpReadRaw(tb, c)
	var p rtp.Packet
	if err := p.Unmarshal(b); err != nil {
		tb.Fatalf("not RTP: %v", err)
	}
	return p
}

func rtpReadRawRTCP(tb testing.TB, c *net.UDPConn) []rtcp.Packet {
	tb.Helper()
	b, _ := rtpReadRaw(tb, c)
	pkts, err := rtcp.Unmarshal(b)
	if err != nil {
		tb.Fatalf("not RTCP: %v", err)
	}
	return pkts
}

func rtpSendRaw(tb testing.TB, c *net.UDPConn, to netip.AddrPort, b []byte) {
	tb.Helper()
	if _, err := c.WriteToUDPAddrPort(b, to); err != nil {
		tb.Fatal(err)
	}
}

func rtpRaw(tb testing.TB, pt uint8, seq uint16, ts, ssrc uint32, payload []byte) []byte {
	tb.Helper()
	p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: pt, SequenceNumber: seq, Timestamp: ts, SSRC: ssrc}, Payload: payload}
	b, err := p.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// rtpIdleEndpoint builds an endpoint whose goroutines are not running, so tests can call its
// handlers directly.
func rtpIdleEndpoint(tb testing.TB) *RTPEndpoint {
	tb.Helper()
	e, err := newRTPEndpoint(RTPConfig{Ports: rtpTestPorts(tb), Logger: rtpDiscardLog})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// rtpRelay forwards datagrams to target from its own socket, and replies back to the last
// sender: a NAT as seen from target, which can also drop packets.
type rtpRelay struct {
	in, out *net.UDPConn
	last    atomic.Pointer[netip.AddrPort]
	wg      sync.WaitGroup
}

func newRTPRelay(tb testing.TB, target netip.AddrPort, drop func([]byte) bool) *rtpRelay {
	tb.Helper()
	r := &rtpRelay{in: rtpListen(tb), out: rtpListen(tb)}
	r.wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := r.in.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			r.last.Store(&from)
			if drop != nil && drop(buf[:n]) {
				continue
			}
			r.out.WriteToUDPAddrPort(buf[:n], target)
		}
	})
	r.wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := r.out.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if to := r.last.Load(); to != nil {
				r.in.WriteToUDPAddrPort(buf[:n], *to)
			}
		}
	})
	tb.Cleanup(func() { r.in.Close(); r.out.Close(); r.wg.Wait() })
	return r
}

// ---- tests ----

func TestRTPEndpointConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  RTPConfig
	}{
		{"no ports", RTPConfig{}},
		{"payload type", RTPConfig{Ports: rtpTestPorts(t), PayloadType: 128}},
		{"negative queue", RTPConfig{Ports: rtpTestPorts(t), QueueSize: -1}},
	}
	for _, tt := range tests {
		if _, err := NewRTPEndpoint(context.Background(), tt.cfg); !errors.Is(err, ErrInvalidRTPConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidRTPConfig", tt.name, err)
		}
	}
}

func TestRTPEndpointExchange(t *testing.T) {
	a, b := rtpEndpointPair(t, nil)
	const n = 50
	payload := make([]byte, 160)
	var first RTPPacket
	for i := range n {
		payload[0] = byte(i)
		if err := a.WriteSample(payload, 160); err != nil {
			t.Fatal(err)
		}
		p := rtpRead(t, b)
		if i == 0 {
			first = p
			first.Payload = nil
		}
		if p.SSRC != a.SSRC() || p.PayloadType != 0 || len(p.Payload) != 160 || p.Payload[0] != byte(i) {
			t.Fatalf("packet %d: ssrc %#x pt %d len %d first byte %d", i, p.SSRC, p.PayloadType, len(p.Payload), p.Payload[0])
		}
		if p.SequenceNumber != first.SequenceNumber+uint16(i) {
			t.Fatalf("packet %d: seq %d, want %d", i, p.SequenceNumber, first.SequenceNumber+uint16(i))
		}
		if p.Timestamp != first.Timestamp+uint32(160*i) {
			t.Fatalf("packet %d: ts %d, want %d", i, p.Timestamp, first.Timestamp+uint32(160*i))
		}
		if p.Marker != (i == 0) {
			t.Fatalf("packet %d: marker %v, want %v", i, p.Marker, i == 0)
		}
		if p.ComfortNoise {
			t.Fatalf("packet %d flagged as comfort noise", i)
		}
	}
	// And back.
	if err := b.WriteSample([]byte{1, 2, 3}, 3); err != nil {
		t.Fatal(err)
	}
	if p := rtpRead(t, a); p.SSRC != b.SSRC() || !bytes.Equal(p.Payload, []byte{1, 2, 3}) || !p.Marker {
		t.Fatalf("B→A packet = %+v", p)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.PacketsSent != n || sa.BytesSent != n*160 || sb.PacketsReceived != n || sb.BytesReceived != n*160 {
		t.Fatalf("stats A %+v B %+v", sa, sb)
	}
	if sb.RemoteSSRC != a.SSRC() || sb.PacketsLost != 0 || sb.Latched != rtpAddrOf(a.ports.RTP) {
		t.Fatalf("B stats: remote ssrc %#x lost %d latched %v", sb.RemoteSSRC, sb.PacketsLost, sb.Latched)
	}
}

func TestRTPEndpointRandomStart(t *testing.T) {
	// Two endpoints with SSRC 0 pick different random SSRCs, sequence numbers and timestamps.
	a := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t)})
	b := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t)})
	if a.SSRC() == 0 || a.SSRC() == b.SSRC() {
		t.Fatalf("SSRCs %#x and %#x", a.SSRC(), b.SSRC())
	}
	if a.seq == b.seq && a.ts == b.ts {
		t.Fatalf("same random start seq %d ts %d", a.seq, a.ts)
	}
}

func TestRTPEndpointTalkspurtMarkerAndTimestamps(t *testing.T) {
	clk := newRTPTestClock()
	peer := rtpListen(t)
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), Remote: rtpAddrOf(peer), Now: clk.Now, RTCPInterval: -1})
	frame := make([]byte, 160)

	send := func() rtp.Packet {
		t.Helper()
		if err := e.WriteSample(frame, 160); err != nil {
			t.Fatal(err)
		}
		return rtpReadRawRTP(t, peer)
	}
	p0 := send()
	if !p0.Marker || p0.Version != 2 || p0.SSRC != e.SSRC() || p0.PayloadType != 0 {
		t.Fatalf("first packet header %+v", p0.Header)
	}
	clk.Advance(20 * time.Millisecond)
	p1 := send()
	if p1.Marker || p1.Timestamp != p0.Timestamp+160 || p1.SequenceNumber != p0.SequenceNumber+1 {
		t.Fatalf("steady packet %+v after %+v", p1.Header, p0.Header)
	}
	// A late but not paused packet (pacer jitter) keeps the timestamp contiguous.
	clk.Advance(20*time.Millisecond + DefaultTalkspurtGap)
	p2 := send()
	if p2.Marker || p2.Timestamp != p1.Timestamp+160 {
		t.Fatalf("jittered packet %+v", p2.Header)
	}
	// A pause: nothing sent for 500 ms. The next packet starts a talkspurt and its timestamp
	// follows the sampling clock (RFC 3550 §5.1).
	clk.Advance(500 * time.Millisecond)
	p3 := send()
	if !p3.Marker || p3.Timestamp != p2.Timestamp+4000 || p3.SequenceNumber != p2.SequenceNumber+1 {
		t.Fatalf("after pause %+v, want marker, ts %d", p3.Header, p2.Timestamp+4000)
	}
	// Explicit talkspurt start while silence was being sent.
	clk.Advance(20 * time.Millisecond)
	e.MarkTalkspurt()
	p4 := send()
	if !p4.Marker || p4.Timestamp != p3.Timestamp+160 {
		t.Fatalf("marked talkspurt %+v", p4.Header)
	}
	// An RFC 4733 event: explicit PT and timestamp, sequence continues, media clock untouched.
	clk.Advance(20 * time.Millisecond)
	evTS := e.TimestampNow()
	if evTS != p4.Timestamp+160 {
		t.Fatalf("TimestampNow = %d, want %d", evTS, p4.Timestamp+160)
	}
	for i := range 3 {
		if err := e.WriteRTP(101, i == 0, evTS, []byte{5, 0, 0, byte(i)}); err != nil {
			t.Fatal(err)
		}
		ev := rtpReadRawRTP(t, peer)
		if ev.PayloadType != 101 || ev.Timestamp != evTS || ev.Marker != (i == 0) || ev.SequenceNumber != p4.SequenceNumber+1+uint16(i) {
			t.Fatalf("event packet %d: %+v", i, ev.Header)
		}
		clk.Advance(50 * time.Millisecond)
	}
	// Audio resumes 150 ms after p4's successor slot: a pause, so a new talkspurt.
	p5 := send()
	if !p5.Marker || p5.Timestamp != p4.Timestamp+8*170 || p5.SequenceNumber != p4.SequenceNumber+4 {
		t.Fatalf("audio after event %+v, want ts %d", p5.Header, p4.Timestamp+8*170)
	}
	if err := e.WriteRTP(128, false, 0, nil); err == nil {
		t.Fatal("WriteRTP accepted payload type 128")
	}
	if err := e.WriteSample(make([]byte, MaxRTPPayload+1), 160); err == nil {
		t.Fatal("WriteSample accepted an oversized payload")
	}
}

func TestRTPEndpointSendFailureKeepsClock(t *testing.T) {
	clk := newRTPTestClock()
	peer := rtpListen(t)
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), Remote: rtpAddrOf(peer), Now: clk.Now, RTCPInterval: -1})
	frame := make([]byte, 160)
	if err := e.WriteSample(frame, 160); err != nil {
		t.Fatal(err)
	}
	p0 := rtpReadRawRTP(t, peer)
	// The network refuses the next packet (an IPv6 destination on an IPv4 socket).
	e.SetRemote(netip.MustParseAddrPort("[::1]:9"), netip.AddrPort{})
	clk.Advance(20 * time.Millisecond)
	if err := e.WriteSample(frame, 160); err == nil {
		t.Fatal("send to an IPv6 address on a udp4 socket succeeded")
	}
	e.SetRemote(rtpAddrOf(peer), netip.AddrPort{})
	clk.Advance(20 * time.Millisecond)
	if err := e.WriteSample(frame, 160); err != nil {
		t.Fatal(err)
	}
	p2 := rtpReadRawRTP(t, peer)
	if p2.SequenceNumber != p0.SequenceNumber+2 || p2.Timestamp != p0.Timestamp+320 || p2.Marker {
		t.Fatalf("after a failed send: %+v, want seq %d ts %d: the lost packet keeps its slot",
			p2.Header, p0.SequenceNumber+2, p0.Timestamp+320)
	}
	if s := e.Stats(); s.PacketsSent != 2 {
		t.Fatalf("PacketsSent = %d, want 2", s.PacketsSent)
	}
}

func TestRTPEndpointNoRemote(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t)})
	if err := e.WriteSample([]byte{1}, 160); !errors.Is(err, ErrNoRemote) {
		t.Fatalf("WriteSample without remote = %v, want ErrNoRemote", err)
	}
	// A packet arrives: the endpoint latches and can answer.
	peer := rtpListen(t)
	rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, 1, 1, 77, []byte{1}))
	rtpRead(t, e)
	if err := e.WriteSample([]byte{1}, 160); err != nil {
		t.Fatal(err)
	}
	if p := rtpReadRawRTP(t, peer); p.SSRC != e.SSRC() {
		t.Fatalf("reply %+v", p.Header)
	}
}

func TestRTPEndpointLatching(t *testing.T) {
	logs := &rtpLogBuffer{}
	signalled := rtpListen(t) // the address in the SDP, e.g. a private address behind NAT
	e := newRTPTestEndpoint(t, RTPConfig{
		Ports:  rtpTestPorts(t),
		Remote: rtpAddrOf(signalled),
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	frame := []byte{0xff, 0xff}
	if err := e.WriteSample(frame, 160); err != nil {
		t.Fatal(err)
	}
	rtpReadRawRTP(t, signalled) // before any packet: the signalled address

	// Media arrives from the NAT's public mapping, not from the signalled address.
	nat1 := rtpListen(t)
	const ssrc = 0x1111
	rtpSendRaw(t, nat1, e.LocalAddr(), rtpRaw(t, 0, 1, 160, ssrc, frame))
	if p := rtpRead(t, e); p.SequenceNumber != 1 {
		t.Fatalf("first packet %+v", p)
	}
	if got := e.Stats().Latched; got != rtpAddrOf(nat1) {
		t.Fatalf("latched to %v, want %v", got, rtpAddrOf(nat1))
	}
	wantLog := fmt.Sprintf("from=%s to=%s", rtpAddrOf(signalled), rtpAddrOf(nat1))
	if !strings.Contains(logs.String(), `msg="rtp latched"`) || !strings.Contains(logs.String(), wantLog) {
		t.Fatalf("log lacks %q:\n%s", wantLog, logs.String())
	}
	if err := e.WriteSample(frame, 160); err != nil {
		t.Fatal(err)
	}
	if p := rtpReadRawRTP(t, nat1); p.SSRC != e.SSRC() {
		t.Fatalf("after latching, got %+v at the NAT address", p.Header)
	}

	// An unrelated source is ignored after latching.
	stranger := rtpListen(t)
	rtpSendRaw(t, stranger, e.LocalAddr(), rtpRaw(t, 0, 9, 9, 0x2222, frame))
	rtpWaitFor(t, "stranger ignored", func() bool { return e.Stats().Ignored == 1 })
	var p RTPPacket
	if e.TryReadPacket(&p) {
		t.Fatalf("packet from an unrelated source delivered: %+v", p)
	}

	// The remote moves (NAT rebinding): same SSRC, new address. Its packets are delivered; the
	// latch moves after 3 consecutive ones with none from the latched address in between.
	nat2 := rtpListen(t)
	rtpSendRaw(t, nat2, e.LocalAddr(), rtpRaw(t, 0, 2, 320, ssrc, frame))
	rtpRead(t, e)
	rtpSendRaw(t, nat1, e.LocalAddr(), rtpRaw(t, 0, 3, 480, ssrc, frame)) // resets the count
	rtpRead(t, e)
	rtpSendRaw(t, nat2, e.LocalAddr(), rtpRaw(t, 0, 4, 640, ssrc, frame))
	rtpRead(t, e)
	rtpSendRaw(t, nat2, e.LocalAddr(), rtpRaw(t, 0, 5, 800, ssrc, frame))
	rtpRead(t, e)
	if got := e.Stats().Latched; got != rtpAddrOf(nat1) {
		t.Fatalf("latch moved to %v after 2 packets", got)
	}
	rtpSendRaw(t, nat2, e.LocalAddr(), rtpRaw(t, 0, 6, 960, ssrc, frame))
	rtpRead(t, e)
	if got := e.Stats().Latched; got != rtpAddrOf(nat2) {
		t.Fatalf("latched to %v, want %v after 3 packets", got, rtpAddrOf(nat2))
	}
	if err := e.WriteSample(frame, 160); err != nil {
		t.Fatal(err)
	}
	rtpReadRawRTP(t, nat2)
	if !strings.Contains(logs.String(), fmt.Sprintf("from=%s to=%s", rtpAddrOf(nat1), rtpAddrOf(nat2))) {
		t.Fatalf("no log line for the re-latch:\n%s", logs.String())
	}
	if s := e.Stats(); s.Ignored != 1 || s.PacketsReceived != 6 {
		t.Fatalf("stats %+v", s)
	}

	// A re-INVITE with a new address clears the latch.
	e.SetRemote(rtpAddrOf(signalled), netip.AddrPort{})
	if got := e.Stats().Latched; got.IsValid() {
		t.Fatalf("still latched to %v after SetRemote", got)
	}
	if err := e.WriteSample(frame, 160); err != nil {
		t.Fatal(err)
	}
	rtpReadRawRTP(t, signalled)
}

func TestRTPEndpointLatchAfterN(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), LatchAfter: 2})
	a, b := rtpListen(t), rtpListen(t)
	rtpSendRaw(t, a, e.LocalAddr(), rtpRaw(t, 0, 1, 0, 1, nil))
	rtpRead(t, e)
	rtpSendRaw(t, b, e.LocalAddr(), rtpRaw(t, 0, 1, 0, 2, nil)) // another source before latching: delivered
	rtpRead(t, e)
	if e.Stats().Latched.IsValid() {
		t.Fatal("latched before 2 consecutive packets")
	}
	rtpSendRaw(t, b, e.LocalAddr(), rtpRaw(t, 0, 2, 160, 2, nil))
	rtpRead(t, e)
	if got := e.Stats().Latched; got != rtpAddrOf(b) {
		t.Fatalf("latched to %v, want %v", got, rtpAddrOf(b))
	}
}

// TestRTPEndpointRTCPLossAndRTT runs A → lossy NAT → B with injected clocks, then an SR from A
// and an RR from B, and checks loss, fraction lost, jitter, LSR/DLSR and the RTT A computes.
func TestRTPEndpointRTCPLossAndRTT(t *testing.T) {
	ca, cb := newRTPTestClock(), newRTPTestClock()
	pa, pb := rtpTestPorts(t), rtpTestPorts(t)
	relay := newRTPRelay(t, rtpAddrOf(pb.RTP), func(b []byte) bool {
		var p rtp.Packet
		return p.Unmarshal(b) == nil && p.SequenceNumber%10 == 3 // drop 10 %
	})
	a := newRTPTestEndpoint(t, RTPConfig{Ports: pa, Remote: rtpAddrOf(relay.in), RemoteRTCP: rtpAddrOf(pb.RTCP),
		Now: ca.Now, RTCPInterval: -1, InactivityTimeout: -1, SSRC: 0xaaaa})
	b := newRTPTestEndpoint(t, RTPConfig{Ports: pb, Remote: rtpAddrOf(pa.RTP), RemoteRTCP: rtpAddrOf(pa.RTCP),
		Now: cb.Now, RTCPInterval: -1, InactivityTimeout: -1, SSRC: 0xbbbb})

	// Start at a sequence number ending in 0 so that exactly 10 of 100 are dropped.
	a.txMu.Lock()
	a.seq = 1000
	a.txMu.Unlock()
	frame := make([]byte, 160)
	for range 100 {
		if err := a.WriteSample(frame, 160); err != nil {
			t.Fatal(err)
		}
		ca.Advance(20 * time.Millisecond)
	}
	rtpWaitFor(t, "90 packets at B", func() bool { return b.Stats().PacketsReceived == 90 })
	if got := b.Stats().Latched; got != rtpAddrOf(relay.out) {
		t.Fatalf("B latched to %v, want the relay %v", got, rtpAddrOf(relay.out))
	}

	if err := a.sendReport(false); err != nil { // an SR: A has sent
		t.Fatal(err)
	}
	rtpWaitFor(t, "SR at B", func() bool { return b.Stats().RTCPReceived == 1 })
	cb.Advance(100 * time.Millisecond) // B holds the SR for 100 ms (DLSR)
	ca.Advance(250 * time.Millisecond) // the RR reaches A 250 ms after its SR
	if err := b.sendReport(false); err != nil {
		t.Fatal(err)
	}
	rtpWaitFor(t, "RR at A", func() bool { return a.Stats().RTCPReceived == 1 })

	sa, sb := a.Stats(), b.Stats()
	if sb.PacketsLost != 10 {
		t.Errorf("B PacketsLost = %d, want 10", sb.PacketsLost)
	}
	if want := float64(25) / 256; sb.FractionLost != want { // floor(10*256/100)/256
		t.Errorf("B FractionLost = %v, want %v", sb.FractionLost, want)
	}
	if sb.Jitter <= 0 || sb.Jitter > 40*time.Millisecond {
		// B's clock stood still while 20 ms-spaced packets arrived: jitter tends to 20 ms.
		t.Errorf("B Jitter = %v", sb.Jitter)
	}
	if sa.RemotePacketsLost != 10 || sa.RemoteFractionLost != sb.FractionLost || sa.RemoteJitter != sb.Jitter {
		t.Errorf("A's view of B's report: lost %d fraction %v jitter %v; B has %d %v %v",
			sa.RemotePacketsLost, sa.RemoteFractionLost, sa.RemoteJitter, sb.PacketsLost, sb.FractionLost, sb.Jitter)
	}
	if d := sa.RTT - 150*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("A RTT = %v, want 150ms (250 ms since the SR minus 100 ms DLSR)", sa.RTT)
	}
	if sb.RTT != 0 {
		t.Errorf("B RTT = %v, want 0: B sent no SR", sb.RTT)
	}
}

func TestRTPEndpointReportTypes(t *testing.T) {
	peerRTP, peerRTCP := rtpListen(t), rtpListen(t)
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), Remote: rtpAddrOf(peerRTP), RemoteRTCP: rtpAddrOf(peerRTCP),
		RTCPInterval: -1, CNAME: "parley@test"})

	checkSDES := func(pkts []rtcp.Packet) {
		t.Helper()
		if len(pkts) < 2 {
			t.Fatalf("compound packet has %d parts", len(pkts))
		}
		sd, ok := pkts[1].(*rtcp.SourceDescription)
		if !ok || len(sd.Chunks) != 1 || sd.Chunks[0].Source != e.SSRC() || sd.Chunks[0].Items[0].Text != "parley@test" {
			t.Fatalf("second part is not our SDES CNAME: %#v", pkts[1])
		}
	}
	// Nothing sent yet: RR (RFC 3550 §6.4).
	if err := e.sendReport(false); err != nil {
		t.Fatal(err)
	}
	pkts := rtpReadRawRTCP(t, peerRTCP)
	if rr, ok := pkts[0].(*rtcp.ReceiverReport); !ok || rr.SSRC != e.SSRC() || len(rr.Reports) != 0 {
		t.Fatalf("first report %#v, want an empty RR", pkts[0])
	}
	checkSDES(pkts)

	// Sent and received: SR with counts and a report block on the peer's stream.
	rtpSendRaw(t, peerRTP, e.LocalAddr(), rtpRaw(t, 0, 10, 1000, 0x5555, make([]byte, 160)))
	rtpRead(t, e)
	if err := e.WriteSample(make([]byte, 160), 160); err != nil {
		t.Fatal(err)
	}
	rtpReadRawRTP(t, peerRTP)
	if err := e.sendReport(false); err != nil {
		t.Fatal(err)
	}
	pkts = rtpReadRawRTCP(t, peerRTCP)
	sr, ok := pkts[0].(*rtcp.SenderReport)
	if !ok || sr.PacketCount != 1 || sr.OctetCount != 160 || len(sr.Reports) != 1 || sr.Reports[0].SSRC != 0x5555 ||
		sr.Reports[0].LastSequenceNumber != 10 || sr.NTPTime == 0 {
		t.Fatalf("second report %#v, want an SR", pkts[0])
	}
	checkSDES(pkts)
	// One more interval still counts as "sent recently", then back to RR.
	e.sendReport(false)
	if _, ok := rtpReadRawRTCP(t, peerRTCP)[0].(*rtcp.SenderReport); !ok {
		t.Fatal("third report is not an SR")
	}
	e.sendReport(false)
	if _, ok := rtpReadRawRTCP(t, peerRTCP)[0].(*rtcp.ReceiverReport); !ok {
		t.Fatal("fourth report is not an RR")
	}
	// Close sends RR + SDES + BYE.
	e.Close()
	pkts = rtpReadRawRTCP(t, peerRTCP)
	if bye, ok := pkts[len(pkts)-1].(*rtcp.Goodbye); !ok || len(bye.Sources) != 1 || bye.Sources[0] != e.SSRC() {
		t.Fatalf("closing packet %#v, want a BYE last", pkts)
	}
}

func TestRTPEndpointPeriodicRTCPAndBye(t *testing.T) {
	a, b := rtpEndpointPair(t, func(ca, cb *RTPConfig) {
		ca.RTCPInterval = 20 * time.Millisecond
		cb.RTCPInterval = 20 * time.Millisecond
	})
	frame := make([]byte, 160)
	for range 5 {
		if err := a.WriteSample(frame, 160); err != nil {
			t.Fatal(err)
		}
	}
	rtpWaitFor(t, "RTCP both ways", func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sa.RTCPSent >= 2 && sb.RTCPSent >= 2 && sa.RTCPReceived >= 2 && sb.RTCPReceived >= 2
	})
	rtpWaitFor(t, "B's report on A's stream", func() bool {
		b.rxMu.Lock()
		haveSR := !b.lastSRAt.IsZero()
		b.rxMu.Unlock()
		return haveSR && a.Stats().RemotePacketsLost == 0
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.RemoteBye():
	case <-time.After(5 * time.Second):
		t.Fatal("B saw no BYE after A closed")
	}
	if !b.Stats().RemoteBye {
		t.Fatal("Stats().RemoteBye = false")
	}
}

func TestRTPEndpointRTCPMux(t *testing.T) {
	a, b := rtpEndpointPair(t, func(ca, cb *RTPConfig) {
		ca.Ports = NewPortPair(rtpListen(t), nil)
		cb.Ports = NewPortPair(rtpListen(t), nil)
		ca.Remote, ca.RemoteRTCP = rtpAddrOf(cb.Ports.RTP), netip.AddrPort{}
		cb.Remote, cb.RemoteRTCP = rtpAddrOf(ca.Ports.RTP), netip.AddrPort{}
		ca.RTCPInterval, cb.RTCPInterval = -1, -1
	})
	if err := a.WriteSample(make([]byte, 160), 160); err != nil {
		t.Fatal(err)
	}
	rtpRead(t, b)
	if err := a.sendReport(false); err != nil {
		t.Fatal(err)
	}
	rtpWaitFor(t, "muxed RTCP at B", func() bool { return b.Stats().RTCPReceived == 1 })
	if s := b.Stats(); s.PacketsReceived != 1 || s.Malformed != 0 {
		t.Fatalf("B stats %+v: RTCP counted as RTP or malformed", s)
	}
	var p RTPPacket
	if b.TryReadPacket(&p) {
		t.Fatalf("RTCP delivered as RTP: %+v", p)
	}
}

func TestRTPEndpointIgnoresForeignRTCP(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), RTCPInterval: -1})
	peer := rtpListen(t)
	rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, 1, 1, 0x1234, nil))
	rtpRead(t, e)
	bye, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.ReceiverReport{SSRC: 0x9999}, &rtcp.Goodbye{Sources: []uint32{0x9999}}})
	rtpSendRaw(t, peer, rtpAddrOf(e.ports.RTCP), bye)
	rtpWaitFor(t, "foreign RTCP ignored", func() bool { return e.Stats().Ignored == 1 })
	if s := e.Stats(); s.RemoteBye || s.RTCPReceived != 0 {
		t.Fatalf("foreign BYE taken: %+v", s)
	}
}

func TestRTPEndpointComfortNoise(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t)})
	peer := rtpListen(t)
	rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, 1, 0, 7, make([]byte, 160)))
	rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, PayloadTypeCN, 2, 160, 7, []byte{50}))
	rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, PayloadTypeCN, 3, 320, 7, []byte{60, 1, 2, 3})) // with spectral params
	rtpRead(t, e)
	for _, want := range []int{50, 60} {
		p := rtpRead(t, e)
		if !p.ComfortNoise || p.PayloadType != PayloadTypeCN {
			t.Fatalf("CN packet not flagged: %+v", p)
		}
		if lvl, ok := p.ComfortNoiseLevel(); !ok || lvl != want {
			t.Fatalf("CN level %d, %v; want %d", lvl, ok, want)
		}
	}
	if s := e.Stats(); s.ComfortNoise != 2 || s.Malformed != 0 || s.PacketsReceived != 3 || s.RemotePayloadType != PayloadTypeCN {
		t.Fatalf("stats %+v", s)
	}
}

func TestRTPEndpointInactivity(t *testing.T) {
	t.Run("after media stops", func(t *testing.T) {
		clk := newRTPTestClock()
		e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), Now: clk.Now, InactivityTimeout: 200 * time.Millisecond, RTCPInterval: -1})
		peer := rtpListen(t)
		rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, 1, 0, 7, nil))
		rtpRead(t, e)

		clk.Advance(150 * time.Millisecond)
		c0 := e.checks.Load()
		rtpWaitFor(t, "two inactivity checks", func() bool { return e.checks.Load() >= c0+2 })
		if e.Stats().Inactive {
			t.Fatal("inactive after 150 ms with a 200 ms timeout")
		}
		// Media keeps the endpoint alive.
		rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, 2, 160, 7, nil))
		rtpRead(t, e)
		clk.Advance(150 * time.Millisecond)
		c0 = e.checks.Load()
		rtpWaitFor(t, "two inactivity checks", func() bool { return e.checks.Load() >= c0+2 })
		if e.Stats().Inactive {
			t.Fatal("inactive although media arrived 150 ms ago")
		}
		clk.Advance(100 * time.Millisecond)
		select {
		case <-e.Inactive():
		case <-time.After(5 * time.Second):
			t.Fatal("inactivity not reported")
		}
		clk.Advance(time.Second)
		rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, 3, 320, 7, nil))
		rtpRead(t, e)
		clk.Advance(time.Second)
		if n := e.inactiveFired.Load(); n != 1 {
			t.Fatalf("inactivity reported %d times, want once", n)
		}
	})
	t.Run("no media at all", func(t *testing.T) {
		clk := newRTPTestClock()
		e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), Now: clk.Now, InactivityTimeout: 100 * time.Millisecond, RTCPInterval: -1})
		clk.Advance(100 * time.Millisecond)
		rtpWaitFor(t, "inactive", func() bool { return e.Stats().Inactive })
	})
	t.Run("real clock, short timeout", func(t *testing.T) {
		e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), InactivityTimeout: 30 * time.Millisecond, RTCPInterval: -1})
		select {
		case <-e.Inactive():
		case <-time.After(5 * time.Second):
			t.Fatal("inactivity not reported")
		}
	})
}

func TestRTPEndpointMalformed(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t)})
	peer := rtpListen(t)
	valid := rtpRaw(t, 0, 42, 0, 7, []byte{1, 2, 3})
	bad := [][]byte{
		{0x80, 0, 0},                                    // short
		append([]byte{0x40}, valid[1:]...),              // version 1
		append([]byte{0x00}, valid[1:]...),              // version 0
		append([]byte{0x8f}, valid[1:12]...),            // 15 CSRCs announced, none present
		append([]byte{0x90}, valid[1:12]...),            // extension announced, missing
		append(append([]byte{0xa0}, valid[1:12]...), 0), // padding of 0
		make([]byte, 2100),                              // larger than any packet we take
		{0x81, 201, 0, 50, 1, 2, 3, 4},                  // RTCP RR whose length is a lie
	}
	for _, b := range bad {
		rtpSendRaw(t, peer, e.LocalAddr(), b)
	}
	rtpSendRaw(t, peer, e.LocalAddr(), valid)
	p := rtpRead(t, e)
	if p.SequenceNumber != 42 || !bytes.Equal(p.Payload, []byte{1, 2, 3}) {
		t.Fatalf("delivered %+v, want the valid packet", p)
	}
	if s := e.Stats(); s.Malformed != uint64(len(bad)) || s.PacketsReceived != 1 {
		t.Fatalf("Malformed = %d, PacketsReceived = %d; want %d and 1", s.Malformed, s.PacketsReceived, len(bad))
	}
}

func TestRTPEndpointQueueFullDrops(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), QueueSize: 4})
	peer := rtpListen(t)
	for i := range 10 {
		rtpSendRaw(t, peer, e.LocalAddr(), rtpRaw(t, 0, uint16(i), uint32(160*i), 7, nil))
	}
	rtpWaitFor(t, "10 packets seen", func() bool { return e.Stats().PacketsReceived == 10 })
	if got := e.Stats().Dropped; got != 6 {
		t.Fatalf("Dropped = %d, want 6", got)
	}
	for i := range 4 {
		if p := rtpRead(t, e); p.SequenceNumber != uint16(i) {
			t.Fatalf("packet %d has seq %d", i, p.SequenceNumber)
		}
	}
}

func TestRTPEndpointReadPacketContext(t *testing.T) {
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var p RTPPacket
	if err := e.ReadPacket(ctx, &p); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadPacket(cancelled) = %v", err)
	}
}

func TestRTPEndpointCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, err := NewRTPEndpoint(ctx, RTPConfig{Ports: rtpTestPorts(t), Logger: rtpDiscardLog})
	if err != nil {
		t.Fatal(err)
	}
	var p RTPPacket
	if err := e.ReadPacket(context.Background(), &p); !errors.Is(err, ErrEndpointClosed) {
		t.Fatalf("ReadPacket on an endpoint whose context was done = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRTPEndpointCloseNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	alloc, err := NewPortAllocator(rtpLoopback, rtpFreePortRange(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	pa, err := alloc.Allocate()
	if err != nil {
		t.Fatal(err)
	}
	pb := rtpTestPorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := NewRTPEndpoint(ctx, RTPConfig{Ports: pa, Remote: rtpAddrOf(pb.RTP), Logger: rtpDiscardLog, RTCPInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRTPEndpoint(ctx, RTPConfig{Ports: pb, Remote: a.LocalAddr(), Logger: rtpDiscardLog, RTCPInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.WriteSample(make([]byte, 160), 160); err != nil {
			t.Fatal(err)
		}
	}
	rtpRead(t, b)

	// A reader blocked in ReadPacket is released by Close once the queue is drained.
	readErr := make(chan error, 1)
	go func() {
		var p RTPPacket
		for {
			if err := a.ReadPacket(context.Background(), &p); err != nil {
				readErr <- err
				return
			}
		}
	}()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, ErrEndpointClosed) {
		t.Fatalf("ReadPacket after Close = %v", err)
	}
	if err := a.WriteSample([]byte{1}, 160); !errors.Is(err, ErrEndpointClosed) {
		t.Fatalf("WriteSample after Close = %v", err)
	}
	if alloc.InUse() != 0 {
		t.Fatalf("port pair not returned to the allocator: %d in use", alloc.InUse())
	}
	// Cancelling the context closes b.
	cancel()
	rtpWaitFor(t, "b closed by its context", func() bool {
		select {
		case <-b.closing:
			return true
		default:
			return false
		}
	})
	b.Close()
	pb.Close()
	rtpWaitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

// BenchmarkRTPReceive is the endpoint's per-packet receive work after the socket read: parse,
// latching check, RFC 3550 statistics, copy into the ring, and the owner's copy out of it.
func BenchmarkRTPReceive(b *testing.B) {
	e := rtpIdleEndpoint(b)
	from := rtpLoopbackAddr(4000)
	buf := rtpG711Packet(b, 0, 0, 0x1234)
	var dst RTPPacket
	seq, ts := uint16(0), uint32(0)
	b.ReportAllocs()
	for b.Loop() {
		binary.BigEndian.PutUint16(buf[2:], seq)
		binary.BigEndian.PutUint32(buf[4:], ts)
		seq++
		ts += 160
		e.handleRTP(buf, from)
		if !e.TryReadPacket(&dst) {
			b.Fatal("packet not delivered")
		}
	}
}

// BenchmarkRTPSend is WriteSample: header stamping, marshal into the reused buffer and the
// sendto on a loopback socket.
func BenchmarkRTPSend(b *testing.B) {
	sink := rtpListen(b)
	e := newRTPTestEndpoint(b, RTPConfig{Ports: rtpTestPorts(b), Remote: rtpAddrOf(sink), RTCPInterval: -1, InactivityTimeout: -1})
	frame := make([]byte, 160)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.WriteSample(frame, 160); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRTPLoopback is one packet end to end between two endpoints on 127.0.0.1: WriteSample,
// the kernel, the receiver's read loop, and ReadPacket.
func BenchmarkRTPLoopback(b *testing.B) {
	a, r := rtpEndpointPair(b, func(ca, cb *RTPConfig) {
		ca.RTCPInterval, cb.RTCPInterval = -1, -1
		ca.InactivityTimeout, cb.InactivityTimeout = -1, -1
		cb.QueueSize = 64
	})
	frame := make([]byte, 160)
	var p RTPPacket
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := a.WriteSample(frame, 160); err != nil {
			b.Fatal(err)
		}
		if err := r.ReadPacket(ctx, &p); err != nil {
			b.Fatal(err)
		}
	}
}
