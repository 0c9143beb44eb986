package media

import (
	"testing"
	"time"

	"github.com/pion/rtcp"
)

func TestNTPConversions(t *testing.T) {
	if got, want := ntpTime(time.Unix(0, 0)), uint64(ntpEpochOffset)<<32; got != want {
		t.Fatalf("ntpTime(Unix epoch) = %#x, want %#x", got, want)
	}
	if got, want := ntpTime(time.Unix(1, 500_000_000)), (uint64(ntpEpochOffset+1)<<32)|0x80000000; got != want {
		t.Fatalf("ntpTime(1.5 s) = %#x, want %#x", got, want)
	}
	if got := ntpShort(0x1122334455667788); got != 0x33445566 {
		t.Fatalf("ntpShort = %#x", got)
	}
	tests := []struct {
		d time.Duration
		v uint32
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Second, 65536},
		{1500 * time.Millisecond, 98304},
		{250 * time.Millisecond, 16384},
	}
	for _, tt := range tests {
		if got := durationToNTPShort(tt.d); got != tt.v {
			t.Errorf("durationToNTPShort(%v) = %d, want %d", tt.d, got, tt.v)
		}
		if tt.d > 0 {
			if got := ntpShortToDuration(tt.v); got != tt.d {
				t.Errorf("ntpShortToDuration(%d) = %v, want %v", tt.v, got, tt.d)
			}
		}
	}
}

func TestRTCPSender(t *testing.T) {
	tests := []struct {
		name string
		pkts []rtcp.Packet
		ssrc uint32
		ok   bool
	}{
		{"SR first", []rtcp.Packet{&rtcp.SenderReport{SSRC: 1}, rtcp.NewCNAMESourceDescription(2, "x")}, 1, true},
		{"RR first", []rtcp.Packet{&rtcp.ReceiverReport{SSRC: 3}}, 3, true},
		{"SDES only", []rtcp.Packet{rtcp.NewCNAMESourceDescription(4, "x")}, 4, true},
		{"BYE only", []rtcp.Packet{&rtcp.Goodbye{Sources: []uint32{5}}}, 5, true},
		{"empty BYE", []rtcp.Packet{&rtcp.Goodbye{}}, 0, false},
		{"PLI only", []rtcp.Packet{&rtcp.PictureLossIndication{SenderSSRC: 6}}, 0, false},
	}
	for _, tt := range tests {
		ssrc, ok := rtcpSender(tt.pkts)
		if ssrc != tt.ssrc || ok != tt.ok {
			t.Errorf("%s: rtcpSender = %d, %v; want %d, %v", tt.name, ssrc, ok, tt.ssrc, tt.ok)
		}
	}
}
