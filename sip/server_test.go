package sip_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestDrain: while draining, new INVITEs and OPTIONS get 503 with Retry-After; the call in
// progress goes on, and Drain returns once it ended.
func TestDrain(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{DrainRetryAfter: 45 * time.Second}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 30*time.Second)
	drained := make(chan error, 1)
	go func() { drained <- s.srv.Drain(ctx) }()
	waitFor(t, 3*time.Second, "draining", s.srv.Draining)
	other := siptest.NewPhone(t, siptest.PhoneOptions{})
	c, err := other.Call(ctx, target(s.srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err == nil || c.Status() != 503 || c.Header("Retry-After") != "45" || !strings.Contains(c.Header("Reason"), "draining") {
		t.Fatalf("new call while draining: %d %q %q", c.Status(), c.Header("Retry-After"), c.Header("Reason"))
	}
	if res, err := other.Options(ctx, target(s.srv, sip.UDP, "")); err != nil || res.StatusCode != 503 {
		t.Errorf("OPTIONS while draining: %v %v", res, err)
	}
	if _, err := s.srv.Dial(ctx, sip.DialRequest{To: "+14155550123", Trunk: loopbackTrunk("x"), Conversation: s.eng.factory()}); !errors.Is(err, sip.ErrDraining) {
		t.Errorf("Dial while draining: %v", err)
	}
	s.call.ResetHeard()
	s.pcall.Conversation().Execute(session.Command{Kind: session.CommandSay, Text: "We are still talking."})
	waitFor(t, 10*time.Second, "the call in progress to go on", func() bool { return toneLevel(s.call.Heard(), 440) > -30 })
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with a call up", err)
	default:
	}
	s.call.Bye(ctx)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after the last call")
	}
}

// TestDrainDeadline: at the deadline the calls left are hung up.
func TestDrainDeadline(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := s.srv.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain: %v", err)
	}
	select {
	case <-s.call.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the call was not hung up at the deadline")
	}
	// Issue 22 item 2: a call ended at the drain deadline ends as shutdown, not failed.
	if got := s.pcall.EndReason(); got != session.EndShutdown {
		t.Errorf("end reason at the drain deadline %q, want shutdown", got)
	}
	conv := s.pcall.Conversation()
	select {
	case <-conv.Done():
	case <-time.After(time.Second):
		t.Fatal("the conversation did not end within a second of the hang-up")
	}
	if got := conv.EndReason(); got != session.EndShutdown {
		t.Errorf("conversation end reason %q, want shutdown", got)
	}
}

// TestOptionsKeepalive: out-of-dialog OPTIONS (a carrier's keep-alive) is answered 200 with our
// capabilities.
func TestOptionsKeepalive(t *testing.T) {
	t.Parallel()
	srv := newServer(t, sip.Options{})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	res, err := ph.Options(ctxTimeout(t, 5*time.Second), target(srv, sip.UDP, ""))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("OPTIONS: %v %v", res, err)
	}
	for _, h := range []string{"Allow", "Accept", "Supported"} {
		if len(res.GetHeaders(h)) == 0 {
			t.Errorf("no %s", h)
		}
	}
}

// selfSigned returns a TLS certificate for 127.0.0.1.
func selfSigned(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestTLS: a call over SIP/TLS when a certificate is configured.
func TestTLS(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	srv := newServer(t, sip.Options{Router: rt, TLSAddr: "127.0.0.1:0",
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS12}})
	if !srv.Addr(sip.TLS).IsValid() {
		t.Fatal("no TLS listener")
	}
	ph := siptest.NewPhone(t, siptest.PhoneOptions{Transport: "tls"})
	ctx := ctxTimeout(t, 20*time.Second)
	c, err := ph.Call(ctx, "sip:+14155550100@"+srv.Addr(sip.TLS).String(), siptest.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the agent over TLS signalling", func() bool { return toneLevel(c.Heard(), 440) > -30 })
	pc := srv.ActiveCalls()[0]
	if err := pc.SendDTMF(ctx, "9"); err != nil { // an in-dialog exchange from Parley's side
		t.Fatal(err)
	}
	if err := c.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the end", func() bool { ev, ok := rt.lastEnded(); return ok && ev.EndReason == session.EndCallerHungUp })
}

// TestNoGoroutineLeak: after calls and Close, the server's goroutines are gone.
func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Run("calls", func(t *testing.T) {
		s := setupCall(t, sip.Options{}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
		waitFor(t, 10*time.Second, "the greeting", func() bool { return toneLevel(s.call.Heard(), 440) > -30 })
		// The server closes with the call up: Close hangs it up.
	})
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines left over (base %d):\n%s", n, base, buf)
	}
}

// TestMaxCalls: over the node's cap an INVITE gets 503 with Retry-After and Dial ErrAtCapacity.
func TestMaxCalls(t *testing.T) {
	t.Parallel()
	s := setupCall(t, sip.Options{MaxCalls: 1}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 10*time.Second)
	other := siptest.NewPhone(t, siptest.PhoneOptions{})
	c, err := other.Call(ctx, target(s.srv, sip.UDP, "+14155550100"), siptest.CallOptions{})
	if err == nil || c.Status() != 503 || c.Header("Retry-After") == "" {
		t.Fatalf("second call: %d %q", c.Status(), c.Header("Retry-After"))
	}
	if _, err := s.srv.Dial(ctx, sip.DialRequest{To: "+14155550123", Trunk: loopbackTrunk("x"), Conversation: s.eng.factory()}); !errors.Is(err, sip.ErrAtCapacity) {
		t.Errorf("Dial at capacity: %v", err)
	}
	s.call.Bye(ctx)
}

// TestPublicIP: the configured public address is what Via, Contact and SDP advertise (an
// outbound call: the callee answers to where the INVITE came from).
func TestPublicIP(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{PublicIP: netip.MustParseAddr("203.0.113.9")})
	ph := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx := ctxTimeout(t, 20*time.Second)
	call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, sip.UDP), Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := ph.Incoming(ctx)
	inv := pc.Invite()
	if v := inv.Via(); v == nil || v.Host != "203.0.113.9" {
		t.Errorf("Via %v", v)
	}
	if ct := inv.Contact(); ct == nil || ct.Address.Host != "203.0.113.9" {
		t.Errorf("Contact %v", ct)
	}
	if body := string(inv.Body()); !strings.Contains(body, "c=IN IP4 203.0.113.9") {
		t.Errorf("SDP:\n%s", body)
	}
	call.Hangup(ctx, session.EndAPI)
	select {
	case <-pc.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no BYE")
	}
}

// TestServingLogWithoutTLS: issue 22 item 10: with TLS off the start-up line has no tls
// attribute (it said tls="invalid AddrPort").
func TestServingLogWithoutTLS(t *testing.T) {
	var buf syncBuffer
	newServer(t, sip.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	waitFor(t, 5*time.Second, "the start-up line", func() bool { return strings.Contains(buf.String(), "sip: serving") })
	if s := buf.String(); strings.Contains(s, "invalid AddrPort") || strings.Contains(s, " tls=") {
		t.Errorf("start-up line: %s", s)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
