package bench

// issue 21: SRTP (RFC 3711) with SDES keys (RFC 4568) for the bench's SIP callers, so that
// bench-e2e can measure Parley's cost per call with media encryption on (parley-bench --srtp,
// make bench-e2e-srtp). The caller offers RTP/SAVP with one AES_CM_128_HMAC_SHA1_80 key,
// takes the key of Parley's answer, and protects its RTP endpoint with media.SRTP (pion/srtp,
// as Parley does). The bench's trunk is then in SRTP "required" mode, allowed over clear UDP
// signalling (--srtp-over-clear): the bench keeps UDP signalling, it measures media.

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	pionsdp "github.com/pion/sdp/v3"

	"github.com/parley-voice/parley/media"
)

// benchSRTPSuite is the suite the bench offers: RFC 4568's mandatory one.
const benchSRTPSuite = media.AESCM128HMACSHA180

// newSDESKey returns a fresh master key and salt for the bench's offer.
func newSDESKey() ([]byte, error) {
	k := make([]byte, benchSRTPSuite.KeyLen())
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("bench: SRTP key: %w", err)
	}
	return k, nil
}

// secureOffer turns a plain offer (sdpOffer) into an SRTP one: RTP/SAVP with an a=crypto line
// carrying key.
func secureOffer(plain []byte, key []byte) []byte {
	s := strings.Replace(string(plain), " RTP/AVP ", " RTP/SAVP ", 1)
	return []byte(s + "a=crypto:1 " + string(benchSRTPSuite) + " inline:" + base64.StdEncoding.EncodeToString(key) + "\r\n")
}

// answerSRTP reads the SRTP key of the answer's audio stream: it must be RTP/SAVP with an
// a=crypto line of the suite offered (tag 1). The error never quotes the key.
func answerSRTP(body []byte, local []byte) (*media.SRTP, error) {
	var sd pionsdp.SessionDescription
	if err := sd.Unmarshal(body); err != nil {
		return nil, fmt.Errorf("%w: %v", errSDP, err)
	}
	for _, md := range sd.MediaDescriptions {
		if md.MediaName.Media != "audio" {
			continue
		}
		if p := strings.Join(md.MediaName.Protos, "/"); p != "RTP/SAVP" {
			return nil, fmt.Errorf("%w: answered %s, want RTP/SAVP (is the trunk in SRTP mode?)", errSDP, p)
		}
		for _, a := range md.Attributes {
			if a.Key != "crypto" {
				continue
			}
			f := strings.Fields(a.Value)
			if len(f) < 3 || f[0] != "1" || f[1] != string(benchSRTPSuite) {
				continue
			}
			b64, ok := strings.CutPrefix(f[2], "inline:")
			if !ok {
				continue
			}
			b64, _, _ = strings.Cut(b64, "|")
			remote, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				remote, err = base64.RawStdEncoding.DecodeString(b64)
			}
			if err != nil || len(remote) != benchSRTPSuite.KeyLen() {
				return nil, fmt.Errorf("%w: the answer's %s key is not %d bytes of base64", errSDP, benchSRTPSuite, benchSRTPSuite.KeyLen())
			}
			return media.NewSRTP(benchSRTPSuite, local, remote)
		}
		return nil, fmt.Errorf("%w: no a=crypto:1 %s in the answer", errSDP, benchSRTPSuite)
	}
	return nil, fmt.Errorf("%w: no audio stream", errSDP)
}

// srtpTrunkArgs are the `parley admin trunks add` flags of the bench's trunk with SRTP on.
func srtpTrunkArgs(on bool) []string {
	if !on {
		return nil
	}
	return []string{"--srtp", "required", "--srtp-over-clear"}
}
