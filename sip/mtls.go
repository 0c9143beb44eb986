package sip

// issue 21: inbound mutual TLS. The TLS listener may ask for (ClientAuthRequest) or require
// (ClientAuthRequire) a client certificate. Each trunk's CA (Trunk.TLS.CAPEM) is what vouches
// for its peers: an inbound TLS INVITE whose connection presented a certificate is matched to
// the trunk whose CA verifies that certificate, whatever its source address, and refused 403
// "client certificate matches no trunk" when none does. When several trunks trust the same CA,
// the one whose URI host the certificate names (DNS or IP SAN), else the one that allows the
// source address, is taken. A connection without a certificate (request mode) is matched by
// its source address as any other. With ClientAuthNone (the default) no certificate picks a
// trunk, even one a custom Options.TLSConfig asked for.
//
// The handshake cannot check a trunk's CA (the listener has no one CA), so it takes any
// certificate the client proves it holds the key of; verification against the trunks' CAs
// happens when the INVITE is matched. Connections are remembered by remote address from
// Accept to Close (tlsPeers), so the INVITE's source finds its connection's certificates.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
)

// ClientAuth is the TLS listener's client-certificate policy (PARLEY_SIP_TLS_CLIENT_AUTH).
type ClientAuth string

// Client-certificate policies.
const (
	ClientAuthNone    ClientAuth = "none"    // no certificate asked (default)
	ClientAuthRequest ClientAuth = "request" // asked; a connection without one is matched by source
	ClientAuthRequire ClientAuth = "require" // a connection without one fails its handshake
)

// ParseClientAuth reads none, request or require (empty: none).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch ClientAuth(strings.ToLower(strings.TrimSpace(s))) {
	case "", ClientAuthNone:
		return ClientAuthNone, nil
	case ClientAuthRequest:
		return ClientAuthRequest, nil
	case ClientAuthRequire:
		return ClientAuthRequire, nil
	}
	return "", fmt.Errorf("sip: TLS client auth %q (want none, request or require)", s)
}

// ErrClientCertUnmatched says an inbound TLS client certificate is vouched for by no trunk's CA.
var ErrClientCertUnmatched = errors.New("sip: client certificate matches no trunk")

// CertTrunkSource is a TrunkSource that can also match a TLS client certificate to a trunk
// (StaticTrunks does; the control plane's source does).
type CertTrunkSource interface {
	TrunkSource
	// MatchClientCert returns the trunk whose CA verifies chain (leaf first), preferring the
	// one whose URI host the leaf names, then one that allows src; ErrClientCertUnmatched
	// when none does.
	MatchClientCert(ctx context.Context, src netip.Addr, chain []*x509.Certificate) (Trunk, error)
}

// AcceptsClientCert reports whether the trunk's CA (only it: not the system pool) verifies
// chain, the leaf first and intermediates after it, at the time of the call.
func (t *Trunk) AcceptsClientCert(chain []*x509.Certificate) bool {
	if t.TLS.CAPEM == "" || len(chain) == 0 {
		return false
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(t.TLS.CAPEM)) {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// namedBy reports whether the certificate names the host of the trunk's URI.
func (t *Trunk) namedBy(leaf *x509.Certificate) bool {
	u, err := t.ParseURI()
	if err != nil {
		return false
	}
	return leaf.VerifyHostname(strings.Trim(u.Host, "[]")) == nil
}

// MatchClientCert picks from trunks the one a client certificate chain belongs to (see
// CertTrunkSource). Sources that list their trunks use it.
func MatchClientCert(trunks []Trunk, src netip.Addr, chain []*x509.Certificate) (Trunk, error) {
	var byCA, bySource *Trunk
	for i := range trunks {
		t := &trunks[i]
		if !t.AcceptsClientCert(chain) {
			continue
		}
		if t.namedBy(chain[0]) {
			return *t, nil
		}
		if bySource == nil && t.Allows(src) {
			bySource = t
		}
		if byCA == nil {
			byCA = t
		}
	}
	switch {
	case bySource != nil:
		return *bySource, nil
	case byCA != nil:
		return *byCA, nil
	}
	return Trunk{}, fmt.Errorf("%w (subject %q)", ErrClientCertUnmatched, chain[0].Subject.CommonName)
}

// MatchClientCert implements CertTrunkSource.
func (s *StaticTrunks) MatchClientCert(_ context.Context, src netip.Addr, chain []*x509.Certificate) (Trunk, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return MatchClientCert(s.trunks, src, chain)
}

// tlsPeers remembers the TLS connections the listener accepted, by remote address, so that
// an INVITE's source finds its connection's client certificates.
type tlsPeers struct {
	net.Listener
	mu    sync.Mutex
	conns map[netip.AddrPort]*tls.Conn
}

func newTLSPeers(ln net.Listener) *tlsPeers {
	return &tlsPeers{Listener: ln, conns: map[netip.AddrPort]*tls.Conn{}}
}

func addrKey(a net.Addr) netip.AddrPort {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Accept remembers each connection until it is closed.
func (p *tlsPeers) Accept() (net.Conn, error) {
	c, err := p.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		return c, nil
	}
	key := addrKey(tc.RemoteAddr())
	p.mu.Lock()
	p.conns[key] = tc
	p.mu.Unlock()
	return &peerConn{Conn: tc, forget: func() {
		p.mu.Lock()
		if p.conns[key] == tc {
			delete(p.conns, key)
		}
		p.mu.Unlock()
	}}, nil
}

// certs returns the verified-by-handshake certificates the client at src presented (nil: none,
// or no such connection). A message was read from the connection, so its handshake is over.
func (p *tlsPeers) certs(src netip.AddrPort) []*x509.Certificate {
	p.mu.Lock()
	tc := p.conns[src]
	p.mu.Unlock()
	if tc == nil {
		return nil
	}
	return tc.ConnectionState().PeerCertificates
}

// peerConn forgets its connection when closed.
type peerConn struct {
	net.Conn
	once   sync.Once
	forget func()
}

func (c *peerConn) Close() error {
	c.once.Do(c.forget)
	return c.Conn.Close()
}

// withClientAuth returns the listener configuration under policy a.
func withClientAuth(conf *tls.Config, a ClientAuth) *tls.Config {
	switch a {
	case ClientAuthRequest:
		conf = conf.Clone()
		conf.ClientAuth = tls.RequestClientCert
	case ClientAuthRequire:
		conf = conf.Clone()
		conf.ClientAuth = tls.RequireAnyClientCert
	}
	return conf
}

// matchTLSClient matches an inbound TLS INVITE from src by its client certificate: ok is
// false when the connection presented none (then the source decides).
func (s *Server) matchTLSClient(ctx context.Context, src netip.AddrPort) (t Trunk, ok bool, err error) {
	if s.tlsPeers == nil {
		return Trunk{}, false, nil
	}
	chain := s.tlsPeers.certs(src)
	if len(chain) == 0 {
		return Trunk{}, false, nil
	}
	cs, isCert := s.o.Trunks.(CertTrunkSource)
	if !isCert {
		return Trunk{}, true, fmt.Errorf("%w: the trunk source cannot match certificates", ErrClientCertUnmatched)
	}
	t, err = cs.MatchClientCert(ctx, src.Addr(), chain)
	return t, true, err
}
