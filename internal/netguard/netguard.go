// Package netguard is the one way Parley reaches a URL a customer chose: webhook receivers, HTTP
// tools, MCP servers, crawled sites. It refuses addresses inside the service's own network
// (loopback, RFC 1918 and unique-local, link-local with the cloud metadata address, CGNAT,
// multicast, unspecified and reserved ranges) twice: when the URL is saved (CheckURL) and at every
// connection, on the address actually dialled (the dialer's Control hook), so a name that
// resolves to a public address when saved and to 127.0.0.1 later (DNS rebinding) is still refused.
// Redirects are never followed: a client sees the 3xx answer itself.
//
// Two operator settings loosen it for local testing and are unsafe in production: AllowPrivate
// admits loopback, private, link-local and CGNAT addresses (never unspecified, multicast or the
// metadata address), and ExtraCAFile trusts one more certificate authority besides the system's.
package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors the guard answers; each is wrapped with the address or URL it is about.
var (
	// ErrBlocked: the address is inside a refused range.
	ErrBlocked = errors.New("address not allowed")
	// ErrScheme: the URL's scheme is not one the caller accepts.
	ErrScheme = errors.New("scheme not allowed")
	// ErrUnresolvable: the host has no address.
	ErrUnresolvable = errors.New("host does not resolve")
	// ErrBadURL: the URL cannot be parsed or has no host.
	ErrBadURL = errors.New("not a valid absolute URL")
)

// Schemes says which URL schemes CheckURL accepts.
type Schemes int

const (
	// HTTPSOnly accepts https only (webhook receivers).
	HTTPSOnly Schemes = iota
	// HTTPOrHTTPS accepts http and https (tools, MCP servers, crawls).
	HTTPOrHTTPS
)

// Resolver looks names up; *net.Resolver is one. Tests give their own to play DNS rebinding.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Guard.
type Options struct {
	// AllowPrivate admits loopback, private, link-local and CGNAT addresses. Unsafe in
	// production; local testing needs it (PARLEY_OUTBOUND_ALLOW_PRIVATE).
	AllowPrivate bool
	// ExtraCAFile is a PEM file of certificate authorities trusted besides the system pool
	// (PARLEY_OUTBOUND_CA_FILE), e.g. a test receiver's self-signed certificate.
	ExtraCAFile string
	// Resolver replaces the system resolver (nil: net.DefaultResolver).
	Resolver Resolver
	// DialTimeout bounds one TCP connection attempt (0: 10 s).
	DialTimeout time.Duration
}

// Guard checks addresses and makes HTTP clients and dialers that enforce the checks.
type Guard struct {
	opts      Options
	resolver  Resolver
	tlsConfig *tls.Config
	transport *http.Transport
}

// New makes a Guard. It fails when ExtraCAFile cannot be read or holds no certificate.
func New(o Options) (*Guard, error) {
	g := &Guard{opts: o, resolver: o.Resolver}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.opts.DialTimeout <= 0 {
		g.opts.DialTimeout = 10 * time.Second
	}
	g.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.ExtraCAFile != "" {
		pem, err := os.ReadFile(o.ExtraCAFile)
		if err != nil {
			return nil, fmt.Errorf("netguard: extra CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("netguard: extra CA file %s holds no PEM certificate", o.ExtraCAFile)
		}
		g.tlsConfig.RootCAs = pool
	}
	g.transport = &http.Transport{
		Proxy:                  nil, // never through an environment proxy: the guard must see the real peer
		DialContext:            g.DialContext,
		TLSClientConfig:        g.tlsConfig,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    32,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return g, nil
}

// MustNew is New for options known to be valid (no CA file); it panics otherwise.
func MustNew(o Options) *Guard {
	g, err := New(o)
	if err != nil {
		panic(err)
	}
	return g
}

// AllowsPrivate reports whether the unsafe AllowPrivate setting is on.
func (g *Guard) AllowsPrivate() bool { return g.opts.AllowPrivate }

// TLSConfig is a copy of the TLS settings the guard's clients use (system roots plus the extra CA).
func (g *Guard) TLSConfig() *tls.Config { return g.tlsConfig.Clone() }

// Client is an HTTP client whose every connection is checked, which follows no redirect, and
// whose whole request (connection, headers and body read) is bounded by timeout (0: none; then
// bound it with the request's context). Clients share one connection pool.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     g.transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Transport is the guard's shared RoundTripper, for libraries that take one (it follows no
// redirects by itself; http.Client does, so wrap it in Client's CheckRedirect).
func (g *Guard) Transport() http.RoundTripper { return g.transport }

// Dialer is a net.Dialer whose Control hook refuses a connection to a disallowed address. Use
// it for dials that are not HTTP; it does not resolve names itself in a checked way, so prefer
// DialContext, which resolves through the guard's resolver.
func (g *Guard) Dialer(timeout time.Duration) *net.Dialer {
	if timeout <= 0 {
		timeout = g.opts.DialTimeout
	}
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.control}
}

// control runs after the socket is made and before it connects, with the address actually dialled.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: dial %s: %w", address, ErrBlocked)
	}
	return g.Check(ap.Addr())
}

