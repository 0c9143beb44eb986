package sip

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/parley-voice/parley/codec"
)

func mustSDP(t *testing.T, s string) *SessionDescription {
	t.Helper()
	sd, err := ParseSDP([]byte(strings.ReplaceAll(s, "\n", "\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	return sd
}

const offerHead = "v=0\no=- 1 1 IN IP4 192.0.2.7\ns=-\nc=IN IP4 192.0.2.7\nt=0 0\n"

func TestAnswerOffer(t *testing.T) {
	local := netip.MustParseAddrPort("203.0.113.5:30000")
	cases := []struct {
		name      string
		offer     string
		codecs    []codec.Info
		audio     string
		pt        uint8
		dtmfPT    int // -1: none
		local     Direction
		ptime     int
		answerFmt string
	}{
		{"offerer's first codec wins", "m=audio 4000 RTP/AVP 8 0 101\na=rtpmap:101 telephone-event/8000\n",
			DefaultCodecs, "PCMA", 8, 101, SendRecv, 20, "8 101"},
		{"skips what we lack", "m=audio 4000 RTP/AVP 18 9 0\n", DefaultCodecs, "G722", 9, -1, SendRecv, 20, "9"},
		{"dynamic opus with 48k telephone-event", "m=audio 4000 RTP/AVP 96 97 98\na=rtpmap:96 opus/48000/2\na=rtpmap:97 telephone-event/8000\na=rtpmap:98 telephone-event/48000\n",
			DefaultCodecs, "opus", 96, 98, SendRecv, 20, "96 98"},
		{"our codec set filters", "m=audio 4000 RTP/AVP 0 8\n", []codec.Info{codec.PCMA}, "PCMA", 8, -1, SendRecv, 20, "8"},
		{"hold: sendonly answered recvonly", "m=audio 4000 RTP/AVP 0\na=sendonly\n", DefaultCodecs, "PCMU", 0, -1, RecvOnly, 20, "0"},
		{"inactive", "m=audio 4000 RTP/AVP 0\na=inactive\n", DefaultCodecs, "PCMU", 0, -1, Inactive, 20, "0"},
		{"their ptime", "m=audio 4000 RTP/AVP 0\na=ptime:30\n", DefaultCodecs, "PCMU", 0, -1, SendRecv, 30, "0"},
		{"video rejected, audio second", "m=video 5000 RTP/AVP 31\nm=audio 4000 RTP/AVP 0\n", DefaultCodecs, "PCMU", 0, -1, SendRecv, 20, "0"},
		{"opus must say 2 channels", "m=audio 4000 RTP/AVP 96 0\na=rtpmap:96 opus/48000\n", DefaultCodecs, "PCMU", 0, -1, SendRecv, 20, "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, ans, err := answerOffer(mustSDP(t, offerHead+tc.offer), tc.codecs, local, Origin{SessionID: 9, SessionVersion: 9})
			if err != nil {
				t.Fatal(err)
			}
			if n.Audio.Name != tc.audio || n.Audio.PayloadType != tc.pt {
				t.Errorf("audio %s/%d, want %s/%d", n.Audio.Name, n.Audio.PayloadType, tc.audio, tc.pt)
			}
			if (tc.dtmfPT < 0) == n.HasDTMF || (n.HasDTMF && int(n.DTMF.PayloadType) != tc.dtmfPT) {
				t.Errorf("dtmf %v %d, want %d", n.HasDTMF, n.DTMF.PayloadType, tc.dtmfPT)
			}
			if n.Local != tc.local || n.Ptime != tc.ptime {
				t.Errorf("local %s ptime %d", n.Local, n.Ptime)
			}
			if n.Remote != netip.MustParseAddrPort("192.0.2.7:4000") {
				t.Errorf("remote %v", n.Remote)
			}
			var audio *MediaDescription
			for i := range ans.Media {
				if ans.Media[i].Type == "audio" && ans.Media[i].Port != 0 {
					audio = &ans.Media[i]
				}
			}
			if audio == nil || strings.Join(audio.Formats, " ") != tc.answerFmt || audio.Port != 30000 || audio.Direction != tc.local {
				t.Errorf("answer %s", ans.Marshal())
			}
			if len(ans.Media) != len(mustSDP(t, offerHead+tc.offer).Media) {
				t.Errorf("answer has %d media sections, the offer %d (RFC 3264 §6)", len(ans.Media), len(mustSDP(t, offerHead+tc.offer).Media))
			}
			if strings.EqualFold(n.Audio.Name, "opus") && n.Audio.SampleRate != 16000 {
				t.Errorf("opus runs at %d Hz", n.Audio.SampleRate)
			}
		})
	}
}

// TestAnswerOfferNoCommonCodec: offers answerOffer cannot take. (An RTP/SAVP offer on a trunk
// without SRTP is refused by answerOfferSRTP's policy before the codec choice: srtp_test.go.)
func TestAnswerOfferNoCommonCodec(t *testing.T) {
	for _, offer := range []string{
		"m=audio 4000 RTP/AVP 18 3\n",
		"m=video 4000 RTP/AVP 31\n",
		"m=audio 0 RTP/AVP 0\n",
	} {
		if _, _, err := answerOffer(mustSDP(t, offerHead+offer), DefaultCodecs, netip.MustParseAddrPort("1.2.3.4:5"), Origin{}); !errors.Is(err, ErrNoCommonCodec) {
			t.Errorf("%q: err %v", offer, err)
		}
	}
}

func TestOfferAndAnswer(t *testing.T) {
	local := netip.MustParseAddrPort("203.0.113.5:30000")
	offer := buildOffer(DefaultCodecs, local, Origin{SessionID: 1, SessionVersion: 1}, SendRecv)
	body := string(offer.Marshal())
	for _, want := range []string{"m=audio 30000 RTP/AVP 0 8 9 111 110 101", "c=IN IP4 203.0.113.5", "a=rtpmap:111 opus/48000/2",
		"a=fmtp:111 minptime=20;useinbandfec=1", "a=rtpmap:110 telephone-event/48000", "a=rtpmap:101 telephone-event/8000",
		"a=ptime:20", "a=sendrecv"} {
		if !strings.Contains(body, want) {
			t.Errorf("offer lacks %q:\n%s", want, body)
		}
	}
	// A configured order is kept.
	g722First := string(buildOffer([]codec.Info{codec.G722, codec.PCMU}, local, Origin{}, SendRecv).Marshal())
	if !strings.Contains(g722First, "RTP/AVP 9 0 101") {
		t.Errorf("order not kept:\n%s", g722First)
	}
	ans := mustSDP(t, offerHead+"m=audio 4000 RTP/AVP 111 110\na=rtpmap:111 opus/48000/2\na=rtpmap:110 telephone-event/48000\n")
	n, err := takeAnswer(ans, DefaultCodecs)
	if err != nil {
		t.Fatal(err)
	}
	if n.Audio.Name != "opus" || !n.HasDTMF || n.DTMF.ClockRate != 48000 || n.Audio.SampleRate != 16000 {
		t.Errorf("%+v", n)
	}
	if _, err := takeAnswer(mustSDP(t, offerHead+"m=audio 0 RTP/AVP 0\n"), DefaultCodecs); !errors.Is(err, ErrNoCommonCodec) {
		t.Errorf("rejected stream: %v", err)
	}
}

// TestAnswerDTMFEvents: issue 22 item 13: the answer's telephone-event list never names an
// event the offer did not (RFC 4733 §2.4.1, §7.1.1).
func TestAnswerDTMFEvents(t *testing.T) {
	for offered, want := range map[string]string{"0-15": "0-15", "0-16": "0-16", "": "0-15", "0-11": "0-11",
		"0-15,66,70": "0-15", "1,3-5,16": "1,3-5,16", "0-255": "0-16"} {
		if got := answerEvents(offered); got != want {
			t.Errorf("offer %q: answer %q, want %q", offered, got, want)
		}
	}
	offer, err := ParseSDP([]byte("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n" +
		"m=audio 40000 RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, ans, err := answerOffer(offer, DefaultCodecs, netip.MustParseAddrPort("127.0.0.1:20000"), Origin{Username: "parley", Address: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if body := string(ans.Marshal()); !strings.Contains(body, "a=fmtp:101 0-15\r\n") {
		t.Errorf("answer to an offer of 0-15:\n%s", body)
	}
}
