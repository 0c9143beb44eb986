package media

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pion/rtp"
)

// rtpG711Packet returns a marshalled 172-byte RTP packet: 12-byte header and 20 ms of G.711.
func rtpG711Packet(tb testing.TB, seq uint16, ts, ssrc uint32) []byte {
	tb.Helper()
	p := rtp.Packet{
		Header:  rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: seq, Timestamp: ts, SSRC: ssrc},
		Payload: bytes.Repeat([]byte{0xff}, 160),
	}
	b, err := p.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParseRTP(t *testing.T) {
	valid := rtpG711Packet(t, 7, 1234, 0xdeadbeef)
	withPadding := func() []byte {
		p := rtp.Packet{Header: rtp.Header{Version: 2, Padding: true, PaddingSize: 4, SSRC: 1}, Payload: []byte{1, 2, 3}}
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	tests := []struct {
		name    string
		buf     []byte
		wantErr error
		payload int
	}{
		{"valid G.711", valid, nil, 160},
		{"valid with padding", withPadding, nil, 3},
		{"empty", nil, errRTPShort, 0},
		{"short", valid[:11], errRTPShort, 0},
		{"version 1", append([]byte{0x40}, valid[1:]...), errRTPVersion, 0},
		{"version 0", append([]byte{0x00}, valid[1:]...), errRTPVersion, 0},
		{"CSRC count beyond packet", append([]byte{0x8f}, valid[1:12]...), errRTPMalformed, 0},
		{"extension header missing", append([]byte{0x90}, valid[1:12]...), errRTPMalformed, 0},
		{"extension longer than packet", append(append([]byte{0x90}, valid[1:12]...), 0xbe, 0xde, 0x00, 0x10), errRTPMalformed, 0},
		{"padding of zero", append(append([]byte{0xa0}, valid[1:]...), 0), errRTPMalformed, 0},
		{"padding longer than payload", append(append([]byte{0xa0}, valid[1:12]...), 1, 200), errRTPMalformed, 0},
		{"payload too large", append(bytes.Clone(valid[:12]), make([]byte, MaxRTPPayload+1)...), errRTPTooLarge, 0},
	}
	var p rtp.Packet
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := parseRTP(tt.buf, &p)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("parseRTP = %v, want %v", err, tt.wantErr)
			}
			if err == nil && len(p.Payload) != tt.payload {
				t.Fatalf("payload %d bytes, want %d", len(p.Payload), tt.payload)
			}
		})
	}
	if err := parseRTP(valid, &p); err != nil || p.SequenceNumber != 7 || p.Timestamp != 1234 || p.SSRC != 0xdeadbeef {
		t.Fatalf("parseRTP(valid) = %v, header %+v", err, p.Header)
	}
}

func TestIsRTCP(t *testing.T) {
	tests := []struct {
		b    []byte
		want bool
	}{
		{[]byte{0x80, 200}, true},   // SR
		{[]byte{0x80, 201}, true},   // RR
		{[]byte{0x80, 203}, true},   // BYE
		{[]byte{0x80, 0}, false},    // PCMU
		{[]byte{0x80, 0x80}, false}, // PCMU with marker
		{[]byte{0x80, 0xe0}, false}, // PT 96 with marker (224)
		{[]byte{0x80}, false},
	}
	for _, tt := range tests {
		if got := isRTCP(tt.b); got != tt.want {
			t.Errorf("isRTCP(%v) = %v, want %v", tt.b, got, tt.want)
		}
	}
}

func TestRTPPacketComfortNoiseLevel(t *testing.T) {
	p := RTPPacket{PayloadType: PayloadTypeCN, ComfortNoise: true, Payload: []byte{0x80 | 42, 1, 2}}
	if lvl, ok := p.ComfortNoiseLevel(); !ok || lvl != 42 {
		t.Fatalf("ComfortNoiseLevel = %d, %v; want 42, true", lvl, ok)
	}
	p.Payload = nil
	if _, ok := p.ComfortNoiseLevel(); ok {
		t.Fatal("empty CN payload has no level")
	}
	p = RTPPacket{PayloadType: 0, Payload: []byte{42}}
	if _, ok := p.ComfortNoiseLevel(); ok {
		t.Fatal("non-CN packet has no comfort-noise level")
	}
}

// FuzzParseRTP feeds arbitrary datagrams to the parse path and to the endpoint's RTP and RTCP
// handlers: they must never panic, and whatever parses must re-marshal to a valid packet.
func FuzzParseRTP(f *testing.F) {
	f.Add(rtpG711Packet(f, 1, 2, 3))
	f.Add([]byte{0x80, 13, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 40})
	f.Add([]byte{0x90, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xbe, 0xde, 0, 1, 0x10, 0xff, 0, 0})
	f.Add([]byte{0xa0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 2})
	f.Add([]byte{0x81, 200, 0, 12, 0, 0, 0, 1})
	f.Add([]byte{0x81, 201, 0, 7, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x81, 203, 0, 1, 0, 0, 0, 1})
	e := rtpIdleEndpoint(f)
	var p rtp.Packet
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := parseRTP(b, &p); err == nil {
			out := make([]byte, p.MarshalSize())
			if _, err := p.MarshalTo(out); err != nil {
				t.Fatalf("parsed packet does not marshal: %v", err)
			}
			var again rtp.Packet
			if err := parseRTP(out, &again); err != nil {
				t.Fatalf("re-marshalled packet does not parse: %v", err)
			}
			if again.SequenceNumber != p.SequenceNumber || again.SSRC != p.SSRC || !bytes.Equal(again.Payload, p.Payload) {
				t.Fatalf("round trip changed the packet")
			}
		}
		from := rtpLoopbackAddr(4000)
		if isRTCP(b) {
			e.handleRTCP(b, from)
		} else {
			e.handleRTP(b, from)
		}
		var dst RTPPacket
		for e.TryReadPacket(&dst) {
		}
	})
}

// BenchmarkRTPParse is the per-packet parse of a 172-byte G.711 packet into a reused rtp.Packet.
func BenchmarkRTPParse(b *testing.B) {
	buf := rtpG711Packet(b, 1, 160, 0x1234)
	var p rtp.Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := parseRTP(buf, &p); err != nil {
			b.Fatal(err)
		}
	}
}
