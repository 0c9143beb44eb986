package sip_test

// issue 21: inbound mutual TLS (mtls.go).

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// mtlsCallee is a Parley whose TLS listener asks for client certificates under auth, with three
// trunks: "mtls" trusts pki's CA and allows no source address (only a certificate can pick it),
// "other" trusts another CA, and "plain" allows 127.0.0.0/8 by source.
func mtlsCallee(t *testing.T, pki *testPKI, auth sip.ClientAuth) (*sip.Server, *router) {
	t.Helper()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	mtls := sip.Trunk{Name: "mtls", URI: "sip:localhost:5061", Transport: sip.TLS, TLS: sip.TrunkTLS{CAPEM: pki.caPEM}}
	other := sip.Trunk{Name: "other", URI: "sip:pbx.example.net:5061", Transport: sip.TLS, TLS: sip.TrunkTLS{CAPEM: newTestPKI(t).caPEM}}
	plain := loopbackTrunk("plain")
	srv := newServer(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, false), TLSAddr: "127.0.0.1:0", TLSClientAuth: auth,
		Trunks: sip.NewStaticTrunks(other, plain, mtls)})
	return srv, rt
}

// trunksOfCalls returns the trunk names of the calls the router took.
func (r *router) trunksOfCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		out = append(out, c.Trunk.Name)
	}
	return out
}

// TestTLSInboundMutualBaresip: with client certificates required, baresip presenting one signed
// by a trunk's CA reaches the agent on that trunk (which allows no source address), and
// baresip without a certificate does not get a connection at all.
func TestTLSInboundMutualBaresip(t *testing.T) {
	testenv.NeedCommand(t, "baresip")
	t.Run("with-cert", func(t *testing.T) {
		t.Parallel()
		pki := newTestPKI(t)
		srv, rt := mtlsCallee(t, pki, sip.ClientAuthRequire)
		b := newBaresip(t, "pcmu/8000/1", callerBursts(4*time.Second), false)
		both := writeFile(t, b.dir, "client.pem", pki.clientPEM+pki.ckeyPEM)
		ca := writeFile(t, b.dir, "ca.pem", pki.caPEM)
		b.cfg += "sip_certificate " + both + "\nsip_cafile " + ca + "\n"
		b.reconfigure(t)
		ctx := ctxTimeout(t, 40*time.Second)
		out, err := b.run(t, ctx, 7, "/dial sip:+14155550100@"+srv.Addr(sip.TLS).String()+";transport=tls", true)
		if err != nil {
			t.Fatalf("baresip: %v\n%s", err, lastLines(out, 30))
		}
		waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
		if got := rt.trunksOfCalls(); len(got) != 1 || got[0] != "mtls" {
			t.Fatalf("calls on trunks %v, want [mtls]\n%s", got, lastLines(out, 30))
		}
		ev, _ := rt.lastEnded()
		if ev.Stats.PacketsReceived < 100 {
			t.Errorf("the call carried no audio: %+v\n%s", ev.Stats, lastLines(out, 30))
		}
		if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
			t.Errorf("the agent's tone is at %.1f dBFS in baresip's recording", lvl)
		}
	})
	t.Run("without-cert", func(t *testing.T) {
		t.Parallel()
		pki := newTestPKI(t)
		srv, rt := mtlsCallee(t, pki, sip.ClientAuthRequire)
		b := newBaresip(t, "pcmu/8000/1", callerBursts(2*time.Second), false)
		ca := writeFile(t, b.dir, "ca.pem", pki.caPEM)
		b.cfg += "sip_cafile " + ca + "\n"
		b.reconfigure(t)
		ctx := ctxTimeout(t, 12*time.Second) // baresip waits for its INVITE's timeout: cut it short
		out, _ := b.run(t, ctx, 4, "/dial sip:+14155550100@"+srv.Addr(sip.TLS).String()+";transport=tls", true)
		if got := rt.trunksOfCalls(); len(got) != 0 {
			t.Fatalf("a client without a certificate reached the router: %v\n%s", got, lastLines(out, 30))
		}
		if strings.Contains(out, "Call established") {
			t.Fatalf("baresip established a call without a certificate\n%s", lastLines(out, 30))
		}
		if n := len(srv.ActiveCalls()); n != 0 {
			t.Fatalf("%d calls left", n)
		}
		// The reason, seen by a client that can say it: the handshake is refused.
		pool := x509.NewCertPool()
		pool.AddCert(pki.ca)
		c, err := tls.Dial("tcp", srv.Addr(sip.TLS).String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1)) // TLS 1.3: the server's alert arrives after the client's Finished
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Fatalf("a TLS client without a certificate: %v, want the handshake refused (certificate required)", err)
		}
	})
}

// TestTLSInboundMutualMatching: with client certificates requested, Parley as the caller shows
// each way a TLS client is matched: its certificate signed by the trunk's CA picks that trunk
// (no source address of it allowed); a certificate no trunk's CA signed is refused 403 "client
// certificate matches no trunk" (though its source is allowed by another trunk); no
// certificate falls back to the source address. None leaves a call behind.
func TestTLSInboundMutualMatching(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	callee, rt := mtlsCallee(t, pki, sip.ClientAuthRequest)
	eng := newEngine(t, engineOptions{})
	ctx := ctxTimeout(t, 40*time.Second)
	var callers []*sip.Server
	// Each attempt is made by another caller: a new TLS connection each time.
	dial := func(clientCert, clientKey string) (*sip.Call, error) {
		caller := newServer(t, sip.Options{})
		callers = append(callers, caller)
		tr := encryptedTrunk(callee.Addr(sip.TLS), sip.SRTPAllowed, pki.caPEM)
		tr.TLS.ClientCertPEM, tr.TLS.ClientKeyPEM = clientCert, clientKey
		return caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	}
	call, err := dial(pki.clientPEM, pki.ckeyPEM)
	if err != nil {
		t.Fatalf("with the trunk's certificate: %v", err)
	}
	call.Hangup(ctx, session.EndAPI)

	foreign := newTestPKI(t)
	_, err = dial(foreign.clientPEM, foreign.ckeyPEM)
	var de *sip.DialError
	if !errors.As(err, &de) || de.Status != 403 {
		t.Fatalf("a certificate of an unknown CA: %v, want 403", err)
	}

	call, err = dial("", "")
	if err != nil {
		t.Fatalf("without a certificate, by source: %v", err)
	}
	call.Hangup(ctx, session.EndAPI)
	if got := rt.trunksOfCalls(); len(got) != 2 || got[0] != "mtls" || got[1] != "plain" {
		t.Fatalf("calls on trunks %v, want [mtls plain] (the refused one never reaches the router)", got)
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool {
		n := len(callee.ActiveCalls())
		for _, c := range callers {
			n += len(c.ActiveCalls())
		}
		return n == 0
	})
}

// TestParseClientAuth: the setting's values, and a clear error for others.
func TestParseClientAuth(t *testing.T) {
	for in, want := range map[string]sip.ClientAuth{"": sip.ClientAuthNone, "None": sip.ClientAuthNone, "request": sip.ClientAuthRequest, " REQUIRE ": sip.ClientAuthRequire} {
		if got, err := sip.ParseClientAuth(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := sip.ParseClientAuth("optional"); err == nil || !strings.Contains(err.Error(), "none, request or require") {
		t.Errorf("optional: %v", err)
	}
	if _, err := sip.New(sip.Options{Addr: "127.0.0.1:0", TLSClientAuth: "maybe"}); !errors.Is(err, sip.ErrBadOptions) {
		t.Errorf("New with a bad TLSClientAuth: %v", err)
	}
}
