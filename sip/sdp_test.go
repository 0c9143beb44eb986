package sip

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// carrierOffer is an offer as Twilio-style trunks send it: several codecs, telephone-event,
// a=rtcp, CRLF line ends.
const carrierOffer = "v=0\r\n" +
	"o=root 1404537414 1404537414 IN IP4 198.51.100.10\r\n" +
	"s=Twilio Media Gateway\r\n" +
	"c=IN IP4 198.51.100.10\r\n" +
	"t=0 0\r\n" +
	"m=audio 17584 RTP/AVP 0 8 101\r\n" +
	"a=rtpmap:0 PCMU/8000\r\n" +
	"a=rtpmap:8 PCMA/8000\r\n" +
	"a=rtpmap:101 telephone-event/8000\r\n" +
	"a=fmtp:101 0-16\r\n" +
	"a=ptime:20\r\n" +
	"a=rtcp:17585 IN IP4 198.51.100.10\r\n" +
	"a=sendrecv\r\n"

func TestParseSDP(t *testing.T) {
	sd, err := ParseSDP([]byte(carrierOffer))
	if err != nil {
		t.Fatal(err)
	}
	if sd.Origin.SessionID != 1404537414 || sd.Name != "Twilio Media Gateway" {
		t.Errorf("origin %+v name %q", sd.Origin, sd.Name)
	}
	if len(sd.Media) != 1 {
		t.Fatalf("%d media", len(sd.Media))
	}
	m := &sd.Media[0]
	if m.Port != 17584 || m.Proto != "RTP/AVP" || strings.Join(m.Formats, " ") != "0 8 101" {
		t.Errorf("m= %+v", m)
	}
	if m.RTPMaps[101] != (RTPMap{Name: "telephone-event", ClockRate: 8000, Channels: 1}) || m.FMTPs[101] != "0-16" {
		t.Errorf("rtpmap/fmtp %v %v", m.RTPMaps, m.FMTPs)
	}
	if got := sd.AudioAddr(m); got != netip.MustParseAddrPort("198.51.100.10:17584") {
		t.Errorf("audio addr %v", got)
	}
	if got := sd.RTCPAddrPort(m); got != netip.MustParseAddrPort("198.51.100.10:17585") {
		t.Errorf("rtcp addr %v", got)
	}
	if sd.MediaDirection(m) != SendRecv || m.Ptime != 20 {
		t.Errorf("direction %q ptime %d", sd.MediaDirection(m), m.Ptime)
	}
	// Round trip: what we render parses back the same.
	again, err := ParseSDP(sd.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if again.Media[0].Port != m.Port || len(again.Media[0].RTPMaps) != 3 || again.Media[0].RTCPPort != 17585 {
		t.Errorf("round trip %+v", again.Media[0])
	}
}

func TestParseSDPErrors(t *testing.T) {
	cases := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"no v=0 first", "o=- 1 1 IN IP4 1.2.3.4\r\nv=0\r\n"},
		{"wrong version", "v=1\r\no=- 1 1 IN IP4 1.2.3.4\r\n"},
		{"no origin", "v=0\r\ns=-\r\n"},
		{"short origin", "v=0\r\no=- 1 IN IP4 1.2.3.4\r\n"},
		{"origin not numbers", "v=0\r\no=- x y IN IP4 1.2.3.4\r\n"},
		{"bad line", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nthis is not sdp\r\n"},
		{"hostname in c=", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nc=IN IP4 media.example.com\r\n"},
		{"family mismatch", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nc=IN IP6 1.2.3.4\r\n"},
		{"port out of range", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nm=audio 70000 RTP/AVP 0\r\n"},
		{"payload type out of range", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP 200\r\n"},
		{"m= without format", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP\r\n"},
		{"bad rtpmap rate", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP 0\r\na=rtpmap:0 PCMU/fast\r\n"},
		{"bad rtpmap channels", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP 96\r\na=rtpmap:96 opus/48000/99\r\n"},
		{"too large", "v=0\r\n" + strings.Repeat("a=x\r\n", maxSDPBody/5)},
		{"too many media", "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\n" + strings.Repeat("m=audio 1 RTP/AVP 0\r\n", maxSDPMedia+1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseSDP([]byte(tc.body)); !errors.Is(err, ErrBadSDP) {
				t.Fatalf("err %v, want ErrBadSDP", err)
			}
		})
	}
}

func TestParseSDPTolerant(t *testing.T) {
	// Bare LF, blank lines, unknown lines and attributes, a fractional ptime, c=0.0.0.0 hold.
	body := "v=0\no=- 5 6 IN IP4 10.0.0.1\ns=-\nc=IN IP4 0.0.0.0\nb=AS:64\nt=0 0\n\nm=audio 4000 RTP/AVP 8\na=ptime:20.5\na=x-unknown:1\na=label:1\n"
	sd, err := ParseSDP([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	m := &sd.Media[0]
	if m.Ptime != 20 {
		t.Errorf("ptime %d", m.Ptime)
	}
	if sd.AudioAddr(m).IsValid() {
		t.Error("0.0.0.0 gave an address")
	}
	if sd.MediaDirection(m) != SendOnly {
		t.Errorf("c=0.0.0.0 hold read as %q", sd.MediaDirection(m))
	}
}

// FuzzParseSDP: no input makes the parser panic; what it accepts it can render and parse again.
func FuzzParseSDP(f *testing.F) {
	f.Add([]byte(carrierOffer))
	f.Add([]byte("v=0\no=- 1 1 IN IP6 ::1\nc=IN IP6 ::1\nm=audio 9 RTP/AVPF 111\na=rtpmap:111 opus/48000/2\na=rtcp-mux\n"))
	f.Add([]byte("v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\nm=audio 1/2 RTP/AVP 0\r\na=rtcp:9\r\na=inactive\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sd, err := ParseSDP(b)
		if err != nil {
			if !errors.Is(err, ErrBadSDP) {
				t.Fatalf("error %v does not wrap ErrBadSDP", err)
			}
			return
		}
		out := sd.Marshal()
		if _, err := ParseSDP(out); err != nil {
			t.Fatalf("cannot parse our own rendering: %v\n%q\nfrom %q", err, out, b)
		}
		for i := range sd.Media {
			sd.AudioAddr(&sd.Media[i])
			sd.RTCPAddrPort(&sd.Media[i])
			sd.MediaDirection(&sd.Media[i])
		}
	})
}
