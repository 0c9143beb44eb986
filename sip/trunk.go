package sip

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/emiago/sipgo/sip"
)

// Transport is a SIP transport protocol of a trunk.
type Transport string

// Transports (RFC 3261 §18).
const (
	UDP Transport = "udp"
	TCP Transport = "tcp"
	TLS Transport = "tls"
)

// ParseTransport reads "udp", "tcp" or "tls" in any case; empty means UDP.
func ParseTransport(s string) (Transport, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "udp":
		return UDP, nil
	case "tcp":
		return TCP, nil
	case "tls":
		return TLS, nil
	}
	return "", fmt.Errorf("sip: unknown transport %q (want udp, tcp or tls)", s)
}

// Trunk is a SIP trunk: a carrier or PBX Parley exchanges calls with.
type Trunk struct {
	ID   string
	Name string
	// URI is where outbound INVITEs go, "sip:host[:port]" (the user part is replaced by the
	// dialled number).
	URI       string
	Transport Transport
	// Username and Password are the digest credentials: sent when the trunk challenges an
	// outbound request (401/407), and required from the trunk when InboundAuth is set.
	Username, Password string
	// AllowedSources are the addresses and networks allowed to send INVITEs for this trunk;
	// an INVITE from anywhere else is answered 403.
	AllowedSources []netip.Prefix
	// InboundAuth makes Parley challenge the trunk's INVITEs with digest authentication.
	InboundAuth bool
	// FromDomain, when set, is the host part of the From URI of outbound calls (some carriers
	// identify the account by it); empty uses Parley's advertised address.
	FromDomain string

	// issue 21: encrypted trunks (see srtp.go, tls.go).
	// SRTP is the media-encryption mode: disabled (empty), allowed or required.
	SRTP SRTPMode
	// SRTPOverClear lets SDES keys travel over UDP or TCP signalling (they are then no secret
	// from anyone on the path); without it SRTP needs a TLS trunk.
	SRTPOverClear bool
	// TLS is the trunk's TLS material: extra CA, client certificate for mutual TLS.
	TLS TrunkTLS
	// Registration, when set, makes Parley register to the trunk (register.go).
	Registration *Registration

	// Issue 22 item 7 (see trunkguard.go): TransferAllow lists the non-public networks this
	// trunk's calls may be transferred to, on top of Options.TransferAllow; MediaCIDRs, when
	// set, are the only networks the carrier's SDP may put media at (carriers publish them).
	TransferAllow []netip.Prefix
	MediaCIDRs    []netip.Prefix
}

// Allows reports whether src may send INVITEs for this trunk.
func (t *Trunk) Allows(src netip.Addr) bool {
	src = src.Unmap()
	for _, p := range t.AllowedSources {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// Validate checks the trunk's outbound URI and transport.
func (t *Trunk) Validate() error {
	if t.Name == "" {
		return fmt.Errorf("sip: trunk needs a name")
	}
	if _, err := t.ParseURI(); err != nil {
		return err
	}
	if _, err := ParseTransport(string(t.Transport)); err != nil {
		return err
	}
	if _, err := ParseSRTPMode(string(t.SRTP)); err != nil { // issue 21
		return err
	}
	if err := t.TLS.validate(); err != nil {
		return err
	}
	return nil
}

// ParseURI parses the trunk's outbound URI.
func (t *Trunk) ParseURI() (sip.Uri, error) {
	var u sip.Uri
	s := strings.TrimSpace(t.URI)
	if !strings.HasPrefix(strings.ToLower(s), "sip:") && !strings.HasPrefix(strings.ToLower(s), "sips:") {
		return u, fmt.Errorf("sip: trunk URI %q must start with sip: or sips:", t.URI)
	}
	if err := sip.ParseUri(s, &u); err != nil {
		return u, fmt.Errorf("sip: trunk URI %q: %w", t.URI, err)
	}
	if u.Host == "" {
		return u, fmt.Errorf("sip: trunk URI %q has no host", t.URI)
	}
	return u, nil
}

// ParsePrefixes reads addresses and CIDRs ("203.0.113.7", "198.51.100.0/24", "2001:db8::/32");
// a bare address is a /32 (or /128).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("sip: bad source network %q: %w", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("sip: bad source address %q: %w", s, err)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// TrunkSource is where the server finds trunks: the control plane implements it over its store
// (with a cache); StaticTrunks serves a fixed list.
type TrunkSource interface {
	// MatchSource returns the trunk whose allowed sources contain src, or ErrUnknownTrunk.
	MatchSource(ctx context.Context, src netip.Addr) (Trunk, error)
}

// StaticTrunks is a TrunkSource over a list that can be replaced at run time. The first trunk
// that allows a source wins.
type StaticTrunks struct {
	mu     sync.RWMutex
	trunks []Trunk
}

// NewStaticTrunks returns a source serving trunks.
func NewStaticTrunks(trunks ...Trunk) *StaticTrunks {
	return &StaticTrunks{trunks: append([]Trunk(nil), trunks...)}
}

// Set replaces the list.
func (s *StaticTrunks) Set(trunks ...Trunk) {
	s.mu.Lock()
	s.trunks = append([]Trunk(nil), trunks...)
	s.mu.Unlock()
}

// MatchSource implements TrunkSource.
func (s *StaticTrunks) MatchSource(_ context.Context, src netip.Addr) (Trunk, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.trunks {
		if t.Allows(src) {
			return t, nil
		}
	}
	return Trunk{}, fmt.Errorf("%w for source %s", ErrUnknownTrunk, src)
}

// Lookup returns the trunk called name.
func (s *StaticTrunks) Lookup(name string) (Trunk, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.trunks {
		if t.Name == name {
			return t, nil
		}
	}
	return Trunk{}, fmt.Errorf("%w %q", ErrUnknownTrunk, name)
}
