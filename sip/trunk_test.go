package sip

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func TestTrunks(t *testing.T) {
	p, err := ParsePrefixes([]string{"203.0.113.7", " 198.51.100.0/24 ", "2001:db8::/32", ""})
	if err != nil {
		t.Fatal(err)
	}
	tr := Trunk{Name: "carrier", URI: "sip:sip.example.com:5080", Transport: TCP, AllowedSources: p}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{"203.0.113.7": true, "203.0.113.8": false, "198.51.100.200": true,
		"::ffff:198.51.100.1": true, "2001:db8::1": true, "192.0.2.1": false} {
		if got := tr.Allows(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Allows(%s) = %v", addr, got)
		}
	}
	if _, err := ParsePrefixes([]string{"300.1.1.1"}); err == nil {
		t.Error("bad address accepted")
	}
	for _, bad := range []Trunk{{Name: "", URI: "sip:x"}, {Name: "a", URI: "http://x"}, {Name: "a", URI: "sip:"}, {Name: "a", URI: "sip:x", Transport: "sctp"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	src := NewStaticTrunks(tr)
	if got, err := src.MatchSource(context.Background(), netip.MustParseAddr("203.0.113.7")); err != nil || got.Name != "carrier" {
		t.Errorf("MatchSource: %v %v", got, err)
	}
	if _, err := src.MatchSource(context.Background(), netip.MustParseAddr("192.0.2.1")); !errors.Is(err, ErrUnknownTrunk) {
		t.Errorf("unknown source: %v", err)
	}
	if _, err := src.Lookup("carrier"); err != nil {
		t.Error(err)
	}
	for in, want := range map[string]Transport{"": UDP, "UDP": UDP, "tcp": TCP, "TLS": TLS} {
		if got, err := ParseTransport(in); err != nil || got != want {
			t.Errorf("ParseTransport(%q) = %v %v", in, got, err)
		}
	}
}
