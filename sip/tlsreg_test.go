package sip_test

// issue 21: registration over TLS (Kamailio with its tls module) and TLS over IPv6.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestKamailioRegistrationTLS: Parley registers to Kamailio over TLS, verifying Kamailio's
// certificate with the trunk's CA; a sipp caller calls the AOR through Kamailio, which relays
// the INVITE to Parley's TLS contact, and the call reaches the agent on the registering trunk.
// A trunk that does not trust Kamailio's CA fails to register, saying why, and never
// registers. Unregister leaves nothing.
func TestKamailioRegistrationTLS(t *testing.T) {
	pki := newTestPKI(t)
	k := siptest.NewKamailioTLS(t, pki.certPEM, pki.keyPEM)
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	var states regStates
	srv := newServer(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, false), TLSAddr: "127.0.0.1:0",
		Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "other", URI: "sip:127.0.0.1:9"}), OnRegistration: states.add, RegisterBackoffMax: 2 * time.Second})
	tr := registeringTrunk(k.TLSURI(), "", siptest.KamailioPassword)
	tr.Transport, tr.TLS.CAPEM = sip.TLS, pki.caPEM
	if err := srv.Register(tr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "registered over TLS", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k.TLSURI()
	})

	dir := t.TempDir()
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{Hold: 2 * time.Second}))
	ctx := ctxTimeout(t, 90*time.Second)
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{fmt.Sprintf("127.0.0.1:%d", k.Port), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp through Kamailio: %v\n%s\n%s", err, lastLines(out, 30), lastLines(k.Output(), 30))
	}
	waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
	if ev, _ := rt.lastEnded(); ev.EndReason != session.EndCallerHungUp {
		t.Errorf("end reason %q", ev.EndReason)
	}
	rt.mu.Lock()
	calls := append([]sip.InboundCall(nil), rt.calls...)
	rt.mu.Unlock()
	if len(calls) != 1 || calls[0].Trunk.Name != "pbx" || calls[0].Transport != sip.TLS {
		t.Errorf("inbound calls %+v, want one on trunk pbx over TLS", calls)
	}
	srv.Unregister("pbx")
	if st := states.last(); st.State != sip.RegUnregistered {
		t.Fatalf("after Unregister: %+v", st)
	}

	// A trunk that trusts another CA: the handshake fails, the state says so.
	var bad regStates
	srv2 := newServer(t, sip.Options{OnRegistration: bad.add, RegisterBackoffMax: time.Second})
	tr.TLS.CAPEM = newTestPKI(t).caPEM
	if err := srv2.Register(tr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "two failed attempts", func() bool { return bad.count(sip.RegFailed) >= 2 })
	if bad.count(sip.RegRegistered) != 0 {
		t.Fatal("registered to a registrar whose certificate the trunk does not trust")
	}
	var failed sip.RegistrationStatus
	for _, s := range bad.all {
		if s.State == sip.RegFailed {
			failed = s
		}
	}
	if !strings.Contains(failed.Error, "TLS") {
		t.Errorf("failed state %+v: the error does not say TLS", failed)
	}
	srv2.Unregister("pbx")
	if len(srv2.Registrations()) != 0 || len(srv.Registrations()) != 0 {
		t.Fatal("a registration is left")
	}
}

// TestIPv6TLS: SIP over TLS on [::1]. Parley calls Parley with SRTP required, verifying the
// callee's certificate (an IP address SAN ::1) with the trunk's CA; and baresip on [::1] calls
// Parley's TLS listener on [::1] with srtp-mand. Audio flows both ways, over IPv6.
func TestIPv6TLS(t *testing.T) {
	t.Run("parley-to-parley", func(t *testing.T) {
		t.Parallel()
		pki := newTestPKI(t)
		eng := newEngine(t, engineOptions{})
		rt := newRouter()
		rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
		in := v6Trunk("in")
		in.SRTP = sip.SRTPRequired
		callee := newV6Server(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, false), TLSAddr: "[::1]:0", Trunks: sip.NewStaticTrunks(in)})
		caller := newV6Server(t, sip.Options{})
		tr := encryptedTrunk(callee.Addr(sip.TLS), sip.SRTPRequired, pki.caPEM)
		if !strings.HasPrefix(tr.URI, "sip:[::1]:") {
			t.Fatalf("TLS address %s", tr.URI)
		}
		ctx := ctxTimeout(t, 30*time.Second)
		call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "SRTP both ways over IPv6", func() bool {
			st := call.Stats()
			return st.PacketsReceived > 50 && st.PacketsSent > 50
		})
		if st := call.Stats(); st.SRTP == "" || st.SRTPFailed != 0 || !strings.HasPrefix(st.Latched, "[::1]:") {
			t.Errorf("caller stats %+v", st)
		}
		call.Hangup(ctx, session.EndAPI)
		waitFor(t, 5*time.Second, "the callee's end", func() bool { _, ok := rt.lastEnded(); return ok })
		rt.mu.Lock()
		tp := rt.calls[0].Transport
		rt.mu.Unlock()
		if ev, _ := rt.lastEnded(); tp != sip.TLS || ev.EndReason != session.EndCallerHungUp || ev.Stats.SRTP == "" {
			t.Errorf("callee: transport %s, end %q, stats %+v", tp, ev.EndReason, ev.Stats)
		}
	})
	t.Run("baresip-calls", func(t *testing.T) {
		t.Parallel()
		pki := newTestPKI(t)
		eng := newEngine(t, engineOptions{})
		rt := newRouter()
		rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
		in := v6Trunk("in")
		in.SRTP = sip.SRTPRequired
		srv := newV6Server(t, sip.Options{Router: rt, TLSConfig: pki.serverTLS(t, false), TLSAddr: "[::1]:0", Trunks: sip.NewStaticTrunks(in)})
		b := newBaresipTLS(t, pki, callerBursts(6*time.Second), false, "srtp-mand")
		b.host = "[::1]"
		b.cfg = strings.Replace(b.cfg, "sip_listen 127.0.0.1:", "sip_listen [::1]:", 1) + "net_interface ::1\n"
		b.acctExtra += ";mediaaf=ipv6"
		b.reconfigure(t)
		ctx := ctxTimeout(t, 40*time.Second)
		out, err := b.run(t, ctx, 9, "/dial sip:+14155550100@"+srv.Addr(sip.TLS).String()+";transport=tls", true)
		if err != nil {
			t.Fatalf("baresip: %v\n%s", err, lastLines(out, 30))
		}
		waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
		ev, _ := rt.lastEnded()
		rt.mu.Lock()
		calls := append([]sip.InboundCall(nil), rt.calls...)
		rt.mu.Unlock()
		if len(calls) != 1 || calls[0].Transport != sip.TLS || !calls[0].Source.Addr().Is6() {
			t.Errorf("inbound calls %+v", calls)
		}
		if ev.Stats.SRTP == "" || ev.Stats.SRTPFailed > 2 || ev.Stats.PacketsReceived < 200 || !strings.HasPrefix(ev.Stats.Latched, "[::1]:") {
			t.Errorf("Parley's stats %+v\n%s", ev.Stats, lastLines(out, 30))
		}
		if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
			t.Errorf("the agent's tone is at %.1f dBFS in baresip's recording", lvl)
		}
		if eng.utterances() < 1 {
			t.Errorf("the recognizer heard nothing from baresip")
		}
	})
}
