package webhooks_test

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// short is the retry schedule of the tests: every wait 30 ms.
var short = []time.Duration{30 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond}

// TestDeliveriesVerifiedByStandardWebhooks: deliveries are signed so that the reference
// library (the standardwebhooks npm package, run by Node in an HTTPS receiver trusted through
// the extra-CA setting) verifies them; a retry keeps the webhook-id; the attempts are recorded.
func TestDeliveriesVerifiedByStandardWebhooks(t *testing.T) {
	cert, key := tlsFiles(t)
	node := startNodeReceiver(t, cert, key)
	engines(t, func(t *testing.T, open opener) {
		w := newWorld(t, open(t), worldOpts{guard: localGuard(t, cert), schedule: short})
		path := "/verify-" + randHex(4)
		r := w.receiver(t, node.url(path), appwebhooks.WebhookReceiverCreate{})
		if !strings.HasPrefix(r.Secret, "whsec_") || len(r.Secret) < len("whsec_")+32 {
			t.Fatalf("secret %q", r.Secret)
		}
		node.configure(t, path, []string{r.Secret}, []int{500, 500, 500}, "")
		w.emit(t, map[string]any{"object": "conversation", "id": "c1", "metadata": map[string]any{"crm": 7}})
		ds := w.waitStatus(t, r.ID, 1, store.DeliveryDelivered, 30*time.Second)
		d := ds[0]
		if d.AttemptCount != 4 || len(d.Attempts) != 4 {
			t.Fatalf("delivery %+v: want 3 failures then a success", d)
		}
		for i, want := range []int{500, 500, 500, 200} {
			a := d.Attempts[i]
			if a.StatusCode == nil || *a.StatusCode != want || a.Number != i+1 {
				t.Fatalf("attempt %d: %+v, want status %d", i+1, a, want)
			}
		}
		if d.Attempts[3].ResponseBody != "ok" || d.Attempts[0].Error == nil {
			t.Fatalf("attempts %+v", d.Attempts)
		}
		poll(t, 10*time.Second, "the receiver's report of 4 requests", func() bool { return len(node.hitsOf(path)) >= 4 })
		hits := node.hitsOf(path)
		if len(hits) != 4 {
			t.Fatalf("the receiver got %d requests, want 4", len(hits))
		}
		for _, h := range hits {
			if !h.Verified || h.ID != d.ID || h.Type != "conversation.ended" || h.Signatures != 1 {
				t.Fatalf("request %+v: want verified by standardwebhooks, webhook-id %s on every attempt", h, d.ID)
			}
		}
	})
}

