package media

import (
	"math"
	"testing"
	"time"
)

func TestRTPReceptionSequence(t *testing.T) {
	tests := []struct {
		name     string
		seqs     []uint16
		extMax   uint32
		lost     int64
		received uint32
	}{
		{"in order", []uint16{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, 109, 0, 10},
		{"gap", []uint16{100, 101, 104, 105}, 105, 2, 4},
		{"wrap", []uint16{65534, 65535, 0, 1}, 65536 + 1, 0, 4},
		{"reordered", []uint16{100, 102, 101, 103}, 103, 0, 4},
		{"duplicate", []uint16{100, 101, 101, 102}, 102, -1, 4},
		{"reordered across wrap", []uint16{65535, 1, 0}, 65536 + 1, 0, 3},
		{"loss across wrap", []uint16{65533, 2}, 65536 + 2, 4, 2},
		{"big jump ignored", []uint16{100, 101, 20000, 102}, 102, 0, 3},
		{"big jump then sequential restarts", []uint16{100, 101, 20000, 20001, 20002}, 20002, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s rtpReception
			s.reset(1, tt.seqs[0])
			s.updateSeq(tt.seqs[0])
			for _, q := range tt.seqs[1:] {
				s.updateSeq(q)
			}
			if got := s.extendedMax(); got != tt.extMax {
				t.Errorf("extendedMax = %d, want %d", got, tt.extMax)
			}
			if got := s.cumulativeLost(); got != tt.lost {
				t.Errorf("cumulativeLost = %d, want %d", got, tt.lost)
			}
			if s.received != tt.received {
				t.Errorf("received = %d, want %d", s.received, tt.received)
			}
		})
	}
}

func TestRTPReceptionReportIntervals(t *testing.T) {
	var s rtpReception
	s.reset(0xabc, 100)
	for q := uint16(100); q < 110; q++ {
		if q == 103 || q == 107 {
			continue // 2 of 10 lost
		}
		s.updateSeq(q)
	}
	now := time.Unix(1000, 0)
	rr := s.report(now, 0, time.Time{})
	if rr.SSRC != 0xabc || rr.TotalLost != 2 || rr.LastSequenceNumber != 109 {
		t.Fatalf("report 1 = %+v", rr)
	}
	if want := uint8(2 * 256 / 10); rr.FractionLost != want {
		t.Fatalf("fraction lost = %d, want %d", rr.FractionLost, want)
	}
	if rr.LastSenderReport != 0 || rr.Delay != 0 {
		t.Fatalf("LSR/DLSR = %d/%d without an SR, want 0/0", rr.LastSenderReport, rr.Delay)
	}
	// Second interval: nothing lost; the cumulative count stays.
	for q := uint16(110); q < 120; q++ {
		s.updateSeq(q)
	}
	rr = s.report(now, 0x12345678, now.Add(-1500*time.Millisecond))
	if rr.FractionLost != 0 || rr.TotalLost != 2 || rr.LastSequenceNumber != 119 {
		t.Fatalf("report 2 = %+v", rr)
	}
	if rr.LastSenderReport != 0x12345678 || rr.Delay != 98304 { // 1.5 s in 1/65536 s
		t.Fatalf("LSR/DLSR = %#x/%d, want 0x12345678/98304", rr.LastSenderReport, rr.Delay)
	}
	// Third interval: no packets at all.
	rr = s.report(now, 0, time.Time{})
	if rr.FractionLost != 0 {
		t.Fatalf("fraction lost with no packets expected = %d", rr.FractionLost)
	}
	// Duplicates make the interval's loss negative: reported as 0 (A.3).
	s.updateSeq(119)
	s.updateSeq(119)
	if rr = s.report(now, 0, time.Time{}); rr.FractionLost != 0 {
		t.Fatalf("fraction lost with duplicates = %d", rr.FractionLost)
	}
}

func TestRTPReceptionJitter(t *testing.T) {
	tests := []struct {
		name    string
		arrival []uint32 // RTP units
		ts      []uint32
	}{
		{"constant transit", []uint32{1000, 1160, 1320, 1480}, []uint32{0, 160, 320, 480}},
		{"alternating 10 ms late", []uint32{1000, 1240, 1320, 1560, 1640, 1880}, []uint32{0, 160, 320, 480, 640, 800}},
		{"timestamps wrap", []uint32{500, 660, 900, 980}, []uint32{math.MaxUint32 - 159, 0, 160, 320}},
		{"one late packet", []uint32{0, 160, 800, 480, 640}, []uint32{0, 160, 320, 480, 640}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s rtpReception
			s.reset(1, 0)
			ref := 0.0 // the floating-point form of A.8
			for i := range tt.arrival {
				s.updateJitter(tt.arrival[i], tt.ts[i])
				if i > 0 {
					d := float64(int32((tt.arrival[i] - tt.ts[i]) - (tt.arrival[i-1] - tt.ts[i-1])))
					ref += (math.Abs(d) - ref) / 16
				}
			}
			if got := float64(s.jitterTicks()); math.Abs(got-ref) > 1 {
				t.Fatalf("jitter = %v ticks, A.8 float reference %v", got, ref)
			}
		})
	}
	var s rtpReception
	s.reset(1, 0)
	s.updateJitter(0, 0)
	s.updateJitter(320, 160) // D = 160
	if got := s.jitterTicks(); got != 10 {
		t.Fatalf("jitter after one 160-tick deviation = %d, want 10", got)
	}
}

func TestLost24(t *testing.T) {
	tests := []struct {
		in   int64
		wire uint32
		out  int64
	}{
		{0, 0, 0},
		{5, 5, 5},
		{-1, 0xffffff, -1},
		{0x7fffff, 0x7fffff, 0x7fffff},
		{0x800000, 0x7fffff, 0x7fffff},   // clamped
		{-0x800000, 0x800000, -0x800000}, //
		{-0x900000, 0x800000, -0x800000}, // clamped
	}
	for _, tt := range tests {
		if got := clampLost24(tt.in); got != tt.wire {
			t.Errorf("clampLost24(%d) = %#x, want %#x", tt.in, got, tt.wire)
		}
		if got := signedLost24(tt.wire); got != tt.out {
			t.Errorf("signedLost24(%#x) = %d, want %d", tt.wire, got, tt.out)
		}
	}
}
