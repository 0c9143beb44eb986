package media

import (
	"errors"
	"time"

	"github.com/pion/rtp"
)

// PayloadTypeCN is the static RTP payload type of comfort noise (RFC 3389 §4, RFC 3551 §6).
const PayloadTypeCN = 13

// MaxRTPPayload is the largest RTP payload the endpoint accepts (an Ethernet MTU minus the IPv4,
// UDP and RTP headers is less than this; Opus frames are at most 1275 bytes).
const MaxRTPPayload = 1500

// Errors of the RTP parse path. The endpoint counts them in RTPStats.Malformed; they never reach
// its callers.
var (
	errRTPShort     = errors.New("media: RTP packet shorter than its 12-byte header")
	errRTPVersion   = errors.New("media: RTP version is not 2")
	errRTPMalformed = errors.New("media: malformed RTP packet")
	errRTPTooLarge  = errors.New("media: RTP payload larger than MaxRTPPayload")
)

// RTPPacket is one received RTP packet as the endpoint delivers it: the header fields an audio
// consumer needs and a payload the packet owns (its backing array is reused by the next read
// into the same RTPPacket, so copy what must outlive it).
type RTPPacket struct {
	PayloadType    uint8
	Marker         bool
	SequenceNumber uint16
	Timestamp      uint32
	SSRC           uint32
	// ComfortNoise is set for RFC 3389 comfort-noise payloads (payload type 13). Payload then
	// holds a noise level (-dBov, RFC 3389 §3) and optional spectral parameters, not audio.
	ComfortNoise bool
	Payload      []byte
	// ReceivedAt is the arrival time taken from the endpoint's clock.
	ReceivedAt time.Time
}

// CopyFrom copies src into p, reusing p's payload buffer (no allocation once it has grown).
func (p *RTPPacket) CopyFrom(src *RTPPacket) {
	payload := append(p.Payload[:0], src.Payload...)
	*p = *src
	p.Payload = payload
}

// ComfortNoiseLevel returns the noise level of a comfort-noise payload in -dBov (0..127, RFC 3389
// §3.1) and false when p is not comfort noise or carries no level byte.
func (p *RTPPacket) ComfortNoiseLevel() (int, bool) {
	if !p.ComfortNoise || len(p.Payload) == 0 {
		return 0, false
	}
	return int(p.Payload[0] & 0x7f), true
}

// parseRTP validates buf as an RTP data packet (RFC 3550 §5.1) and unmarshals it into p, which is
// reused across calls: no allocation for valid packets.
func parseRTP(buf []byte, p *rtp.Packet) error {
	if len(buf) < 12 {
		return errRTPShort
	}
	if buf[0]>>6 != 2 {
		return errRTPVersion
	}
	if err := p.Unmarshal(buf); err != nil {
		return errRTPMalformed
	}
	if len(p.Payload) > MaxRTPPayload {
		return errRTPTooLarge
	}
	return nil
}

// isRTCP reports whether a datagram on a multiplexed RTP/RTCP port is RTCP: its second byte, the
// RTCP packet type, falls in 192..223 (RFC 5761 §4).
func isRTCP(buf []byte) bool {
	return len(buf) >= 2 && buf[1] >= 192 && buf[1] <= 223
}
