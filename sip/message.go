package sip

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// Headers Parley announces (RFC 3261 §20.5, §20.37; RFC 4028 §3; RFC 3515 §2.4.4).
const (
	allowMethods     = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, REFER, NOTIFY, UPDATE, PRACK"
	supportedOptions = "timer, replaces, 100rel"
	acceptTypes      = "application/sdp, application/dtmf-relay, application/dtmf"
)

// messageSource returns the address a received message came from.
func messageSource(m interface{ Source() string }) netip.AddrPort {
	ap, err := netip.ParseAddrPort(m.Source())
	if err != nil {
		host, port, err := net.SplitHostPort(m.Source())
		if err != nil {
			return netip.AddrPort{}
		}
		a, err1 := netip.ParseAddr(host)
		p, err2 := strconv.Atoi(port)
		if err1 != nil || err2 != nil || p < 0 || p > 65535 {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(a.Unmap(), uint16(p))
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// transportOf maps sipgo's transport names to ours.
func transportOf(tp string) Transport {
	switch strings.ToUpper(tp) {
	case "TCP":
		return TCP
	case "TLS":
		return TLS
	}
	return UDP
}

// sipgoTransport maps ours to sipgo's.
func sipgoTransport(t Transport) string {
	switch t {
	case TCP:
		return "TCP"
	case TLS:
		return "TLS"
	}
	return "UDP"
}

// headerValue returns the first value of header name, trimmed, or "".
func headerValue(m sip.Message, name string) string {
	if hs := m.GetHeaders(name); len(hs) > 0 {
		return strings.TrimSpace(hs[0].Value())
	}
	return ""
}

// headerList returns the comma-separated tokens of every header name, lower-cased.
func headerList(m sip.Message, name string) []string {
	var out []string
	for _, h := range m.GetHeaders(name) {
		for _, t := range strings.Split(h.Value(), ",") {
			if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// hasOption reports whether a Supported/Require list contains opt.
func hasOption(m sip.Message, header, opt string) bool {
	for _, t := range headerList(m, header) {
		if t == opt {
			return true
		}
	}
	// Compact forms: k is Supported (RFC 3261 §7.3.3).
	if header == "Supported" {
		for _, t := range headerList(m, "k") {
			if t == opt {
				return true
			}
		}
	}
	return false
}

// contentType returns the media type of a message's body, lower-cased, without parameters.
func contentType(m sip.Message) string {
	v := headerValue(m, "Content-Type")
	if v == "" {
		v = headerValue(m, "c")
	}
	v, _, _ = strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(v))
}

// fromTag and toTag return the tags of a message's From and To.
func fromTag(m sip.Message) string {
	if f := m.From(); f != nil {
		t, _ := f.Params.Get("tag")
		return t
	}
	return ""
}

func toTag(m sip.Message) string {
	if t := m.To(); t != nil {
		v, _ := t.Params.Get("tag")
		return v
	}
	return ""
}

func callID(m sip.Message) string {
	if c := m.CallID(); c != nil {
		return c.Value()
	}
	return ""
}

// uriHostPort formats an address for a SIP URI or Via (IPv6 in brackets).
func uriHost(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		return "[" + a.String() + "]"
	}
	return a.Unmap().String()
}

// userOf returns the user part of a URI, unescaped as far as phone numbers need.
func userOf(u sip.Uri) string {
	user := u.User
	if user == "" && strings.EqualFold(u.Scheme, "tel") {
		user = u.Raw()
	}
	user = strings.ReplaceAll(user, "%2B", "+")
	user = strings.ReplaceAll(user, "%2b", "+")
	return user
}
