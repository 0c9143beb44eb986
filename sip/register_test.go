package sip_test

// issue 21: registration against Kamailio (Debian's kamailio package), started by the test on
// loopback as registrar and proxy.

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// regStates records the registration states a server reports.
type regStates struct {
	mu  sync.Mutex
	all []sip.RegistrationStatus
}

func (r *regStates) add(st sip.RegistrationStatus) {
	r.mu.Lock()
	r.all = append(r.all, st)
	r.mu.Unlock()
}

func (r *regStates) last() sip.RegistrationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) == 0 {
		return sip.RegistrationStatus{}
	}
	return r.all[len(r.all)-1]
}

func (r *regStates) count(state sip.RegState) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, st := range r.all {
		if st.State == state {
			n++
		}
	}
	return n
}

func registeringTrunk(primary, backup, password string) sip.Trunk {
	return sip.Trunk{Name: "pbx", URI: primary, Transport: sip.UDP, Username: "parley", Password: password,
		Registration: &sip.Registration{Registrar: primary, Backup: backup, AOR: "sip:+14155550100@parley.test", Expires: 4 * time.Second}}
}

// TestKamailioRegistration: Parley registers to Kamailio with digest credentials; a sipp caller
// calls the AOR through Kamailio and the call reaches the agent (the trunk's number, though the
// trunk lists no allowed source: the registrar's address counts). Kamailio stops: Parley's
// refresh fails and it fails over to the backup registrar. The first comes back and the
// backup stops: the registration returns to the first. Close un-registers.
func TestKamailioRegistration(t *testing.T) {
	k1, k2 := siptest.NewKamailio(t), siptest.NewKamailio(t)
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	var states regStates
	tr := registeringTrunk(k1.URI(), k2.URI(), siptest.KamailioPassword)
	srv := newServer(t, sip.Options{Router: rt, Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "other", URI: "sip:127.0.0.1:9"}),
		OnRegistration: states.add, RegisterBackoffMax: 2 * time.Second})
	if err := srv.Register(tr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "registered at the first registrar", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k1.URI()
	})

	// A call to the AOR through Kamailio reaches the agent.
	dir := t.TempDir()
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{Hold: 2 * time.Second}))
	ctx := ctxTimeout(t, 90*time.Second)
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{fmt.Sprintf("127.0.0.1:%d", k1.Port), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp through Kamailio: %v\n%s\n%s", err, lastLines(out, 30), lastLines(k1.Output(), 20))
	}
	waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
	if ev, _ := rt.lastEnded(); ev.EndReason != session.EndCallerHungUp {
		t.Errorf("end reason %q", ev.EndReason)
	}
	rt.mu.Lock()
	calls := append([]sip.InboundCall(nil), rt.calls...)
	rt.mu.Unlock()
	if len(calls) == 0 || calls[len(calls)-1].Trunk.Name != "pbx" || calls[len(calls)-1].To != "+14155550100" {
		t.Errorf("inbound calls %+v", calls)
	}

	// The first registrar goes away: failure, then the backup.
	k1.Stop()
	waitFor(t, 20*time.Second, "failover to the backup", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k2.URI()
	})
	if states.count(sip.RegFailed) == 0 {
		t.Error("no failed state reported before the failover")
	}
	// It comes back, the backup goes: the registration returns to the first.
	k1.Start()
	k2.Stop()
	waitFor(t, 20*time.Second, "registration back at the first registrar", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k1.URI()
	})
	srv.Unregister("pbx")
	if st := states.last(); st.State != sip.RegUnregistered {
		t.Fatalf("after Unregister: %+v", st)
	}
	if len(srv.Registrations()) != 0 {
		t.Fatal("a registration is left")
	}
}

// TestKamailioRegistrationForbidden: a wrong password gets 403: the state is failed with the
// status (never the password), retries back off, and Unregister leaves nothing running.
func TestKamailioRegistrationForbidden(t *testing.T) {
	k := siptest.NewKamailio(t)
	var states regStates
	srv := newServer(t, sip.Options{OnRegistration: states.add, RegisterBackoffMax: time.Second})
	if err := srv.Register(registeringTrunk(k.URI(), "", "wrong-password")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "two failed attempts", func() bool { return states.count(sip.RegFailed) >= 2 })
	st := states.last()
	for _, s := range states.all {
		if s.State == sip.RegFailed {
			st = s
		}
	}
	if !strings.Contains(st.Error, "403") || strings.Contains(st.Error, "wrong-password") {
		t.Fatalf("failed state %+v", st)
	}
	if states.count(sip.RegRegistered) != 0 {
		t.Fatal("registered with a wrong password")
	}
	srv.Unregister("pbx")
	if len(srv.Registrations()) != 0 {
		t.Fatal("a registration is left")
	}
}
