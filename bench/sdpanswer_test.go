package bench

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParseSDPAnswer(t *testing.T) {
	cases := []struct {
		name, body string
		rtp, rtcp  string
		pts        []uint8
		bad        bool
	}{
		{name: "session-level c", body: "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 20000 RTP/AVP 0 101\r\na=rtcp:20001\r\n",
			rtp: "127.0.0.1:20000", rtcp: "127.0.0.1:20001", pts: []uint8{0, 101}},
		{name: "media-level c wins", body: "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 8\r\nc=IN IP4 127.0.0.2\r\n",
			rtp: "127.0.0.2:4000", pts: []uint8{8}},
		{name: "video first", body: "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=video 5000 RTP/AVP 96\r\nm=audio 5002 RTP/AVP 0\r\n",
			rtp: "1.2.3.4:5002", pts: []uint8{0}},
		{name: "refused stream", body: "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=audio 0 RTP/AVP 0\r\n", bad: true},
		{name: "no c", body: "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nt=0 0\r\nm=audio 5 RTP/AVP 0\r\n", bad: true},
		{name: "no audio", body: "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\n", bad: true},
		{name: "garbage", body: "hello", bad: true},
		{name: "hostname", body: "v=0\r\no=- 1 1 IN IP4 h\r\ns=-\r\nc=IN IP4 example\r\nt=0 0\r\nm=audio 5 RTP/AVP 0\r\n", bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := parseSDPAnswer([]byte(c.body))
			if c.bad {
				if !errors.Is(err, errSDP) {
					t.Fatalf("err = %v, want errSDP", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.RTP != netip.MustParseAddrPort(c.rtp) {
				t.Errorf("rtp %v", a.RTP)
			}
			if c.rtcp != "" && a.RTCP != netip.MustParseAddrPort(c.rtcp) {
				t.Errorf("rtcp %v", a.RTCP)
			}
			if len(a.PayloadTypes) != len(c.pts) || a.PayloadTypes[0] != c.pts[0] {
				t.Errorf("payload types %v", a.PayloadTypes)
			}
		})
	}
}

func TestSDPOfferParses(t *testing.T) {
	offer := sdpOffer(netip.MustParseAddr("127.0.0.1"), 30000, 30011, 7)
	a, err := parseSDPAnswer(offer)
	if err != nil {
		t.Fatal(err)
	}
	if a.RTP.Port() != 30000 || a.RTCP.Port() != 30011 || a.PayloadTypes[0] != 0 {
		t.Errorf("%+v", a)
	}
}

func FuzzParseSDPAnswer(f *testing.F) {
	f.Add([]byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 20000 RTP/AVP 0 101\r\na=rtcp:20001\r\n"))
	f.Add([]byte("v=0\r\nm=audio 99999 RTP/AVP 300\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseSDPAnswer(b)
		if err == nil && (!a.RTP.IsValid() || a.RTP.Port() == 0) {
			t.Fatalf("accepted %+v", a)
		}
	})
}
