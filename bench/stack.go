package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StackOptions say how to start Parley and its fakes for a run.
type StackOptions struct {
	// ParleyBin is the parley binary. Required.
	ParleyBin string
	// WorkDir holds the data directory, the scripts and the logs; empty makes a temporary one
	// that Close removes (unless KeepWorkDir).
	WorkDir     string
	KeepWorkDir bool
	// Latencies configure `parley fakes` and the agent's endpointing.
	Latencies Latencies
	// Greeting is the agent's first message; Reply its scripted answer to every turn (its
	// first sentence must be one token, "Okay.", for Latencies.LLMFirstChunkTokens = 1).
	// ScriptTurns is how many replies the LLM fake has before it falls back to echoing.
	Greeting, Reply string
	ScriptTurns     int
	// Number is the inbound agent's number (E.164).
	Number string
	// TTSEspeak makes the TTS fake speak with espeak-ng instead of a tone (costs the fakes
	// process CPU per request).
	TTSEspeak bool
	// LogLevel of `parley serve` (default info, as deployed).
	LogLevel string
	// Env is added to `parley serve`'s environment (PARLEY_… settings).
	Env []string
	// Progress receives one line per set-up step.
	Progress io.Writer
	// SRTP puts the bench's trunk in SRTP mode (required, over clear UDP signalling: see
	// sipsrtp.go); the SIP callers must then offer SRTP (issue 21).
	SRTP bool
}

// Stack is the system under test: a running Parley with an inbound agent on a number, and the
// fakes it uses. StartStack makes one; AttachStack describes one started elsewhere.
type Stack struct {
	BaseURL   string
	APIKey    string
	ProjectID string
	AgentID   string
	Number    string
	SIP       netip.AddrPort
	ParleyPID int
	FakesPID  int
	Build     ParleyBuild
	Dir       string
	// Warnings are set-up steps that were skipped.
	Warnings []string

	keep  bool
	procs []*exec.Cmd
	logs  []*os.File
	once  sync.Once

	// The fakes process, restartable with another TTS voice.
	bin, fakesAddr string
	fakesArgs      []string
	fakes          *exec.Cmd
	fakesStarts    int
	espeak         bool
}

// startFakes starts `parley fakes` (with espeak-ng speech for TTS when espeak) and waits until
// it answers.
func (s *Stack) startFakes(ctx context.Context, espeak bool) error {
	args := append([]string(nil), s.fakesArgs...)
	if espeak {
		args = append(args, "--tts-espeak")
	}
	s.fakesStarts++
	logName := "fakes.log"
	if s.fakesStarts > 1 {
		logName = fmt.Sprintf("fakes-%d.log", s.fakesStarts)
	}
	fk, err := s.start(s.bin, logName, nil, args...)
	if err != nil {
		return err
	}
	s.fakes, s.FakesPID, s.espeak = fk, fk.Process.Pid, espeak
	if err := waitHTTP(ctx, fk, "http://"+s.fakesAddr+"/healthz", 20*time.Second); err != nil {
		return fmt.Errorf("bench: parley fakes did not start: %w (log: %s)", err, s.tail(logName))
	}
	return nil
}

// SetTTSEspeak restarts the fakes, on the same address, so that the TTS fake speaks with
// espeak-ng (on) or a tone (off). Call it between scenarios, with no call in progress: a steady
// tone is not speech to every codec (Opus DTX takes it for background noise and stops sending
// it), so browser callers need speech. An attached stack cannot change its fakes.
func (s *Stack) SetTTSEspeak(ctx context.Context, on bool) error {
	if s.fakes == nil {
		return errors.New("bench: the fakes were not started by the harness; their TTS voice cannot change")
	}
	if on == s.espeak {
		return nil
	}
	stopProcess(s.fakes, 10*time.Second)
	for i, p := range s.procs {
		if p == s.fakes {
			s.procs = append(s.procs[:i], s.procs[i+1:]...)
			break
		}
	}
	return s.startFakes(ctx, on)
}

