package media

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/pion/rtcp"
)

// This file is the RTCP half of RTPEndpoint (RFC 3550 §6): compound SR/RR + SDES reports, the
// remote's reports (RTT per §6.4.1, remote loss and jitter) and BYE (§6.6). RTCP runs once every
// few seconds, so unlike the RTP path it may allocate (pion/rtcp marshals into new buffers).

// ntpEpochOffset is the number of seconds from 1900-01-01 (NTP) to 1970-01-01 (Unix).
const ntpEpochOffset = 2208988800

// ntpTime converts t to a 64-bit NTP timestamp (RFC 3550 §4).
func ntpTime(t time.Time) uint64 {
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := (uint64(t.Nanosecond()) << 32) / uint64(time.Second)
	return secs<<32 | frac
}

// ntpShort returns the middle 32 bits of an NTP timestamp, the unit of LSR (§6.4.1).
func ntpShort(ntp uint64) uint32 { return uint32(ntp >> 16) }

// durationToNTPShort converts d to units of 1/65536 s (DLSR, §6.4.1).
func durationToNTPShort(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32((uint64(d) << 16) / uint64(time.Second))
}

// ntpShortToDuration converts units of 1/65536 s to a duration.
func ntpShortToDuration(v uint32) time.Duration {
	return time.Duration((uint64(v) * uint64(time.Second)) >> 16)
}

// rtcpDestination picks where RTCP goes, in this order: the address RTCP arrived from (latched);
// for RTP latched to the signalled address, the signalled RTCP address; the latched RTP address
// (port+1, or itself when multiplexed); the signalled RTCP address; the signalled RTP address
// (port+1, or itself). Callers hold rtcpMu.
func (e *RTPEndpoint) rtcpDestination() netip.AddrPort {
	if p := e.remoteRTCP.Load(); p != nil {
		return *p
	}
	if p := e.latchedPtr.Load(); p != nil {
		if *p == e.signalledRTP && e.signalledRTCP.IsValid() {
			return e.signalledRTCP
		}
		return e.rtcpFor(*p)
	}
	if e.signalledRTCP.IsValid() {
		return e.signalledRTCP
	}
	if e.signalledRTP.IsValid() {
		return e.rtcpFor(e.signalledRTP)
	}
	return netip.AddrPort{}
}

func (e *RTPEndpoint) rtcpFor(rtpAddr netip.AddrPort) netip.AddrPort {
	if e.rtcpConn == nil {
		return rtpAddr
	}
	return netip.AddrPortFrom(rtpAddr.Addr(), rtpAddr.Port()+1)
}

// sendReport sends one compound RTCP packet (RFC 3550 §6.1): an SR when we sent RTP in this or
// the previous report interval, an RR otherwise (§6.4), with a report block on the remote source
// when we have heard it, then SDES CNAME, then BYE when bye is set. With bye set and no part
// taken in the session (nothing sent or received), nothing is sent (§6.6).
func (e *RTPEndpoint) sendReport(bye bool) error {
	e.rtcpMu.Lock()
	defer e.rtcpMu.Unlock()
	dst := e.rtcpDestination()
	if !dst.IsValid() {
		return ErrNoRemote
	}
	now := e.now()

	e.txMu.Lock()
	ssrc := e.ssrc.Load()
	weSent := e.sentSinceRR || e.sentPrevRR
	e.sentPrevRR, e.sentSinceRR = e.sentSinceRR, false
	sentAny := e.pktsSent > 0
	pkts, octets := e.pktsSent, e.octetsSent
	rtpTime := e.timestampAtLocked(now)
	e.txMu.Unlock()

	e.rxMu.Lock()
	var blocks []rtcp.ReceptionReport
	if e.rx.started {
		var lsrAt time.Time
		if e.lastSRSSRC == e.rx.ssrc {
			lsrAt = e.lastSRAt
		}
		blocks = []rtcp.ReceptionReport{e.rx.report(now, e.lastSR, lsrAt)}
	}
	took := sentAny || e.rx.started || e.rtcpSent > 0
	e.rxMu.Unlock()
	if bye && !took {
		return nil
	}

	var first rtcp.Packet
	if weSent {
		first = &rtcp.SenderReport{
			SSRC:        ssrc,
			NTPTime:     ntpTime(now),
			RTPTime:     rtpTime,
			PacketCount: uint32(pkts),
			OctetCount:  uint32(octets),
			Reports:     blocks,
		}
	} else {
		first = &rtcp.ReceiverReport{SSRC: ssrc, Reports: blocks}
	}
	packets := []rtcp.Packet{first, rtcp.NewCNAMESourceDescription(ssrc, e.cname)}
	if bye {
		packets = append(packets, &rtcp.Goodbye{Sources: []uint32{ssrc}})
	}
	raw, err := rtcp.Marshal(packets)
	if err != nil {
		return fmt.Errorf("media: marshal RTCP: %w", err)
	}
	if s := e.srtp.Load(); s != nil { // issue 21: SRTCP (RFC 3711 §3.4)
		if raw, err = s.protectRTCP(nil, raw); err != nil {
			return fmt.Errorf("media: SRTCP protect: %w", err)
		}
	}
	conn := e.rtcpConn
	if conn == nil {
		conn = e.rtpConn
	}
	if _, err := conn.WriteToUDPAddrPort(raw, dst); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return ErrEndpointClosed
		}
		return fmt.Errorf("media: send RTCP to %s: %w", dst, err)
	}
	e.rxMu.Lock()
	e.rtcpSent++
	e.rxMu.Unlock()
	return nil
}

