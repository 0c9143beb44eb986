package sip

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Limits on what ParseSDP accepts. A body beyond them is refused as malformed rather than
// parsed at a cost the peer chooses.
const (
	maxSDPBody    = 16 << 10
	maxSDPMedia   = 16
	maxSDPFormats = 64
	maxSDPAttrs   = 256
)

// Direction is a media stream's direction attribute (RFC 3264 §5.1, RFC 8866 §6.7).
type Direction string

// Directions.
const (
	SendRecv Direction = "sendrecv"
	SendOnly Direction = "sendonly"
	RecvOnly Direction = "recvonly"
	Inactive Direction = "inactive"
)

// Reverse returns the direction an answerer uses for an offered one (RFC 3264 §6.1).
func (d Direction) Reverse() Direction {
	switch d {
	case SendOnly:
		return RecvOnly
	case RecvOnly:
		return SendOnly
	case Inactive:
		return Inactive
	}
	return SendRecv
}

// Sends reports whether the side holding direction d sends media.
func (d Direction) Sends() bool { return d == SendRecv || d == SendOnly || d == "" }

// Receives reports whether the side holding direction d receives media.
func (d Direction) Receives() bool { return d == SendRecv || d == RecvOnly || d == "" }

// Origin is the o= line (RFC 8866 §5.2).
type Origin struct {
	Username       string
	SessionID      uint64
	SessionVersion uint64
	Address        string
}

// RTPMap is one a=rtpmap attribute (RFC 8866 §6.6).
type RTPMap struct {
	Name      string
	ClockRate uint32
	Channels  int
}

// MediaDescription is one m= section (RFC 8866 §5.14) with the attributes Parley reads.
type MediaDescription struct {
	Type    string   // "audio", "video", …
	Port    int      // 0 rejects or disables the stream (RFC 3264 §5.1)
	Proto   string   // "RTP/AVP", "RTP/AVPF", "RTP/SAVP", …
	Formats []string // the fmt tokens, in preference order; payload types for RTP
	// Conn is the media-level c= address; invalid when the section has none.
	Conn      netip.Addr
	RTPMaps   map[uint8]RTPMap
	FMTPs     map[uint8]string
	Ptime     int // a=ptime in ms; 0 when absent
	MaxPtime  int // a=maxptime in ms; 0 when absent
	Direction Direction
	// RTCPPort and RTCPAddr come from a=rtcp (RFC 3605); RTCPPort 0 when absent.
	RTCPPort int
	RTCPAddr netip.Addr
	RTCPMux  bool // a=rtcp-mux (RFC 5761)
	// Crypto are the a=crypto values (RFC 4568), in order (issue 21). They carry SRTP keys:
	// never log them.
	Crypto []string
}

// PayloadTypes returns the formats that are valid RTP payload types (0..127).
func (m *MediaDescription) PayloadTypes() []uint8 {
	out := make([]uint8, 0, len(m.Formats))
	for _, f := range m.Formats {
		if v, err := strconv.ParseUint(f, 10, 8); err == nil && v <= 127 {
			out = append(out, uint8(v))
		}
	}
	return out
}

// SessionDescription is a parsed SDP body: the fields an audio gateway negotiates with.
// Unknown lines and attributes are skipped, as RFC 8866 §5 asks.
type SessionDescription struct {
	Origin Origin
	Name   string
	// Conn is the session-level c= address; invalid when absent.
	Conn      netip.Addr
	Direction Direction // session-level direction attribute, "" when absent
	Media     []MediaDescription
}

