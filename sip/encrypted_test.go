package sip_test

// issue 21: encrypted trunks (TLS signalling, SRTP media) against Parley itself and baresip.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// testPKI is a CA and certificates it signed, for 127.0.0.1, ::1 and localhost.
type testPKI struct {
	caPEM              string
	caKey              *ecdsa.PrivateKey
	ca                 *x509.Certificate
	certPEM, keyPEM    string // a server certificate
	clientPEM, ckeyPEM string // a client certificate
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{}
	var err error
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	p.certPEM, p.keyPEM = p.issue(t, 2, x509.ExtKeyUsageServerAuth)
	p.clientPEM, p.ckeyPEM = p.issue(t, 3, x509.ExtKeyUsageClientAuth)
	return p
}

func (p *testPKI) issue(t testing.TB, serial int64, usage x509.ExtKeyUsage) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// serverTLS is a listener configuration with the server certificate; clientCAs, when set,
// requires a client certificate signed by the CA (mutual TLS).
func (p *testPKI) serverTLS(t testing.TB, mutual bool) *tls.Config {
	cert, err := tls.X509KeyPair([]byte(p.certPEM), []byte(p.keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if mutual {
		pool := x509.NewCertPool()
		pool.AddCert(p.ca)
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c
}

// encryptedTrunk is a loopback trunk over TLS to addr with SRTP mode.
func encryptedTrunk(addr netip.AddrPort, mode sip.SRTPMode, ca string) sip.Trunk {
	tr := loopbackTrunk("secure")
	tr.URI = "sip:" + addr.String()
	tr.Transport = sip.TLS
	tr.SRTP = mode
	tr.TLS.CAPEM = ca
	return tr
}

// tlsPair is a callee Parley (TLS listener, SRTP required on its trunk, an agent on
// +14155550100) and a caller Parley.
func tlsPair(t *testing.T, mutual bool, calleeMode sip.SRTPMode) (caller, callee *sip.Server, rt *router, pki *testPKI) {
	t.Helper()
	pki = newTestPKI(t)
	eng := newEngine(t, engineOptions{})
	rt = newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	in := loopbackTrunk("in")
	in.SRTP = calleeMode
	callee = newServer(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, mutual), TLSAddr: "127.0.0.1:0",
		Trunks: sip.NewStaticTrunks(in)})
	caller = newServer(t, sip.Options{})
	return caller, callee, rt, pki
}

// TestTLSSRTPParleyToParley: an outbound call over TLS, verified with the trunk's CA, with
// SRTP required on both trunks: audio flows both ways encrypted, in each suite order Parley
// offers (the first, AES_CM_128_HMAC_SHA1_80, is taken).
func TestTLSSRTPParleyToParley(t *testing.T) {
	t.Parallel()
	caller, callee, rt, pki := tlsPair(t, false, sip.SRTPRequired)
	eng := newEngine(t, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100",
		Trunk: encryptedTrunk(callee.Addr(sip.TLS), sip.SRTPRequired, pki.caPEM), Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "SRTP both ways", func() bool {
		st := call.Stats()
		return st.PacketsReceived > 50 && st.PacketsSent > 50
	})
	st := call.Stats()
	if st.SRTP != "AES_CM_128_HMAC_SHA1_80" || st.SRTPFailed != 0 {
		t.Fatalf("caller SRTP %q, %d failed", st.SRTP, st.SRTPFailed)
	}
	call.Hangup(ctx, session.EndAPI)
	waitFor(t, 5*time.Second, "the callee's end", func() bool { _, ok := rt.lastEnded(); return ok })
	ev, _ := rt.lastEnded()
	if ev.Stats.SRTP != "AES_CM_128_HMAC_SHA1_80" || ev.Stats.PacketsReceived < 50 || ev.Stats.SRTPFailed != 0 {
		t.Fatalf("callee stats %+v", ev.Stats)
	}
}

// TestTLSWrongCertificate: a TLS trunk whose server certificate no trusted CA signed fails the
// call clearly (TLS handshake failed) and leaves no call behind; with the trunk's CA the same
// call goes through.
func TestTLSWrongCertificate(t *testing.T) {
	t.Parallel()
	caller, callee, _, pki := tlsPair(t, false, sip.SRTPAllowed)
	eng := newEngine(t, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	tr := encryptedTrunk(callee.Addr(sip.TLS), sip.SRTPRequired, "")
	_, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	var de *sip.DialError
	if !errors.As(err, &de) || de.Reason != "TLS handshake failed" {
		t.Fatalf("err %v, want a DialError saying TLS handshake failed", err)
	}
	if n := len(caller.ActiveCalls()); n != 0 {
		t.Fatalf("%d calls left", n)
	}
	// Another CA is no better.
	tr.TLS.CAPEM = newTestPKI(t).caPEM
	tr.URI = "sip:localhost:" + fmt.Sprint(callee.Addr(sip.TLS).Port())
	if _, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()}); !errors.As(err, &de) || de.Reason != "TLS handshake failed" {
		t.Fatalf("another CA: %v", err)
	}
	tr.TLS.CAPEM = pki.caPEM
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	call.Hangup(ctx, session.EndAPI)
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(caller.ActiveCalls()) == 0 && len(callee.ActiveCalls()) == 0 })
}

