package codec

import (
	"strconv"
	"strings"
)

// Info describes an RTP payload format as SDP announces it (RFC 8866 a=rtpmap) together with
// the PCM sample rate the codec works at.
type Info struct {
	// Name is the encoding name of a=rtpmap, e.g. "PCMU" or "opus".
	Name string
	// PayloadType is the RTP payload type: static for PCMU, PCMA and G722 (RFC 3551 §6), and
	// this package's default for the dynamic ones (opus, telephone-event).
	PayloadType uint8
	// ClockRate is the RTP timestamp rate, as written in a=rtpmap.
	ClockRate uint32
	// SampleRate is the PCM rate the encoder consumes and the decoder produces.
	SampleRate int
	// Channels is the channel count announced in SDP. Parley's audio is always mono; Opus is
	// announced as 2 channels because RFC 7587 §7 requires it, and decodes to mono.
	Channels int
}

// The payload formats Parley speaks.
var (
	// PCMU is G.711 µ-law, static payload type 0 (RFC 3551 §4.5.14).
	PCMU = Info{Name: "PCMU", PayloadType: 0, ClockRate: 8000, SampleRate: 8000, Channels: 1}
	// PCMA is G.711 A-law, static payload type 8 (RFC 3551 §4.5.14).
	PCMA = Info{Name: "PCMA", PayloadType: 8, ClockRate: 8000, SampleRate: 8000, Channels: 1}
	// G722 is G.722 at 64 kbit/s, static payload type 9. Its RTP clock rate is 8000 although the
	// audio is sampled at 16 kHz, an error in the original RFC 1890 kept for compatibility
	// (RFC 3551 §4.5.2).
	G722 = Info{Name: "G722", PayloadType: 9, ClockRate: 8000, SampleRate: 16000, Channels: 1}
	// Opus uses a dynamic payload type (111 by the common WebRTC convention); its RTP clock is
	// always 48000 and SDP always says 2 channels (RFC 7587 §4.1, §7).
	Opus = Info{Name: "opus", PayloadType: 111, ClockRate: 48000, SampleRate: 48000, Channels: 2}
	// TelephoneEvent is RFC 4733 DTMF events, dynamic payload type (101 by convention), at an
	// 8000 Hz clock. When used beside Opus the offer usually also carries a 48000 Hz variant.
	TelephoneEvent = Info{Name: "telephone-event", PayloadType: 101, ClockRate: 8000, SampleRate: 8000, Channels: 1}
)

// RTPMap returns the a=rtpmap value without the payload type, e.g. "opus/48000/2" or
// "PCMU/8000" (RFC 8866 §6.6: the channel count is omitted when it is 1).
func (i Info) RTPMap() string {
	s := i.Name + "/" + strconv.FormatUint(uint64(i.ClockRate), 10)
	if i.Channels > 1 {
		s += "/" + strconv.Itoa(i.Channels)
	}
	return s
}

// SamplesPerFrame returns how many PCM samples (at SampleRate) make up ms milliseconds.
func (i Info) SamplesPerFrame(ms int) int { return i.SampleRate * ms / 1000 }

// TimestampTicks returns how far the RTP timestamp advances over ms milliseconds.
func (i Info) TimestampTicks(ms int) uint32 { return i.ClockRate * uint32(ms) / 1000 }

// LookupInfo finds a known payload format by its a=rtpmap encoding name (case-insensitive)
// and clock rate. The payload type of the returned Info is this package's default: callers
// negotiating SDP replace it with the one offered.
func LookupInfo(name string, clockRate uint32) (Info, bool) {
	for _, i := range []Info{PCMU, PCMA, G722, Opus, TelephoneEvent} {
		if strings.EqualFold(i.Name, name) {
			if i.ClockRate == clockRate {
				return i, true
			}
			if i.Name == TelephoneEvent.Name && clockRate > 0 {
				// RFC 4733 §7.1.1: telephone-event may run at any audio clock rate, e.g. 48000
				// beside Opus.
				i.ClockRate = clockRate
				i.SampleRate = int(clockRate)
				return i, true
			}
		}
	}
	return Info{}, false
}
