package sip

import (
	"bytes"
	"context"
	"net"
	"time"

	"encoding/base64"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/codec"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/parley-voice/parley/media"
)

func savpOffer(t *testing.T, proto string, crypto ...string) *SessionDescription {
	t.Helper()
	body := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n" +
		"m=audio 4000 " + proto + " 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
	for _, c := range crypto {
		body += "a=crypto:" + c + "\r\n"
	}
	sd, err := ParseSDP([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return sd
}

func b64key(p media.SRTPProfile, fill byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, p.KeyLen()))
}

var local = netip.MustParseAddrPort("127.0.0.1:5000")

// TestSRTPAnswerPolicy: every mode against RTP/AVP and RTP/SAVP offers, over TLS and clear
// signalling.
func TestSRTPAnswerPolicy(t *testing.T) {
	crypto80 := "1 AES_CM_128_HMAC_SHA1_80 inline:" + b64key(media.AESCM128HMACSHA180, 7)
	cases := []struct {
		mode    SRTPMode
		secure  bool
		proto   string
		wantErr error
		wantSec bool
	}{
		{SRTPDisabled, true, "RTP/AVP", nil, false},
		{SRTPDisabled, true, "RTP/SAVP", ErrSRTPDisabled, false},
		{SRTPAllowed, true, "RTP/AVP", nil, false},
		{SRTPAllowed, true, "RTP/SAVP", nil, true},
		{SRTPAllowed, false, "RTP/SAVP", ErrSRTPClearSignalling, false},
		{SRTPRequired, true, "RTP/AVP", ErrSRTPRequired, false},
		{SRTPRequired, true, "RTP/SAVP", nil, true},
		{SRTPRequired, false, "RTP/SAVP", ErrSRTPClearSignalling, false},
		{SRTPAllowed, true, "RTP/AVP+crypto", nil, true},
		{SRTPRequired, true, "RTP/AVP+crypto", nil, true},
		{SRTPAllowed, false, "RTP/AVP+crypto", nil, false},
		{SRTPDisabled, true, "RTP/AVP+crypto", nil, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/secure=%v/%s", c.mode, c.secure, c.proto), func(t *testing.T) {
			var offer *SessionDescription
			if c.proto == "RTP/SAVP" {
				offer = savpOffer(t, c.proto, crypto80)
			} else if c.proto == "RTP/AVP+crypto" {
				c.proto = "RTP/AVP"
				offer = savpOffer(t, c.proto, crypto80)
			} else {
				offer = savpOffer(t, c.proto)
			}
			n, ans, err := answerOfferSRTP(offer, DefaultCodecs, local, Origin{}, srtpPolicy{mode: c.mode, secure: c.secure}, nil)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				if r := refusalFor(err); r.Status != 488 || strings.Contains(r.Reason, b64key(media.AESCM128HMACSHA180, 7)) {
					t.Fatalf("refusal %+v", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (n.SRTP != nil) != c.wantSec {
				t.Fatalf("SRTP %v, want %v", n.SRTP, c.wantSec)
			}
			m := ans.Media[0]
			if m.Proto != c.proto {
				t.Fatalf("answer proto %s", m.Proto)
			}
			if !c.wantSec && len(m.Crypto) != 0 {
				t.Fatalf("plain answer carries a=crypto")
			}
			if c.wantSec {
				if len(m.Crypto) != 1 || !strings.HasPrefix(m.Crypto[0], "1 AES_CM_128_HMAC_SHA1_80 inline:") {
					t.Fatalf("answer crypto %q", m.Crypto)
				}
				ca, err := parseCrypto(m.Crypto[0])
				if err != nil || !bytes.Equal(ca.key, n.SRTP.local) || bytes.Equal(n.SRTP.local, n.SRTP.remote) {
					t.Fatalf("answer key does not match the negotiated one (%v)", err)
				}
				if !strings.Contains(string(ans.Marshal()), "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:") {
					t.Fatal("the marshalled answer lacks its a=crypto")
				}
			}
		})
	}
}

// TestSRTPCryptoLines: the a=crypto lines Parley takes and those it skips; the first usable one
// wins.
func TestSRTPCryptoLines(t *testing.T) {
	gcm := b64key(media.AEADAES128GCM, 3)
	k32 := b64key(media.AESCM128HMACSHA132, 4)
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + k32, true},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + k32 + "|2^20", true},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + strings.TrimRight(k32, "="), true},
		{"2 AEAD_AES_128_GCM inline:" + gcm, true},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + k32 + " WSH=64", true},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + k32 + "|2^20|1:4", false},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + k32 + "|1:4", false},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + k32 + " UNENCRYPTED_SRTP", false},
		{"1 AES_CM_128_HMAC_SHA1_32 inline:" + gcm, false}, // wrong length
		{"1 F8_128_HMAC_SHA1_80 inline:" + k32, false},
		{"1 AES_CM_128_HMAC_SHA1_80 inline:" + k32 + ";inline:" + k32, false},
		{"x AES_CM_128_HMAC_SHA1_80 inline:" + k32, false},
		{"1 AES_CM_128_HMAC_SHA1_80", false},
	} {
		_, err := parseCrypto(c.line)
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v", c.line, err)
		}
		if err != nil && (strings.Contains(err.Error(), k32[:10]) || strings.Contains(err.Error(), gcm[:10])) {
			t.Errorf("error quotes the key: %v", err)
		}
	}
	// The first usable line of several.
	offer := savpOffer(t, "RTP/SAVP", "1 F8_128_HMAC_SHA1_80 inline:"+k32, "2 AEAD_AES_128_GCM inline:"+gcm)
	n, ans, err := answerOfferSRTP(offer, DefaultCodecs, local, Origin{}, srtpPolicy{mode: SRTPRequired, secure: true}, nil)
	if err != nil || n.SRTP.profile != media.AEADAES128GCM || n.SRTP.tag != 2 || !strings.HasPrefix(ans.Media[0].Crypto[0], "2 AEAD_AES_128_GCM ") {
		t.Fatalf("n %v crypto %q err %v", n.SRTP, ans.Media[0].Crypto, err)
	}
	// None usable: 488 with no key in its reason.
	offer = savpOffer(t, "RTP/SAVP", "1 AES_CM_128_HMAC_SHA1_32 inline:"+k32+"|1:4")
	_, _, err = answerOfferSRTP(offer, DefaultCodecs, local, Origin{}, srtpPolicy{mode: SRTPAllowed, secure: true}, nil)
	if !errors.Is(err, ErrSRTPNoCrypto) {
		t.Fatalf("err %v", err)
	}
}

