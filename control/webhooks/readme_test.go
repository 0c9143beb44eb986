package webhooks_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// readmeBlock returns the first fenced code block of lang in the README's "Receiving webhooks"
// section, exactly as written there.
func readmeBlock(t *testing.T, lang string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "\n### Receiving webhooks\n")
	if i < 0 {
		t.Fatal(`README.md has no "### Receiving webhooks" section`)
	}
	s = s[i+1:]
	if j := strings.Index(s[4:], "\n## "); j >= 0 {
		s = s[:j+4]
	}
	if j := strings.Index(s[4:], "\n### "); j >= 0 {
		s = s[:j+4]
	}
	fence := "\n```" + lang + "\n"
	i = strings.Index(s, fence)
	if i < 0 {
		t.Fatalf("the Receiving webhooks section has no %s block", lang)
	}
	s = s[i+len(fence):]
	j := strings.Index(s, "\n```\n")
	if j < 0 {
		t.Fatalf("the %s block is not closed", lang)
	}
	return s[:j+1]
}

// example is one README receiver run as its own process on 127.0.0.1 (plain HTTP, as the
// README runs it behind an HTTPS front); it prints "<type> <webhook-id>" per event handled.
type example struct {
	port int
	mu   sync.Mutex
	out  []string
}

// handled returns the lines the example printed so far.
func (e *example) handled() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.out)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runExample writes src to a file and runs it with interpreter, the secret in
// PARLEY_WEBHOOK_SECRET and a free PORT; it returns once the port takes connections.
func runExample(t *testing.T, interpreter, file, src, secret string, env ...string) *example {
	t.Helper()
	f := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &example{port: freePort(t)}
	cmd := exec.Command(interpreter, f)
	cmd.Env = append(os.Environ(), append(env, "PARLEY_WEBHOOK_SECRET="+secret, "PORT="+strconv.Itoa(e.port))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			e.mu.Lock()
			e.out = append(e.out, sc.Text())
			e.mu.Unlock()
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s stderr:\n%s", file, stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", e.port), time.Second)
		if err == nil {
			c.Close()
			return e
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before listening: %s", file, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %d within 20 s: %s", file, e.port, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// post sends one request straight to an example and returns its status.
func (e *example) post(t *testing.T, body []byte, h map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/parley", e.port), bytes.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// signed returns the Standard Webhooks headers of body signed with secrets at ts.
func signed(t *testing.T, id string, ts time.Time, body []byte, secrets ...string) map[string]string {
	t.Helper()
	sig, err := appwebhooks.Sign(secrets, id, ts.Unix(), body)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(ts.Unix(), 10), "webhook-signature": sig,
		"Content-Type": "application/json"}
}

// httpsFront is the HTTPS front the README puts before its receivers: a reverse proxy on
// 127.0.0.1, with the certificate of certFile, to whichever example is current.
func httpsFront(t *testing.T, certFile, keyFile string) (string, *atomic.Int64) {
	t.Helper()
	var backend atomic.Int64
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", backend.Load())})
	}}
	srv := httptest.NewUnstartedServer(proxy)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, &backend
}

// TestREADMEExamples runs the README's two verification examples, extracted from README.md as
// written, as receivers of real deliveries: each accepts the deliveries and handles each
// webhook-id once (a resend is accepted, not handled again); during a rotation's overlap a
// receiver that knows only the old secret and one that knows only the new accept the
// deliveries; a tampered body, an old timestamp and a wrong secret are refused.
func TestREADMEExamples(t *testing.T) {
	langs := []struct{ name, lang, file, interpreter string }{
		{"node", "js", "receiver.js", "node"},
		{"python", "python", "receiver.py", "python3"},
	}
	cert, key := tlsFiles(t)
	for _, l := range langs {
		t.Run(l.name, func(t *testing.T) {
			src := readmeBlock(t, l.lang)
			interp := testenv.NeedCommand(t, l.interpreter)
			var env []string
			if l.name == "node" {
				mods := filepath.Join(repoRoot(), "scripts", "webhook-receiver", "node_modules")
				if _, err := os.Stat(filepath.Join(mods, "standardwebhooks")); err != nil {
					testenv.Missing(t, "the standardwebhooks npm package (run: npm ci --prefix scripts/webhook-receiver)")
				}
				env = append(env, "NODE_PATH="+mods)
			}
			engines(t, func(t *testing.T, open opener) {
				testREADMEExample(t, open, cert, key, func(secret string) *example {
					return runExample(t, interp, l.file, src, secret, env...)
				})
			})
		})
	}
}