// TTSEspeak reports whether the TTS fake speaks with espeak-ng.
func (s *Stack) TTSEspeak() bool { return s.espeak }

// AttachStack describes a Parley already running (and its fakes, whose latencies the caller
// must know): nothing is started or stopped.
func AttachStack(baseURL, apiKey, agentID, number string, sip netip.AddrPort, parleyPID, fakesPID int) *Stack {
	return &Stack{BaseURL: baseURL, APIKey: apiKey, AgentID: agentID, Number: number, SIP: sip, ParleyPID: parleyPID, FakesPID: fakesPID, keep: true}
}

// BenchAgentDefinition is the inbound agent the harness talks to: a custom agent on the phone
// and browser channels whose providers are the deployment's defaults (the fakes).
func BenchAgentDefinition(greeting string, endpointing time.Duration) json.RawMessage {
	def := map[string]any{
		"format": "service.agent/1",
		"agent": map[string]any{
			"name": "Parley bench", "kind": "custom", "direction": "inbound", "channels": []string{"phone", "voice"},
			"system_prompt": "You are the benchmark agent. Answer briefly.", "first_message": greeting,
			"turn_taking":          map[string]any{"endpointing_ms": int(endpointing / time.Millisecond), "silence": map[string]any{"timeout_ms": 30000, "reprompts": 1}},
			"max_duration_seconds": 900,
		},
	}
	b, _ := json.Marshal(def)
	return b
}