// TestSRTPOfferAnswerRoundTrip: our required offer, answered by another Parley, gives both
// sides mirrored keys; a session refresh offers the same key again; a re-key by the peer makes
// us renew ours.
func TestSRTPOfferAnswerRoundTrip(t *testing.T) {
	pol := srtpPolicy{mode: SRTPRequired, secure: true}
	offer, err := buildOfferSRTP(DefaultCodecs, local, Origin{}, SendRecv, pol, nil)
	if err != nil {
		t.Fatal(err)
	}
	if offer.Media[0].Proto != "RTP/SAVP" || len(offer.Media[0].Crypto) != len(media.SRTPProfiles) {
		t.Fatalf("offer %s %q", offer.Media[0].Proto, offer.Media[0].Crypto)
	}
	wire, err := ParseSDP(offer.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	nb, ans, err := answerOfferSRTP(wire, DefaultCodecs, local, Origin{}, pol, nil)
	if err != nil {
		t.Fatal(err)
	}
	ansWire, _ := ParseSDP(ans.Marshal())
	na, err := takeAnswerSRTP(ansWire, DefaultCodecs, offer, pol)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(na.SRTP.local, nb.SRTP.remote) || !bytes.Equal(na.SRTP.remote, nb.SRTP.local) || na.SRTP.profile != media.AESCM128HMACSHA180 {
		t.Fatal("keys do not mirror")
	}
	// Refresh: the answerer keeps its key when the offerer keeps its own.
	nb2, _, err := answerOfferSRTP(wire, DefaultCodecs, local, Origin{}, pol, nb.SRTP)
	if err != nil || !nb2.SRTP.same(nb.SRTP) {
		t.Fatalf("refresh re-keyed (%v)", err)
	}
	// Re-key: a new offer with new keys gets a new answer key.
	offer2, _ := buildOfferSRTP(DefaultCodecs, local, Origin{}, SendRecv, pol, nil)
	wire2, _ := ParseSDP(offer2.Marshal())
	nb3, _, err := answerOfferSRTP(wire2, DefaultCodecs, local, Origin{}, pol, nb.SRTP)
	if err != nil || bytes.Equal(nb3.SRTP.local, nb.SRTP.local) {
		t.Fatalf("re-key kept the old answer key (%v)", err)
	}
	// A plain answer to our SAVP offer is refused.
	plain := savpOffer(t, "RTP/AVP")
	if _, err := takeAnswerSRTP(plain, DefaultCodecs, offer, pol); !errors.Is(err, ErrSRTPRequired) {
		t.Fatalf("plain answer: %v", err)
	}
	// An answer naming a tag we never offered is refused.
	bogus := savpOffer(t, "RTP/SAVP", "9 AES_CM_128_HMAC_SHA1_80 inline:"+b64key(media.AESCM128HMACSHA180, 1))
	if _, err := takeAnswerSRTP(bogus, DefaultCodecs, offer, pol); !errors.Is(err, ErrSRTPNoCrypto) {
		t.Fatalf("bogus tag: %v", err)
	}
	// Over clear signalling a required trunk offers nothing.
	if _, err := buildOfferSRTP(DefaultCodecs, local, Origin{}, SendRecv, srtpPolicy{mode: SRTPRequired}, nil); !errors.Is(err, ErrSRTPClearSignalling) {
		t.Fatalf("clear offer: %v", err)
	}
	// Allowed offers plain RTP.
	if sd, _ := buildOfferSRTP(DefaultCodecs, local, Origin{}, SendRecv, srtpPolicy{mode: SRTPAllowed, secure: true}, nil); sd.Media[0].Proto != "RTP/AVP" || len(sd.Media[0].Crypto) != 0 {
		t.Fatalf("allowed offer %s", sd.Media[0].Proto)
	}
}

// TestSRTPKeysNeverLogged: the keys print as their suite in fmt and slog, and a Negotiated
// printed whole shows no key.
func TestSRTPKeysNeverLogged(t *testing.T) {
	k := &sdesKeys{profile: media.AESCM128HMACSHA180, local: bytes.Repeat([]byte{0xC3}, 30), remote: bytes.Repeat([]byte{0x3C}, 30)}
	n := Negotiated{SRTP: k}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	log.Info("x", "keys", k, "neg", n)
	out := buf.String() + fmt.Sprintf("%v %+v %#v %s", k, n, k, k)
	for _, key := range [][]byte{k.local, k.remote} {
		for _, enc := range []string{base64.StdEncoding.EncodeToString(key), fmt.Sprintf("%x", key), fmt.Sprint(key), string(key)} {
			if strings.Contains(out, enc) {
				t.Fatalf("a key is printed: %s", out)
			}
		}
	}
}

// TestSRTPWrongKeyEndsLeg: a peer whose packets all fail SRTP (it keys otherwise than it
// signalled) makes the leg's failure hook run once srtpFailAfter packets were refused.
func TestSRTPWrongKeyEndsLeg(t *testing.T) {
	p := media.AESCM128HMACSHA180
	n := neg(codec.PCMU, 20)
	m, _ := testLeg(t, n)
	ours, _ := media.NewSRTP(p, bytes.Repeat([]byte{1}, p.KeyLen()), bytes.Repeat([]byte{2}, p.KeyLen()))
	m.ep.SetSRTP(ours)
	fired := make(chan struct{})
	m.onSRTPFail(func() { close(fired) })
	// The peer protects with a key Parley does not expect.
	wrong, _ := media.NewSRTP(p, bytes.Repeat([]byte{3}, p.KeyLen()), bytes.Repeat([]byte{4}, p.KeyLen()))
	rtpC, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sender, err := media.NewRTPEndpoint(context.Background(), media.RTPConfig{Ports: media.NewPortPair(rtpC, nil),
		Remote: m.ep.LocalAddr(), SRTP: wrong, RTCPInterval: -1, InactivityTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	for range srtpFailAfter + 5 {
		if err := sender.WriteSample(make([]byte, 160), 160); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.ep.Stats().SRTPFailed < srtpFailAfter {
		if time.Now().After(deadline) {
			t.Fatalf("only %d packets refused", m.ep.Stats().SRTPFailed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.checkSRTP()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the failure hook did not run")
	}
	m.checkSRTP() // once only
}