// TestRotationOverlap: after rotate-secret both secrets sign: a receiver that knows only the
// old secret and one that knows only the new both verify the same delivery.
func TestRotationOverlap(t *testing.T) {
	cert, key := tlsFiles(t)
	node := startNodeReceiver(t, cert, key)
	engines(t, func(t *testing.T, open opener) {
		w := newWorld(t, open(t), worldOpts{guard: localGuard(t, cert), schedule: short})
		path := "/rotate-" + randHex(4)
		r := w.receiver(t, node.url(path), appwebhooks.WebhookReceiverCreate{})
		old := r.Secret
		rot, err := w.svc.Rotate(context.Background(), w.act, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rot.Secret == old || rot.PreviousSecretExpiresAt == nil || rot.PreviousSecretExpiresAt.Sub(time.Now()) < 23*time.Hour {
			t.Fatalf("rotated %+v", rot)
		}
		node.configure(t, path, []string{old}, nil, "")
		d, err := w.svc.Test(context.Background(), w.act, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		w.waitStatus(t, r.ID, 1, store.DeliveryDelivered, 20*time.Second)
		poll(t, 10*time.Second, "the receiver's report", func() bool { return len(node.hitsOf(path)) == 1 })
		node.configure(t, path, []string{rot.Secret}, nil, "")
		if _, err := w.svc.Resend(context.Background(), w.act, r.ID, d.ID); err != nil {
			t.Fatal(err)
		}
		poll(t, 20*time.Second, "the resend", func() bool { return len(node.hitsOf(path)) == 2 })
		for i, h := range node.hitsOf(path) {
			if !h.Verified || h.Signatures != 2 || h.ID != d.ID || h.Type != "webhook.test" {
				t.Fatalf("request %d %+v: want two signatures, verified with the %s secret alone", i, h, []string{"old", "new"}[i])
			}
		}
		// A secret nobody issued verifies nothing.
		node.configure(t, path, []string{appwebhooks.NewSecret()}, nil, "")
		w.svc.Resend(context.Background(), w.act, r.ID, d.ID)
		poll(t, 20*time.Second, "the third request", func() bool { return len(node.hitsOf(path)) == 3 })
		if h := node.hitsOf(path)[2]; h.Verified || h.Status != 401 {
			t.Fatalf("a wrong secret verified: %+v", h)
		}
	})
}

// TestGoneDisablesRetryAfterWaits: a 410 fails the delivery at once and disables the
// receiver, which hears nothing until a PATCH enables it; a 503 with Retry-After is retried
// after that long, not after the (shorter) schedule; the last attempt of the schedule fails
// the delivery.
func TestGoneDisablesRetryAfterWaits(t *testing.T) {
	cert, key := tlsFiles(t)
	node := startNodeReceiver(t, cert, key)
	engines(t, func(t *testing.T, open opener) {
		w := newWorld(t, open(t), worldOpts{guard: localGuard(t, cert), schedule: short[:3]})
		ctx := context.Background()

		gone := "/gone-" + randHex(4)
		r := w.receiver(t, node.url(gone), appwebhooks.WebhookReceiverCreate{})
		node.configure(t, gone, []string{r.Secret}, []int{410}, "")
		w.emit(t, map[string]any{"n": 1})
		ds := w.waitStatus(t, r.ID, 1, store.DeliveryFailed, 20*time.Second)
		if ds[0].AttemptCount != 1 {
			t.Fatalf("a 410 was retried: %+v", ds[0])
		}
		poll(t, 10*time.Second, "the receiver's report", func() bool { return len(node.hitsOf(gone)) == 1 })
		got, _ := w.svc.Get(ctx, w.act, r.ID)
		if got.Enabled || got.DisabledAt == nil {
			t.Fatalf("after a 410 the receiver is %+v", got)
		}
		w.emit(t, map[string]any{"n": 2})
		time.Sleep(100 * time.Millisecond) // nothing must come: give it the chance
		if n := len(w.deliveries(t, r.ID)); n != 1 || len(node.hitsOf(gone)) != 1 {
			t.Fatalf("a disabled receiver got %d deliveries", n)
		}
		yes := true
		if got, err := w.svc.Update(ctx, w.act, r.ID, appwebhooks.WebhookReceiverUpdate{Enabled: &yes}); err != nil || !got.Enabled {
			t.Fatalf("enable: %+v %v", got, err)
		}
		w.emit(t, map[string]any{"n": 3})
		poll(t, 20*time.Second, "the delivery after enabling", func() bool {
			ds := w.deliveries(t, r.ID)
			return len(ds) == 2 && ds[0].Status == store.DeliveryDelivered
		})

		later := "/retry-after-" + randHex(4)
		r2 := w.receiver(t, node.url(later), appwebhooks.WebhookReceiverCreate{})
		node.configure(t, later, []string{r2.Secret}, []int{503}, "1")
		w.emit(t, map[string]any{"n": 4})
		w.waitStatus(t, r2.ID, 1, store.DeliveryDelivered, 20*time.Second)
		poll(t, 10*time.Second, "the receiver's report", func() bool { return len(node.hitsOf(later)) == 2 })
		hs := node.hitsOf(later)
		if len(hs) != 2 || hs[1].At-hs[0].At < 1000 {
			t.Fatalf("Retry-After: 1 was not honoured: %+v", hs)
		}

		failing := "/failing-" + randHex(4)
		r3 := w.receiver(t, node.url(failing), appwebhooks.WebhookReceiverCreate{})
		node.configure(t, failing, []string{r3.Secret}, []int{500, 500, 500, 500, 500}, "")
		w.emit(t, map[string]any{"n": 5})
		ds = w.waitStatus(t, r3.ID, 1, store.DeliveryFailed, 20*time.Second)
		poll(t, 10*time.Second, "the receiver's report", func() bool { return len(node.hitsOf(failing)) == 4 })
		if ds[0].AttemptCount != 4 || len(node.hitsOf(failing)) != 4 {
			t.Fatalf("a schedule of 3 waits made %d attempts, want 4", ds[0].AttemptCount)
		}
	})
}

// TestBadReceiversDoNotStallOthers: a receiver that answers slowly, one that redirects and
// one that sends 5 MB hold no more than their own attempt, while another receiver gets all
// its deliveries; the redirect is not followed.
func TestBadReceiversDoNotStallOthers(t *testing.T) {
	release := make(chan struct{})
	var redirected atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/target", http.StatusFound) })
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, io.LimitReader(zeros{}, 5<<20))
	})
	var fast atomic.Int32
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) { fast.Add(1) })
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(func() { close(release); srv.Close() })
	certFile := writeCert(t, srv)
	w := newWorld(t, openStore(t, store.Options{DataDir: t.TempDir()}), worldOpts{guard: localGuard(t, certFile), schedule: short[:1], concurrency: 4, perReceiver: 1, timeout: 10 * time.Second})
	slow := w.receiver(t, srv.URL+"/slow", appwebhooks.WebhookReceiverCreate{})
	redir := w.receiver(t, srv.URL+"/redirect", appwebhooks.WebhookReceiverCreate{})
	big := w.receiver(t, srv.URL+"/big", appwebhooks.WebhookReceiverCreate{})
	ok := w.receiver(t, srv.URL+"/fast", appwebhooks.WebhookReceiverCreate{})
	for i := range 20 {
		w.emit(t, map[string]any{"n": i})
	}
	w.waitStatus(t, ok.ID, 20, store.DeliveryDelivered, 20*time.Second)
	if ds := w.deliveries(t, slow.ID); ds[len(ds)-1].AttemptCount != 0 && ds[len(ds)-1].Status != store.DeliveryPending {
		t.Fatalf("the slow receiver's first delivery is no longer in flight: %+v", ds[len(ds)-1])
	}
	rd := w.waitStatus(t, redir.ID, 20, store.DeliveryFailed, 20*time.Second)
	if c := rd[0].Attempts[0].StatusCode; c == nil || *c != http.StatusFound || redirected.Load() != 0 {
		t.Fatalf("redirect: attempt %+v, target hit %d times", rd[0].Attempts[0], redirected.Load())
	}
	bd := w.waitStatus(t, big.ID, 20, store.DeliveryDelivered, 20*time.Second)
	if n := len(bd[0].Attempts[0].ResponseBody); n != store.MaxAttemptBody {
		t.Fatalf("a 5 MB answer kept %d bytes, want the first %d", n, store.MaxAttemptBody)
	}
	_ = fast.Load()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

