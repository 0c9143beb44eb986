package webrtc

import (
	"testing"
	"time"

	"github.com/pion/rtcp"
)

func TestReceptionStatsLossAndSequence(t *testing.T) {
	type pkt struct {
		ssrc uint32
		seq  uint16
	}
	run := func(seqs ...uint16) []pkt {
		out := make([]pkt, len(seqs))
		for i, s := range seqs {
			out[i] = pkt{1, s}
		}
		return out
	}
	span := func(from uint16, n int, skip ...uint16) []uint16 {
		var out []uint16
		for i := 0; i < n; i++ {
			s := from + uint16(i)
			drop := false
			for _, k := range skip {
				drop = drop || k == s
			}
			if !drop {
				out = append(out, s)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		pkts     []pkt
		extMax   uint32
		lost     uint32 // 24-bit two's complement
		fraction uint8
	}{
		{"in order", run(span(100, 100)...), 199, 0, 0},
		{"10% lost", run(span(100, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 195)...), 199, 10, 25},
		{"wrap", run(span(65530, 20)...), 1<<16 + 13, 0, 0},
		{"wrap with a loss", run(span(65530, 20, 2)...), 1<<16 + 13, 1, 12},
		{"duplicates", run(append(span(1, 10), 5, 6)...), 10, 0xfffffe, 0},
		{"reordered", run(1, 2, 4, 3, 5), 5, 0, 0},
		{"late packet after a wrap", run(65533, 65535, 0, 1, 65534, 2), 1<<16 + 2, 0, 0},
		{"unconfirmed jump ignored", run(1, 2, 3, 20000, 4, 5), 5, 0, 0},
		{"confirmed jump restarts", run(1, 2, 3, 20000, 20001, 20002), 20002, 0, 0},
		{"new source restarts", []pkt{{1, 10}, {1, 11}, {2, 500}, {2, 501}, {2, 503}}, 503, 1, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newReceptionStats(48000)
			if _, ok := s.report(0); ok {
				t.Fatal("a report before any packet")
			}
			for i, p := range tc.pkts {
				s.update(p.ssrc, p.seq, uint32(i)*960, time.Duration(i)*20*time.Millisecond)
			}
			rr, ok := s.report(time.Minute)
			if !ok {
				t.Fatal("no report")
			}
			if rr.SSRC != tc.pkts[len(tc.pkts)-1].ssrc || rr.LastSequenceNumber != tc.extMax || rr.TotalLost != tc.lost || rr.FractionLost != tc.fraction {
				t.Fatalf("report %+v, want highest %d lost %#x fraction %d", rr, tc.extMax, tc.lost, tc.fraction)
			}
			if _, err := (&rtcp.ReceiverReport{SSRC: 9, Reports: []rtcp.ReceptionReport{rr}}).Marshal(); err != nil {
				t.Fatalf("the report does not marshal: %v", err)
			}
		})
	}
}

// The fraction lost covers the interval since the previous report (RFC 3550 §6.4.1); the
// cumulative count keeps growing.
func TestReceptionStatsIntervals(t *testing.T) {
	s := newReceptionStats(8000)
	seq := uint16(0)
	send := func(n int, lose int) {
		for i := 0; i < n; i++ {
			if i < lose {
				seq++
				continue
			}
			s.update(7, seq, uint32(seq)*160, time.Duration(seq)*20*time.Millisecond)
			seq++
		}
	}
	send(50, 0)
	if rr, _ := s.report(time.Second); rr.FractionLost != 0 || rr.TotalLost != 0 {
		t.Fatalf("first interval %+v", rr)
	}
	send(50, 25) // the first 25 of the next 50 lost
	if rr, _ := s.report(2 * time.Second); rr.FractionLost != 128 || rr.TotalLost != 25 {
		t.Fatalf("second interval %+v, want half lost", rr)
	}
	send(50, 0)
	if rr, _ := s.report(3 * time.Second); rr.FractionLost != 0 || rr.TotalLost != 25 {
		t.Fatalf("third interval %+v", rr)
	}
}

func TestReceptionStatsJitter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		delay    func(i int) time.Duration
		min, max float64 // jitter in ms
	}{
		{"constant delay", func(int) time.Duration { return 30 * time.Millisecond }, 0, 0.01},
		{"alternating 0 and 10 ms", func(i int) time.Duration { return time.Duration(i%2) * 10 * time.Millisecond }, 9, 10.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newReceptionStats(48000)
			ts := uint32(4294960000) // wraps on the way
			for i := 0; i < 500; i++ {
				s.update(1, uint16(i), ts, time.Duration(i)*20*time.Millisecond+tc.delay(i))
				ts += 960
			}
			rr, _ := s.report(0)
			ms := float64(rr.Jitter) / 48
			if ms < tc.min || ms > tc.max {
				t.Fatalf("jitter %.2f ms, want %.2f..%.2f", ms, tc.min, tc.max)
			}
		})
	}
}

