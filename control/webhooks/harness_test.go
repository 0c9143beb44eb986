package webhooks_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/parley-voice/parley/control/app"
	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/webhooks"
	"github.com/parley-voice/parley/internal/netguard"
	"github.com/parley-voice/parley/internal/testenv"
)

// opener returns a fresh, migrated store that nothing else uses.
type opener func(t testing.TB) *store.Store

// engines runs fn once per store engine: a SQLite file and a PostgreSQL schema of its own.
func engines(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, func(t testing.TB) *store.Store { return openStore(t, store.Options{DataDir: t.TempDir()}) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		base := testenv.PostgresURL(t)
		fn(t, func(t testing.TB) *store.Store {
			return openStore(t, store.Options{URL: pgSchema(t, base), MaxConns: 8})
		})
	})
}

func openStore(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// pgSchema creates a schema dropped when t ends and returns a URL whose search_path selects it.
func pgSchema(t testing.TB, base string) string {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_hooks_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// poll calls cond every few milliseconds until it is true, failing t at the deadline.
func poll(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tlsFiles writes a self-signed certificate for 127.0.0.1 and its key, and returns their paths
// (the certificate is its own CA: the guard trusts it through ExtraCAFile).
func tlsFiles(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley test receiver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// repoRoot is the module's root directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// hit is one request the Node receiver got.
type hit struct {
	Path       string `json:"path"`
	ID         string `json:"id"`
	Timestamp  string `json:"timestamp"`
	Signatures int    `json:"signatures"`
	Verified   bool   `json:"verified"`
	Error      string `json:"error"`
	Type       string `json:"type"`
	Status     int    `json:"status"`
	At         int64  `json:"at"` // Unix ms
}

// nodeReceiver is scripts/webhook-receiver/receiver.js: an HTTPS server run by Node that
// verifies each delivery with the standardwebhooks npm package.
type nodeReceiver struct {
	port  int
	stdin io.WriteCloser
	mu    sync.Mutex
	hits  []hit
	acks  chan string
}

// startNodeReceiver runs the receiver with the certificate of certFile; it skips (or fails with
// PARLEY_REQUIRE_PEERS=1) when Node or the npm package is missing.
func startNodeReceiver(t testing.TB, certFile, keyFile string) *nodeReceiver {
	t.Helper()
	node := testenv.NeedCommand(t, "node")
	dir := filepath.Join(repoRoot(), "scripts", "webhook-receiver")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		testenv.Missing(t, "the standardwebhooks npm package (run: npm ci --prefix scripts/webhook-receiver)")
	}
	cmd := exec.Command(node, filepath.Join(dir, "receiver.js"), certFile, keyFile)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	r := &nodeReceiver{stdin: stdin, acks: make(chan string, 16)}
	ready := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			var port int
			if _, err := fmt.Sscanf(line, "listening %d", &port); err == nil {
				ready <- port
				continue
			}
			var ack struct{ Configured string }
			if json.Unmarshal([]byte(line), &ack) == nil && ack.Configured != "" {
				r.acks <- ack.Configured
				continue
			}
			var h hit
			if json.Unmarshal([]byte(line), &h) == nil {
				r.mu.Lock()
				r.hits = append(r.hits, h)
				r.mu.Unlock()
			}
		}
	}()
	select {
	case r.port = <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("the Node receiver did not start")
	}
	return r
}

// url is the receiver's address for path.
func (r *nodeReceiver) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", r.port, path)
}

// configure sets what path verifies with and answers.
func (r *nodeReceiver) configure(t testing.TB, path string, secrets []string, statuses []int, retryAfter string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"path": path, "secrets": secrets, "statuses": statuses, "retryAfter": retryAfter})
	if _, err := r.stdin.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.acks:
	case <-time.After(10 * time.Second):
		t.Fatal("the Node receiver did not take its configuration")
	}
}

// hitsOf returns the requests to path so far.
func (r *nodeReceiver) hitsOf(path string) []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hit
	for _, h := range r.hits {
		if h.Path == path {
			out = append(out, h)
		}
	}
	return out
}

