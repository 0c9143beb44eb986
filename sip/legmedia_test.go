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
		m.rx.Close()
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

// TestRebuffer: 30 ms PCMU packets from a peer are cut to the 20 ms pipeline without loss.
func TestRebuffer(t *testing.T) {
	rx, err := media.NewRTPReceiver(media.RTPReceiverConfig{Codec: codec.PCMU, MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	var rb rebuffer
	tone := mediatest.Sine(8000, 8000, 700, -12)
	payload := make([]byte, 240)
	var f media.Frame
	var out []int16
	frames := 0
	for i := 0; i+240 <= len(tone); i += 240 {
		codec.EncodeMulaw(payload, tone[i:i+240])
		p := media.RTPPacket{PayloadType: 0, SequenceNumber: uint16(i / 240), Timestamp: uint32(1000 + i), SSRC: 7, Payload: payload, ReceivedAt: time.Now()}
		rb.push(&p, rx)
		// Play out in step with the 30 ms arrivals: a 20 ms frame per 160 samples received.
		for ; frames*160 < i+240-160; frames++ {
			rx.ReadFrame(&f)
			out = append(out, f.PCM()...)
		}
	}
	st := rx.Stats()
	if st.Played < uint64(frames)-4 || st.Jitter.Dropped > 0 {
		t.Errorf("played %d frames of %d (%+v)", st.Played, frames, st)
	}
	if lvl := mediatest.DetectTone(out[len(out)/2:], media.PipelineRate, 700); lvl < -16 {
		t.Errorf("tone at %.1f dBFS after rebuffering", lvl)
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
