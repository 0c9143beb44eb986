package webrtc

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCodecs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []Codec
		ok   bool
	}{
		{nil, []Codec{CodecOpus, CodecPCMU}, true},
		{[]string{"PCMU", "opus"}, []Codec{CodecPCMU, CodecOpus}, true},
		{[]string{" opus ", "opus"}, []Codec{CodecOpus}, true},
		{[]string{"g729"}, nil, false},
	} {
		got, err := parseCodecs(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Fatalf("%v: %v %v", tc.in, got, err)
		}
	}
}

const chromeOffer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r\nc=IN IP4 0.0.0.0\r\n" +
	"a=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\na=rtpmap:63 red/48000/2\r\na=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\n" +
	"a=rtpmap:8 PCMA/8000\r\na=rtpmap:13 CN/8000\r\na=rtpmap:110 telephone-event/48000\r\na=rtpmap:126 telephone-event/8000\r\n"

func TestOfferedCodecs(t *testing.T) {
	got, err := offeredCodecs(chromeOffer)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []Codec{CodecOpus, CodecPCMU}) {
		t.Fatalf("offered %v", got)
	}
	if _, err := offeredCodecs("nonsense"); err == nil {
		t.Fatal("nonsense parsed")
	}
}

func TestWithOpusFmtp(t *testing.T) {
	answer := "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\na=sendrecv\r\n"
	got := withOpusFmtp(answer)
	if !strings.Contains(got, "a=fmtp:111 "+opusFmtp+"\r\n") || strings.Count(got, "a=fmtp:111") != 1 {
		t.Fatalf("fmtp not replaced:\n%s", got)
	}
	noFmtp := "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 OPUS/48000/2\r\n"
	if got := withOpusFmtp(noFmtp); !strings.Contains(got, "a=rtpmap:96 OPUS/48000/2\r\na=fmtp:96 "+opusFmtp) {
		t.Fatalf("fmtp not added:\n%s", got)
	}
	pcmu := "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=rtpmap:0 PCMU/8000\r\n"
	if withOpusFmtp(pcmu) != pcmu {
		t.Fatal("a PCMU answer changed")
	}
}

func TestRTCAPIOptions(t *testing.T) {
	for _, o := range []rtcAPIOptions{
		{Host: "not-an-ip", Codecs: []Codec{CodecOpus}, Log: quietLog()},
		{Host: "127.0.0.1", Port: 70000, Codecs: []Codec{CodecOpus}, Log: quietLog()},
		{Host: "127.0.0.1", PublicIP: "nope", Codecs: []Codec{CodecOpus}, Log: quietLog()},
		{Host: "127.0.0.1", Log: quietLog()},
	} {
		if a, err := newRTCAPI(o); err == nil {
			a.Close()
			t.Fatalf("%+v accepted", o)
		}
	}
}
