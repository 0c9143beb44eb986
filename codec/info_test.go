package codec

import "testing"

func TestInfoValues(t *testing.T) {
	// RFC 3551 Table 4 (static types) and RFC 7587 §7 (opus/48000/2).
	cases := []struct {
		info               Info
		pt                 uint8
		clock              uint32
		rate, ch           int
		rtpmap             string
		ticks20, samples20 int
	}{
		{PCMU, 0, 8000, 8000, 1, "PCMU/8000", 160, 160},
		{PCMA, 8, 8000, 8000, 1, "PCMA/8000", 160, 160},
		{G722, 9, 8000, 16000, 1, "G722/8000", 160, 320},
		{Opus, 111, 48000, 48000, 2, "opus/48000/2", 960, 960},
		{TelephoneEvent, 101, 8000, 8000, 1, "telephone-event/8000", 160, 160},
	}
	for _, tc := range cases {
		i := tc.info
		if i.PayloadType != tc.pt || i.ClockRate != tc.clock || i.SampleRate != tc.rate || i.Channels != tc.ch {
			t.Errorf("%s: %+v", i.Name, i)
		}
		if got := i.RTPMap(); got != tc.rtpmap {
			t.Errorf("%s: RTPMap %q, want %q", i.Name, got, tc.rtpmap)
		}
		if got := i.TimestampTicks(20); got != uint32(tc.ticks20) {
			t.Errorf("%s: 20 ms is %d ticks, want %d", i.Name, got, tc.ticks20)
		}
		if got := i.SamplesPerFrame(20); got != tc.samples20 {
			t.Errorf("%s: 20 ms is %d samples, want %d", i.Name, got, tc.samples20)
		}
	}
}

func TestLookupInfo(t *testing.T) {
	cases := []struct {
		name  string
		clock uint32
		want  Info
		ok    bool
	}{
		{"pcmu", 8000, PCMU, true},
		{"PCMA", 8000, PCMA, true},
		{"G722", 8000, G722, true},
		{"OPUS", 48000, Opus, true},
		{"telephone-event", 8000, TelephoneEvent, true},
		{"telephone-event", 48000, Info{Name: "telephone-event", PayloadType: 101, ClockRate: 48000, SampleRate: 48000, Channels: 1}, true},
		{"PCMU", 16000, Info{}, false},
		{"G729", 8000, Info{}, false},
	}
	for _, tc := range cases {
		got, ok := LookupInfo(tc.name, tc.clock)
		if ok != tc.ok || got != tc.want {
			t.Errorf("LookupInfo(%q, %d) = %+v, %v", tc.name, tc.clock, got, ok)
		}
	}
}