// LSR and DLSR (RFC 3550 §6.4.1) come from the source's last sender report.
func TestReceptionStatsSenderReport(t *testing.T) {
	s := newReceptionStats(48000)
	s.noteSR(5, 0x1122334455667788, time.Second) // before the first packet: kept
	s.update(5, 1, 0, time.Second)
	rr, _ := s.report(1500 * time.Millisecond)
	if rr.LastSenderReport != 0x33445566 || rr.Delay != 32768 {
		t.Fatalf("LSR %#x DLSR %d, want 0x33445566 and 0.5 s (32768)", rr.LastSenderReport, rr.Delay)
	}
	s.noteSR(6, 0xaaaaaaaaaaaaaaaa, 2*time.Second) // another source's: ignored
	s.noteSR(5, 0x0000000100020000, 2*time.Second)
	rr, _ = s.report(2 * time.Second)
	if rr.LastSenderReport != 0x00010002 || rr.Delay != 0 {
		t.Fatalf("LSR %#x DLSR %d", rr.LastSenderReport, rr.Delay)
	}
	s.update(9, 1, 0, 3*time.Second) // a new source: its own reports only
	if rr, _ := s.report(3 * time.Second); rr.LastSenderReport != 0 || rr.Delay != 0 {
		t.Fatalf("the old source's SR was kept for the new one: %+v", rr)
	}
}

func TestSenderReports(t *testing.T) {
	compound, err := rtcp.Marshal([]rtcp.Packet{
		&rtcp.SenderReport{SSRC: 42, NTPTime: 0x0102030405060708, RTPTime: 9, PacketCount: 1, OctetCount: 2,
			Reports: []rtcp.ReceptionReport{{SSRC: 1}}},
		&rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{Source: 42, Items: []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "page"}}}}},
		&rtcp.ReceiverReport{SSRC: 43},
		&rtcp.SenderReport{SSRC: 44, NTPTime: 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	type sr struct {
		ssrc uint32
		ntp  uint64
	}
	var got []sr
	senderReports(compound, func(ssrc uint32, ntp uint64) { got = append(got, sr{ssrc, ntp}) })
	if len(got) != 2 || got[0] != (sr{42, 0x0102030405060708}) || got[1] != (sr{44, 7}) {
		t.Fatalf("sender reports %+v", got)
	}
	got = nil
	senderReports(compound[:20], func(ssrc uint32, ntp uint64) { got = append(got, sr{ssrc, ntp}) })
	if len(got) != 0 {
		t.Fatalf("a truncated SR was read: %+v", got)
	}
}

func FuzzSenderReports(f *testing.F) {
	b, _ := rtcp.Marshal([]rtcp.Packet{&rtcp.SenderReport{SSRC: 1, NTPTime: 2}, &rtcp.ReceiverReport{SSRC: 3}})
	f.Add(b)
	f.Add([]byte{0x80, 200, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		senderReports(b, func(uint32, uint64) {})
	})
}

func BenchmarkReceptionStats(b *testing.B) {
	s := newReceptionStats(48000)
	b.ReportAllocs()
	var at time.Duration
	for i := 0; b.Loop(); i++ {
		at += 20 * time.Millisecond
		s.update(1, uint16(i), uint32(i)*960, at)
	}
}