// DialContext resolves host through the guard's resolver and dials the allowed addresses in
// turn; the Control hook checks each address again at connect time.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: %w: %s", ErrBadURL, address)
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	d := g.Dialer(0)
	var first error
	for _, a := range addrs {
		if err := g.Check(a); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// CheckURL checks a URL when it is saved: an absolute URL of an accepted scheme whose host
// resolves, every address of it allowed.
func (g *Guard) CheckURL(ctx context.Context, raw string, schemes Schemes) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return fmt.Errorf("netguard: %q: %w", raw, ErrBadURL)
	}
	switch s := strings.ToLower(u.Scheme); {
	case s == "https":
	case s == "http" && schemes == HTTPOrHTTPS:
	default:
		if schemes == HTTPSOnly {
			return fmt.Errorf("netguard: %w: %q (only https is accepted)", ErrScheme, u.Scheme)
		}
		return fmt.Errorf("netguard: %w: %q (only http and https are accepted)", ErrScheme, u.Scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("netguard: %q: %w (port %s)", raw, ErrBadURL, p)
		}
	}
	addrs, err := g.lookup(ctx, u.Hostname())
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if err := g.Check(a); err != nil {
			return err
		}
	}
	return nil
}

// lookup returns a host's addresses (an IP literal is its own answer).
func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("netguard: %w: %s", ErrUnresolvable, host)
	}
	return addrs, nil
}

// Check reports whether a may be connected to, as ErrBlocked wrapped with the range's name.
func (g *Guard) Check(a netip.Addr) error {
	if why := Classify(a); why != "" {
		if g.opts.AllowPrivate && privateKind(why) {
			return nil
		}
		return fmt.Errorf("netguard: %w: %s is %s", ErrBlocked, a.Unmap(), why)
	}
	return nil
}

// privateKind: ranges the AllowPrivate setting admits.
func privateKind(why string) bool {
	switch why {
	case kindLoopback, kindPrivate, kindLinkLocal, kindCGNAT:
		return true
	}
	return false
}

const (
	kindLoopback    = "a loopback address"
	kindPrivate     = "a private address"
	kindLinkLocal   = "a link-local address"
	kindMetadata    = "the cloud metadata address"
	kindCGNAT       = "a shared (CGNAT) address"
	kindMulticast   = "a multicast address"
	kindUnspecified = "an unspecified address"
	kindReserved    = "a reserved address"
	kindInvalid     = "not an IP address"
)

var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
}

var (
	cgnat   = netip.MustParsePrefix("100.64.0.0/10")
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	teredo  = netip.MustParsePrefix("2001::/32")
	metaV4  = netip.MustParseAddr("169.254.169.254")
	metaV6  = netip.MustParseAddr("fd00:ec2::254")
	siteLoc = netip.MustParsePrefix("fec0::/10")
)

// Classify names the refused range an address is in, or "" for a public address. IPv4 carried
// inside IPv6 (mapped, NAT64, 6to4) is judged by the IPv4 address it carries.
func Classify(a netip.Addr) string {
	if !a.IsValid() {
		return kindInvalid
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return Classify(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixTo4.Contains(a):
			return Classify(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		case teredo.Contains(a):
			return kindReserved // the client address is obfuscated; nothing public needs Teredo
		}
	}
	switch {
	case a == metaV4 || a == metaV6:
		return kindMetadata
	case a.IsUnspecified():
		return kindUnspecified
	case a.IsLoopback():
		return kindLoopback
	case a.IsMulticast():
		return kindMulticast
	case a.IsLinkLocalUnicast():
		return kindLinkLocal
	case a.IsPrivate() || siteLoc.Contains(a):
		return kindPrivate
	case cgnat.Contains(a):
		return kindCGNAT
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return kindReserved
		}
	}
	return ""
}
