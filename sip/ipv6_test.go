package sip_test

// issue 21: SIP and RTP over IPv6 on [::1]: SDP c=IN IP6, Via and Contact with bracketed
// addresses, against Parley itself, sipp and baresip.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

func v6Trunk(name string) sip.Trunk {
	return sip.Trunk{Name: name, URI: "sip:[::1]:5060", Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("::1/128")}}
}

func newV6Server(t *testing.T, o sip.Options) *sip.Server {
	t.Helper()
	o.Addr, o.RTPIP = "[::1]:0", netip.MustParseAddr("::1")
	if o.Trunks == nil {
		o.Trunks = sip.NewStaticTrunks(v6Trunk("v6"))
	}
	if o.TransferAllow == nil {
		o.TransferAllow = []netip.Prefix{netip.MustParsePrefix("::1/128")}
	}
	return newServer(t, o)
}

// TestIPv6ParleyToParley: a call between two Parleys on [::1], both ways audio.
func TestIPv6ParleyToParley(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	callee := newV6Server(t, sip.Options{Router: rt})
	caller := newV6Server(t, sip.Options{})
	tr := v6Trunk("out")
	tr.URI = "sip:" + callee.Addr(sip.UDP).String()
	if !strings.HasPrefix(tr.URI, "sip:[::1]:") {
		t.Fatalf("address %s", tr.URI)
	}
	ctx := ctxTimeout(t, 30*time.Second)
	call, err := caller.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550100", Trunk: tr, Conversation: eng.factory()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "RTP both ways over IPv6", func() bool {
		st := call.Stats()
		return st.PacketsReceived > 50 && st.PacketsSent > 50
	})
	if l := call.Stats().Latched; !strings.HasPrefix(l, "[::1]:") {
		t.Errorf("latched %q", l)
	}
	call.Hangup(ctx, session.EndAPI)
	waitFor(t, 5*time.Second, "the callee's end", func() bool { _, ok := rt.lastEnded(); return ok })
}

// TestIPv6SippInbound: sipp calls Parley on [::1] with c=IN IP6; the call is answered, RTP
// flows both ways and sipp's BYE ends it.
func TestIPv6SippInbound(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	srv := newV6Server(t, sip.Options{Router: rt})
	dir := t.TempDir()
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{Hold: 3 * time.Second}))
	ctx := ctxTimeout(t, 60*time.Second)
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "::1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp over IPv6: %v\n%s", err, lastLines(out, 40))
	}
	waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
	ev, _ := rt.lastEnded()
	if ev.EndReason != session.EndCallerHungUp || ev.Stats.PacketsSent < 50 {
		t.Errorf("end %q stats %+v", ev.EndReason, ev.Stats)
	}
}

// TestIPv6Baresip: baresip on [::1] calls Parley, and Parley calls it; each hears the other.
func TestIPv6Baresip(t *testing.T) {
	testenv.NeedCommand(t, "baresip")
	t.Run("baresip-calls", func(t *testing.T) {
		t.Parallel()
		eng := newEngine(t, engineOptions{})
		rt := newRouter()
		rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
		srv := newV6Server(t, sip.Options{Router: rt})
		b := newBaresip(t, "pcmu/8000/1", callerBursts(6*time.Second), false)
		b.host = "[::1]"
		b.cfg = strings.Replace(b.cfg, "sip_listen 127.0.0.1:", "sip_listen [::1]:", 1) + "net_interface ::1\n"
		b.acctExtra = ";mediaaf=ipv6"
		b.reconfigure(t)
		ctx := ctxTimeout(t, 40*time.Second)
		out, err := b.run(t, ctx, 9, "/dial sip:+14155550100@"+srv.Addr(sip.UDP).String(), true)
		if err != nil {
			t.Fatalf("baresip: %v\n%s", err, lastLines(out, 30))
		}
		waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
		ev, _ := rt.lastEnded()
		if ev.Stats.PacketsReceived < 200 || !strings.HasPrefix(ev.Stats.Latched, "[::1]:") {
			t.Errorf("stats %+v\n%s", ev.Stats, lastLines(out, 30))
		}
		if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
			t.Errorf("the agent's tone is at %.1f dBFS in baresip's recording", lvl)
		}
		if eng.utterances() < 1 {
			t.Errorf("the recognizer heard nothing from baresip")
		}
	})
	t.Run("parley-calls", func(t *testing.T) {
		t.Parallel()
		eng := newEngine(t, engineOptions{})
		srv := newV6Server(t, sip.Options{})
		b := newBaresip(t, "pcmu/8000/1", callerBursts(20*time.Second), true)
		b.host = "[::1]"
		b.cfg = strings.Replace(b.cfg, "sip_listen 127.0.0.1:", "sip_listen [::1]:", 1) + "net_interface ::1\n"
		b.acctExtra = ";mediaaf=ipv6"
		b.reconfigure(t)
		ctx := ctxTimeout(t, 40*time.Second)
		done := make(chan string, 1)
		go func() {
			out, _ := b.run(t, ctx, 10, "", true)
			done <- out
		}()
		var call *sip.Call
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			tr := v6Trunk("baresip")
			tr.URI = fmt.Sprintf("sip:[::1]:%d", b.live.Load())
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
		call.Hangup(ctx, session.EndAPI)
		out := <-done
		if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
			t.Errorf("the agent's tone is at %.1f dBFS in baresip's recording\n%s", lvl, lastLines(out, 20))
		}
	})
}
