package webrtc

import (
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
)

// MediaStats are a browser call's RTP figures, per direction (issue 22 item 11: loss and
// jitter of WebRTC calls in /metrics). Received: the page's microphone stream as the service
// counted it (RFC 3550 A.3 loss, A.8 jitter). Sent: the agent's stream as the page's RTCP
// receiver reports said, from the last report (RemoteReports counts them; zero when none came).
type MediaStats struct {
	PacketsReceived uint64
	PacketsLost     uint64 // expected minus received, never negative
	Jitter          time.Duration
	// Concealed counts 20 ms frames made up for lost packets and Late the packets that came
	// after their turn to play, as sip.CallStats does (one receive chain, media.Playout).
	Concealed uint64
	Late      uint64

	PacketsSent       uint64
	RemoteReports     uint64
	RemotePacketsLost uint64
	RemoteJitter      time.Duration
}

// MediaStats returns the call's RTP figures so far (also after the call ended).
func (c *callPort) MediaStats() MediaStats { return c.p.mediaStats() }

func (p *peer) mediaStats() MediaStats {
	var st MediaStats
	if r := p.recv.Load(); r != nil {
		r.mu.Lock()
		st.PacketsReceived, st.PacketsLost, st.Jitter = r.stats.totals()
		r.mu.Unlock()
		ps := r.play.Stats()
		st.Concealed, st.Late = ps.Concealed, ps.Jitter.Late
	}
	if s := p.sender.Load(); s != nil {
		st.PacketsSent, _, _ = s.Stats()
	}
	p.remote.mu.Lock()
	st.RemoteReports, st.RemotePacketsLost, st.RemoteJitter = p.remote.reports, p.remote.lost, p.remote.jitter
	p.remote.mu.Unlock()
	return st
}

// totals returns the packets received and lost since the stream started and the current
// interarrival jitter (RFC 3550 A.3, A.8); zeros before the first packet.
func (s *receptionStats) totals() (received, lost uint64, jitter time.Duration) {
	if !s.started {
		return 0, 0, 0
	}
	expected := int64(s.cycles+uint32(s.maxSeq)) - int64(s.baseSeq) + 1
	if l := expected - int64(s.received); l > 0 {
		lost = uint64(l)
	}
	if s.clockRate > 0 {
		jitter = time.Duration(s.jitter / s.clockRate * float64(time.Second))
	}
	return uint64(s.received), lost, jitter
}

// remoteReports are what the page's RTCP receiver reports say of the agent's stream.
type remoteReports struct {
	mu      sync.Mutex
	reports uint64
	lost    uint64
	jitter  time.Duration
}

// take records the report blocks about ssrc (0: any) of one compound RTCP packet; clock is the
// stream's RTP clock rate, for the jitter.
func (r *remoteReports) take(pkts []rtcp.Packet, ssrc uint32, clock float64) {
	for _, pkt := range pkts {
		var blocks []rtcp.ReceptionReport
		switch x := pkt.(type) {
		case *rtcp.ReceiverReport:
			blocks = x.Reports
		case *rtcp.SenderReport:
			blocks = x.Reports
		}
		for _, b := range blocks {
			if ssrc != 0 && b.SSRC != ssrc {
				continue
			}
			lost := b.TotalLost & 0xffffff
			if lost&0x800000 != 0 { // a negative cumulative loss (duplicates): none lost
				lost = 0
			}
			r.mu.Lock()
			r.reports++
			r.lost = uint64(lost)
			if clock > 0 {
				r.jitter = time.Duration(float64(b.Jitter) / clock * float64(time.Second))
			}
			r.mu.Unlock()
		}
	}
}

// readSenderRTCP reads the RTCP the page sends about the agent's track (its receiver
// reports) until the connection closes: the interceptors see it, and the report blocks about
// the track's SSRC are kept for MediaStats. RTCP comes about once a second: parsing it is not
// on the per-packet path.
func (p *peer) readSenderRTCP(r interface {
	Read([]byte) (int, interceptor.Attributes, error)
}, ssrc func() uint32) {
	buf := make([]byte, 1500)
	clock := float64(p.codec.parameters().ClockRate)
	for {
		n, _, err := r.Read(buf)
		if err != nil {
			return
		}
		pkts, err := rtcp.Unmarshal(buf[:n])
		if err != nil {
			continue
		}
		p.remote.take(pkts, ssrc(), clock)
	}
}