// StartStack starts `parley fakes` and `parley serve` on loopback ports (embedded SQLite in a
// fresh data directory), bootstraps keys, adds a trunk for 127.0.0.1 and the number, creates
// and publishes the agent, assigns the number, and checks that SIP answers.
func StartStack(ctx context.Context, o StackOptions) (_ *Stack, err error) {
	if o.ParleyBin == "" {
		return nil, errors.New("bench: the parley binary is required")
	}
	bin, err := filepath.Abs(o.ParleyBin)
	if err != nil {
		return nil, err
	}
	if o.Number == "" {
		o.Number = "+15550100100"
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	s := &Stack{Number: o.Number, keep: o.KeepWorkDir}
	if o.WorkDir == "" {
		if s.Dir, err = os.MkdirTemp("", "parley-bench-"); err != nil {
			return nil, err
		}
	} else {
		s.Dir = o.WorkDir
		s.keep = true
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	step := func(format string, a ...any) { fmt.Fprintf(o.Progress, "setup: "+format+"\n", a...) }
	s.Build = BuildOf(ctx, bin)

	ports, err := freePorts()
	if err != nil {
		return nil, err
	}
	// The fakes, with a script of identical replies.
	script := filepath.Join(s.Dir, "llm-script.txt")
	if err := writeScript(script, o.Reply, o.ScriptTurns); err != nil {
		return nil, err
	}
	l := o.Latencies
	fakesAddr := fmt.Sprintf("127.0.0.1:%d", ports.fakes)
	s.bin, s.fakesAddr = bin, fakesAddr
	s.fakesArgs = []string{"fakes", "--addr", fakesAddr,
		"--llm-first-token", l.LLMFirstToken.String(), "--llm-tps", strconv.FormatFloat(l.LLMTokensPerSec, 'f', -1, 64),
		"--stt-interim-every", l.STTInterimEvery.String(), "--stt-final-delay", l.STTFinalDelay.String(),
		"--tts-first-byte", l.TTSFirstByte.String(), "--tts-speed", strconv.FormatFloat(l.TTSSpeed, 'f', -1, 64),
		"--script", script}
	if err := s.startFakes(ctx, o.TTSEspeak); err != nil {
		return nil, err
	}
	step("parley fakes on %s (pid %d)", fakesAddr, s.FakesPID)

	s.BaseURL = fmt.Sprintf("http://127.0.0.1:%d", ports.http)
	s.SIP = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(ports.sip))
	env := []string{
		"PARLEY_DATA_DIR=" + filepath.Join(s.Dir, "data"),
		"PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=",
		"PARLEY_HTTP_ADDR=127.0.0.1:" + strconv.Itoa(ports.http),
		"PARLEY_BASE_URL=" + s.BaseURL,
		"PARLEY_SIP_ADDR=" + s.SIP.String(),
		// Everything on loopback: SIP, SDP and ICE candidates name 127.0.0.1, not the
		// machine's interfaces.
		"PARLEY_PUBLIC_IP=127.0.0.1",
		"PARLEY_RTP_PORTS=20000-29999",
		"PARLEY_WEBRTC_UDP_PORT=" + strconv.Itoa(ports.webrtc),
		"PARLEY_FAKES_URL=http://" + fakesAddr,
		"PARLEY_LOG_LEVEL=" + o.LogLevel,
		"PARLEY_DRAIN_TIMEOUT=5s",
		// The benchmark measures calls, not the API's request limits nor an organization's
		// call cap (PARLEY_MAX_CALLS, where Parley has that setting).
		"PARLEY_RATE_KEY=0", "PARLEY_RATE_ORG=0", "PARLEY_MAX_CALLS=100000", "PARLEY_RECORD=false",
	}
	env = append(env, o.Env...)

	// Keys and the number, before the server opens the store.
	var boot struct {
		OrgID     string `json:"organization_id"`
		ProjectID string `json:"project_id"`
		LiveKey   string `json:"live_key"`
	}
	if err := s.admin(ctx, bin, env, &boot, "bootstrap", "--json"); err != nil {
		return nil, err
	}
	s.ProjectID, s.APIKey = boot.ProjectID, boot.LiveKey
	step("bootstrapped project %s", s.ProjectID)
	// Calls are charged: an organization without credit is refused.
	if err := s.admin(ctx, bin, env, nil, "credit", "add", "--org", boot.OrgID, "--amount", "1000000", "--reason", "parley-bench", "--json"); err != nil {
		return nil, err
	}
	trunkArgs := append([]string{"trunks", "add", "--name", "bench", "--allow", "127.0.0.1/32",
		"--uri", "sip:127.0.0.1:5099", "--json"}, srtpTrunkArgs(o.SRTP)...)
	if err := s.admin(ctx, bin, env, nil, trunkArgs...); err != nil {
		if o.SRTP {
			return nil, fmt.Errorf("bench: the SRTP trunk: %w", err)
		}
		s.Warnings = append(s.Warnings, "no trunk added ("+oneLine(err.Error())+"); inbound calls are accepted only if the deployment allows 127.0.0.1 otherwise")
		step("trunk: %v", err)
	} else {
		step("trunk bench allows 127.0.0.1")
	}
	numArgs := []string{"numbers", "add", "--project", s.ProjectID, "--number", o.Number, "--json"}
	if len(s.Warnings) == 0 {
		numArgs = append(numArgs, "--trunk", "bench")
	}
	if err := s.admin(ctx, bin, env, nil, numArgs...); err != nil {
		return nil, err
	}
	step("number %s added", o.Number)

	srv, err := s.start(bin, "parley-serve.log", env, "serve")
	if err != nil {
		return nil, err
	}
	s.ParleyPID = srv.Process.Pid
	if err := waitHTTP(ctx, srv, s.BaseURL+"/readyz", 60*time.Second); err != nil {
		return nil, fmt.Errorf("bench: parley serve did not become ready: %w (log: %s)", err, s.tail("parley-serve.log"))
	}
	step("parley serve on %s, SIP %s (pid %d)", s.BaseURL, s.SIP, s.ParleyPID)

	api, err := NewAPIClient(s.BaseURL, s.APIKey)
	if err != nil {
		return nil, err
	}
	defer api.Close()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if s.AgentID, err = api.CreateAgent(actx, s.ProjectID, BenchAgentDefinition(o.Greeting, l.Endpointing)); err != nil {
		return nil, fmt.Errorf("bench: create the agent: %w", err)
	}
	if err := api.PublishAgent(actx, s.AgentID); err != nil {
		return nil, fmt.Errorf("bench: publish the agent: %w", err)
	}
	if err := api.AssignNumber(actx, o.Number, s.AgentID); err != nil {
		return nil, fmt.Errorf("bench: assign the number: %w", err)
	}
	step("agent %s published on %s", s.AgentID, o.Number)
	return s, nil
}

// Close stops the processes (SIGTERM, then SIGKILL after 10 s) and removes a temporary work
// directory. It is idempotent.
func (s *Stack) Close() error {
	s.once.Do(func() {
		for i := len(s.procs) - 1; i >= 0; i-- {
			stopProcess(s.procs[i], 10*time.Second)
		}
		for _, f := range s.logs {
			f.Close()
		}
		if !s.keep && s.Dir != "" {
			os.RemoveAll(s.Dir)
		}
	})
	return nil
}

func (s *Stack) start(bin, logName string, env []string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(s.Dir, logName))
	if err != nil {
		return nil, err
	}
	s.logs = append(s.logs, f)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = s.Dir
	// The children die with the harness, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start parley %s: %w", args[0], err)
	}
	s.procs = append(s.procs, cmd)
	return cmd, nil
}

