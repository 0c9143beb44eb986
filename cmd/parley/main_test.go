package main

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/internal/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// parleyBin builds the real binary once for the end-to-end tests.
func parleyBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "parley-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "parley")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// server is a running `parley serve` process.
type server struct {
	cmd    *exec.Cmd
	base   string
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan error
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

var listenRe = regexp.MustCompile(`msg="parley serving" http=([0-9.:\[\]]+)`)

func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(parleyBin(t), append([]string{"serve", "--http-addr", "127.0.0.1:0", "--sip-addr", "127.0.0.1:0", "--webrtc-udp-port", "0", "--drain-timeout", "10s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	s := &server{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("server stdout:\n%s\nserver stderr:\n%s", s.stdout, s.stderr)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := listenRe.FindStringSubmatch(s.stderr.String()); m != nil {
			s.base = "http://" + m[1]
			return s
		}
		select {
		case err := <-s.done:
			t.Fatalf("server exited early: %v\nstderr:\n%s", err, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start; stderr:\n%s", s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) get(t *testing.T, path, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(parleyBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

var keyRe = regexp.MustCompile(`live key\s+(sk_live_\S+)\s+test key\s+(sk_test_\S+)`)

// The embedded default: first start prints keys once, /v1/me answers 200 with the key and 401
// without; admin bootstrap prints JSON; a revoked key answers 401 at once; SIGTERM exits 0.
func TestServeEmbeddedDefault(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL="}
	s := startServer(t, env)
	m := keyRe.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("first start printed no keys:\n%s", s.stdout)
	}
	live, test := m[1], m[2]
	if code, body := s.get(t, "/v1/me", live); code != 200 || body["object"] != "me" {
		t.Fatalf("/v1/me with live key: %d %v", code, body)
	}
	if code, body := s.get(t, "/v1/me", test); code != 200 || body["key"].(map[string]any)["mode"] != "test" {
		t.Fatalf("/v1/me with test key: %d %v", code, body)
	}
	for _, tc := range []struct{ key, code string }{
		{"", "missing_api_key"}, {"nonsense", "malformed_api_key"}, {"sk_live_" + strings.Repeat("A", 40), "unknown_api_key"},
	} {
		code, body := s.get(t, "/v1/me", tc.key)
		if code != 401 || body["code"] != tc.code || body["request_id"] == "" {
			t.Errorf("key %q: %d %v, want 401 %s", tc.key, code, body, tc.code)
		}
	}
	if code, body := s.get(t, "/readyz", ""); code != 200 || body["status"] != "ready" {
		t.Fatalf("/readyz: %d %v", code, body)
	}

	// admin bootstrap against the same store, while the server runs.
	out, errOut, code := runCLI(t, env, "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("admin bootstrap: %d %s", code, errOut)
	}
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil || !strings.HasPrefix(boot["live_key"], "sk_live_") || !strings.HasPrefix(boot["test_key"], "sk_test_") || boot["organization_id"] == "" || boot["project_id"] == "" {
		t.Fatalf("bootstrap JSON %q: %v", out, err)
	}
	if boot["live_key"] == live {
		t.Fatal("bootstrap must mint fresh keys")
	}
	if code, _ := s.get(t, "/v1/me", boot["live_key"]); code != 200 {
		t.Fatalf("new key: %d", code)
	}
	// Revoke: find the key id through /v1/me, revoke it with the CLI, and see 401 at once.
	_, me := s.get(t, "/v1/me", boot["live_key"])
	keyID := me["key"].(map[string]any)["id"].(string)
	if _, errOut, code := runCLI(t, env, "admin", "keys", "revoke", keyID, "--json"); code != 0 {
		t.Fatalf("revoke: %s", errOut)
	}
	if code, body := s.get(t, "/v1/me", boot["live_key"]); code != 401 || body["code"] != "revoked_api_key" {
		t.Fatalf("revoked key: %d %v", code, body)
	}
	if code, _ := s.get(t, "/v1/me", live); code != 200 {
		t.Fatalf("other key affected by revoke: %d", code)
	}
	// The id may also be given as --id (the flag every other command uses).
	_, me = s.get(t, "/v1/me", boot["test_key"])
	if _, errOut, code := runCLI(t, env, "admin", "keys", "revoke", "--id", me["key"].(map[string]any)["id"].(string)); code != 0 {
		t.Fatalf("revoke --id: %s", errOut)
	}
	if code, _ := s.get(t, "/v1/me", boot["test_key"]); code != 401 {
		t.Fatalf("key revoked with --id: %d", code)
	}

	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}

	// A second start on the same store prints no keys.
	s2 := startServer(t, env)
	if keyRe.MatchString(s2.stdout.String()) || strings.Contains(s2.stdout.String(), "sk_live_") {
		t.Fatalf("second start printed keys again:\n%s", s2.stdout)
	}
}

// SIGTERM during a request lets the request finish, then the process exits 0.
func TestGracefulStopFinishesRequest(t *testing.T) {
	env := []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL="}
	s := startServer(t, env, "--pprof")
	type result struct {
		code int
		n    int
		err  error
	}
	res := make(chan result, 1)
	sent := make(chan struct{})
	go func() {
		// The CPU profile handler runs for the seconds asked: a request that is in progress for 2s.
		req, _ := http.NewRequest("GET", s.base+"/debug/pprof/profile?seconds=2", nil)
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
		resp, err := http.DefaultClient.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if err != nil {
			res <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, len(b), err}
	}()
	<-sent
	// Wait until the server is serving it (not merely holding the connection in its listen
	// backlog): the in-flight gauge counts it and the scrape itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(s.base + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "parley_http_requests_in_flight 2") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the profile request never showed as in flight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	r := <-res
	if r.err != nil || r.code != 200 || r.n == 0 {
		t.Fatalf("request during drain: code %d, %d bytes, err %v", r.code, r.n, r.err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after the request finished")
	}
	if time.Since(start) < time.Second {
		t.Fatalf("process stopped before the 2s request could finish (%v)", time.Since(start))
	}
	if !strings.Contains(s.stderr.String(), "draining") {
		t.Fatalf("no drain logged:\n%s", s.stderr)
	}
}

func TestBadConfigOneLine(t *testing.T) {
	_, errOut, code := runCLI(t, []string{"PARLEY_RTP_PORTS=abc", "PARLEY_DATA_DIR=" + t.TempDir()}, "serve")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 1 || !strings.Contains(errOut, "PARLEY_RTP_PORTS") {
		t.Fatalf("exit %d, stderr %q: want one line naming PARLEY_RTP_PORTS", code, errOut)
	}
	out, _, code := runCLI(t, nil, "serve", "--help")
	if code != 0 || !strings.Contains(out, "PARLEY_WEBRTC_UDP_PORT") || !strings.Contains(out, "default :8080") {
		t.Fatalf("serve --help (%d):\n%s", code, out)
	}
	_, errOut, code = runCLI(t, nil, "frobnicate")
	if code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
}

// pgSchemaURL makes a fresh schema on the test PostgreSQL and returns a URL that uses it.
func pgSchemaURL(t *testing.T) string {
	t.Helper()
	base := testenv.PostgresURL(t)
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b [6]byte
	rand.Read(b[:])
	schema := "e2e_" + hex.EncodeToString(b[:])
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err == nil {
			db.Exec("DROP SCHEMA " + schema + " CASCADE")
			db.Close()
		}
	})
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// The same binary on PostgreSQL and Redis: two serve processes share the store and find each
// other over the Redis bus (a message published by one arrives at the other).
func TestTwoNodesOnPostgresAndRedis(t *testing.T) {
	pg := pgSchemaURL(t)
	redisURL := testenv.RedisURL(t)
	key := strings.Repeat("ab", 32)
	env := []string{"PARLEY_DATABASE_URL=" + pg, "PARLEY_REDIS_URL=" + redisURL, "PARLEY_MASTER_KEY=" + key}

	out, errOut, code := runCLI(t, append(env, "PARLEY_DATA_DIR="+t.TempDir()), "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("bootstrap on postgres: %s", errOut)
	}
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatalf("bootstrap JSON: %v %q", err, out)
	}
	nodeA := startServer(t, append(env, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_NODE_ID=node-a-"+boot["project_id"][:8]), "--roles", "api")
	nodeB := startServer(t, append(env, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_NODE_ID=node-b-"+boot["project_id"][:8]), "--roles", "media,worker")

	if code, _ := nodeA.get(t, "/v1/me", boot["live_key"]); code != 200 {
		t.Fatalf("/v1/me on postgres node: %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := nodeA.get(t, "/readyz", "")
		if peers, _ := body["peers"].([]any); len(peers) == 1 && peers[0].(map[string]any)["id"] == "node-b-"+boot["project_id"][:8] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node A never heard node B over Redis: %v", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, body := nodeB.get(t, "/readyz", "")
	if peers, _ := body["peers"].([]any); len(peers) != 1 {
		t.Fatalf("node B peers: %v", body)
	}
	// The api-only node serves /v1; the media,worker node does not.
	if code, _ := nodeB.get(t, "/v1/me", boot["live_key"]); code != 404 {
		t.Fatalf("/v1 on a node without the api role: %d", code)
	}
}

func TestREADMEConfigTableInSync(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), config.Reference()) {
		t.Fatal("README's configuration table is out of date: regenerate it from config.Reference()")
	}
	for _, want := range []string{"make run", "make test", "/v1/me"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("README lacks %q", want)
		}
	}
}

// TestAdminHelp: a command's --help names the command and lists its own flags apart from the
// settings it shares with the server.
func TestAdminHelp(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "admin", "keys", "revoke", "--help")
	if code != 0 {
		t.Fatalf("--help: %d %s", code, errOut)
	}
	own := strings.Index(out, "Flags:\n  --id")
	shared := strings.Index(out, "Settings shared with the server")
	if !strings.HasPrefix(out, "Usage: parley admin keys revoke [flags]") || own < 0 || shared < own || !strings.Contains(out[shared:], "--database-url") || strings.Contains(out[:shared], "--database-url") {
		t.Fatalf("help:\n%s", out)
	}
}

// TestServeLowLoadTuning (issue 20): `parley serve` starts itself again, in the same process,
// with GODEBUG's scheduler trace at its longest period (keeping sysmon out of deep sleep), and an
// idle node drops to one Go processor; with PARLEY_LOW_LOAD_TUNING=false it does neither.
func TestServeLowLoadTuning(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs Linux's /proc and two cores")
	}
	metric := func(s *server, name string) float64 {
		resp, err := http.Get(s.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	environ := func(s *server) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), "\x00", "\n")
	}
	on := startServer(t, []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "GODEBUG=", "GOMAXPROCS="})
	if env := environ(on); !strings.Contains(env, "\nGODEBUG=schedtrace=2147483647\n") {
		t.Fatalf("the serving process (pid %d, the one started) has no scheduler trace in GODEBUG:\n%s", on.cmd.Process.Pid, env)
	}
	deadline := time.Now().Add(60 * time.Second)
	for metric(on, "go_sched_gomaxprocs_threads") != 1 || metric(on, "parley_gomaxprocs_changes_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("an idle node kept %v processors (%v changes)", metric(on, "go_sched_gomaxprocs_threads"), metric(on, "parley_gomaxprocs_changes_total"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	off := startServer(t, []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "GODEBUG=", "GOMAXPROCS=", "PARLEY_LOW_LOAD_TUNING=false"})
	if env := environ(off); strings.Contains(env, "schedtrace") {
		t.Fatalf("tuning off, yet GODEBUG has a scheduler trace:\n%s", env)
	}
	time.Sleep(3 * time.Second) // longer than the adapter takes to go down (2 s of quiet)
	if n := metric(off, "go_sched_gomaxprocs_threads"); n < 2 || metric(off, "parley_gomaxprocs_changes_total") != 0 {
		t.Fatalf("tuning off: %v processors, %v changes", n, metric(off, "parley_gomaxprocs_changes_total"))
	}
}
