package webrtc

import (
	"encoding/binary"
	"time"

	"github.com/pion/rtcp"
)

// Sequence-number checks of RFC 3550 Appendix A.1.
const (
	rsMaxDropout  = 3000 // a jump forward larger than this is not believed at once
	rsMaxMisorder = 100  // a packet this far behind the highest is late, not a restart
)

// receptionStats are the receiver statistics of one incoming RTP stream, kept for the reception
// report block of the service's RTCP receiver reports (RFC 3550 §6.4.1): the extended highest
// sequence number (Appendix A.1), the loss since the start and since the last report (A.3), the
// interarrival jitter (§6.4.1, A.8) and the delay since the sender's last SR. update runs once
// per packet on the receive path and allocates nothing; the caller serializes it with report
// and noteSR.
type receptionStats struct {
	clockRate float64 // RTP clock of the stream, Hz

	ssrc     uint32
	started  bool
	baseSeq  uint32 // first sequence number, extended
	maxSeq   uint16
	cycles   uint32 // sequence wraps, shifted left 16
	badSeq   int32  // RFC 3550 A.1: the sequence number that would confirm a jump; -1 when none
	received uint32

	expectedPrior, receivedPrior uint32

	haveTransit bool
	lastArrival time.Duration
	lastTS      uint32
	jitter      float64 // in RTP timestamp units

	lastSR   uint32        // middle 32 bits of the last SR's NTP timestamp
	lastSRAt time.Duration // when it arrived; valid when haveSR
	haveSR   bool
}

func newReceptionStats(clockRate uint32) receptionStats {
	return receptionStats{clockRate: float64(clockRate), badSeq: -1}
}

// reset starts the statistics over for the source ssrc, whose first packet is seq.
func (s *receptionStats) reset(ssrc uint32, seq uint16) {
	*s = receptionStats{clockRate: s.clockRate, ssrc: ssrc, started: true, badSeq: -1,
		baseSeq: uint32(seq), maxSeq: seq, lastSR: s.lastSR, lastSRAt: s.lastSRAt,
		haveSR: s.haveSR && (!s.started || s.ssrc == ssrc)}
}

// update accounts for one packet that arrived at `at` (on any monotonic clock).
func (s *receptionStats) update(ssrc uint32, seq uint16, ts uint32, at time.Duration) {
	switch {
	case !s.started || ssrc != s.ssrc:
		s.reset(ssrc, seq)
	default:
		delta := seq - s.maxSeq
		switch {
		case delta < rsMaxDropout:
			if seq < s.maxSeq {
				s.cycles += 1 << 16 // the sequence number wrapped
			}
			s.maxSeq = seq
		case delta <= 1<<16-rsMaxMisorder:
			// A big jump: believed only when the next packet follows it (the sender restarted).
			if s.badSeq >= 0 && uint16(s.badSeq) == seq {
				s.reset(ssrc, seq)
				break
			}
			s.badSeq = int32(seq + 1)
			return
		}
		// Otherwise a duplicate or a reordered packet: counted, as A.3 does.
	}
	s.badSeq = -1
	s.received++
	// RFC 3550 §6.4.1: D(i-1,i) = (Rj - Ri) - (Sj - Si) in timestamp units, J += (|D| - J)/16.
	if s.haveTransit {
		d := (at-s.lastArrival).Seconds()*s.clockRate - float64(int32(ts-s.lastTS))
		if d < 0 {
			d = -d
		}
		s.jitter += (d - s.jitter) / 16
	}
	s.haveTransit, s.lastArrival, s.lastTS = true, at, ts
}

// noteSR records a sender report of the stream's source that arrived at `at` (RFC 3550 §6.4.1:
// LSR is the middle 32 bits of its NTP timestamp).
func (s *receptionStats) noteSR(ssrc uint32, ntp uint64, at time.Duration) {
	if s.started && ssrc != s.ssrc {
		return
	}
	s.lastSR, s.lastSRAt, s.haveSR = uint32(ntp>>16), at, true
}

// report returns the reception report block for now and starts a new report interval; false
// before the first packet.
func (s *receptionStats) report(now time.Duration) (rtcp.ReceptionReport, bool) {
	if !s.started {
		return rtcp.ReceptionReport{}, false
	}
	extMax := s.cycles + uint32(s.maxSeq)
	expected := extMax - s.baseSeq + 1
	lost := int64(expected) - int64(s.received)
	// RFC 3550 §6.4.1: the cumulative loss is a signed 24-bit number (duplicates can make it
	// negative), clamped to its range.
	lost = min(max(lost, -0x800000), 0x7fffff)

	expInt := expected - s.expectedPrior
	recInt := s.received - s.receivedPrior
	s.expectedPrior, s.receivedPrior = expected, s.received
	var fraction uint8
	if lostInt := int64(expInt) - int64(recInt); expInt > 0 && lostInt > 0 {
		fraction = uint8(min(lostInt<<8/int64(expInt), 255))
	}
	rr := rtcp.ReceptionReport{
		SSRC:               s.ssrc,
		FractionLost:       fraction,
		TotalLost:          uint32(lost) & 0xffffff,
		LastSequenceNumber: extMax,
		Jitter:             uint32(s.jitter),
	}
	if s.haveSR {
		rr.LastSenderReport = s.lastSR
		// DLSR in units of 1/65536 s.
		rr.Delay = uint32(max(now-s.lastSRAt, 0) * 65536 / time.Second)
	}
	return rr, true
}

// senderReports calls f for each sender report (SSRC and NTP timestamp) in a compound RTCP
// packet (RFC 3550 §6.1, §6.4.1), without allocating. Malformed input ends the walk.
func senderReports(b []byte, f func(ssrc uint32, ntp uint64)) {
	for len(b) >= 4 {
		if b[0]>>6 != 2 {
			return
		}
		n := (int(binary.BigEndian.Uint16(b[2:4])) + 1) * 4
		if n > len(b) {
			return
		}
		if b[1] == uint8(rtcp.TypeSenderReport) && n >= 28 {
			f(binary.BigEndian.Uint32(b[4:8]), binary.BigEndian.Uint64(b[8:16]))
		}
		b = b[n:]
	}
}
