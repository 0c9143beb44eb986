package sip

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
)

// testLeg is a legMedia with a real RTP endpoint on loopback, not started (the test drives
// it), and a peer socket that receives what it sends.
func testLeg(t testing.TB, n Negotiated) (*legMedia, *net.UDPConn) {
	t.Helper()
	rtp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rtcp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	n.Remote = peer.LocalAddr().(*net.UDPAddr).AddrPort()
	if n.Local == "" {
		n.Local, n.RemoteDir = SendRecv, SendRecv
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	m := newLegMedia(log, media.NewPortPair(rtp, rtcp), netip.AddrPort{}, time.Minute, &wg, nil)
	ep, err := media.NewRTPEndpoint(context.Background(), media.RTPConfig{Ports: m.ports, Remote: n.Remote,
		PayloadType: n.Audio.PayloadType, ClockRate: n.Audio.ClockRate, InactivityTimeout: -1, RTCPInterval: -1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m.ep = ep
	if err := m.setTx(n); err != nil {
		t.Fatal(err)
	}
	if err := m.setRx(n); err != nil {
		t.Fatal(err)
	}
	m.started.Store(true)
	m.receiving.Store(true)
	t.Cleanup(func() {
		ep.Close()
		m.play.Load().Close()
		closeCodec(m.tx.enc)
	})
	return m, peer
}

func neg(info codec.Info, ptime int) Negotiated {
	return Negotiated{Audio: pipelineInfo(info), Ptime: ptime, DTMF: codec.TelephoneEvent, HasDTMF: true}
}

// TestSendPtime: for a peer that asked for 30 ms packets, 20 ms frames are cut into 30 ms
// packets whose timestamps follow the samples.
func TestSendPtime(t *testing.T) {
	m, peer := testLeg(t, neg(codec.PCMU, 30))
	var f media.Frame
	f.SetPCM(media.PipelineRate, mediatest.Sine(320, media.PipelineRate, 700, -12))
	for range 3 {
		m.sendFrame(&f)
	}
	peer.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 2048)
	var ts []uint32
	for range 2 {
		n, err := peer.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n != 12+240 {
			t.Fatalf("packet of %d bytes, want 252", n)
		}
		ts = append(ts, binary.BigEndian.Uint32(buf[4:]))
	}
	if ts[1]-ts[0] != 240 {
		t.Errorf("timestamps %v step %d, want 240", ts, ts[1]-ts[0])
	}
}

// BenchmarkSendFrame is the per-frame send path (encode + RTP write): no allocation.
func BenchmarkSendFrame(b *testing.B) {
	for _, info := range []codec.Info{codec.PCMU, codec.G722, codec.Opus} {
		b.Run(info.Name, func(b *testing.B) {
			m, peer := testLeg(b, neg(info, 20))
			go io.Copy(io.Discard, peer)
			var f media.Frame
			f.SetPCM(media.PipelineRate, mediatest.Sine(320, media.PipelineRate, 700, -12))
			m.sendFrame(&f)
			b.ReportAllocs()
			for b.Loop() {
				m.sendFrame(&f)
			}
		})
	}
}

// BenchmarkReceiveTick is one 20 ms step of the receive side (drain, jitter buffer, decode,
// resample, sink, filler send) with a packet arriving each time: no allocation.
func BenchmarkReceiveTick(b *testing.B) {
	m, peer := testLeg(b, neg(codec.PCMU, 20))
	sink := frameFunc(func(*media.Frame) {})
	m.setSink(sink)
	go io.Copy(io.Discard, peer)
	dst := m.ep.LocalAddr()
	pkt := make([]byte, 12+160)
	pkt[0] = 0x80
	binary.BigEndian.PutUint32(pkt[8:], 42)
	now := time.Now()
	send := func(i int) {
		binary.BigEndian.PutUint16(pkt[2:], uint16(i))
		binary.BigEndian.PutUint32(pkt[4:], uint32(i*160))
		peer.WriteToUDPAddrPort(pkt, dst)
	}
	for i := range 10 {
		send(i)
	}
	time.Sleep(50 * time.Millisecond) // let the warm-up packets land before measuring
	b.ReportAllocs()
	i := 10
	for b.Loop() {
		send(i)
		i++
		now = now.Add(frameDur)
		m.tick(now)
	}
}

// TestRTPTimestampFollowsClock is issue 22 item 12: over a simulated 60 s call of agent
// silence (the filler sends), with 50 ticks woken late by 25–95 ms and one 1 s stall, the RTP
// timestamp advances by exactly the audio sent: it ends within two frames of the clock, the
// packets carry consecutive timestamps except across the stall, and the marker bit is set once
// for it. Before, each late tick added 20 ms that never played, with a marker each time.
func TestRTPTimestampFollowsClock(t *testing.T) {
	m, peer := testLeg(t, neg(codec.PCMU, 20))
	type pkt struct {
		ts     uint32
		marker bool
	}
	var (
		mu   sync.Mutex
		pkts []pkt
	)
	peer.SetReadBuffer(4 << 20)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 2048)
		for {
			peer.SetReadDeadline(time.Now().Add(time.Second))
			n, err := peer.Read(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			mu.Lock()
			pkts = append(pkts, pkt{ts: binary.BigEndian.Uint32(buf[4:]), marker: buf[1]&0x80 != 0})
			mu.Unlock()
		}
	}()
	t0 := time.Now()
	const call = 60 * time.Second
	late := 0
	var last time.Time
	for k := 0; ; k++ {
		at := t0.Add(time.Duration(k) * frameDur)
		if at.Sub(t0) >= call {
			break
		}
		if at.Sub(t0) >= 30*time.Second && at.Sub(t0) < 31*time.Second {
			continue // a 1 s stall: no tick at all (the schedule restarts)
		}
		if !last.IsZero() && at.Before(last) {
			continue // the ticker dropped the ticks a late wake-up slept through
		}
		if k > 0 && k%59 == 0 && late < 50 {
			at = at.Add(25*time.Millisecond + time.Duration(late%8)*10*time.Millisecond)
			late++
		}
		m.tick(at)
		last = at
		if k%50 == 0 {
			time.Sleep(time.Millisecond) // let the reader keep up
		}
	}
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	if len(pkts) < 2900 {
		t.Fatalf("%d packets for a 60 s call", len(pkts))
	}
	span := pkts[len(pkts)-1].ts - pkts[0].ts
	wall := last.Sub(t0)
	drift := time.Duration(int64(span)) * time.Second / 8000
	drift -= wall
	if drift < -2*frameDur || drift > 2*frameDur {
		t.Errorf("RTP timestamps span %v more than the %v of the call (%d late ticks)", drift, wall, late)
	}
	markers, jumps := 0, 0
	for i := 1; i < len(pkts); i++ {
		if pkts[i].marker {
			markers++
		}
		if pkts[i].ts-pkts[i-1].ts != 160 {
			jumps++
		}
	}
	if markers != 1 || jumps != 1 {
		t.Errorf("%d marker bits and %d timestamp jumps after the first packet, want 1 and 1 (the stall)", markers, jumps)
	}
	t.Logf("%d packets, %d late ticks, timestamp drift %v, %d markers", len(pkts), late, drift, markers)
}

// TestLegOnSharedClock: a started leg has no clock of its own: it is ticked by the process's
// shared media clock (one registration per leg), which keeps RTP flowing (the filler's silence,
// as the peer hears it) and gives the sink a frame every 20 ms while the peer sends nothing; close
// takes it off the clock, after which nothing is sent or delivered, and returns the wait group.
func TestLegOnSharedClock(t *testing.T) {
	rtpc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rtcpc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	n := neg(codec.PCMU, 20)
	n.Remote = peer.LocalAddr().(*net.UDPAddr).AddrPort()
	n.Local, n.RemoteDir = SendRecv, SendRecv
	var wg sync.WaitGroup
	m := newLegMedia(slog.New(slog.NewTextHandler(io.Discard, nil)), media.NewPortPair(rtpc, rtcpc), netip.AddrPort{}, time.Minute, &wg, nil)
	var frames atomicCount
	m.setSink(func(f *media.Frame) { frames.add() })
	before := media.SharedClock().Len()
	if err := m.start(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if got := media.SharedClock().Len(); got != before+1 {
		t.Fatalf("the shared clock has %d streams after the leg started, want %d", got, before+1)
	}
	// RTP flows with nothing sent by the engine or the peer: the clock's ticks send the filler.
	buf := make([]byte, 2048)
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	for range 10 {
		if _, err := peer.Read(buf); err != nil {
			t.Fatalf("no RTP from the leg's clock: %v", err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); frames.get() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames given to the sink by the clock in 5 s", frames.get())
		}
	}
	m.close()
	if got := media.SharedClock().Len(); got != before {
		t.Fatalf("the shared clock has %d streams after close, want %d", got, before)
	}
	wg.Wait() // close returned the registration start counted
	got := frames.get()
	peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		if _, err := peer.Read(buf); err != nil {
			break // drained what was sent before close
		}
	}
	time.Sleep(60 * time.Millisecond) // three ticks of the clock
	if frames.get() != got {
		t.Fatal("the sink got frames after close")
	}
	peer.SetReadDeadline(time.Now().Add(60 * time.Millisecond))
	if _, err := peer.Read(buf); err == nil {
		t.Fatal("RTP sent after close")
	}
}

type atomicCount struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCount) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *atomicCount) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
