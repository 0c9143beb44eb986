package codec

import "fmt"

// DTMFEvent is the payload of one RFC 4733 telephone-event packet (RFC 4733 §2.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     event     |E|R| volume    |          duration             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DTMFEvent struct {
	// Event is the event code; 0–15 are the DTMF digits (RFC 4733 §3.2).
	Event uint8
	// End is the E bit: this packet ends the event (RFC 4733 §2.3.3).
	End bool
	// Volume is the power level in -dBm0, 0–63 (RFC 4733 §2.3.4).
	Volume uint8
	// Duration is the event's length so far in RTP timestamp units, counted from the packet's
	// RTP timestamp, which is the event's start (RFC 4733 §2.3.5).
	Duration uint16
}

// DTMFEventLen is the length of a telephone-event payload.
const DTMFEventLen = 4

// MarshalTo writes the 4-byte payload into dst. The R bit is sent as zero (RFC 4733 §2.3.2).
func (e DTMFEvent) MarshalTo(dst []byte) (int, error) {
	if len(dst) < DTMFEventLen {
		return 0, shortBuffer(len(dst), DTMFEventLen)
	}
	if e.Volume > 63 {
		return 0, fmt.Errorf("%w: telephone-event volume %d > 63", ErrInvalidPacket, e.Volume)
	}
	dst[0] = e.Event
	dst[1] = e.Volume
	if e.End {
		dst[1] |= 0x80
	}
	dst[2] = byte(e.Duration >> 8)
	dst[3] = byte(e.Duration)
	return DTMFEventLen, nil
}

// ParseDTMFEvent reads a telephone-event payload. Bytes after the first four are ignored (a
// payload carries one event; several events in one packet only come with RFC 2198 redundancy,
// which is unwrapped before this). The reserved R bit is ignored on receipt (RFC 4733 §2.3.2).
func ParseDTMFEvent(p []byte) (DTMFEvent, error) {
	if len(p) < DTMFEventLen {
		return DTMFEvent{}, fmt.Errorf("%w: telephone-event payload of %d bytes, need 4", ErrInvalidPacket, len(p))
	}
	return DTMFEvent{
		Event:    p[0],
		End:      p[1]&0x80 != 0,
		Volume:   p[1] & 0x3F,
		Duration: uint16(p[2])<<8 | uint16(p[3]),
	}, nil
}

// dtmfDigits maps event codes 0–15 to their keys (RFC 4733 §3.2, Table 7).
const dtmfDigits = "0123456789*#ABCD"

// DigitToEvent returns the RFC 4733 event code for a DTMF key: 0–9, *, #, A–D (a–d accepted).
func DigitToEvent(d rune) (uint8, bool) {
	switch {
	case d >= '0' && d <= '9':
		return uint8(d - '0'), true
	case d == '*':
		return 10, true
	case d == '#':
		return 11, true
	case d >= 'A' && d <= 'D':
		return uint8(d-'A') + 12, true
	case d >= 'a' && d <= 'd':
		return uint8(d-'a') + 12, true
	}
	return 0, false
}

// EventToDigit returns the DTMF key of an event code 0–15.
func EventToDigit(e uint8) (rune, bool) {
	if int(e) >= len(dtmfDigits) {
		return 0, false
	}
	return rune(dtmfDigits[e]), true
}
