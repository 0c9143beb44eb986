package sip_test

// issue 21: in-dialog requests over TLS to a Contact elsewhere use the trunk's TLS
// configuration.

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// tcpRelay forwards every TCP connection it accepts on 127.0.0.1 to to (TLS passes through it
// untouched, as through a carrier's TCP front end), and counts them.
type tcpRelay struct {
	ln    net.Listener
	conns atomic.Int32
	wg    sync.WaitGroup
}

func newTCPRelay(t *testing.T, to string) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln}
	var mu sync.Mutex
	var open []net.Conn
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			up, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, up)
			mu.Unlock()
			r.wg.Add(2)
			go func() { defer r.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer r.wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// TestTLSInDialogToAnotherContact: an outbound TLS call reaches the callee through a relay on
// another port, and the callee's Contact names its own TLS port, whose certificate only the
// trunk's private CA signed. The ACK and the BYE go to that Contact: they must be sent over a
// connection made with the trunk's CA (sipgo's default, the system pool, would refuse the
// certificate and the callee would never see them). The callee keeps the call past its ACK
// timeout (so the ACK arrived) and ends it as hung up by the caller (so the BYE arrived).
//
// With mutual TLS the callee also requires a client certificate on every connection: the new
// one to its Contact must present the trunk's.
func TestTLSInDialogToAnotherContact(t *testing.T) {
	for _, mutual := range []bool{false, true} {
		t.Run(map[bool]string{false: "server-auth", true: "mutual"}[mutual], func(t *testing.T) {
			t.Parallel()
			testInDialogToAnotherContact(t, mutual)
		})
	}
}

func testInDialogToAnotherContact(t *testing.T, mutual bool) {
	pki := newTestPKI(t)
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	in := loopbackTrunk("in")
	in.SRTP = sip.SRTPRequired
	callee := newServer(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, mutual), TLSAddr: "127.0.0.1:0",
		Trunks: sip.NewStaticTrunks(in), AckTimeout: 2 * time.Second})
	caller := newServer(t, sip.Options{})
	relay := newTCPRelay(t, callee.Addr(sip.TLS).String())
	tr := encryptedTrunk(relay.ln.Addr().(*net.TCPAddr).AddrPort(), sip.SRTPRequired, pki.caPEM)
	if mutual {
		tr.TLS.ClientCertPEM, tr.TLS.ClientKeyPEM = pki.clientPEM, pki.ckeyPEM
	}
	ctx := ctxTimeout(t, 30*time.Second)
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "SRTP both ways", func() bool {
		st := call.Stats()
		return st.PacketsReceived > 20 && st.PacketsSent > 20
	})
	time.Sleep(3 * time.Second) // past the callee's ACK timeout
	if n := len(callee.ActiveCalls()); n != 1 {
		t.Fatalf("the callee has %d calls after its ACK timeout (the ACK to its Contact did not arrive?)", n)
	}
	if _, ended := rt.lastEnded(); ended {
		t.Fatal("the callee's call ended before the hang-up")
	}
	call.Hangup(ctx, session.EndAPI)
	waitFor(t, 5*time.Second, "the callee's end", func() bool { _, ok := rt.lastEnded(); return ok })
	if ev, _ := rt.lastEnded(); ev.EndReason != session.EndCallerHungUp {
		t.Fatalf("the callee's call ended %q, want %q (the BYE to its Contact)", ev.EndReason, session.EndCallerHungUp)
	}
	if n := relay.conns.Load(); n != 1 {
		t.Errorf("%d connections through the relay, want 1 (the INVITE's)", n)
	}
}
