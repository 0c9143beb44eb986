// Command parley-bench is Parley's benchmark harness: it starts `parley fakes` and `parley
// serve` (or attaches to a running Parley), calls it over SIP and WebRTC like a crowd of
// callers, and reports turn latency, capacity and call rate as JSON, markdown and SVG.
//
//	parley-bench --parley bin/parley --profile standard --out bench/results/latest
//
// The work is in package bench; this file reads flags and handles signals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parley-voice/parley/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line.
type options struct {
	parleyBin, out, workDir, profile, scenarios, speech, logLevel, command string
	fromJSON                                                               string
	keep, ttsEspeak, webrtcTone, pprof, srtp                               bool
	serveEnv                                                               envList
	timeout                                                                time.Duration
	// attach to a running Parley
	baseURL, apiKey, agent, number, sipAddr string
	pid, fakesPID                           int
	// scenarios
	calls, turns, capTurns, webCalls, webTurns int
	evalConversations, evalTurns               int
	capSteps, rateSteps, webSteps              string
	rateDuration, rateHold, ramp               time.Duration
	// latencies
	llmFirst, sttEvery, sttFinal, ttsFirst, endpointing time.Duration
	llmTPS, ttsSpeed                                    float64
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.parleyBin, "parley", "bin/parley", "the parley binary to start (serve and fakes)")
	fs.StringVar(&o.out, "out", "bench/results/latest", "results base path: writes .json, .md and .svg")
	fs.StringVar(&o.workDir, "work-dir", "", "directory for Parley's data and logs (default: a temporary one)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (logs) after the run")
	fs.StringVar(&o.profile, "profile", "", "standard: every scenario at the bench-e2e sizes (< 5 min on 2 cores); rate: the call-rate scenario alone, in steps up to "+rateProfileSteps+" calls/s, to find the ceiling (make bench-rate); flags given also apply")
	fs.StringVar(&o.scenarios, "scenarios", "latency", "comma-separated: latency, capacity, rate, webrtc, evaluations (not in the standard profile)")
	fs.StringVar(&o.speech, "speech", bench.SourceAuto, "caller speech: auto, espeak-ng or synthetic")
	fs.StringVar(&o.logLevel, "parley-log-level", "info", "log level of the started parley serve")
	fs.Var(&o.serveEnv, "serve-env", "KEY=VALUE added to the started parley serve's environment (repeatable), e.g. a PARLEY_ setting")
	fs.StringVar(&o.fromJSON, "from-json", "", "run nothing: render --out's markdown and SVG again from this results JSON")
	fs.StringVar(&o.command, "command", "", "the command to record in the report (default: this command line)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "stop the whole run after this long")
	fs.StringVar(&o.baseURL, "base-url", "", "attach: the running Parley's HTTP address (then also --api-key, --agent, --number, --sip-addr)")
	fs.StringVar(&o.apiKey, "api-key", "", "attach: a live API key")
	fs.StringVar(&o.agent, "agent", "", "attach: the published inbound agent's id")
	fs.StringVar(&o.number, "number", "+15550100100", "the inbound agent's number")
	fs.StringVar(&o.sipAddr, "sip-addr", "", "attach: Parley's SIP address (127.0.0.1:PORT)")
	fs.IntVar(&o.pid, "pid", 0, "attach: Parley's process id, for CPU and memory from /proc")
	fs.IntVar(&o.fakesPID, "fakes-pid", 0, "attach: the fakes' process id")
	fs.IntVar(&o.calls, "calls", 0, "latency: concurrent callers (default 10)")
	fs.IntVar(&o.turns, "turns", 0, "latency: turns per call (default 3)")
	fs.StringVar(&o.capSteps, "capacity-steps", "", "capacity: concurrency steps (default 5,25,50,100,200)")
	fs.IntVar(&o.capTurns, "capacity-turns", 0, "capacity: turns per call (default 2)")
	fs.StringVar(&o.rateSteps, "rate-steps", "", "rate: calls per second steps (default 10,25,50,100,150)")
	fs.DurationVar(&o.rateDuration, "rate-duration", 0, "rate: how long each step places calls (default 2s)")
	fs.DurationVar(&o.rateHold, "rate-hold", 0, "rate: how long each short call lasts after its answer (default 1s)")
	fs.StringVar(&o.webSteps, "webrtc-steps", "", "webrtc: concurrency steps (default 5,20)")
	fs.IntVar(&o.webCalls, "webrtc-calls", 0, "webrtc: one step of this many concurrent callers (instead of --webrtc-steps)")
	fs.IntVar(&o.webTurns, "webrtc-turns", 0, "webrtc: turns per call (default 2)")
	fs.IntVar(&o.evalConversations, "eval-conversations", 0, "evaluations: saved conversations in the run that goes on during the second latency step (default 50)")
	fs.IntVar(&o.evalTurns, "eval-turns", 0, "evaluations: turns of each saved conversation (default 10)")
	fs.DurationVar(&o.ramp, "ramp", 0, "spread each step's call starts over this (default 3s)")
	j := bench.JambonzLatencies()
	fs.DurationVar(&o.llmFirst, "llm-first-token", j.LLMFirstToken, "fakes: LLM time to first token")
	fs.Float64Var(&o.llmTPS, "llm-tps", j.LLMTokensPerSec, "fakes: LLM tokens per second after the first")
	fs.DurationVar(&o.sttEvery, "stt-interim-every", j.STTInterimEvery, "fakes: STT interim results every")
	fs.DurationVar(&o.sttFinal, "stt-final-delay", j.STTFinalDelay, "fakes: STT final result after the endpointing silence")
	fs.DurationVar(&o.ttsFirst, "tts-first-byte", j.TTSFirstByte, "fakes: TTS time to first audio")
	fs.Float64Var(&o.ttsSpeed, "tts-speed", j.TTSSpeed, "fakes: TTS speed against real time")
	fs.BoolVar(&o.srtp, "srtp", false, "SIP callers offer SRTP (SDES, AES_CM_128_HMAC_SHA1_80) and the bench's trunk requires it, over clear UDP signalling (issue 21)")
	fs.BoolVar(&o.pprof, "pprof", false, "start parley serve with PARLEY_PPROF and save a CPU profile of each capacity and webrtc step next to --out")
	fs.BoolVar(&o.ttsEspeak, "tts-espeak", false, "fakes: TTS speaks with espeak-ng instead of a tone in every scenario (costs the fakes CPU)")
	fs.BoolVar(&o.webrtcTone, "webrtc-tone", false, "webrtc: keep the TTS tone (by default the fakes speak with espeak-ng for WebRTC callers: Opus DTX drops a steady tone)")
	fs.DurationVar(&o.endpointing, "endpointing", j.Endpointing, "the agent's endpointing silence")
}

