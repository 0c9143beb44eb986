package sip

import "testing"

func TestParseDTMFInfo(t *testing.T) {
	cases := []struct {
		ct, body string
		digit    rune
		ok       bool
	}{
		{"application/dtmf-relay", "Signal=5\r\nDuration=160\r\n", '5', true},
		{"application/dtmf-relay", "signal= #\nduration=100", '#', true},
		{"application/dtmf-relay", "Signal=11\r\n", '#', true},
		{"application/dtmf-relay", "Signal=10", '*', true},
		{"application/dtmf-relay", "Signal=a", 'A', true},
		{"application/dtmf-relay", "Duration=160", 0, false},
		{"application/dtmf-relay", "Signal=16", 0, false},
		{"application/dtmf-relay", "Signal=x", 0, false},
		{"application/dtmf", "7", '7', true},
		{"application/dtmf", " 0 ", '0', true},
		{"application/dtmf", "12", 'A', true},
		{"application/dtmf", "", 0, false},
		{"text/plain", "5", 0, false},
	}
	for _, tc := range cases {
		d, err := parseDTMFInfo(tc.ct, []byte(tc.body))
		if (err == nil) != tc.ok || d != tc.digit {
			t.Errorf("parseDTMFInfo(%q, %q) = %q, %v; want %q ok=%v", tc.ct, tc.body, d, err, tc.digit, tc.ok)
		}
	}
	if got := string(formatDTMFRelay('9', 160e6)); got != "Signal=9\r\nDuration=160\r\n" {
		t.Errorf("formatDTMFRelay %q", got)
	}
}

func TestParseSipfrag(t *testing.T) {
	cases := []struct {
		body   string
		status int
		reason string
		ok     bool
	}{
		{"SIP/2.0 200 OK\r\n", 200, "OK", true},
		{"SIP/2.0 100 Trying", 100, "Trying", true},
		{"SIP/2.0 486 Busy Here\r\nContent-Length: 0\r\n", 486, "Busy Here", true},
		{"SIP/2.0 603", 603, "", true},
		{"HTTP/1.1 200 OK", 0, "", false},
		{"SIP/2.0 99 Odd", 0, "", false},
		{"", 0, "", false},
	}
	for _, tc := range cases {
		f, err := parseSipfrag([]byte(tc.body))
		if (err == nil) != tc.ok || f.status != tc.status || f.reason != tc.reason {
			t.Errorf("parseSipfrag(%q) = %+v, %v", tc.body, f, err)
		}
	}
}