// world is a store with an organization and a project, the webhooks service over it and a
// running delivery worker.
type world struct {
	st      *store.Store
	org     store.Org
	project store.Project
	act     app.Actor
	svc     *appwebhooks.Service
	worker  *jobs.Worker
}

type worldOpts struct {
	guard       *netguard.Guard
	schedule    []time.Duration
	timeout     time.Duration
	concurrency int
	perReceiver int
	noWorker    bool
}

func newWorld(t testing.TB, st *store.Store, o worldOpts) *world {
	t.Helper()
	ctx := context.Background()
	org, err := st.CreateOrg(ctx, "Acme "+randHex(3))
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(ctx, org.ID, "One")
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, secrets.KeySize)
	rand.Read(key)
	box, _ := secrets.NewBox(key)
	w := &world{st: st, org: org, project: p,
		act: app.Actor{Scope: store.Scope{Org: org.ID, AllProjects: true, Mode: store.ModeLive}, Org: org, Type: store.ActorOperator, ID: "test"},
		svc: &appwebhooks.Service{Store: st, Box: box, Guard: o.guard, Schedule: o.schedule}}
	if o.noWorker {
		return w
	}
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	if o.concurrency == 0 {
		o.concurrency = 16
	}
	b := bus.NewMemory()
	t.Cleanup(func() { b.Close() })
	q := jobs.NewQueue(nil, b, nil)
	st.OnEnqueue(func(kind string) { go q.Wake(context.Background(), kind) })
	sender := &webhooks.Sender{Service: w.svc, Client: o.guard.Client(o.timeout), PerReceiver: o.perReceiver}
	w.worker = jobs.NewWorker(jobs.Options{Store: st, Bus: b, Owner: "test", Concurrency: o.concurrency, ClaimBatch: o.concurrency / 2, PollInterval: 50 * time.Millisecond})
	w.worker.Register(store.WebhookDeliverKind, sender.Handle, jobs.WithTimeout(o.timeout+5*time.Second))
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.worker.Run(wctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// receiver creates a receiver at url through the domain's rules.
func (w *world) receiver(t testing.TB, url string, c appwebhooks.WebhookReceiverCreate) appwebhooks.WebhookReceiverWithSecret {
	t.Helper()
	c.ProjectID, c.URL = string(w.project.ID), url
	r, err := w.svc.Create(context.Background(), w.act, c)
	if err != nil {
		t.Fatalf("create receiver %s: %v", url, err)
	}
	return r
}

// emit records a conversation.ended event of the project.
func (w *world) emit(t testing.TB, data map[string]any) store.Event {
	t.Helper()
	b, _ := json.Marshal(data)
	var e store.Event
	err := w.st.Tx(context.Background(), func(tx *store.Tx) (err error) {
		e, err = tx.InsertEvent(context.Background(), store.Event{OrgID: w.org.ID, ProjectID: w.project.ID, Mode: store.ModeLive,
			Type: "conversation.ended", Data: b})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// deliveries lists a receiver's deliveries, newest first.
func (w *world) deliveries(t testing.TB, id string) []appwebhooks.WebhookDelivery {
	t.Helper()
	ds, err := w.svc.Deliveries(context.Background(), w.act, id, "", store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// waitStatus waits until every delivery of receiver id is in status and there are n of them.
func (w *world) waitStatus(t testing.TB, id string, n int, status string, within time.Duration) []appwebhooks.WebhookDelivery {
	t.Helper()
	var ds []appwebhooks.WebhookDelivery
	poll(t, within, fmt.Sprintf("%d deliveries %s", n, status), func() bool {
		ds = w.deliveries(t, id)
		if len(ds) != n {
			return false
		}
		for _, d := range ds {
			if d.Status != status {
				return false
			}
		}
		return true
	})
	return ds
}

// localGuard trusts the test certificate and allows loopback (the unsafe testing settings).
func localGuard(t testing.TB, certFile string) *netguard.Guard {
	g, err := netguard.New(netguard.Options{AllowPrivate: true, ExtraCAFile: certFile})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
