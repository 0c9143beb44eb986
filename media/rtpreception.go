package media

import (
	"time"

	"github.com/pion/rtcp"
)

// Sequence-number validation constants of RFC 3550 Appendix A.1.
const (
	rtpSeqMod   = 1 << 16
	maxDropout  = 3000
	maxMisorder = 100
)

// rtpReception holds the reception statistics of one remote synchronization source: sequence
// tracking (RFC 3550 A.1), loss (A.3), interarrival jitter (A.8). It is not safe for concurrent use; the endpoint guards it.
//
// Unlike A.1, a new source is not put on probation: audio is delivered from the first packet,
// and statistics count from it too. The large-jump logic of A.1 (restart after two sequential
// packets) is kept.
type rtpReception struct {
	started  bool
	ssrc     uint32
	maxSeq   uint16 // highest sequence number seen
	cycles   uint32 // count of sequence-number wraps, shifted left by 16
	baseSeq  uint32
	badSeq   uint32 // last "bad" sequence number + 1 (A.1)
	received uint32 // packets received (A.1 "received")

	expectedPrior uint32
	receivedPrior uint32
	fraction      uint8 // fraction lost of the last report interval, 8-bit fixed point (A.3)

	haveTransit bool
	transit     uint32 // relative transit time of the previous packet, in RTP clock units
	jitter      uint32 // interarrival jitter estimate, scaled by 16 (A.8, integer form)
}

// reset starts tracking a new source whose first packet carries seq.
func (s *rtpReception) reset(ssrc uint32, seq uint16) {
	*s = rtpReception{started: true, ssrc: ssrc}
	s.initSeq(seq)
}

// initSeq is A.1 init_seq.
func (s *rtpReception) initSeq(seq uint16) {
	s.baseSeq = uint32(seq)
	s.maxSeq = seq
	s.badSeq = rtpSeqMod + 1 // so seq == badSeq is false
	s.cycles = 0
	s.received = 0
	s.receivedPrior = 0
	s.expectedPrior = 0
}

// updateSeq is A.1 update_seq without probation. It reports whether seq is counted as valid.
func (s *rtpReception) updateSeq(seq uint16) bool {
	udelta := seq - s.maxSeq
	switch {
	case udelta < maxDropout:
		// In order, with a permissible gap.
		if seq < s.maxSeq {
			s.cycles += rtpSeqMod // sequence number wrapped
		}
		s.maxSeq = seq
	case udelta <= rtpSeqMod-maxMisorder:
		// A very large jump.
		if uint32(seq) == s.badSeq {
			// Two sequential packets: assume the other side restarted without telling us.
			s.initSeq(seq)
		} else {
			s.badSeq = (uint32(seq) + 1) & (rtpSeqMod - 1)
			return false
		}
	default:
		// Duplicate or reordered packet.
	}
	s.received++
	return true
}

// updateJitter is A.8: arrival is the packet's arrival time and ts its RTP timestamp, both in RTP
// clock units. Differences are taken modulo 2^32, so both may wrap.
func (s *rtpReception) updateJitter(arrival, ts uint32) {
	transit := arrival - ts
	if !s.haveTransit {
		s.haveTransit = true
		s.transit = transit
		return
	}
	d := int32(transit - s.transit)
	s.transit = transit
	if d < 0 {
		d = -d
	}
	s.jitter += uint32(d) - ((s.jitter + 8) >> 4)
}

// extendedMax returns the extended highest sequence number received (A.3).
func (s *rtpReception) extendedMax() uint32 { return s.cycles + uint32(s.maxSeq) }

// cumulativeLost returns expected minus received (A.3); it is negative with duplicates.
func (s *rtpReception) cumulativeLost() int64 {
	expected := int64(s.extendedMax()) - int64(s.baseSeq) + 1
	return expected - int64(s.received)
}

// jitterTicks returns the interarrival jitter in RTP clock units.
func (s *rtpReception) jitterTicks() uint32 { return s.jitter >> 4 }

// report builds the reception report block for this source at now and starts a new report
// interval (A.3). lastSR is the middle of the NTP timestamp of the last SR from this source and
// lastSRAt its arrival (zero when none was received), for LSR and DLSR (§6.4.1).
func (s *rtpReception) report(now time.Time, lastSR uint32, lastSRAt time.Time) rtcp.ReceptionReport {
	expected := s.extendedMax() - s.baseSeq + 1
	expectedInterval := expected - s.expectedPrior
	s.expectedPrior = expected
	receivedInterval := s.received - s.receivedPrior
	s.receivedPrior = s.received
	lostInterval := int64(expectedInterval) - int64(receivedInterval)
	if expectedInterval == 0 || lostInterval <= 0 {
		s.fraction = 0
	} else {
		s.fraction = uint8((lostInterval << 8) / int64(expectedInterval))
	}
	rr := rtcp.ReceptionReport{
		SSRC:               s.ssrc,
		FractionLost:       s.fraction,
		TotalLost:          clampLost24(s.cumulativeLost()),
		LastSequenceNumber: s.extendedMax(),
		Jitter:             s.jitterTicks(),
	}
	if !lastSRAt.IsZero() {
		rr.LastSenderReport = lastSR
		rr.Delay = durationToNTPShort(now.Sub(lastSRAt))
	}
	return rr
}

// clampLost24 clamps the cumulative number of packets lost to the 24-bit signed field of a
// report block (RFC 3550 §6.4.1, A.3) and returns it in two's complement.
func clampLost24(lost int64) uint32 {
	switch {
	case lost > 0x7fffff:
		lost = 0x7fffff
	case lost < -0x800000:
		lost = -0x800000
	}
	return uint32(lost) & 0xffffff
}

// signedLost24 decodes the 24-bit signed cumulative-lost field of a report block.
func signedLost24(v uint32) int64 {
	v &= 0xffffff
	if v&0x800000 != 0 {
		return int64(v) - 0x1000000
	}
	return int64(v)
}
