package sip

import (
	"time"

	"github.com/google/uuid"
)

// CallStats are the media statistics of a call leg (RFC 3550 §6.4 figures from both sides).
type CallStats struct {
	// Codec is the negotiated audio codec ("PCMU", "opus", …) and PayloadType its RTP type.
	Codec       string
	PayloadType uint8
	ClockRate   uint32

	PacketsSent     uint64
	PacketsReceived uint64
	// PacketsLost is the cumulative loss of the peer's stream (RFC 3550 A.3), FractionLost the
	// loss in the last RTCP interval, Jitter the interarrival jitter (A.8).
	PacketsLost  int64
	FractionLost float64
	Jitter       time.Duration
	// RTT is the round-trip time from the peer's RTCP reports; zero until measured.
	RTT time.Duration
	// RemotePacketsLost and RemoteJitter are what the peer reported about our stream.
	RemotePacketsLost int64
	RemoteJitter      time.Duration
	// Concealed counts 20 ms frames made up for lost packets; SendErrors packets that could not
	// be encoded or sent.
	Concealed  uint64
	SendErrors uint64
	// Late counts the peer's packets that came after their turn to play and were dropped.
	Late uint64
	// Latched is the address RTP is sent to after symmetric-RTP latching ("" before).
	Latched string
	// SRTP is the SRTP suite protecting the media ("" for plain RTP) and SRTPFailed the packets
	// refused by its authentication or replay check (issue 21).
	SRTP       string
	SRTPFailed uint64
	SRTPRekeys uint64 // times the keys changed during the call (re-INVITE)
}

// stats gathers a leg's statistics.
func (l *leg) stats() CallStats {
	ep, rx, info, errs := l.med.stats()
	st := CallStats{
		Codec: info.Name, PayloadType: info.PayloadType, ClockRate: info.ClockRate,
		PacketsSent: ep.PacketsSent, PacketsReceived: ep.PacketsReceived,
		PacketsLost: ep.PacketsLost, FractionLost: ep.FractionLost, Jitter: ep.Jitter, RTT: ep.RTT,
		RemotePacketsLost: ep.RemotePacketsLost, RemoteJitter: ep.RemoteJitter,
		Concealed: rx.Concealed, SendErrors: errs, Late: rx.Jitter.Late,
	}
	if ep.Latched.IsValid() {
		st.Latched = ep.Latched.String()
	}
	st.SRTPFailed = ep.SRTPFailed
	l.med.txMu.Lock()
	if l.med.keys != nil {
		st.SRTP = string(l.med.keys.profile)
	}
	st.SRTPRekeys = l.med.rekeys
	l.med.txMu.Unlock()
	return st
}

// newUUID returns a random UUIDv7 (time-ordered, like the control plane's IDs).
func newUUID() string { return uuid.Must(uuid.NewV7()).String() }
