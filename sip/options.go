package sip

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// Defaults of Options.
const (
	DefaultMediaTimeout    = 30 * time.Second
	DefaultSessionExpires  = 30 * time.Minute // RFC 4028 §4 recommends 1800 s
	DefaultMinSE           = 90 * time.Second // RFC 4028 §5 minimum
	DefaultRingTimeout     = 60 * time.Second
	DefaultDrainRetryAfter = 30 * time.Second
	DefaultUserAgent       = "Parley"
)

// Options configure a Server.
type Options struct {
	// Addr is the UDP and TCP listen address (PARLEY_SIP_ADDR), e.g. ":5060". Port 0 takes a
	// free port (UDP first, then TCP on the same port when it is free).
	Addr string
	// TLSAddr is the SIP over TLS listen address, used when a certificate is configured
	// (TLSConfig, or TLSCertFile and TLSKeyFile).
	TLSAddr                 string
	TLSCertFile, TLSKeyFile string
	TLSConfig               *tls.Config
	// TLSClientAuth asks TLS clients for a certificate (request) or requires one (require);
	// a certificate is matched to the trunk whose CA verifies it (issue 21, mtls.go). Empty
	// is none.
	TLSClientAuth ClientAuth
	// TLSRootCAs are the roots outbound TLS trusts beside each trunk's CA; nil is the system
	// pool (issue 21).
	TLSRootCAs *x509.CertPool
	// PublicIP is the address advertised in Via, Contact and SDP (PARLEY_PUBLIC_IP). Zero
	// advertises the local address the peer is reached from.
	PublicIP netip.Addr
	// RTPPorts is the UDP range for RTP/RTCP pairs (PARLEY_RTP_PORTS); zero means
	// media.DefaultPortRange. RTPIP is the address RTP binds to (zero: all).
	RTPPorts media.PortRange
	RTPIP    netip.Addr
	// Codecs is the audio codec order of offers and the set accepted in answers; empty means
	// DefaultCodecs. telephone-event is always offered and accepted.
	Codecs []codec.Info
	// Router decides inbound calls. Nil refuses every inbound call 480.
	Router Router
	// Trunks matches inbound sources to trunks. Nil refuses every inbound call 403.
	Trunks TrunkSource
	// MediaTimeout ends a call when no RTP arrived for this long while the peer should be
	// sending (not on hold). Zero means DefaultMediaTimeout; negative disables it.
	MediaTimeout time.Duration
	// SessionExpires and MinSE are the RFC 4028 session interval Parley asks for and the
	// smallest it accepts. Zero means the defaults.
	SessionExpires, MinSE time.Duration
	// AckTimeout is how long a 2xx to an INVITE is retransmitted while waiting for its ACK
	// before the call is given up (RFC 3261 §13.3.1.4); zero means 64×T1 (32 s). Tests
	// shorten it.
	AckTimeout time.Duration
	// PrackTimeout is how long a reliable provisional response is retransmitted while waiting
	// for its PRACK before the INVITE is refused 500 (RFC 3262 §3); 0 means 64×T1 (issue 21).
	PrackTimeout time.Duration
	// OnRegistration receives every registration state change (issue 21); it must not block
	// for long. RegisterBackoffMax caps the retry backoff (0: 1 min). InstanceID is this node's
	// +sip.instance UUID (empty: one made at start).
	OnRegistration     func(RegistrationStatus)
	RegisterBackoffMax time.Duration
	InstanceID         string
	// TransferAllow lists the non-public networks transfers may go to (a PBX on the LAN):
	// a transfer to a SIP URI whose host is (or resolves to) a loopback, private, link-local,
	// unspecified or multicast address outside these is refused with ErrDestinationNotAllowed
	// (PARLEY_TRANSFER_ALLOW). Numbers dialled through a trunk are not checked.
	TransferAllow []netip.Prefix
	// DrainRetryAfter is the Retry-After of the 503 answered while draining.
	DrainRetryAfter time.Duration
	// DefaultCountryCode completes national numbers into E.164 ("1" for the NANP); empty
	// normalizes only numbers already in international form.
	DefaultCountryCode string
	// MaxCalls caps the calls of this node (inbound answered 503, Dial refused); 0: no cap.
	MaxCalls int
	// UserAgent is sent in User-Agent and Server headers.
	UserAgent string
	// Observer, when set, receives the counts of calls and SIP responses (metrics).
	Observer Observer
	// Logger receives the server's log lines; nil means slog.Default().
	Logger *slog.Logger
	// SIPLogger receives sipgo's own log lines; nil discards them below warnings.
	SIPLogger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Addr == "" {
		o.Addr = ":5060"
	}
	if o.RTPPorts == (media.PortRange{}) {
		o.RTPPorts = media.DefaultPortRange
	}
	if err := o.RTPPorts.Validate(); err != nil {
		return o, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	if len(o.Codecs) == 0 {
		o.Codecs = DefaultCodecs
	}
	for _, c := range o.Codecs {
		if _, err := codec.NewDecoder(pipelineInfo(c)); err != nil {
			return o, fmt.Errorf("%w: codec %s: %v", ErrBadOptions, c.Name, err)
		}
	}
	if o.MediaTimeout == 0 {
		o.MediaTimeout = DefaultMediaTimeout
	}
	if o.SessionExpires == 0 {
		o.SessionExpires = DefaultSessionExpires
	}
	if o.MinSE == 0 {
		o.MinSE = DefaultMinSE
	}
	if o.SessionExpires < o.MinSE {
		return o, fmt.Errorf("%w: SessionExpires %v below MinSE %v", ErrBadOptions, o.SessionExpires, o.MinSE)
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 64 * sip.T1
	}
	if o.DrainRetryAfter <= 0 {
		o.DrainRetryAfter = DefaultDrainRetryAfter
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return o, fmt.Errorf("%w: set both TLSCertFile and TLSKeyFile, or neither", ErrBadOptions)
	}
	if a, err := ParseClientAuth(string(o.TLSClientAuth)); err != nil {
		return o, fmt.Errorf("%w: %v", ErrBadOptions, err)
	} else {
		o.TLSClientAuth = a
	}
	if o.PublicIP.IsValid() {
		o.PublicIP = o.PublicIP.Unmap()
	}
	return o, nil
}

// CodecsByName returns the codecs named in list ("PCMU", "pcma", "G722", "opus"), in that
// order; for a configurable codec order.
func CodecsByName(list []string) ([]codec.Info, error) {
	var out []codec.Info
	for _, n := range list {
		n = strings.TrimSpace(n)
		if n == "" || strings.EqualFold(n, codec.TelephoneEvent.Name) {
			continue
		}
		found := false
		for _, c := range DefaultCodecs {
			if strings.EqualFold(c.Name, n) {
				out = append(out, c)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("sip: unknown codec %q (want PCMU, PCMA, G722 or opus)", n)
		}
	}
	return out, nil
}