func testREADMEExample(t *testing.T, open opener, cert, key string, run func(secret string) *example) {
	ctx := context.Background()
	w := newWorld(t, open(t), worldOpts{guard: localGuard(t, cert), schedule: short})
	front, backend := httpsFront(t, cert, key)
	r := w.receiver(t, front+"/parley", appwebhooks.WebhookReceiverCreate{})
	old := run(r.Secret)
	backend.Store(int64(old.port))

	// Real deliveries are accepted, each handled once.
	for i := range 3 {
		w.emit(t, map[string]any{"n": i})
	}
	ds := w.waitStatus(t, r.ID, 3, store.DeliveryDelivered, 30*time.Second)
	want := map[string]bool{}
	for _, d := range ds {
		want["conversation.ended "+d.ID] = true
	}
	poll(t, 10*time.Second, "the example to report 3 events", func() bool { return len(old.handled()) == 3 })
	for _, line := range old.handled() {
		if !want[line] {
			t.Fatalf("the example handled %q; the deliveries are %v", line, want)
		}
	}
	// A resend (same webhook-id) is accepted and not handled again.
	if _, err := w.svc.Resend(ctx, w.act, r.ID, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "the resend to be delivered", func() bool {
		for _, d := range w.deliveries(t, r.ID) {
			if d.ID == ds[0].ID {
				return d.Status == store.DeliveryDelivered && d.AttemptCount == 2
			}
		}
		return false
	})
	// (That it was not handled again is checked below: the example's output is in order, so a
	// second handling would come before the line of the request sent next.)

	// Refused: a tampered body, an old timestamp, a wrong secret, no signature; the same request
	// untampered is accepted (so the refusals are the checks', not the harness's).
	body := []byte(`{"type":"conversation.ended","id":"` + randHex(8) + `","data":{"amount":10}}`)
	id := "0190a6f0-0000-7000-8000-" + randHex(6)
	tampered := bytes.Replace(body, []byte(`10`), []byte(`99`), 1)
	if got := old.post(t, tampered, signed(t, id, time.Now(), body, r.Secret)); got != http.StatusUnauthorized {
		t.Fatalf("a tampered body got %d, want 401", got)
	}
	if got := old.post(t, body, signed(t, id, time.Now().Add(-time.Hour), body, r.Secret)); got != http.StatusUnauthorized {
		t.Fatalf("an hour-old timestamp got %d, want 401", got)
	}
	if got := old.post(t, body, signed(t, id, time.Now(), body, appwebhooks.NewSecret())); got != http.StatusUnauthorized {
		t.Fatalf("a wrong secret got %d, want 401", got)
	}
	if got := old.post(t, body, map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(time.Now().Unix(), 10)}); got != http.StatusUnauthorized {
		t.Fatalf("no signature got %d, want 401", got)
	}
	if got := old.post(t, body, signed(t, id, time.Now(), body, r.Secret)); got != http.StatusNoContent {
		t.Fatalf("the untampered request got %d, want 204", got)
	}
	poll(t, 10*time.Second, "the example to report the untampered request", func() bool {
		return slices.Contains(old.handled(), "conversation.ended "+id)
	})
	if got := old.handled(); len(got) != 4 || got[3] != "conversation.ended "+id {
		t.Fatalf("handled %v, want the three deliveries once each (the resend not again), then the untampered request", got)
	}

	// Rotation: both secrets sign. The example that knows only the old one accepts…
	rot, err := w.svc.Rotate(ctx, w.act, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.emit(t, map[string]any{"n": "after rotation"})
	w.waitStatus(t, r.ID, 4, store.DeliveryDelivered, 30*time.Second)
	poll(t, 10*time.Second, "the old-secret example to handle the event", func() bool { return len(old.handled()) == 5 })
	// …and so does one that knows only the new one, which refuses the old secret alone.
	fresh := run(rot.Secret)
	backend.Store(int64(fresh.port))
	w.emit(t, map[string]any{"n": "new secret"})
	w.waitStatus(t, r.ID, 5, store.DeliveryDelivered, 30*time.Second)
	poll(t, 10*time.Second, "the new-secret example to handle the event", func() bool { return len(fresh.handled()) == 1 })
	if got := fresh.post(t, body, signed(t, id, time.Now(), body, r.Secret)); got != http.StatusUnauthorized {
		t.Fatalf("the new-secret example took the old secret alone: %d", got)
	}
	if got := fresh.post(t, body, signed(t, id, time.Now(), body, rot.Secret, r.Secret)); got != http.StatusNoContent {
		t.Fatalf("the new-secret example refused both signatures: %d", got)
	}
}