// ParseSDP parses an SDP body (RFC 8866). It accepts CRLF or bare LF line ends and skips what it
// does not model, but refuses a body whose structure is wrong: no v=0 first, a malformed o=,
// c= or m= line, a port or payload type out of range, or a body over the limits. Every error
// wraps ErrBadSDP. It never panics, whatever the input.
func ParseSDP(body []byte) (*SessionDescription, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty body", ErrBadSDP)
	}
	if len(body) > maxSDPBody {
		return nil, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrBadSDP, len(body), maxSDPBody)
	}
	sd := &SessionDescription{}
	var cur *MediaDescription
	attrs := 0
	first := true
	sawOrigin := false
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue // tolerate blank lines (a trailing CRLF, for one)
		}
		if len(line) < 2 || line[1] != '=' {
			return nil, fmt.Errorf("%w: line %q is not type=value", ErrBadSDP, truncate(line))
		}
		typ, val := line[0], string(line[2:])
		if first {
			if typ != 'v' || strings.TrimSpace(val) != "0" {
				return nil, fmt.Errorf("%w: first line must be v=0", ErrBadSDP)
			}
			first = false
			continue
		}
		switch typ {
		case 'o':
			o, err := parseOrigin(val)
			if err != nil {
				return nil, err
			}
			sd.Origin, sawOrigin = o, true
		case 's':
			if cur == nil {
				sd.Name = val
			}
		case 'c':
			a, err := parseConnection(val)
			if err != nil {
				return nil, err
			}
			if cur == nil {
				sd.Conn = a
			} else {
				cur.Conn = a
			}
		case 'm':
			if len(sd.Media) == maxSDPMedia {
				return nil, fmt.Errorf("%w: more than %d media sections", ErrBadSDP, maxSDPMedia)
			}
			m, err := parseMediaLine(val)
			if err != nil {
				return nil, err
			}
			sd.Media = append(sd.Media, m)
			cur = &sd.Media[len(sd.Media)-1]
		case 'a':
			if attrs++; attrs > maxSDPAttrs {
				return nil, fmt.Errorf("%w: more than %d attributes", ErrBadSDP, maxSDPAttrs)
			}
			if err := parseAttribute(sd, cur, val); err != nil {
				return nil, err
			}
		default:
			// b=, t=, r=, z=, k=, i=, u=, e=, p= and unknown types: not modelled.
			if typ < 'a' || typ > 'z' {
				return nil, fmt.Errorf("%w: bad line type %q", ErrBadSDP, typ)
			}
		}
	}
	if first {
		return nil, fmt.Errorf("%w: no v= line", ErrBadSDP)
	}
	if !sawOrigin {
		return nil, fmt.Errorf("%w: no o= line", ErrBadSDP)
	}
	return sd, nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// parseOrigin reads "username sess-id sess-version nettype addrtype unicast-address".
func parseOrigin(v string) (Origin, error) {
	f := strings.Fields(v)
	if len(f) != 6 {
		return Origin{}, fmt.Errorf("%w: o= needs 6 fields, has %d", ErrBadSDP, len(f))
	}
	id, err1 := strconv.ParseUint(f[1], 10, 64)
	ver, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Origin{}, fmt.Errorf("%w: o= session id or version is not a number", ErrBadSDP)
	}
	return Origin{Username: f[0], SessionID: id, SessionVersion: ver, Address: f[5]}, nil
}

// parseConnection reads "IN IP4 addr[/ttl[/n]]" or "IN IP6 addr[/n]" (RFC 8866 §5.7).
func parseConnection(v string) (netip.Addr, error) {
	f := strings.Fields(v)
	if len(f) != 3 || f[0] != "IN" || (f[1] != "IP4" && f[1] != "IP6") {
		return netip.Addr{}, fmt.Errorf("%w: c= must be \"IN IP4|IP6 address\"", ErrBadSDP)
	}
	host, _, _ := strings.Cut(f[2], "/")
	a, err := netip.ParseAddr(host)
	if err != nil {
		// A hostname is legal SDP but no carrier sends one; refuse rather than resolve.
		return netip.Addr{}, fmt.Errorf("%w: c= address %q is not an IP address", ErrBadSDP, host)
	}
	if (f[1] == "IP4") != a.Is4() {
		return netip.Addr{}, fmt.Errorf("%w: c= address %q does not match %s", ErrBadSDP, host, f[1])
	}
	return a, nil
}

// parseMediaLine reads "media port[/number] proto fmt …".
func parseMediaLine(v string) (MediaDescription, error) {
	f := strings.Fields(v)
	if len(f) < 4 {
		return MediaDescription{}, fmt.Errorf("%w: m= needs media, port, proto and a format", ErrBadSDP)
	}
	if len(f)-3 > maxSDPFormats {
		return MediaDescription{}, fmt.Errorf("%w: m= lists more than %d formats", ErrBadSDP, maxSDPFormats)
	}
	portStr, _, _ := strings.Cut(f[1], "/")
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return MediaDescription{}, fmt.Errorf("%w: m= port %q out of range", ErrBadSDP, f[1])
	}
	m := MediaDescription{Type: f[0], Port: port, Proto: f[2], Formats: append([]string(nil), f[3:]...)}
	if strings.HasPrefix(m.Proto, "RTP/") {
		for _, t := range m.Formats {
			if v, err := strconv.ParseUint(t, 10, 8); err != nil || v > 127 {
				return MediaDescription{}, fmt.Errorf("%w: RTP format %q is not a payload type 0-127", ErrBadSDP, t)
			}
		}
	}
	return m, nil
}

