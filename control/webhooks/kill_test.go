package webhooks_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/webhooks"
	"github.com/parley-voice/parley/internal/netguard"
	"github.com/parley-voice/parley/internal/testenv"
)

// Environment of a delivery worker child process (see TestMain).
const (
	childEnv   = "PARLEY_WEBHOOKS_TEST_CHILD" // the worker's name; set only in children
	childURL   = "PARLEY_WEBHOOKS_TEST_URL"
	childKey   = "PARLEY_WEBHOOKS_TEST_KEY" // the master key, hex
	childCA    = "PARLEY_WEBHOOKS_TEST_CA"
	killEvents = 500
	killLease  = 2 * time.Second
	killSlots  = 16
)

// TestMain runs the test binary as a delivery worker when it is started as a child of
// TestKillDeliveryWorker, and as the tests otherwise.
func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childWorker(name))
	}
	os.Exit(m.Run())
}

// childWorker is one worker node's delivery worker, until SIGTERM.
func childWorker(name string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, store.Options{URL: os.Getenv(childURL), MaxConns: killSlots + 4})
	if err != nil {
		log.Error("open store", "err", err)
		return 2
	}
	defer st.Close()
	key, _ := hex.DecodeString(os.Getenv(childKey))
	box, err := secrets.NewBox(key)
	if err != nil {
		log.Error("box", "err", err)
		return 2
	}
	guard, err := netguard.New(netguard.Options{AllowPrivate: true, ExtraCAFile: os.Getenv(childCA)})
	if err != nil {
		log.Error("guard", "err", err)
		return 2
	}
	svc := &appwebhooks.Service{Store: st, Box: box, Guard: guard}
	sender := &webhooks.Sender{Service: svc, Client: guard.Client(webhooks.Timeout), PerReceiver: killSlots, Log: log}
	w := jobs.NewWorker(jobs.Options{Store: st, Owner: name, Concurrency: killSlots, Lease: killLease, PollInterval: 100 * time.Millisecond, Log: log})
	w.Register(store.WebhookDeliverKind, sender.Handle)
	if err := w.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

// TestKillDeliveryWorker: 500 deliveries pending on PostgreSQL, two worker processes, one
// SIGKILLed in the middle: every event is delivered (each webhook-id reaches the receiver at
// least once, duplicates allowed: the webhook-id is the receiver's idempotency key), every
// delivery ends delivered, and no job is left.
func TestKillDeliveryWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two worker processes; skipped with -short")
	}
	base := testenv.PostgresURL(t)
	url := pgSchema(t, base)
	st := openStore(t, store.Options{URL: url})
	ctx := context.Background()

	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // in flight long enough for the kill to land in some
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	ca := writeCert(t, srv)
	w := newWorld(t, st, worldOpts{guard: localGuard(t, ca), noWorker: true})
	key := make([]byte, secrets.KeySize)
	for i := range key {
		key[i] = byte(7 * i)
	}
	box, _ := secrets.NewBox(key)
	w.svc.Box = box
	r := w.receiver(t, srv.URL+"/hook", appwebhooks.WebhookReceiverCreate{})
	err := st.Tx(ctx, func(tx *store.Tx) error {
		for range killEvents {
			if _, err := tx.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.project.ID, Mode: store.ModeLive, Type: "conversation.ended"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := st.DB().QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	var victimOut, survivorOut bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("victim's log:\n%s\nsurvivor's log:\n%s", &victimOut, &survivorOut)
		}
	})
	env := []string{childURL + "=" + url, childKey + "=" + hex.EncodeToString(key), childCA + "=" + ca}
	start := time.Now()
	victim := startChild(t, "victim", env, &victimOut)
	survivor := startChild(t, "survivor", env, &survivorOut)
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	poll(t, 60*time.Second, "both workers under way, the victim holding leases", func() bool {
		return received() >= killEvents/4 &&
			count(`SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner LIKE 'victim/%'`) >= 3
	})
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	killedAt := time.Now()
	held := count(`SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner LIKE 'victim/%'`)
	poll(t, 60*time.Second, "every delivery delivered", func() bool {
		return count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == killEvents
	})
	finished := time.Now()
	if err := survivor.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, survivor, 15*time.Second)

	mu.Lock()
	defer mu.Unlock()
	ids := map[string]bool{}
	for _, d := range w.deliveriesAll(t, r.ID) {
		ids[d] = true
	}
	dups := 0
	for id, n := range seen {
		if !ids[id] {
			t.Fatalf("the receiver got webhook-id %s, which is no delivery of it", id)
		}
		dups += n - 1
	}
	if len(seen) != killEvents || len(ids) != killEvents {
		t.Fatalf("%d of %d deliveries reached the receiver (%d deliveries made)", len(seen), killEvents, len(ids))
	}
	if n := count(`SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')`); n != 0 {
		t.Fatalf("%d delivery jobs left", n)
	}
	if n := count(`SELECT count(*) FROM jobs WHERE attempts > 1`); n == 0 {
		t.Fatalf("no delivery was claimed again after the kill (the victim held %d)", held)
	}
	t.Logf("%d deliveries on 2 worker processes (%d slots each, lease %s): victim SIGKILLed after %s holding %d leases; all delivered %s after the kill; %d duplicate POSTs (same webhook-id)",
		killEvents, killSlots, killLease, killedAt.Sub(start).Round(time.Millisecond), held, finished.Sub(killedAt).Round(time.Millisecond), dups)
}

// deliveriesAll lists every delivery id of a receiver.
func (w *world) deliveriesAll(t testing.TB, id string) []string {
	var out []string
	page := store.Page{Limit: 100}
	for {
		ds, err := w.st.Receivers().ListDeliveries(context.Background(), w.act.Scope, store.ReceiverID(id), store.DeliveryFilter{}, page)
		if err != nil {
			t.Fatal(err)
		}
		more := len(ds) > 100
		if more {
			ds = ds[:100]
		}
		for _, d := range ds {
			out = append(out, string(d.ID))
		}
		if !more {
			return out
		}
		page.After = string(ds[len(ds)-1].ID)
	}
}

// startChild starts the test binary as a delivery worker named name.
func startChild(t *testing.T, name string, env []string, out *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+name), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// waitExit waits for cmd to exit with status 0.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker process: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("the worker process did not stop within %s of SIGTERM", within)
	}
}
