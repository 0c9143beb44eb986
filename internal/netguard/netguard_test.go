package netguard

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1":        kindLoopback,
		"127.5.6.7":        kindLoopback,
		"::1":              kindLoopback,
		"::ffff:127.0.0.1": kindLoopback,
		"10.1.2.3":         kindPrivate,
		"172.16.0.1":       kindPrivate,
		"172.31.255.255":   kindPrivate,
		"192.168.1.1":      kindPrivate,
		"fc00::1":          kindPrivate,
		"fd12:3456::1":     kindPrivate,
		"fec0::1":          kindPrivate,
		"169.254.1.1":      kindLinkLocal,
		"fe80::1":          kindLinkLocal,
		"169.254.169.254":  kindMetadata,
		"fd00:ec2::254":    kindMetadata,
		"100.64.0.1":       kindCGNAT,
		"100.127.255.254":  kindCGNAT,
		"224.0.0.1":        kindMulticast,
		"ff02::1":          kindMulticast,
		"0.0.0.0":          kindUnspecified,
		"::":               kindUnspecified,
		"0.1.2.3":          kindReserved,
		"255.255.255.255":  kindReserved,
		"198.18.0.1":       kindReserved,
		"2001:db8::1":      kindReserved,
		"64:ff9b::7f00:1":  kindLoopback, // NAT64 of 127.0.0.1
		"64:ff9b::a00:1":   kindPrivate,  // NAT64 of 10.0.0.1
		"2002:7f00:1::1":   kindLoopback, // 6to4 of 127.0.0.1
		"2001:0:4136::1":   kindReserved, // Teredo
		"93.184.216.34":    "",
		"8.8.8.8":          "",
		"172.32.0.1":       "",
		"100.128.0.1":      "",
		"2606:4700::1111":  "",
		"::ffff:8.8.8.8":   "",
		"64:ff9b::808:808": "", // NAT64 of 8.8.8.8
	}
	for s, want := range cases {
		if got := Classify(netip.MustParseAddr(s)); got != want {
			t.Errorf("Classify(%s) = %q, want %q", s, got, want)
		}
	}
	if got := Classify(netip.Addr{}); got != kindInvalid {
		t.Errorf("Classify(zero) = %q", got)
	}
}

func TestAllowPrivateAdmitsOnlyTheLocalRanges(t *testing.T) {
	g := MustNew(Options{AllowPrivate: true})
	for _, s := range []string{"127.0.0.1", "::1", "10.0.0.1", "192.168.0.9", "169.254.3.4", "100.64.1.1", "8.8.8.8"} {
		if err := g.Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("AllowPrivate: %s refused: %v", s, err)
		}
	}
	for _, s := range []string{"169.254.169.254", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::"} {
		if err := g.Check(netip.MustParseAddr(s)); !errors.Is(err, ErrBlocked) {
			t.Errorf("AllowPrivate: %s allowed (%v)", s, err)
		}
	}
}

// staticResolver answers each call with the next list of addresses (the last one repeats).
type staticResolver struct {
	answers [][]netip.Addr
	calls   atomic.Int32
}

