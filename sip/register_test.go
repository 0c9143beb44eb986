package sip_test

// issue 21: registration against Kamailio (Debian's kamailio package), started by the test on
// loopback as registrar and proxy.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// kamailioCfg is a registrar (digest password s3cret, 403 for a wrong one) and a proxy that
// routes INVITEs to the registered contacts, record-routing.
const kamailioCfg = `#!KAMAILIO
debug=2
log_stderror=yes
children=2
auto_aliases=no
listen=udp:127.0.0.1:%d
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "usrloc.so"
loadmodule "registrar.so"
loadmodule "textops.so"
loadmodule "siputils.so"
loadmodule "xlog.so"
loadmodule "auth.so"
modparam("usrloc", "db_mode", 0)
modparam("registrar", "min_expires", 1)
request_route {
	if (is_method("REGISTER")) {
		if (!pv_www_authenticate("parley.test", "s3cret", "0")) {
			if ($rc == -2) { sl_send_reply("403", "Forbidden"); exit; }
			www_challenge("parley.test", "0");
			exit;
		}
		if (!save("location")) { sl_reply_error(); }
		exit;
	}
	if (has_totag()) {
		if (loose_route()) { t_relay(); exit; }
		if (is_method("ACK")) { forward(); exit; }
		t_relay(); # a caller that ignored the Record-Route: to the Request-URI
		exit;
	}
	if (is_method("CANCEL")) { if (t_check_trans()) { t_relay(); } exit; }
	if (is_method("INVITE")) {
		record_route();
		if (!lookup("location")) { sl_send_reply("404", "Not Found"); exit; }
		t_relay();
		exit;
	}
	sl_send_reply("405", "Method Not Allowed");
}
`

// kamailio is a Kamailio process on 127.0.0.1:port.
type kamailio struct {
	t    *testing.T
	dir  string
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *strings.Builder
}

func newKamailio(t *testing.T) *kamailio {
	t.Helper()
	testenv.NeedCommand(t, "kamailio")
	k := &kamailio{t: t, dir: t.TempDir(), port: freePort(t, false)}
	writeFile(t, k.dir, "k.cfg", fmt.Sprintf(kamailioCfg, k.port))
	k.start()
	t.Cleanup(k.stop)
	return k
}

func (k *kamailio) uri() string { return fmt.Sprintf("sip:127.0.0.1:%d", k.port) }

func (k *kamailio) start() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.out = &strings.Builder{}
	k.cmd = exec.Command("kamailio", "-f", filepath.Join(k.dir, "k.cfg"), "-DD", "-E", "-Y", k.dir,
		"-P", filepath.Join(k.dir, "pid"), "-m", "32", "-M", "8")
	k.cmd.Stdout, k.cmd.Stderr = k.out, k.out
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // it binds its socket
}

// stop ends Kamailio and its children (its own process group).
func (k *kamailio) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return
	}
	syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { k.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	k.cmd = nil
}

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
	k1, k2 := newKamailio(t), newKamailio(t)
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	var states regStates
	tr := registeringTrunk(k1.uri(), k2.uri(), "s3cret")
	srv := newServer(t, sip.Options{Router: rt, Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "other", URI: "sip:127.0.0.1:9"}),
		OnRegistration: states.add, RegisterBackoffMax: 2 * time.Second})
	if err := srv.Register(tr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "registered at the first registrar", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k1.uri()
	})

	// A call to the AOR through Kamailio reaches the agent.
	dir := t.TempDir()
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{Hold: 2 * time.Second}))
	ctx := ctxTimeout(t, 90*time.Second)
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{fmt.Sprintf("127.0.0.1:%d", k1.port), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "127.0.0.1", "-p", fmt.Sprint(freePort(t, false)), "-mp", fmt.Sprint(freePort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp through Kamailio: %v\n%s\n%s", err, lastLines(out, 30), lastLines(k1.out.String(), 20))
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
	k1.stop()
	waitFor(t, 20*time.Second, "failover to the backup", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k2.uri()
	})
	if states.count(sip.RegFailed) == 0 {
		t.Error("no failed state reported before the failover")
	}
	// It comes back, the backup goes: the registration returns to the first.
	k1.start()
	k2.stop()
	waitFor(t, 20*time.Second, "registration back at the first registrar", func() bool {
		st := states.last()
		return st.State == sip.RegRegistered && st.Registrar == k1.uri()
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
	k := newKamailio(t)
	var states regStates
	srv := newServer(t, sip.Options{OnRegistration: states.add, RegisterBackoffMax: time.Second})
	if err := srv.Register(registeringTrunk(k.uri(), "", "wrong-password")); err != nil {
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
