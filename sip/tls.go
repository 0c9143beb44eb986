package sip

// issue 21: outbound SIP over TLS with server verification and optional mutual TLS per trunk.
//
// sipgo dials every TLS connection with one tls.Config (the user agent's). Parley's does the
// verification itself (VerifyConnection): the peer's chain must verify against the system pool
// plus the CAs of the trunks that dial that host, for the name the trunk's URI gives (a DNS
// name or an IP address SAN). The client certificate of mutual TLS comes from the dial's
// context: Dial puts the trunk's there, and GetClientCertificate reads it.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// tlsTrust is the server's registry of per-host roots.
type tlsTrust struct {
	mu     sync.Mutex
	system *x509.CertPool // nil: the system pool
	extra  map[string]*x509.CertPool
}

// add trusts the CAs in pem for host (a trunk's URI host).
func (t *tlsTrust) add(host, pem string) {
	if pem == "" {
		return
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.extra == nil {
		t.extra = map[string]*x509.CertPool{}
	}
	p := t.extra[host]
	if p == nil {
		p = x509.NewCertPool()
		t.extra[host] = p
	}
	p.AppendCertsFromPEM([]byte(pem))
}

// verify checks the peer's chain for cs.ServerName against the system pool, then the host's
// extra roots.
func (t *tlsTrust) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate", ErrTLSVerify)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	name := strings.Trim(cs.ServerName, "[]")
	opts := x509.VerifyOptions{DNSName: name, Intermediates: inter, Roots: t.system}
	_, err := cs.PeerCertificates[0].Verify(opts)
	if err == nil {
		return nil
	}
	t.mu.Lock()
	extra := t.extra[strings.ToLower(name)]
	t.mu.Unlock()
	if extra != nil {
		opts.Roots = extra
		if _, err2 := cs.PeerCertificates[0].Verify(opts); err2 == nil {
			return nil
		}
	}
	return fmt.Errorf("%w for %s: %v", ErrTLSVerify, name, err)
}

type clientCertKey struct{}

// withTrunkTLS returns ctx carrying the trunk's client certificate (when it has one) and
// registers its CA for its host.
func (s *Server) withTrunkTLS(ctx context.Context, t Trunk) context.Context {
	if t.TLS.CAPEM != "" {
		if u, err := t.ParseURI(); err == nil {
			s.trust.add(u.Host, t.TLS.CAPEM)
		}
	}
	if t.TLS.ClientCertPEM == "" {
		return ctx
	}
	cert, err := tls.X509KeyPair([]byte(t.TLS.ClientCertPEM), []byte(t.TLS.ClientKeyPEM))
	if err != nil {
		s.log.Warn("sip: trunk client certificate unusable", "trunk", t.Name, "err", err)
		return ctx
	}
	return context.WithValue(ctx, clientCertKey{}, &cert)
}

// dialTLSConfig is the user agent's TLS client configuration.
func (s *Server) dialTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The standard verification is replaced, not skipped: VerifyConnection runs it with the
		// trunk's roots added.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection:   s.trust.verify,
		GetClientCertificate: func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c, ok := cri.Context().Value(clientCertKey{}).(*tls.Certificate); ok {
				return c, nil
			}
			return &tls.Certificate{}, nil // none: the server decides
		},
	}
}

// isTLSVerifyError reports whether err comes from a failed TLS handshake or verification.
func isTLSVerifyError(err error) bool {
	if err == nil {
		return false
	}
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ve) || errors.Is(err, ErrTLSVerify) || strings.Contains(err.Error(), "TLS handshake")
}