func (r *staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	i := int(r.calls.Add(1)) - 1
	if i >= len(r.answers) {
		i = len(r.answers) - 1
	}
	if len(r.answers[i]) == 0 {
		return nil, errors.New("no such host " + host)
	}
	return r.answers[i], nil
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	res := &staticResolver{answers: [][]netip.Addr{addrs("93.184.216.34")}}
	g := MustNew(Options{Resolver: res})
	ok := []struct {
		url string
		s   Schemes
	}{
		{"https://hooks.example.com/parley", HTTPSOnly},
		{"https://hooks.example.com:8443/x?y=1", HTTPSOnly},
		{"http://tools.example.com/lookup", HTTPOrHTTPS},
		{"HTTPS://HOOKS.EXAMPLE.COM/", HTTPSOnly},
		{"https://93.184.216.34/", HTTPSOnly},
	}
	for _, c := range ok {
		if err := g.CheckURL(ctx, c.url, c.s); err != nil {
			t.Errorf("CheckURL(%s) = %v", c.url, err)
		}
	}
	bad := []struct {
		url  string
		s    Schemes
		want error
	}{
		{"http://hooks.example.com/", HTTPSOnly, ErrScheme},
		{"ftp://hooks.example.com/", HTTPOrHTTPS, ErrScheme},
		{"file:///etc/passwd", HTTPOrHTTPS, ErrBadURL},
		{"javascript:alert(1)", HTTPOrHTTPS, ErrBadURL},
		{"/relative", HTTPSOnly, ErrBadURL},
		{"https://", HTTPSOnly, ErrBadURL},
		{"https://h.example.com:99999/", HTTPSOnly, ErrBadURL},
		{"https://127.0.0.1/", HTTPSOnly, ErrBlocked},
		{"https://[::1]:8443/", HTTPSOnly, ErrBlocked},
		{"https://[::ffff:10.0.0.1]/", HTTPSOnly, ErrBlocked},
		{"http://169.254.169.254/latest/meta-data", HTTPOrHTTPS, ErrBlocked},
		{"https://0.0.0.0/", HTTPSOnly, ErrBlocked},
	}
	for _, c := range bad {
		if err := g.CheckURL(ctx, c.url, c.s); !errors.Is(err, c.want) {
			t.Errorf("CheckURL(%s) = %v, want %v", c.url, err, c.want)
		}
	}

	// A name with one private address among public ones is refused.
	mixed := MustNew(Options{Resolver: &staticResolver{answers: [][]netip.Addr{addrs("93.184.216.34", "10.0.0.5")}}})
	if err := mixed.CheckURL(ctx, "https://mixed.example.com/", HTTPSOnly); !errors.Is(err, ErrBlocked) {
		t.Errorf("mixed answer: %v", err)
	}
	// A name that does not resolve.
	none := MustNew(Options{Resolver: &staticResolver{answers: [][]netip.Addr{nil}}})
	if err := none.CheckURL(ctx, "https://nowhere.invalid/", HTTPSOnly); !errors.Is(err, ErrUnresolvable) {
		t.Errorf("unresolvable: %v", err)
	}
}

// TestDNSRebindingRefusedAtDial: the name resolves to a public address when saved and to the
// loopback address of a live server at dial time. The save passes, the request is refused, and
// the server never sees it.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	res := &staticResolver{answers: [][]netip.Addr{addrs("93.184.216.34"), addrs("127.0.0.1")}}
	g := MustNew(Options{Resolver: res})
	target := "http://rebind.example.com:" + u.Port() + "/hook"
	if err := g.CheckURL(context.Background(), target, HTTPOrHTTPS); err != nil {
		t.Fatalf("save-time check: %v", err)
	}
	_, err := g.Client(2 * time.Second).Get(target)
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("dial after rebinding: %v, want ErrBlocked", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the server was reached %d times", hits.Load())
	}
}

// TestControlHookChecksTheDialledAddress: a plain Dialer (no guard resolution) still refuses.
func TestControlHookChecksTheDialledAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	g := MustNew(Options{})
	_, err := g.Dialer(time.Second).Dial("tcp", u.Host)
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("Dialer to %s: %v", u.Host, err)
	}
	open := MustNew(Options{AllowPrivate: true})
	c, err := open.Dialer(time.Second).Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("AllowPrivate dial: %v", err)
	}
	c.Close()
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusFound) })
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	g := MustNew(Options{AllowPrivate: true})
	resp, err := g.Client(2 * time.Second).Get(srv.URL + "/a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || followed.Load() != 0 {
		t.Fatalf("status %d, followed %d", resp.StatusCode, followed.Load())
	}
}

func TestExtraCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	plain := MustNew(Options{AllowPrivate: true})
	if _, err := plain.Client(2 * time.Second).Get(srv.URL); err == nil {
		t.Fatal("a self-signed receiver was trusted without the CA setting")
	}
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{AllowPrivate: true, ExtraCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.Client(2 * time.Second).Get(srv.URL)
	if err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("status %d", resp.StatusCode)
	}

	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not a certificate"), 0o600)
	if _, err := New(Options{ExtraCAFile: empty}); err == nil {
		t.Fatal("a CA file with no certificate was accepted")
	}
	if _, err := New(Options{ExtraCAFile: filepath.Join(dir, "missing.pem")}); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
