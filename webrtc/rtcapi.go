package webrtc

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/report"
	pion "github.com/pion/webrtc/v4"
)

// Codec names an audio codec the service may negotiate.
type Codec string

// Codecs the service speaks.
const (
	// CodecOpus is Opus at 48 kHz (RFC 7587) with in-band FEC and DTX.
	CodecOpus Codec = "opus"
	// CodecPCMU is G.711 µ-law at 8 kHz, the fallback every browser has (RFC 3551 §4.5.14).
	CodecPCMU Codec = "pcmu"
)

// opusFmtp is what the service asks of an Opus sender (RFC 7587 §6.1): 10 ms minimum packets,
// in-band FEC (useinbandfec=1: the decoder can use it) and DTX (usedtx=1: it prefers DTX).
const opusFmtp = "minptime=10;useinbandfec=1;usedtx=1"

// parameters returns the RTP codec registration of c.
func (c Codec) parameters() pion.RTPCodecParameters {
	switch c {
	case CodecPCMU:
		return pion.RTPCodecParameters{
			RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypePCMU, ClockRate: 8000},
			PayloadType:        pion.PayloadType(codec.PCMU.PayloadType),
		}
	default:
		return pion.RTPCodecParameters{
			RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: opusFmtp},
			PayloadType:        pion.PayloadType(codec.Opus.PayloadType),
		}
	}
}

// codecOf maps a negotiated mime type back to a Codec.
func codecOf(mime string) (Codec, bool) {
	switch strings.ToLower(mime) {
	case strings.ToLower(pion.MimeTypeOpus):
		return CodecOpus, true
	case strings.ToLower(pion.MimeTypePCMU):
		return CodecPCMU, true
	}
	return "", false
}

