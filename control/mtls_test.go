package control

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/sip"
)

// testCA is a CA and a client certificate it signed for name.
func testCA(t *testing.T, name string) (caPEM string, client *x509.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(der)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	lder, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	client, _ = x509.ParseCertificate(lder)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), client
}

// TestStoreTrunksMatchClientCert (issue 21, inbound mutual TLS): the control plane's trunk
// source matches a TLS client certificate to the stored trunk whose CA signed it, and refuses
// one no stored trunk's CA signed.
func TestStoreTrunksMatchClientCert(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key, _, err := secrets.LoadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secrets.NewBox(key)
	caA, certA := testCA(t, "pbx-a.example")
	caB, certB := testCA(t, "pbx-b.example")
	_, certC := testCA(t, "stranger.example")
	for _, nt := range []store.NewTrunk{
		{Name: "a", URI: "sip:pbx-a.example:5061", Transport: "tls", NewTrunkSecurity: store.NewTrunkSecurity{SRTP: "required", TLSCA: caA}},
		{Name: "b", URI: "sip:pbx-b.example:5061", Transport: "tls", NewTrunkSecurity: store.NewTrunkSecurity{TLSCA: caB}},
		{Name: "plain", URI: "sip:carrier.example", AllowedSources: []string{"127.0.0.1"}},
	} {
		if _, err := st.CreateTrunk(ctx, box, nt); err != nil {
			t.Fatal(err)
		}
	}
	src := &storeTrunks{st: st, box: box}
	var cs sip.CertTrunkSource = src // the SIP server asks for this interface
	lo := netip.MustParseAddr("127.0.0.1")
	for cert, want := range map[*x509.Certificate]string{certA: "a", certB: "b"} {
		tr, err := cs.MatchClientCert(ctx, lo, []*x509.Certificate{cert})
		if err != nil || tr.Name != want {
			t.Errorf("%s: trunk %q, %v; want %q", cert.Subject.CommonName, tr.Name, err, want)
		}
	}
	if tr, err := cs.MatchClientCert(ctx, lo, []*x509.Certificate{certC}); !errors.Is(err, sip.ErrClientCertUnmatched) {
		t.Errorf("a stranger's certificate: trunk %q, %v", tr.Name, err)
	}
}
