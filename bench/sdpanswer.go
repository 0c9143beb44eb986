package bench

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	pionsdp "github.com/pion/sdp/v3"
)

// sdpAnswer is what a caller needs from the SDP answer (RFC 3264 §6): where to send RTP and
// RTCP, and which payload types the answerer chose.
type sdpAnswer struct {
	RTP, RTCP    netip.AddrPort
	PayloadTypes []uint8
}

var errSDP = errors.New("bench: unusable SDP answer")

// parseSDPAnswer reads the first audio stream of an SDP body (RFC 8866): its connection
// address (media level, else session level), port, payload types and an a=rtcp port (RFC 3605).
func parseSDPAnswer(body []byte) (sdpAnswer, error) {
	var sd pionsdp.SessionDescription
	if err := sd.Unmarshal(body); err != nil {
		return sdpAnswer{}, fmt.Errorf("%w: %v", errSDP, err)
	}
	for _, md := range sd.MediaDescriptions {
		if md.MediaName.Media != "audio" {
			continue
		}
		ci := md.ConnectionInformation
		if ci == nil {
			ci = sd.ConnectionInformation
		}
		if ci == nil || ci.Address == nil {
			return sdpAnswer{}, fmt.Errorf("%w: no connection address", errSDP)
		}
		ip, err := netip.ParseAddr(ci.Address.Address)
		if err != nil {
			return sdpAnswer{}, fmt.Errorf("%w: connection address %q", errSDP, ci.Address.Address)
		}
		port := md.MediaName.Port.Value
		if port <= 0 || port > 65535 {
			return sdpAnswer{}, fmt.Errorf("%w: audio port %d (stream refused?)", errSDP, port)
		}
		a := sdpAnswer{RTP: netip.AddrPortFrom(ip, uint16(port))}
		for _, f := range md.MediaName.Formats {
			pt, err := strconv.Atoi(f)
			if err != nil || pt < 0 || pt > 127 {
				return sdpAnswer{}, fmt.Errorf("%w: payload type %q", errSDP, f)
			}
			a.PayloadTypes = append(a.PayloadTypes, uint8(pt))
		}
		if v, ok := md.Attribute("rtcp"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				if p, err := strconv.Atoi(f[0]); err == nil && p > 0 && p <= 65535 {
					a.RTCP = netip.AddrPortFrom(ip, uint16(p))
				}
			}
		}
		return a, nil
	}
	return sdpAnswer{}, fmt.Errorf("%w: no audio stream", errSDP)
}

// sdpOffer is the caller's offer: PCMU (RFC 3551) and telephone-event (RFC 4733), 20 ms
// packets, RTCP on its own port (RFC 3605).
func sdpOffer(ip netip.Addr, rtpPort, rtcpPort int, sessID uint64) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "v=0\r\no=parley-bench %d %d IN IP4 %s\r\ns=parley-bench\r\nc=IN IP4 %s\r\nt=0 0\r\n", sessID, sessID, ip, ip)
	fmt.Fprintf(&b, "m=audio %d RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-16\r\n", rtpPort)
	fmt.Fprintf(&b, "a=rtcp:%d\r\na=ptime:20\r\na=sendrecv\r\n", rtcpPort)
	return []byte(b.String())
}