// parseCodecs checks the configured codec list; empty means Opus, then PCMU.
func parseCodecs(names []string) ([]Codec, error) {
	if len(names) == 0 {
		return []Codec{CodecOpus, CodecPCMU}, nil
	}
	var out []Codec
	seen := map[Codec]bool{}
	for _, n := range names {
		c := Codec(strings.ToLower(strings.TrimSpace(n)))
		if c != CodecOpus && c != CodecPCMU {
			return nil, fmt.Errorf("webrtc: unknown codec %q (want opus or pcmu)", n)
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// errPollUnsupported: batched reads of the shared socket are not available on this system.
var errPollUnsupported = errors.New("webrtc: batched reads need Linux")

// udpSocketBuffer is the size asked for the shared UDP socket's kernel buffers.
const udpSocketBuffer = 4 << 20

// rtcAPI is the service's pion API: one media engine with only the enabled codecs, the RTCP
// sender-report interceptor, and one UDP socket that every peer connection's ICE shares (a UDP
// mux: STUN usernames tell the connections apart, RFC 8445 §5.1.1 candidates all on one port).
type rtcAPI struct {
	api    *pion.API
	local  *net.UDPAddr
	poll   *pollConn // nil when the mux reads a net.UDPConn packet by packet
	mux    *ice.UDPMuxDefault
	codecs []Codec
}

type rtcAPIOptions struct {
	Host     string // IP to bind; "" binds every interface
	Port     int    // 0 picks a free port
	PublicIP string // NAT 1:1: announced instead of the local addresses
	Codecs   []Codec
	Log      *slog.Logger
	// ReadPeriod and Active: while Active reports true, the shared socket is read in batches
	// every ReadPeriod (pollConn); ReadPeriod <= 0 or a nil Active reads each packet as it
	// comes.
	ReadPeriod time.Duration
	Active     func() bool
}

func newRTCAPI(o rtcAPIOptions) (*rtcAPI, error) {
	if len(o.Codecs) == 0 {
		return nil, errors.New("webrtc: no codec enabled")
	}
	ip := net.IPv4zero
	if o.Host != "" {
		ip = net.ParseIP(o.Host)
		if ip == nil {
			return nil, fmt.Errorf("webrtc: UDP host %q is not an IP address", o.Host)
		}
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("webrtc: UDP port %d out of range", o.Port)
	}
	if o.PublicIP != "" && net.ParseIP(o.PublicIP) == nil {
		return nil, fmt.Errorf("webrtc: public IP %q is not an IP address", o.PublicIP)
	}
	network, ntype := "udp4", pion.NetworkTypeUDP4
	if ip.To4() == nil {
		network, ntype = "udp6", pion.NetworkTypeUDP6
	}
	laddr := &net.UDPAddr{IP: ip, Port: o.Port}
	logs := pionLogs{log: o.Log}
	var muxConn net.PacketConn
	var poll *pollConn
	if o.ReadPeriod > 0 && o.Active != nil {
		// Every call's media shares this socket: room for bursts from many calls (the kernel
		// caps the sizes at net.core.rmem_max / wmem_max).
		var err error
		poll, err = listenPollConn(network, laddr, udpSocketBuffer, o.ReadPeriod, o.Active)
		switch {
		case err == nil:
			muxConn = poll
		case errors.Is(err, errPollUnsupported):
			poll = nil
		default:
			return nil, fmt.Errorf("webrtc: listen on UDP %s: %w", laddr, err)
		}
	}
	if muxConn == nil { // reads packet by packet, or batched reads not on this system
		conn, err := net.ListenUDP(network, laddr)
		if err != nil {
			return nil, fmt.Errorf("webrtc: listen on UDP %s: %w", laddr, err)
		}
		_ = conn.SetReadBuffer(udpSocketBuffer)
		_ = conn.SetWriteBuffer(udpSocketBuffer)
		muxConn = conn
	}
	local := muxConn.LocalAddr().(*net.UDPAddr)
	mux := ice.NewUDPMuxDefault(ice.UDPMuxParams{UDPConn: muxConn, Logger: logs.NewLogger("udpmux")})

	m := &pion.MediaEngine{}
	for _, c := range o.Codecs {
		if err := m.RegisterCodec(c.parameters(), pion.RTPCodecTypeAudio); err != nil {
			mux.Close()
			return nil, fmt.Errorf("webrtc: register %s: %w", c, err)
		}
	}
	// Sender reports (RFC 3550 §6.4.1) come from Pion's interceptor, which costs a lock and a
	// clock read per packet sent. Receiver reports do not: Pion's receiver interceptor parses
	// every incoming packet again into two fresh allocations; the receive path keeps its own
	// statistics and the peer sends the reports (audioReceiver, peer.sendReceiverReport). No
	// NACK, TWCC or other interceptor: Opus has in-band FEC and audio needs no bandwidth
	// estimation.
	ir := &interceptor.Registry{}
	sr, err := report.NewSenderInterceptor()
	if err != nil {
		mux.Close()
		return nil, err
	}
	ir.Add(sr)

	var se pion.SettingEngine
	se.SetICEUDPMux(mux)
	se.SetNetworkTypes([]pion.NetworkType{ntype})
	se.SetIncludeLoopbackCandidate(ip.IsLoopback())
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.LoggerFactory = logs
	if o.PublicIP != "" {
		if err := se.SetICEAddressRewriteRules(pion.ICEAddressRewriteRule{
			External: []string{o.PublicIP}, AsCandidateType: pion.ICECandidateTypeHost,
		}); err != nil {
			mux.Close()
			return nil, fmt.Errorf("webrtc: public IP: %w", err)
		}
	}
	api := pion.NewAPI(pion.WithMediaEngine(m), pion.WithInterceptorRegistry(ir), pion.WithSettingEngine(se))
	return &rtcAPI{api: api, local: local, poll: poll, mux: mux, codecs: o.Codecs}, nil
}

// LocalAddr returns the UDP address every ICE candidate of the service uses.
func (a *rtcAPI) LocalAddr() *net.UDPAddr { return a.local }

// newPeerConnection creates a peer connection on the shared port. The service needs no STUN
// server: its candidates are its own addresses (or the NAT 1:1 public IP).
func (a *rtcAPI) newPeerConnection() (*pion.PeerConnection, error) {
	return a.api.NewPeerConnection(pion.Configuration{})
}

// has reports whether c is enabled.
func (a *rtcAPI) has(c Codec) bool {
	for _, x := range a.codecs {
		if x == c {
			return true
		}
	}
	return false
}

// pick returns the first enabled codec that the remote offer carries.
func (a *rtcAPI) pick(offered []Codec) (Codec, bool) {
	for _, c := range a.codecs {
		for _, o := range offered {
			if c == o {
				return c, true
			}
		}
	}
	return "", false
}

// Close closes the shared socket.
func (a *rtcAPI) Close() error { return a.mux.Close() }
