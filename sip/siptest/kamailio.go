package siptest

// issue 21: Kamailio (Debian's kamailio package) as a registrar and proxy on loopback, for the
// registration tests of package sip and of the control plane.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// kamailioCfg is a registrar (digest password KamailioPassword for any user, 403 for a wrong
// one; min_expires 1 s) and a proxy that routes INVITEs to the registered contacts,
// record-routing.
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
		if (!pv_www_authenticate("parley.test", "%s", "0")) {
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

// KamailioPassword is the digest password the test registrar accepts.
const KamailioPassword = "s3cret"

// kamailioTLS turns kamailioCfg into one that also listens for TLS on 127.0.0.1:%d (the tls
// module, Debian's kamailio-tls-modules) with the certificate of tls.cfg.
func kamailioTLS(cfg string, port int, tlsCfg string) string {
	cfg = strings.Replace(cfg, "auto_aliases=no\n", fmt.Sprintf("auto_aliases=no\nenable_tls=yes\nlisten=tls:127.0.0.1:%d\n", port), 1)
	return strings.Replace(cfg, "loadmodule \"tm.so\"\n", fmt.Sprintf("loadmodule \"tls.so\"\nmodparam(\"tls\", \"config\", \"%s\")\nloadmodule \"tm.so\"\n", tlsCfg), 1)
}

// kamailioTLSCfg is the tls module's configuration: the server certificate, and no
// verification of clients (Parley's registrations authenticate by digest), nor of the servers
// Kamailio relays calls to (the registered contacts).
const kamailioTLSCfg = `[server:default]
method = TLSv1.2+
verify_certificate = no
require_certificate = no
private_key = %s
certificate = %s

[client:default]
method = TLSv1.2+
verify_certificate = no
require_certificate = no
`

// Kamailio is a Kamailio process on 127.0.0.1:Port (UDP), and TLSPort (TLS) when started by
// NewKamailioTLS.
type Kamailio struct {
	Port    int
	TLSPort int
	t       testing.TB
	dir     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	out     *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// NewKamailio starts Kamailio on a free loopback port (skipping the test when kamailio is not
// installed, failing it under PARLEY_REQUIRE_PEERS=1) and stops it when the test ends.
func NewKamailio(t testing.TB) *Kamailio {
	t.Helper()
	testenv.NeedCommand(t, "kamailio")
	k := &Kamailio{t: t, dir: t.TempDir(), Port: freeUDPPort(t)}
	cfg := fmt.Sprintf(kamailioCfg, k.Port, KamailioPassword)
	if err := os.WriteFile(filepath.Join(k.dir, "k.cfg"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	k.Start()
	t.Cleanup(k.Stop)
	return k
}

// NewKamailioTLS is NewKamailio that also listens for SIP over TLS on TLSPort with the PEM
// certificate and key given (issue 21: registration over TLS). It needs the tls module
// (Debian's kamailio-tls-modules).
func NewKamailioTLS(t testing.TB, certPEM, keyPEM string) *Kamailio {
	t.Helper()
	testenv.NeedCommand(t, "kamailio")
	const mod = "/usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so"
	if _, err := os.Stat(mod); err != nil {
		testenv.Missing(t, "Kamailio's tls module "+mod+" (Debian's kamailio-tls-modules)")
	}
	k := &Kamailio{t: t, dir: t.TempDir(), Port: freeUDPPort(t), TLSPort: freeUDPPort(t)}
	cert, key := filepath.Join(k.dir, "cert.pem"), filepath.Join(k.dir, "key.pem")
	tlsCfg := filepath.Join(k.dir, "tls.cfg")
	for _, f := range []struct{ path, data string }{{cert, certPEM}, {key, keyPEM}, {tlsCfg, fmt.Sprintf(kamailioTLSCfg, key, cert)}} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := kamailioTLS(fmt.Sprintf(kamailioCfg, k.Port, KamailioPassword), k.TLSPort, tlsCfg)
	if err := os.WriteFile(filepath.Join(k.dir, "k.cfg"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	k.Start()
	t.Cleanup(k.Stop)
	return k
}

// TLSURI is the registrar's SIP URI over TLS (the trunk's transport says TLS).
func (k *Kamailio) TLSURI() string { return fmt.Sprintf("sip:127.0.0.1:%d", k.TLSPort) }

func freeUDPPort(t testing.TB) int {
	for range 50 {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		p := c.LocalAddr().(*net.UDPAddr).Port
		c.Close()
		if l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// URI is the registrar's SIP URI.
func (k *Kamailio) URI() string { return fmt.Sprintf("sip:127.0.0.1:%d", k.Port) }

// Output is what Kamailio logged.
func (k *Kamailio) Output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.out == nil {
		return ""
	}
	return k.out.String()
}

// Start (re)starts Kamailio on its port.
func (k *Kamailio) Start() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd != nil {
		return
	}
	k.out = &syncBuffer{}
	k.cmd = exec.Command("kamailio", "-f", filepath.Join(k.dir, "k.cfg"), "-DD", "-E", "-Y", k.dir,
		"-P", filepath.Join(k.dir, "pid"), "-m", "32", "-M", "8")
	k.cmd.Stdout, k.cmd.Stderr = k.out, k.out
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	// Wait until it answers on its port (an OPTIONS gets 405 from this configuration).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if k.answers() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	k.t.Fatalf("kamailio did not start:\n%s", k.out.String())
}

func (k *Kamailio) answers() bool {
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", k.Port))
	if err != nil {
		return false
	}
	defer c.Close()
	msg := fmt.Sprintf("OPTIONS sip:127.0.0.1:%d SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bK-probe%d\r\nFrom: <sip:probe@127.0.0.1>;tag=p\r\nTo: <sip:127.0.0.1>\r\nCall-ID: probe-%d\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		k.Port, c.LocalAddr().String(), time.Now().UnixNano(), time.Now().UnixNano())
	if _, err := c.Write([]byte(msg)); err != nil {
		return false
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return err == nil && bytes.HasPrefix(buf[:n], []byte("SIP/2.0"))
}

// Stop ends Kamailio and its children (its own process group).
func (k *Kamailio) Stop() {
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