// rateProfileSteps are the rate profile's steps, in calls per second: from the standard
// profile's largest step up, until one fails (the scenario stops at the first failure).
const rateProfileSteps = "150,200,300,400,500,600,800,1000"

// envList collects repeated KEY=VALUE flags.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad step %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad step %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// config turns the options into the run's configuration.
func (o *options) config(given map[string]bool, progress io.Writer) (bench.Config, error) {
	cfg := bench.Config{Scenarios: strings.Split(o.scenarios, ","), LatencyCalls: o.calls, LatencyTurns: o.turns,
		CapacityTurns: o.capTurns, RateStepDuration: o.rateDuration, RateHold: o.rateHold, WebRTCCalls: o.webCalls,
		WebRTCTurns: o.webTurns, WebRTCTone: o.webrtcTone, EvalConversations: o.evalConversations, EvalTurns: o.evalTurns, Ramp: o.ramp, Speech: o.speech, Progress: progress, Command: o.command, SRTP: o.srtp}
	switch o.profile {
	case "":
	case "standard":
		if !given["scenarios"] {
			cfg.Scenarios = []string{bench.ScenarioLatency, bench.ScenarioCapacity, bench.ScenarioRate, bench.ScenarioWebRTC}
		}
	case "rate":
		if !given["scenarios"] {
			cfg.Scenarios = []string{bench.ScenarioRate}
		}
		if !given["rate-steps"] {
			o.rateSteps = rateProfileSteps
		}
	default:
		return cfg, fmt.Errorf("unknown profile %q (standard or rate)", o.profile)
	}
	for i := range cfg.Scenarios {
		cfg.Scenarios[i] = strings.TrimSpace(cfg.Scenarios[i])
	}
	var err error
	if cfg.CapacitySteps, err = parseInts(o.capSteps); err != nil {
		return cfg, fmt.Errorf("--capacity-steps: %w", err)
	}
	if cfg.WebRTCSteps, err = parseInts(o.webSteps); err != nil {
		return cfg, fmt.Errorf("--webrtc-steps: %w", err)
	}
	if cfg.RateSteps, err = parseFloats(o.rateSteps); err != nil {
		return cfg, fmt.Errorf("--rate-steps: %w", err)
	}
	l := bench.JambonzLatencies()
	l.LLMFirstToken, l.LLMTokensPerSec, l.STTInterimEvery, l.STTFinalDelay = o.llmFirst, o.llmTPS, o.sttEvery, o.sttFinal
	l.TTSFirstByte, l.TTSSpeed, l.Endpointing = o.ttsFirst, o.ttsSpeed, o.endpointing
	cfg.Latencies = l
	if cfg.Command == "" {
		cfg.Command = "parley-bench " + strings.Join(os.Args[1:], " ")
	}
	if o.pprof {
		cfg.ProfileDir = filepath.Dir(o.out)
		o.serveEnv = append(o.serveEnv, "PARLEY_PPROF=true")
	}
	return cfg, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	cfg, err := o.config(given, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "parley-bench:", err)
		return 2
	}
	if o.fromJSON != "" {
		rep, err := bench.ReadReport(o.fromJSON)
		if err == nil {
			err = rep.WriteFiles(o.out)
		}
		if err != nil {
			fmt.Fprintln(stderr, "parley-bench:", err)
			return 1
		}
		fmt.Fprintf(stdout, "rendered %s.json, %s.md, %s.svg\n", o.out, o.out, o.out)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	var st *bench.Stack
	if o.baseURL != "" {
		sip, err := netip.ParseAddrPort(o.sipAddr)
		if err != nil || o.apiKey == "" || o.agent == "" {
			fmt.Fprintln(stderr, "parley-bench: attaching needs --base-url, --api-key, --agent, --number and --sip-addr (127.0.0.1:PORT)")
			return 2
		}
		st = bench.AttachStack(o.baseURL, o.apiKey, o.agent, o.number, sip, o.pid, o.fakesPID)
		st.Build = bench.BuildOf(ctx, "")
	} else {
		st, err = bench.StartStack(ctx, bench.StackOptions{ParleyBin: o.parleyBin, WorkDir: o.workDir, KeepWorkDir: o.keep,
			Latencies: cfg.Latencies, Greeting: "Hello, how can I help?", Reply: "Okay. I have noted that, thank you.",
			ScriptTurns: cfg.Replies(), Number: o.number, LogLevel: o.logLevel, Env: o.serveEnv, TTSEspeak: o.ttsEspeak, Progress: stdout, SRTP: o.srtp})
		if err != nil {
			fmt.Fprintln(stderr, "parley-bench:", err)
			return 1
		}
		defer st.Close()
		if o.keep || o.workDir != "" {
			fmt.Fprintf(stdout, "logs in %s\n", st.Dir)
		}
	}
	r, err := bench.NewRunner(ctx, cfg, st)
	if err != nil {
		fmt.Fprintln(stderr, "parley-bench:", err)
		return 1
	}
	rep := r.Run(ctx)
	r.Close()
	if err := rep.WriteFiles(o.out); err != nil {
		fmt.Fprintln(stderr, "parley-bench: write results:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\n%s\nresults: %s.json, %s.md, %s.svg\n", rep.Markdown(""), o.out, o.out, o.out)
	if len(rep.Errors) > 0 {
		return 1
	}
	return 0
}
