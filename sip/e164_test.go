package sip

import "testing"

func TestNormalizeE164(t *testing.T) {
	cases := []struct {
		in, cc string
		out    string
		ok     bool
	}{
		{"+14155550100", "", "+14155550100", true},
		{"+1 (415) 555-0100", "", "+14155550100", true},
		{"+44.20.7946.0958", "", "+442079460958", true},
		{"+14155550100;phone-context=+1", "", "+14155550100", true},
		{"0014155550100", "", "+14155550100", true},
		{"14155550100", "1", "+14155550100", true},
		{"4155550100", "1", "+14155550100", true},
		{"4155550100", "", "4155550100", false},
		{"02079460958", "44", "+442079460958", true},
		{"alice", "", "alice", false},
		{"+123", "", "+123", false},
		{"+1234567890123456", "", "+1234567890123456", false},
		{"+0123456789", "", "+0123456789", false},
		{"*98", "1", "*98", false},
		{"", "", "", false},
	}
	for _, tc := range cases {
		out, ok := NormalizeE164(tc.in, tc.cc)
		if out != tc.out || ok != tc.ok {
			t.Errorf("NormalizeE164(%q, %q) = %q %v, want %q %v", tc.in, tc.cc, out, ok, tc.out, tc.ok)
		}
	}
}