// TestTLSMutual: a callee that requires a client certificate refuses the trunk without one
// and takes it with the trunk's certificate.
func TestTLSMutual(t *testing.T) {
	t.Parallel()
	caller, callee, _, pki := tlsPair(t, true, sip.SRTPAllowed)
	eng := newEngine(t, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	tr := encryptedTrunk(callee.Addr(sip.TLS), sip.SRTPRequired, pki.caPEM)
	if _, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()}); err == nil {
		t.Fatal("call without a client certificate went through")
	}
	tr.TLS.ClientCertPEM, tr.TLS.ClientKeyPEM = pki.clientPEM, pki.ckeyPEM
	tr.URI = "sip:localhost:" + fmt.Sprint(callee.Addr(sip.TLS).Port()) // a new connection
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	if st := call.Stats(); st.SRTP == "" {
		t.Errorf("no SRTP over mutual TLS")
	}
	call.Hangup(ctx, session.EndAPI)
}

// TestSRTPPolicyRefusals: SRTP over UDP is refused before any INVITE unless the trunk allows
// clear signalling; a callee requiring SRTP answers a plain offer 488; neither leaves a call.
func TestSRTPPolicyRefusals(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	in := loopbackTrunk("in")
	in.SRTP, in.SRTPOverClear = sip.SRTPRequired, true
	callee := newServer(t, sip.Options{Router: rt, Trunks: sip.NewStaticTrunks(in)})
	caller := newServer(t, sip.Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	tr := loopbackTrunk("udp")
	tr.URI = "sip:" + callee.Addr(sip.UDP).String()
	tr.SRTP = sip.SRTPRequired
	_, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	if !errors.Is(err, sip.ErrSRTPClearSignalling) {
		t.Fatalf("SRTP over UDP: %v", err)
	}
	tr.SRTP = sip.SRTPAllowed // offers plain RTP: the callee requires SRTP
	_, err = caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	var de *sip.DialError
	if !errors.As(err, &de) || de.Status != 488 {
		t.Fatalf("plain offer to a required trunk: %v", err)
	}
	tr.SRTP, tr.SRTPOverClear = sip.SRTPRequired, true // explicitly allowed over UDP
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "SRTP over UDP (allowed)", func() bool { return call.Stats().PacketsReceived > 20 })
	call.Hangup(ctx, session.EndAPI)
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(caller.ActiveCalls()) == 0 && len(callee.ActiveCalls()) == 0 })
}

// newBaresipTLS is a baresip with the test PKI's certificate on its TLS listener (SIP port + 1)
// and the srtp module, using mediaenc.
func newBaresipTLS(t *testing.T, pki *testPKI, mic []int16, answer bool, mediaenc string) *baresip {
	t.Helper()
	b := newBaresip(t, "pcmu/8000/1", mic, answer)
	both := writeFile(t, b.dir, "cert.pem", pki.certPEM+pki.keyPEM)
	ca := writeFile(t, b.dir, "ca.pem", pki.caPEM)
	b.cfg += "module srtp.so\nsip_certificate " + both + "\nsip_cafile " + ca + "\n"
	b.acctExtra = ";mediaenc=" + mediaenc
	b.reconfigure(t)
	return b
}