// writeCert writes an httptest TLS server's certificate to a PEM file for the guard.
func writeCert(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return writePEM(t, srv.TLS.Certificates[0])
}

// rebinder resolves every name to a public address the first time and to 127.0.0.1 after.
type rebinder struct{ n atomic.Int32 }

func (r *rebinder) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if r.n.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestDNSRebindingRefusedAtDial: a name that resolves to a public address when the receiver is
// saved and to 127.0.0.1 when the delivery dials is refused at the dial: the attempt records
// the refusal and nothing reaches the local server.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	var reached atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	t.Cleanup(srv.Close)
	guard, err := netguard.New(netguard.Options{Resolver: &rebinder{}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, openStore(t, store.Options{DataDir: t.TempDir()}), worldOpts{guard: guard, schedule: short[:1]})
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	r := w.receiver(t, "https://hooks.rebind.example:"+strconv.Itoa(port)+"/x", appwebhooks.WebhookReceiverCreate{})
	w.emit(t, map[string]any{"n": 1})
	ds := w.waitStatus(t, r.ID, 1, store.DeliveryFailed, 20*time.Second)
	for _, a := range ds[0].Attempts {
		if a.StatusCode != nil || a.Error == nil || !strings.Contains(*a.Error, "not allowed") {
			t.Fatalf("attempt %+v: want refused by the guard at dial time", a)
		}
	}
	if reached.Load() != 0 {
		t.Fatal("the rebound address was reached")
	}
	// The guard refuses the address itself, whatever the name.
	if err := guard.Check(netip.MustParseAddr("127.0.0.1")); !errors.Is(err, netguard.ErrBlocked) {
		t.Fatalf("loopback allowed: %v", err)
	}
}

// writePEM writes a certificate's leaf to a PEM file.
func writePEM(t *testing.T, c tls.Certificate) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