// parseAttribute applies one a= line to the session or the current media section.
func parseAttribute(sd *SessionDescription, m *MediaDescription, v string) error {
	name, val, _ := strings.Cut(v, ":")
	switch name {
	case "sendrecv", "sendonly", "recvonly", "inactive":
		if m == nil {
			sd.Direction = Direction(name)
		} else {
			m.Direction = Direction(name)
		}
		return nil
	}
	if m == nil {
		return nil // other session-level attributes are not modelled
	}
	switch name {
	case "rtpmap":
		pt, rest, err := splitPT(val)
		if err != nil {
			return err
		}
		enc := strings.Fields(rest)
		if len(enc) == 0 {
			return fmt.Errorf("%w: a=rtpmap:%d has no encoding", ErrBadSDP, pt)
		}
		parts := strings.Split(enc[0], "/")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return fmt.Errorf("%w: a=rtpmap:%d %q is not name/rate[/channels]", ErrBadSDP, pt, enc[0])
		}
		rate, err := strconv.ParseUint(parts[1], 10, 32)
		if err != nil || rate == 0 {
			return fmt.Errorf("%w: a=rtpmap:%d clock rate %q", ErrBadSDP, pt, parts[1])
		}
		ch := 1
		if len(parts) == 3 {
			if ch, err = strconv.Atoi(parts[2]); err != nil || ch < 1 || ch > 8 {
				return fmt.Errorf("%w: a=rtpmap:%d channels %q", ErrBadSDP, pt, parts[2])
			}
		}
		if m.RTPMaps == nil {
			m.RTPMaps = map[uint8]RTPMap{}
		}
		m.RTPMaps[pt] = RTPMap{Name: parts[0], ClockRate: uint32(rate), Channels: ch}
	case "fmtp":
		pt, rest, err := splitPT(val)
		if err != nil {
			return err
		}
		if m.FMTPs == nil {
			m.FMTPs = map[uint8]string{}
		}
		m.FMTPs[pt] = strings.TrimSpace(rest)
	case "ptime", "maxptime":
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 1 || n > 1000 {
			// RFC 8866 allows fractional ptime; a malformed one is ignored rather than fatal.
			if f, ferr := strconv.ParseFloat(strings.TrimSpace(val), 64); ferr == nil && f >= 1 && f <= 1000 {
				n = int(f)
			} else {
				return nil
			}
		}
		if name == "ptime" {
			m.Ptime = n
		} else {
			m.MaxPtime = n
		}
	case "rtcp":
		f := strings.Fields(val)
		if len(f) == 0 {
			return nil
		}
		p, err := strconv.Atoi(f[0])
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("%w: a=rtcp port %q", ErrBadSDP, f[0])
		}
		m.RTCPPort = p
		if len(f) == 4 {
			if a, err := netip.ParseAddr(f[3]); err == nil {
				m.RTCPAddr = a
			}
		}
	case "rtcp-mux":
		m.RTCPMux = true
	case "crypto": // issue 21
		if len(m.Crypto) < maxCryptoLines {
			m.Crypto = append(m.Crypto, strings.TrimSpace(val))
		}
	}
	return nil
}

func splitPT(val string) (uint8, string, error) {
	ptStr, rest, _ := strings.Cut(val, " ")
	pt, err := strconv.ParseUint(strings.TrimSpace(ptStr), 10, 8)
	if err != nil || pt > 127 {
		return 0, "", fmt.Errorf("%w: attribute payload type %q", ErrBadSDP, ptStr)
	}
	return uint8(pt), rest, nil
}