// TestBaresipSRTPOverTLS: baresip with mediaenc=srtp (best effort: RTP/AVP with a=crypto) and
// srtp-mand (RTP/SAVP) calls Parley over TLS, and Parley calls it; each side hears the other
// (checked by energy in baresip's recording and the recognizer's utterances), and both sides
// say SRTP was in use.
func TestBaresipSRTPOverTLS(t *testing.T) {
	testenv.NeedCommand(t, "baresip")
	for _, enc := range []string{"srtp", "srtp-mand"} {
		t.Run("baresip-calls/"+enc, func(t *testing.T) {
			t.Parallel()
			pki := newTestPKI(t)
			eng := newEngine(t, engineOptions{})
			rt := newRouter()
			rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
			in := loopbackTrunk("in")
			in.SRTP = sip.SRTPAllowed
			if enc == "srtp-mand" {
				in.SRTP = sip.SRTPRequired
			}
			srv := newServer(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, false), TLSAddr: "127.0.0.1:0", Trunks: sip.NewStaticTrunks(in)})
			b := newBaresipTLS(t, pki, callerBursts(6*time.Second), false, enc)
			ctx := ctxTimeout(t, 40*time.Second)
			out, err := b.run(t, ctx, 9, "/dial sip:+14155550100@"+srv.Addr(sip.TLS).String()+";transport=tls", true)
			if err != nil {
				t.Fatalf("baresip: %v\n%s", err, lastLines(out, 30))
			}
			waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
			ev, _ := rt.lastEnded()
			// baresip 1.0 sends the odd SRTCP packet Parley's check refuses (seen: one per call,
			// "failed to verify auth tag"); every RTP packet must pass.
			if ev.Stats.SRTP == "" || ev.Stats.SRTPFailed > 2 || ev.Stats.PacketsReceived < 200 {
				t.Errorf("Parley's stats %+v\n%s", ev.Stats, lastLines(out, 30))
			}
			if !strings.Contains(out, "SRTP is Enabled") {
				t.Errorf("baresip did not use SRTP\n%s", lastLines(out, 30))
			}
			if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
				t.Errorf("the agent's 440 Hz tone is at %.1f dBFS in baresip's recording", lvl)
			}
			if eng.utterances() < 1 {
				t.Errorf("the recognizer heard no utterance from baresip")
			}
		})
		t.Run("parley-calls/"+enc, func(t *testing.T) {
			t.Parallel()
			pki := newTestPKI(t)
			eng := newEngine(t, engineOptions{})
			srv := newServer(t, sip.Options{})
			b := newBaresipTLS(t, pki, callerBursts(20*time.Second), true, enc)
			ctx := ctxTimeout(t, 40*time.Second)
			done := make(chan string, 1)
			go func() {
				out, _ := b.run(t, ctx, 10, "", true)
				done <- out
			}()
			var call *sip.Call
			var err error
			for attempt := 0; attempt < 20; attempt++ {
				tr := encryptedTrunk(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(b.live.Load()+1)), sip.SRTPRequired, pki.caPEM)
				dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				call, err = srv.Dial(dctx, sip.DialRequest{From: "+15550001111", To: "baresip", Trunk: tr, Conversation: eng.factory()})
				cancel()
				if err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "baresip's audio at the recognizer", func() bool { return eng.utterances() > 0 })
			waitFor(t, 10*time.Second, "RTP to baresip", func() bool { return call.Stats().PacketsSent > 150 })
			if st := call.Stats(); st.SRTP == "" || st.SRTPFailed > 2 {
				t.Errorf("stats %+v", st)
			}
			call.Hangup(ctx, session.EndAPI)
			out := <-done
			if !strings.Contains(out, "SRTP is Enabled") {
				t.Errorf("baresip did not use SRTP\n%s", lastLines(out, 30))
			}
			if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
				t.Errorf("the agent's tone is at %.1f dBFS in baresip's recording\n%s", lvl, lastLines(out, 20))
			}
		})
	}
}

// TestSRTPRekeyOnReinvite: Parley re-keys an SRTP call with a re-INVITE; both sides switch to
// the new keys (one re-key each), and audio keeps flowing both ways without refused packets.
func TestSRTPRekeyOnReinvite(t *testing.T) {
	t.Parallel()
	caller, callee, _, pki := tlsPair(t, false, sip.SRTPRequired)
	eng := newEngine(t, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100",
		Trunk: encryptedTrunk(callee.Addr(sip.TLS), sip.SRTPRequired, pki.caPEM), Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "SRTP flowing", func() bool { return call.Stats().PacketsReceived > 20 })
	if err := call.Rekey(ctx); err != nil {
		t.Fatal(err)
	}
	st := call.Stats()
	if st.SRTPRekeys != 1 {
		t.Fatalf("caller re-keys %d", st.SRTPRekeys)
	}
	before := st.PacketsReceived
	waitFor(t, 10*time.Second, "audio after the re-key", func() bool { return call.Stats().PacketsReceived > before+50 })
	var in *sip.Call
	for _, c := range callee.ActiveCalls() {
		in = c
	}
	if in == nil {
		t.Fatal("no call at the callee")
	}
	cs := in.Stats()
	if cs.SRTPRekeys != 1 || cs.SRTPFailed > 2 {
		t.Fatalf("callee stats %+v", cs)
	}
	inBefore := cs.PacketsReceived
	waitFor(t, 10*time.Second, "audio after the re-key at the callee", func() bool { return in.Stats().PacketsReceived > inBefore+50 })
	if f := call.Stats().SRTPFailed; f > 2 {
		t.Fatalf("%d packets refused at the caller after the re-key", f)
	}
	call.Hangup(ctx, session.EndAPI)
}
