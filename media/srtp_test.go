package media

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/pion/rtp"
)

func srtpKey(tb testing.TB, p SRTPProfile) []byte {
	tb.Helper()
	k := make([]byte, p.KeyLen())
	rand.Read(k)
	return k
}

func srtpPair(tb testing.TB, p SRTPProfile, ka, kb []byte) (*SRTP, *SRTP) {
	tb.Helper()
	a, err := NewSRTP(p, ka, kb)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := NewSRTP(p, kb, ka)
	if err != nil {
		tb.Fatal(err)
	}
	return a, b
}

// TestSRTPEndpointExchange: two endpoints with SRTP contexts keyed for each other exchange
// audio and RTCP in each suite; on the wire no payload is in clear text.
func TestSRTPEndpointExchange(t *testing.T) {
	for _, p := range SRTPProfiles {
		t.Run(string(p), func(t *testing.T) {
			sa, sb := srtpPair(t, p, srtpKey(t, p), srtpKey(t, p))
			a, b := rtpEndpointPair(t, func(ca, cb *RTPConfig) { ca.SRTP, cb.SRTP = sa, sb })
			payload := bytes.Repeat([]byte{0x5a}, 160)
			for i := range 20 {
				payload[0] = byte(i)
				if err := a.WriteSample(payload, 160); err != nil {
					t.Fatal(err)
				}
				got := rtpRead(t, b)
				if !bytes.Equal(got.Payload, payload) {
					t.Fatalf("packet %d: payload differs after SRTP", i)
				}
			}
			if err := b.WriteSample([]byte{1, 2, 3}, 3); err != nil {
				t.Fatal(err)
			}
			if got := rtpRead(t, a); !bytes.Equal(got.Payload, []byte{1, 2, 3}) {
				t.Fatalf("B→A payload %v", got.Payload)
			}
			// SRTCP both ways: each side's report reaches the other.
			if err := a.sendReport(false); err != nil {
				t.Fatal(err)
			}
			if err := b.sendReport(false); err != nil {
				t.Fatal(err)
			}
			rtpWaitFor(t, "SRTCP reports", func() bool { return a.Stats().RTCPReceived > 0 && b.Stats().RTCPReceived > 0 })
			if a.Stats().SRTPFailed != 0 || b.Stats().SRTPFailed != 0 {
				t.Fatalf("failures: %d %d", a.Stats().SRTPFailed, b.Stats().SRTPFailed)
			}
		})
	}
}

// TestSRTPWireIsEncrypted: what leaves the socket is not the plain packet, and is longer by
// the authentication tag.
func TestSRTPWireIsEncrypted(t *testing.T) {
	p := AESCM128HMACSHA180
	s, _ := srtpPair(t, p, srtpKey(t, p), srtpKey(t, p))
	raw := rtpListen(t)
	e := newRTPTestEndpoint(t, RTPConfig{Ports: rtpTestPorts(t), Remote: rtpAddrOf(raw), SRTP: s, RTCPInterval: -1})
	payload := bytes.Repeat([]byte{0x11}, 160)
	if err := e.WriteSample(payload, 160); err != nil {
		t.Fatal(err)
	}
	b, _ := rtpReadRaw(t, raw)
	if len(b) != 12+160+10 {
		t.Fatalf("SRTP packet of %d bytes, want %d", len(b), 12+160+10)
	}
	if bytes.Contains(b, payload[:16]) {
		t.Fatal("the payload is in clear text on the wire")
	}
}