// readRTCPLoop reads the RTCP socket (when RTCP is not multiplexed) until it is closed.
func (e *RTPEndpoint) readRTCPLoop() {
	defer e.wg.Done()
	for {
		n, from, err := e.rtcpConn.ReadFromUDPAddrPort(e.rtcpRxBuf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-e.closing:
				return
			default:
			}
			continue
		}
		if n == len(e.rtcpRxBuf) {
			e.malformed.Add(1)
			continue
		}
		e.handleRTCP(e.rtcpRxBuf[:n], unmapAddrPort(from))
	}
}

// rtcpSender returns the SSRC of the sender of a compound RTCP packet: the SSRC of its first SR
// or RR (RFC 3550 §6.1 requires one first), else of its first SDES chunk or BYE source.
func rtcpSender(pkts []rtcp.Packet) (uint32, bool) {
	for _, p := range pkts {
		switch p := p.(type) {
		case *rtcp.SenderReport:
			return p.SSRC, true
		case *rtcp.ReceiverReport:
			return p.SSRC, true
		case *rtcp.SourceDescription:
			if len(p.Chunks) > 0 {
				return p.Chunks[0].Source, true
			}
		case *rtcp.Goodbye:
			if len(p.Sources) > 0 {
				return p.Sources[0], true
			}
		}
	}
	return 0, false
}

// handleRTCP processes one (compound) RTCP packet from the remote. RTCP from a sender other than
// the source we receive is ignored and counted; before any RTP arrives every sender is accepted.
func (e *RTPEndpoint) handleRTCP(buf []byte, from netip.AddrPort) {
	if s := e.srtp.Load(); s != nil { // issue 21: SRTCP
		if len(buf) < minSRTCP {
			e.malformed.Add(1) // too short to be SRTCP at all: not a failed check
			return
		}
		e.rtcpDecMu.Lock()
		dec, err := s.unprotectRTCP(e.rtcpDec[:0], buf)
		if err != nil {
			e.rtcpDecMu.Unlock()
			e.srtpFail("srtcp", err)
			return
		}
		buf = append(make([]byte, 0, len(dec)), dec...) // RTCP is rare: a copy frees the buffer
		e.rtcpDecMu.Unlock()
	}
	pkts, err := rtcp.Unmarshal(buf)
	if err != nil {
		e.malformed.Add(1)
		return
	}
	sender, ok := rtcpSender(pkts)
	if !ok {
		e.malformed.Add(1) // nothing we can attribute
		return
	}
	now := e.now()
	ours := e.ssrc.Load()
	byeSeen := false

	e.rxMu.Lock()
	if e.rx.started && sender != e.rx.ssrc {
		e.rxMu.Unlock()
		e.ignored.Add(1)
		return
	}
	e.rtcpRecv++
	for _, p := range pkts {
		switch p := p.(type) {
		case *rtcp.SenderReport:
			e.lastSR, e.lastSRAt, e.lastSRSSRC = ntpShort(p.NTPTime), now, p.SSRC
			e.applyReportBlocksLocked(p.Reports, ours, now)
		case *rtcp.ReceiverReport:
			e.applyReportBlocksLocked(p.Reports, ours, now)
		case *rtcp.Goodbye:
			for _, s := range p.Sources {
				if s == sender {
					byeSeen = true
				}
			}
		}
	}
	e.rxMu.Unlock()

	if cur := e.remoteRTCP.Load(); cur == nil || *cur != from {
		e.rtcpMu.Lock()
		prev := e.rtcpDestination()
		to := from
		e.remoteRTCP.Store(&to)
		e.rtcpMu.Unlock()
		e.log.Info("rtcp latched", "from", prev.String(), "to", from.String(), "remote_ssrc", sender)
	}
	if byeSeen {
		e.byeOnce.Do(func() {
			e.log.Info("rtcp bye", "remote_ssrc", sender)
			close(e.bye)
		})
	}
}

// applyReportBlocksLocked takes the remote's report block about our stream: its view of our loss
// and jitter, and the round-trip time A - LSR - DLSR (RFC 3550 §6.4.1). Callers hold rxMu.
func (e *RTPEndpoint) applyReportBlocksLocked(blocks []rtcp.ReceptionReport, ours uint32, now time.Time) {
	for _, b := range blocks {
		if b.SSRC != ours {
			continue
		}
		e.remoteLost = signedLost24(b.TotalLost)
		e.remoteFraction = b.FractionLost
		e.remoteJitterTicks = b.Jitter
		if b.LastSenderReport == 0 {
			continue // the remote has not heard an SR from us yet
		}
		rtt := ntpShort(ntpTime(now)) - b.LastSenderReport - b.Delay
		if rtt < 1<<31 { // a "negative" RTT means a bogus report; keep the last good one
			e.rtt = ntpShortToDuration(rtt)
		}
	}
}
