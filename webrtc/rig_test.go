package webrtc

import (
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/webrtc/internal/rigtest"
)

// testService runs a Service on loopback behind an httptest server.
type testService struct {
	*Service
	srv *httptest.Server
}

func newTestService(t testing.TB, o Options) *testService {
	t.Helper()
	if o.UDPHost == "" {
		o.UDPHost = "127.0.0.1"
	}
	if o.Secret == nil {
		o.Secret = DeriveSecret([]byte("test master key, 32 bytes long!!"))
	}
	if o.Log == nil {
		o.Log = quietLog()
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 200 * time.Millisecond
	}
	if o.GracePeriod == 0 {
		o.GracePeriod = 2 * time.Second
	}
	var ts testService
	ts.srv = httptest.NewUnstartedServer(nil)
	ts.srv.Start()
	if o.BaseURL == "" {
		o.BaseURL = ts.srv.URL
	}
	s, err := NewService(o)
	if err != nil {
		ts.srv.Close()
		t.Fatal(err)
	}
	ts.Service = s
	ts.srv.Config.Handler = s.Handler()
	t.Cleanup(func() {
		s.Close()
		ts.srv.Close()
	})
	return &ts
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	rigtest.WaitFor(t, d, what, cond)
}

// quietLog discards logs unless PARLEY_TEST_LOG is set.
func quietLog() *slog.Logger { return rigtest.QuietLog() }

// engineOptions and newEngine are short names for the shared rig.
type engineOptions = rigtest.EngineOptions

func newEngine(t testing.TB, o engineOptions) *rigtest.Engine { return rigtest.NewEngine(t, o) }

// checkNoLeaks fails when goroutines of this package or of pion are still running once the
// deadline passes.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	var stacks string
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		leaked := leakedGoroutines(stacks)
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leakedGoroutines(all string) []string {
	var out []string
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "checkNoLeaks") || strings.Contains(g, "testing.tRunner") {
			continue
		}
		if strings.Contains(g, "parley/webrtc.") || strings.Contains(g, "parley/webrtc/webrtctest.") || strings.Contains(g, "github.com/pion/") {
			out = append(out, g)
		}
	}
	return out
}