// TestSRTPWrongKeyRefused: packets protected with another key are dropped and counted, never
// delivered; setting the right key (a re-key) lets the next ones through.
func TestSRTPWrongKeyRefused(t *testing.T) {
	p := AESCM128HMACSHA132
	ka, kb, wrong := srtpKey(t, p), srtpKey(t, p), srtpKey(t, p)
	sa, _ := srtpPair(t, p, ka, kb)
	sbWrong, err := NewSRTP(p, kb, wrong) // b expects a's packets under another key
	if err != nil {
		t.Fatal(err)
	}
	a, b := rtpEndpointPair(t, func(ca, cb *RTPConfig) { ca.SRTP, cb.SRTP = sa, sbWrong })
	for range 5 {
		if err := a.WriteSample(make([]byte, 160), 160); err != nil {
			t.Fatal(err)
		}
	}
	rtpWaitFor(t, "5 refused packets", func() bool { return b.Stats().SRTPFailed >= 5 })
	if st := b.Stats(); st.PacketsReceived != 0 {
		t.Fatalf("%d packets delivered under a wrong key", st.PacketsReceived)
	}
	_, sbRight := srtpPair(t, p, ka, kb)
	b.SetSRTP(sbRight)
	if err := a.WriteSample(make([]byte, 160), 160); err != nil {
		t.Fatal(err)
	}
	rtpRead(t, b)
}

// TestSRTPKeyNeverPrinted: the contexts print their suite only.
func TestSRTPKeyNeverPrinted(t *testing.T) {
	p := AESCM128HMACSHA180
	k := bytes.Repeat([]byte{0xAB}, p.KeyLen())
	s, err := NewSRTP(p, k, k)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "srtp(AES_CM_128_HMAC_SHA1_80)" {
		t.Fatalf("String() = %q", got)
	}
	if _, err := NewSRTP(p, k[:5], k); err == nil || bytes.Contains([]byte(err.Error()), []byte("ab")) {
		t.Fatalf("short key error %v", err)
	}
	if _, err := NewSRTP("NULL", k, k); err == nil {
		t.Fatal("unknown suite accepted")
	}
}

// BenchmarkSRTPProtect and BenchmarkSRTPUnprotect measure what SRTP adds to one 20 ms G.711
// packet each way (issue 21: at most 2 µs, 0 allocations).
func BenchmarkSRTPProtect(b *testing.B) {
	for _, p := range SRTPProfiles {
		b.Run(string(p), func(b *testing.B) {
			s, _ := srtpPair(b, p, srtpKey(b, p), srtpKey(b, p))
			pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SSRC: 1}, Payload: make([]byte, 160)}
			buf := make([]byte, 12+160)
			dst := make([]byte, 12+160+srtpOverhead)
			b.ReportAllocs()
			b.SetBytes(160)
			for i := 0; b.Loop(); i++ {
				pkt.SequenceNumber = uint16(i)
				pkt.Timestamp = uint32(i * 160)
				n, _ := pkt.MarshalTo(buf)
				if _, err := s.protectRTP(dst[:0], buf[:n], &pkt.Header); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSRTPUnprotect(b *testing.B) {
	for _, p := range SRTPProfiles {
		b.Run(string(p), func(b *testing.B) {
			ka, kb := srtpKey(b, p), srtpKey(b, p)
			tx, rx := srtpPair(b, p, ka, kb)
			// Protect a ring of packets beforehand: the receive side's replay window refuses a
			// packet seen twice, so each iteration unprotects a fresh sequence number.
			const ring = 1 << 14
			pkts := make([][]byte, ring)
			pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SSRC: 1}, Payload: make([]byte, 160)}
			buf := make([]byte, 12+160)
			for i := range pkts {
				pkt.SequenceNumber = uint16(i)
				n, _ := pkt.MarshalTo(buf)
				enc, err := tx.protectRTP(nil, buf[:n], &pkt.Header)
				if err != nil {
					b.Fatal(err)
				}
				pkts[i] = enc
			}
			dst := make([]byte, 2048)
			var h rtp.Header
			b.ReportAllocs()
			b.SetBytes(160)
			i := 0
			for b.Loop() {
				if i == ring {
					// A new receive context per lap (outside the timing), as a re-key would be.
					b.StopTimer()
					_, rx = srtpPair(b, p, ka, kb)
					i = 0
					b.StartTimer()
				}
				if _, err := rx.unprotectRTP(dst[:0], pkts[i], &h); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
