package sip

// issue 21: outbound SIP over TLS with server verification and optional mutual TLS per trunk.
//
// Parley dials a trunk's TLS connection itself (ensureTLS), verified against the system pool
// plus the trunk's CA for the name the trunk's URI gives (a DNS name or an IP address SAN),
// presenting the trunk's client certificate when it has one, and hands the connection to sipgo
// (dialedTLS), which sends the call's requests over it. Connections sipgo would open on its
// own would use its default configuration (the system pool), so every request of a TLS
// dialog (ACK, BYE, re-INVITE, INFO, PRACK, REFER…) goes through tlsFor first: a request to a
// Contact elsewhere (another port, another host) gets a connection made with the dialog's
// trunk's CA and client certificate, verified for the Contact's host.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// TrunkTLS is a trunk's TLS material, PEM-encoded.
type TrunkTLS struct {
	// CAPEM are extra roots trusted for this trunk's server certificate, beside the system
	// pool (a private PBX's CA).
	CAPEM string
	// ClientCertPEM and ClientKeyPEM are the certificate Parley presents when the trunk asks
	// for one (mutual TLS). The key is a secret: sealed at rest, never shown.
	ClientCertPEM, ClientKeyPEM string
}

// ErrTLSVerify says a trunk's server certificate did not verify.
var ErrTLSVerify = errors.New("sip: TLS server certificate not trusted")

// validate parses the material.
func (t TrunkTLS) validate() error {
	if t.CAPEM != "" {
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(t.CAPEM)) {
			return fmt.Errorf("sip: trunk CA is not PEM certificates")
		}
	}
	if (t.ClientCertPEM == "") != (t.ClientKeyPEM == "") {
		return fmt.Errorf("sip: trunk client certificate needs both certificate and key")
	}
	if t.ClientCertPEM != "" {
		if _, err := tls.X509KeyPair([]byte(t.ClientCertPEM), []byte(t.ClientKeyPEM)); err != nil {
			return fmt.Errorf("sip: trunk client certificate: %v", err)
		}
	}
	return nil
}

// dialedTLS hands the TLS connections Parley dials itself to sipgo, as a listener whose Accept
// returns them: sipgo then reads them and sends the requests to their address over them.
// sipgo would dial with the user agent's one configuration; this way each trunk's connection
// is made with its own roots, server name and client certificate.
type dialedTLS struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

func newDialedTLS(addr net.Addr) *dialedTLS {
	return &dialedTLS{ch: make(chan net.Conn), closed: make(chan struct{}), addr: addr}
}

func (d *dialedTLS) Accept() (net.Conn, error) {
	select {
	case c := <-d.ch:
		return c, nil
	case <-d.closed:
		return nil, net.ErrClosed
	}
}

func (d *dialedTLS) Close() error   { d.once.Do(func() { close(d.closed) }); return nil }
func (d *dialedTLS) Addr() net.Addr { return d.addr }

// trunkTLSConfig is the client configuration of a connection to trunk t: the system pool (or
// Options.TLSRootCAs) plus the trunk's CA, the server name from the trunk's URI host, and the
// trunk's client certificate.
func (s *Server) trunkTLSConfig(t Trunk, host string) (*tls.Config, error) {
	roots := s.o.TLSRootCAs
	if roots == nil {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil || roots == nil {
			roots = x509.NewCertPool()
		}
	} else {
		roots = roots.Clone()
	}
	if t.TLS.CAPEM != "" && !roots.AppendCertsFromPEM([]byte(t.TLS.CAPEM)) {
		return nil, fmt.Errorf("sip: trunk %s: CA is not PEM certificates", t.Name)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: strings.Trim(host, "[]")}
	if t.TLS.ClientCertPEM != "" {
		cert, err := tls.X509KeyPair([]byte(t.TLS.ClientCertPEM), []byte(t.TLS.ClientKeyPEM))
		if err != nil {
			return nil, fmt.Errorf("sip: trunk %s: client certificate: %v", t.Name, err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// ensureTLS makes sure a verified TLS connection to dest (host:port of trunk t) is in sipgo's
// pool before a request goes there: it dials one with the trunk's configuration when none is
// open. A certificate that does not verify fails here, with ErrTLSVerify, before any request.
func (s *Server) ensureTLS(ctx context.Context, t Trunk, dest string) error {
	host, port, err := net.SplitHostPort(dest)
	if err != nil {
		return fmt.Errorf("sip: TLS destination %q: %v", dest, err)
	}
	pool := s.ua.TransportLayer().Pool("tls")
	if ip := resolveHost(ctx, host); ip.IsValid() {
		if pool.Get(net.JoinHostPort(ip.String(), port)) != nil {
			return nil
		}
	}
	conf, err := s.trunkTLSConfig(t, host)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d := tls.Dialer{Config: conf}
	c, err := d.DialContext(dctx, "tcp", dest)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrTLSVerify, dest, err)
	}
	key := c.RemoteAddr().String()
	select {
	case s.dialed.ch <- c:
	case <-dctx.Done():
		c.Close()
		return fmt.Errorf("sip: TLS connection to %s not taken: %w", dest, dctx.Err())
	case <-s.dialed.closed:
		c.Close()
		return ErrClosed
	}
	for pool.Get(key) == nil { // sipgo adds it to its pool at once; wait for that
		select {
		case <-dctx.Done():
			return fmt.Errorf("sip: TLS connection to %s not pooled: %w", dest, dctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// isTLSVerifyError reports whether err comes from a failed TLS handshake or verification.
func isTLSVerifyError(err error) bool {
	if err == nil {
		return false
	}
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ve) || errors.Is(err, ErrTLSVerify) || strings.Contains(err.Error(), "TLS handshake")
}

// tlsFor makes sure a TLS request of a dialog leaves over a connection made with its trunk's
// TLS configuration (ensureTLS), however far its destination is from where the dialog began
// (the Contact of a 200 on another port or host). Requests of no TLS dialog are left alone.
func (s *Server) tlsFor(ctx context.Context, req *sip.Request) error {
	if !strings.EqualFold(req.Transport(), "TLS") || req.Destination() == "" {
		return nil
	}
	l := s.findLeg(callID(req))
	if l == nil || l.tlsTrunk == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return s.ensureTLS(ctx, *l.tlsTrunk, req.Destination())
}