// Marshal renders the description as an SDP body with CRLF line ends, in the order RFC 8866 §5
// requires. Media sections carry their rtpmap and fmtp lines in format order.
func (sd *SessionDescription) Marshal() []byte {
	var b strings.Builder
	ip := func(a netip.Addr) string {
		if a.Is4() || a.Is4In6() {
			return "IP4 " + a.Unmap().String()
		}
		return "IP6 " + a.String()
	}
	b.WriteString("v=0\r\n")
	o := sd.Origin
	user := o.Username
	if user == "" {
		user = "-"
	}
	fmt.Fprintf(&b, "o=%s %d %d IN %s\r\n", user, o.SessionID, o.SessionVersion, originAddr(o.Address, sd.Conn))
	name := sd.Name
	if name == "" {
		name = "-"
	}
	b.WriteString("s=" + name + "\r\n")
	if sd.Conn.IsValid() {
		b.WriteString("c=IN " + ip(sd.Conn) + "\r\n")
	}
	b.WriteString("t=0 0\r\n")
	if sd.Direction != "" {
		b.WriteString("a=" + string(sd.Direction) + "\r\n")
	}
	for i := range sd.Media {
		m := &sd.Media[i]
		proto := m.Proto
		if proto == "" {
			proto = "RTP/AVP"
		}
		fmt.Fprintf(&b, "m=%s %d %s %s\r\n", m.Type, m.Port, proto, strings.Join(m.Formats, " "))
		if m.Conn.IsValid() {
			b.WriteString("c=IN " + ip(m.Conn) + "\r\n")
		}
		for _, f := range m.Formats {
			v, err := strconv.ParseUint(f, 10, 8)
			if err != nil {
				continue
			}
			pt := uint8(v)
			if r, ok := m.RTPMaps[pt]; ok {
				fmt.Fprintf(&b, "a=rtpmap:%d %s/%d", pt, r.Name, r.ClockRate)
				if r.Channels > 1 {
					fmt.Fprintf(&b, "/%d", r.Channels)
				}
				b.WriteString("\r\n")
			}
			if p, ok := m.FMTPs[pt]; ok && p != "" {
				fmt.Fprintf(&b, "a=fmtp:%d %s\r\n", pt, p)
			}
		}
		if m.Ptime > 0 {
			fmt.Fprintf(&b, "a=ptime:%d\r\n", m.Ptime)
		}
		if m.MaxPtime > 0 {
			fmt.Fprintf(&b, "a=maxptime:%d\r\n", m.MaxPtime)
		}
		if m.RTCPPort > 0 {
			fmt.Fprintf(&b, "a=rtcp:%d\r\n", m.RTCPPort)
		}
		if m.RTCPMux {
			b.WriteString("a=rtcp-mux\r\n")
		}
		for _, c := range m.Crypto { // issue 21
			b.WriteString("a=crypto:" + c + "\r\n")
		}
		if m.Direction != "" {
			b.WriteString("a=" + string(m.Direction) + "\r\n")
		}
	}
	return []byte(b.String())
}

func originAddr(addr string, conn netip.Addr) string {
	if a, err := netip.ParseAddr(addr); err == nil {
		if a.Is4() || a.Is4In6() {
			return "IP4 " + a.Unmap().String()
		}
		return "IP6 " + a.String()
	}
	if conn.IsValid() {
		if conn.Is4() {
			return "IP4 " + conn.String()
		}
		return "IP6 " + conn.String()
	}
	return "IP4 0.0.0.0"
}

// AudioAddr returns the RTP address of media section m: its c= (or the session's) and port.
// A zero address (0.0.0.0, the RFC 2543 hold) gives an invalid AddrPort.
func (sd *SessionDescription) AudioAddr(m *MediaDescription) netip.AddrPort {
	a := m.Conn
	if !a.IsValid() {
		a = sd.Conn
	}
	if !a.IsValid() || a.IsUnspecified() || m.Port == 0 {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(m.Port))
}

// RTCPAddrPort returns the RTCP address of m from a=rtcp (RFC 3605), or zero to let the RTP
// endpoint use port+1 (or the RTP address with rtcp-mux).
func (sd *SessionDescription) RTCPAddrPort(m *MediaDescription) netip.AddrPort {
	rtp := sd.AudioAddr(m)
	if !rtp.IsValid() {
		return netip.AddrPort{}
	}
	if m.RTCPMux {
		return rtp
	}
	if m.RTCPPort == 0 {
		return netip.AddrPort{}
	}
	a := m.RTCPAddr
	if !a.IsValid() {
		a = rtp.Addr()
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(m.RTCPPort))
}

// MediaDirection returns m's effective direction: its own attribute, else the session's, else
// sendrecv (RFC 3264 §5.1). A zero connection address is the old way to say hold (RFC 3264
// §8.4), taken as sendonly from the holder's side when no attribute says otherwise.
func (sd *SessionDescription) MediaDirection(m *MediaDescription) Direction {
	d := m.Direction
	if d == "" {
		d = sd.Direction
	}
	if d == "" {
		a := m.Conn
		if !a.IsValid() {
			a = sd.Conn
		}
		if a.IsValid() && a.IsUnspecified() {
			return SendOnly
		}
		return SendRecv
	}
	return d
}