// admin runs `parley admin ARGS` with env and decodes its JSON output into out.
func (s *Stack) admin(ctx context.Context, bin string, env []string, out any, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"admin"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = s.Dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("parley admin %s: %v: %s", strings.Join(args[:min(2, len(args))], " "), err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			return fmt.Errorf("parley admin %s: output: %w", args[0], err)
		}
	}
	return nil
}

// tail returns the end of a log file, for errors.
func (s *Stack) tail(name string) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, name))
	if err != nil {
		return err.Error()
	}
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return oneLine(string(b))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// stopProcess sends SIGTERM and waits up to grace before SIGKILL.
func stopProcess(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitHTTP polls url until it answers 200, the process exits, or d passes.
func waitHTTP(ctx context.Context, cmd *exec.Cmd, url string, d time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	last := errors.New("no answer")
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("HTTP %d", res.StatusCode)
		} else {
			last = err
		}
		if processGone(cmd.Process.Pid) {
			return errors.New("the process exited")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after %v: %v", d, last)
}

// processGone reports whether pid has exited (gone, or a zombie not yet reaped).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

type stackPorts struct{ http, fakes, sip, webrtc int }

// freePorts picks free loopback ports: TCP for HTTP and the fakes, UDP and TCP on the same
// number for SIP, UDP for WebRTC. The OS may hand a port to someone else before Parley binds
// it; the start then fails with a clear error.
func freePorts() (stackPorts, error) {
	var p stackPorts
	tcp := func() (int, error) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var err error
	if p.http, err = tcp(); err != nil {
		return p, err
	}
	if p.fakes, err = tcp(); err != nil {
		return p, err
	}
	for i := 0; i < 50 && p.sip == 0; i++ {
		u, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return p, err
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		if t, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			t.Close()
			p.sip = port
		}
		u.Close()
	}
	if p.sip == 0 {
		return p, errors.New("bench: no free port for SIP")
	}
	u, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return p, err
	}
	p.webrtc = u.LocalAddr().(*net.UDPAddr).Port
	u.Close()
	return p, nil
}

// writeScript writes n identical turns of reply in `parley fakes --script` text form.
func writeScript(path, reply string, n int) error {
	if reply == "" {
		reply = "Okay. I have noted that, thank you."
	}
	if n <= 0 {
		n = 1
	}
	var b bytes.Buffer
	b.WriteString("# parley-bench: the same reply to every turn; its first chunk (\"Okay.\") is one token.\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(reply)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// Recordings counts the call recordings Parley wrote in its data directory (-1 when the stack
// was attached and its data directory is unknown): the per-call goals assume recording off.
func (s *Stack) Recordings() int {
	if s.Dir == "" {
		return -1
	}
	es, err := os.ReadDir(filepath.Join(s.Dir, "data", "recordings"))
	if err != nil {
		return 0
	}
	return len(es)
}
