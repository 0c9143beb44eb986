package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario names.
const (
	ScenarioLatency  = "latency"
	ScenarioCapacity = "capacity"
	ScenarioRate     = "rate"
	ScenarioWebRTC   = "webrtc"
)

// Config is one benchmark run.
type Config struct {
	// Scenarios to run, in this order: latency, capacity, rate, webrtc.
	Scenarios []string
	// latency: LatencyCalls concurrent SIP callers, LatencyTurns turns each.
	LatencyCalls, LatencyTurns int
	// capacity: concurrency steps (the first is the unloaded baseline), turns per call; a step
	// passes while its p95 turn latency stays within MaxP95Increase of the baseline and at most
	// MaxFailRate of its calls fail.
	CapacitySteps  []int
	CapacityTurns  int
	MaxP95Increase float64
	MaxFailRate    float64
	// rate: calls per second in steps, each for RateStepDuration, every call answered and hung
	// up RateHold (default 250 ms: long enough to hear the greeting start) after the answer.
	RateSteps        []float64
	RateStepDuration time.Duration
	RateHold         time.Duration
	// webrtc: concurrent Opus callers in steps (WebRTCSteps, default 5 and 20; WebRTCCalls, when
	// set, is one step of that many), WebRTCTurns turns each. Two steps give the cost of one more
	// call (the marginal cores per call) apart from what every active second costs however few
	// calls share it. WebRTCTone keeps the TTS fake's tone for them; by default the harness
	// restarts the fakes with espeak-ng speech for this scenario, because Opus DTX takes a
	// steady tone for background noise and stops sending it (a browser would hear the reply
	// late, or as comfort noise).
	WebRTCSteps              []int
	WebRTCCalls, WebRTCTurns int
	WebRTCTone               bool
	// Ramp spreads a step's call starts (default 3 s).
	Ramp time.Duration
	// Latencies are the fakes' and the agent's (for the subtraction and the cross-check).
	Latencies Latencies
	// Speech is the utterances' source (SourceAuto, SourceEspeak, SourceSynthetic); Lines what
	// is said (default DefaultLines).
	Speech string
	Lines  []string
	// Hangover is the silence after which the agent's turn counts as over; Pause is added
	// before the caller speaks again.
	Hangover, Pause time.Duration
	// SRTP makes the SIP callers offer SRTP (the stack's trunk must be in SRTP mode).
	SRTP bool
	// Shards of the pacer (default 4).
	Shards int
	// SaturationLag: a step whose pacer tick lag p99 exceeds it (default 10 ms), or that
	// skipped ticks, had a saturated load generator and is not valid.
	SaturationLag time.Duration
	// Warmup places this many calls before the first step, unmeasured (default 1).
	Warmup int
	// ProfileDir, when set, receives a CPU profile of Parley (its /debug/pprof, PARLEY_PPROF)
	// taken for 8 s in the middle of every capacity and webrtc step, cpu-<scenario>-<n>.pprof,
	// and its heap in use and goroutines at the end of that, heap-<scenario>-<n>.pprof and
	// goroutines-<scenario>-<n>.txt.
	ProfileDir string
	// evaluations (issue 18): the saved conversations of the run that goes on during the
	// second latency step, and their turns (default 50 × 10).
	EvalConversations, EvalTurns int
	// Command is recorded in the report.
	Command  string
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	if len(c.Scenarios) == 0 {
		c.Scenarios = []string{ScenarioLatency}
	}
	if c.LatencyCalls <= 0 {
		c.LatencyCalls = 10
	}
	if c.LatencyTurns <= 0 {
		c.LatencyTurns = 3
	}
	if len(c.CapacitySteps) == 0 {
		c.CapacitySteps = []int{5, 25, 50, 100, 200}
	}
	if c.CapacityTurns <= 0 {
		c.CapacityTurns = 2
	}
	if c.MaxP95Increase <= 0 {
		c.MaxP95Increase = 0.25
	}
	if c.MaxFailRate <= 0 {
		c.MaxFailRate = 0.005
	}
	if len(c.RateSteps) == 0 {
		c.RateSteps = []float64{10, 25, 50, 100, 150}
	}
	if c.RateStepDuration <= 0 {
		c.RateStepDuration = 2 * time.Second
	}
	if c.RateHold <= 0 {
		c.RateHold = 250 * time.Millisecond
	}
	switch {
	case c.WebRTCCalls > 0:
		c.WebRTCSteps = []int{c.WebRTCCalls}
	case len(c.WebRTCSteps) == 0:
		c.WebRTCSteps = []int{5, 20}
	}
	if c.WebRTCTurns <= 0 {
		c.WebRTCTurns = 2
	}
	if c.Ramp <= 0 {
		c.Ramp = 3 * time.Second
	}
	if c.Latencies == (Latencies{}) {
		c.Latencies = JambonzLatencies()
	}
	if c.Speech == "" {
		c.Speech = SourceAuto
	}
	if len(c.Lines) == 0 {
		c.Lines = DefaultLines
	}
	if c.Hangover <= 0 {
		c.Hangover = 700 * time.Millisecond
	}
	if c.Shards <= 0 {
		c.Shards = 4
	}
	if c.SaturationLag <= 0 {
		c.SaturationLag = 10 * time.Millisecond
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = 1
	}
	if c.EvalConversations <= 0 {
		c.EvalConversations = DefaultEvalConversations
	}
	c.EvalConversations = min(c.EvalConversations, 500) // what one run rehearses at most
	if c.EvalTurns <= 0 {
		c.EvalTurns = DefaultEvalTurns
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// maxCallsPerStep bounds any step (a mistyped flag must not start a million calls).
const maxCallsPerStep = 5000

// Runner drives the scenarios against a Stack.
type Runner struct {
	cfg      Config
	st       *Stack
	api      *APIClient
	pacer    *Pacer
	sampler  *ProcSampler
	sip      *SIPCaller
	web      *WebRTCCaller
	utt8k    []Utterance
	utt16k   []Utterance
	speech   string
	seq      atomic.Int64
	idleRSS  int64
	maxConc  int // the highest concurrency a step has reached
	warnings []string
	// espeakOnlyForWebRTC: the fakes were switched to espeak-ng for the webrtc scenario and go
	// back to the tone for the others.
	espeakOnlyForWebRTC bool
}

// NewRunner prepares the callers and the utterances.
func NewRunner(ctx context.Context, cfg Config, st *Stack) (*Runner, error) {
	cfg = cfg.withDefaults()
	for _, s := range cfg.Scenarios {
		switch s {
		case ScenarioLatency, ScenarioCapacity, ScenarioRate, ScenarioWebRTC, ScenarioEvaluations:
		default:
			return nil, fmt.Errorf("bench: unknown scenario %q (latency, capacity, rate, webrtc, evaluations)", s)
		}
	}
	r := &Runner{cfg: cfg, st: st}
	var err error
	if r.utt8k, r.speech, err = MakeUtterances(ctx, cfg.Lines, 8000, cfg.Speech); err != nil {
		return nil, err
	}
	if r.utt16k, _, err = MakeUtterances(ctx, cfg.Lines, 16000, r.speech); err != nil {
		return nil, err
	}
	for _, u := range r.utt8k {
		if u.LongestGap >= cfg.Latencies.Endpointing {
			r.warnings = append(r.warnings, fmt.Sprintf("the line %q has a %v pause, not shorter than the %v endpointing: the agent may answer mid-sentence", u.Text, u.LongestGap, cfg.Latencies.Endpointing))
		}
	}
	if r.api, err = NewAPIClient(st.BaseURL, st.APIKey); err != nil {
		return nil, err
	}
	r.pacer = NewPacer(ctx, cfg.Shards, 20*time.Millisecond)
	if r.sip, err = NewSIPCaller(SIPCallerOptions{Server: st.SIP, Number: st.Number, Pacer: r.pacer, SRTP: cfg.SRTP}); err != nil {
		r.Close()
		return nil, err
	}
	if r.web, err = NewWebRTCCaller(WebRTCCallerOptions{Pacer: r.pacer}); err != nil {
		r.Close()
		return nil, err
	}
	pids := map[string]int{"harness": os.Getpid()}
	if st.ParleyPID > 0 {
		pids["parley"] = st.ParleyPID
	}
	if st.FakesPID > 0 {
		pids["fakes"] = st.FakesPID
	}
	r.sampler = NewProcSampler(250*time.Millisecond, pids)
	return r, nil
}

// Close releases the callers. It is idempotent.
func (r *Runner) Close() {
	if r.sip != nil {
		r.sip.Close()
	}
	if r.pacer != nil {
		r.pacer.Close()
	}
	if r.sampler != nil {
		r.sampler.Close()
	}
	if r.api != nil {
		r.api.Close()
	}
}

func (r *Runner) progress(format string, a ...any) {
	fmt.Fprintf(r.cfg.Progress, format+"\n", a...)
}

// Run runs every scenario and returns the report. A scenario that cannot run is recorded in
// the report's errors; the others still run.
func (r *Runner) Run(ctx context.Context) *Report {
	start := time.Now()
	rep := &Report{Started: start, Command: r.cfg.Command, Machine: ThisMachine(), Parley: r.st.Build, Latencies: r.cfg.Latencies,
		Codec: "G.711 µ-law 20 ms (SIP), Opus 16 kHz 20 ms (WebRTC)", Speech: r.speech, Valid: true}
	rep.Warnings = append(rep.Warnings, r.st.Warnings...)
	rep.Warnings = append(rep.Warnings, r.warnings...)
	if r.st.ParleyPID <= 0 {
		rep.Warnings = append(rep.Warnings, "no Parley process id: CPU and memory were not measured")
	}
	r.sampler.Start(ctx)
	// Ping SIP until it answers (the server may still be binding).
	// What else is running: the machine's busy fraction for 2 s before the first call.
	if m0, err := ReadMachineCPU(); err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		if m1, err := ReadMachineCPU(); err == nil {
			rep.BackgroundBusy = BusyFraction(m0, m1)
			if rep.BackgroundBusy > 0.1 {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("the machine was %s busy before the first call (other processes): every number here shares the CPU with them", fmtPct(rep.BackgroundBusy)))
			}
		}
	}
	sipUp := true
	if err := r.waitSIP(ctx); err != nil {
		sipUp = false
		rep.Errors = append(rep.Errors, err.Error()+": the SIP scenarios did not run")
	} else {
		r.warmup(ctx, rep)
	}
	r.idleRSS = 0
	if snap := r.sampler.Snapshot(); snap.Procs["parley"].RSS > 0 {
		r.idleRSS = snap.Procs["parley"].RSS
	}
	for _, name := range r.cfg.Scenarios {
		if ctx.Err() != nil {
			rep.Errors = append(rep.Errors, "interrupted before "+name)
			break
		}
		if !sipUp && name != ScenarioWebRTC {
			continue
		}
		r.progress("scenario %s", name)
		ttsNote := r.setTTS(ctx, name, rep)
		var sc ScenarioResult
		switch name {
		case ScenarioLatency:
			sc = r.latency(ctx, ScenarioLatency, KindSIP, r.cfg.LatencyCalls, r.cfg.LatencyTurns)
		case ScenarioCapacity:
			sc = r.capacity(ctx)
		case ScenarioRate:
			sc = r.rate(ctx)
		case ScenarioWebRTC:
			sc = r.webrtc(ctx)
		case ScenarioEvaluations:
			sc = r.evaluations(ctx)
		}
		sc.Note = strings.TrimPrefix(sc.Note+"; "+ttsNote, "; ")
		for _, st := range sc.Steps {
			if st.Saturated {
				rep.Valid = false
			}
			if st.MachineBusy > 0.95 {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s at %s: the machine was %s busy; Parley and the generator competed for CPU", sc.Name, loadOf(st), fmtPct(st.MachineBusy)))
			}
			for _, n := range st.CrossCheck.Notes {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s at %s: %s", sc.Name, loadOf(st), n))
			}
		}
		rep.Scenarios = append(rep.Scenarios, sc)
	}
	if n := r.st.Recordings(); n > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("Parley recorded the calls (%d recordings in its data directory): the per-call goals assume recording off, so the CPU and memory per call include recording", n))
	}
	rep.Targets = Targets(rep)
	rep.Seconds = time.Since(start).Seconds()
	return rep
}

// setTTS gives the scenario its TTS voice (espeak-ng speech for WebRTC callers unless
// WebRTCTone) and returns a note saying which voice it had.
func (r *Runner) setTTS(ctx context.Context, name string, rep *Report) string {
	want := r.st.TTSEspeak()
	switch {
	case name == ScenarioWebRTC && !r.cfg.WebRTCTone:
		want = true
	case name != ScenarioWebRTC && r.espeakOnlyForWebRTC:
		want = false
	}
	if want != r.st.TTSEspeak() {
		if err := r.st.SetTTSEspeak(ctx, want); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: the TTS fake's voice could not change (%v)", name, err))
		} else {
			r.sampler.SetPID("fakes", r.st.FakesPID)
			r.espeakOnlyForWebRTC = want && name == ScenarioWebRTC
		}
	}
	if r.st.TTSEspeak() {
		return "TTS fake: espeak-ng speech"
	}
	return "TTS fake: a tone"
}

func loadOf(st StepResult) string {
	if st.Rate > 0 {
		return fmt.Sprintf("%g calls/s", st.Rate)
	}
	return fmt.Sprintf("%d calls", st.Concurrency)
}

func (r *Runner) waitSIP(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		code, err := r.sip.Ping(pctx)
		cancel()
		if err == nil && code < 500 {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("OPTIONS answered %d", code)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("Parley's SIP endpoint at %v does not answer OPTIONS: %v", r.st.SIP, last)
}

// warmup places unmeasured calls so that one-time costs (connection pools, caches, the
// store's first writes) are not charged to the first step.
func (r *Runner) warmup(ctx context.Context, rep *Report) {
	for i := 0; i < r.cfg.Warmup; i++ {
		res := r.sip.Call(ctx, r.nextFrom(), r.script(1, 0))
		if res.Failed() {
			rep.Warnings = append(rep.Warnings, "warm-up call failed: "+res.Failure)
			r.progress("warm-up call failed: %s", res.Failure)
			return
		}
		r.progress("warm-up call: setup %v, greeting %v, turn %v", res.Setup.Round(time.Microsecond), res.Script.Greeting.Round(time.Millisecond), firstLatency(res))
	}
}

func firstLatency(c CallResult) time.Duration {
	if len(c.Script.Turns) == 0 {
		return 0
	}
	return c.Script.Turns[0].Latency.Round(time.Millisecond)
}

func (r *Runner) nextFrom() string { return fmt.Sprintf("+1555%07d", r.seq.Add(1)) }

func (r *Runner) script(turns, first int) ScriptOptions {
	return ScriptOptions{Utterances: r.utt8k, Turns: turns, Greeting: true, Hangover: r.cfg.Hangover, Pause: r.cfg.Pause,
		FirstUtterance: first % len(r.utt8k)}
}

// stepSpec is one load level.
type stepSpec struct {
	scenario, kind string
	calls          int
	interval       time.Duration // between call starts
	concurrency    int           // nominal, for the report
	rate           float64
	turns          int
	hold           time.Duration // short calls (turns 0)
}

func (r *Runner) latency(ctx context.Context, name, kind string, calls, turns int) ScenarioResult {
	st := r.runStep(ctx, stepSpec{scenario: name, kind: kind, calls: calls, concurrency: calls, turns: turns,
		interval: r.cfg.Ramp / time.Duration(max(calls, 1))})
	return ScenarioResult{Name: name, Steps: []StepResult{st}}
}

// webrtc runs the WebRTC steps, smallest first, and the marginal cost of a call between the
// smallest and the largest step that has a mid-call figure.
func (r *Runner) webrtc(ctx context.Context) ScenarioResult {
	sc := ScenarioResult{Name: ScenarioWebRTC}
	steps := append([]int(nil), r.cfg.WebRTCSteps...)
	sort.Ints(steps)
	for _, n := range steps {
		if ctx.Err() != nil {
			break
		}
		st := r.runStep(ctx, stepSpec{scenario: ScenarioWebRTC, kind: KindWebRTC, calls: n, concurrency: n, turns: r.cfg.WebRTCTurns,
			interval: r.cfg.Ramp / time.Duration(max(n, 1))})
		sc.Steps = append(sc.Steps, st)
	}
	sc.MarginalCoresPerCall = MarginalCores(sc.Steps)
	return sc
}

// MarginalCores is what one more call costs, from the mid-call figures of the smallest and the
// largest step that have one: (cores_b - cores_a) / (calls_b - calls_a). What an active second
// costs whatever the number of calls (the clock's ticks, the scheduler waking idle cores for a
// few packets) is in every step alike, so it drops out. Zero when fewer than two steps qualify.
func MarginalCores(steps []StepResult) float64 {
	var a, b *StepResult
	for i := range steps {
		s := &steps[i]
		if s.MidCallCoresPerCall <= 0 || s.Failed > 0 || s.Concurrency <= 0 {
			continue
		}
		if a == nil || s.Concurrency < a.Concurrency {
			a = s
		}
		if b == nil || s.Concurrency > b.Concurrency {
			b = s
		}
	}
	if a == nil || b == nil || a.Concurrency == b.Concurrency {
		return 0
	}
	ca := a.MidCallCoresPerCall * float64(a.Concurrency)
	cb := b.MidCallCoresPerCall * float64(b.Concurrency)
	return (cb - ca) / float64(b.Concurrency-a.Concurrency)
}

func (r *Runner) capacity(ctx context.Context) ScenarioResult {
	sc := ScenarioResult{Name: ScenarioCapacity}
	steps := append([]int(nil), r.cfg.CapacitySteps...)
	sort.Ints(steps)
	for i, n := range steps {
		if ctx.Err() != nil {
			break
		}
		st := r.runStep(ctx, stepSpec{scenario: ScenarioCapacity, kind: KindSIP, calls: n, concurrency: n, turns: r.cfg.CapacityTurns,
			interval: r.cfg.Ramp / time.Duration(max(n, 1))})
		if i == 0 {
			sc.BaselineP95 = st.TurnLatency.P95
		}
		limit := sc.BaselineP95 * (1 + r.cfg.MaxP95Increase)
		pass := true
		var why []string
		if st.FailRate() > r.cfg.MaxFailRate {
			pass = false
			why = append(why, fmt.Sprintf("%s of calls failed", fmtPct(st.FailRate())))
		}
		if st.TurnLatency.N == 0 {
			pass = false
			why = append(why, "no turn measured")
		} else if st.TurnLatency.P95 > limit {
			pass = false
			why = append(why, fmt.Sprintf("p95 %s over %s", fmtMs(st.TurnLatency.P95), fmtMs(limit)))
		} else {
			why = append(why, fmt.Sprintf("p95 %s ≤ %s", fmtMs(st.TurnLatency.P95), fmtMs(limit)))
		}
		if st.Saturated {
			pass = false
			why = append(why, "generator saturated")
		}
		st.Pass, st.Verdict = &pass, strings.Join(why, "; ")
		sc.Steps = append(sc.Steps, st)
		r.progress("  capacity %d: %s", n, st.Verdict)
		if !pass {
			sc.Note = fmt.Sprintf("stopped at %d concurrent calls: %s", n, st.Verdict)
			break
		}
		sc.MaxConcurrency = n
	}
	if len(sc.Steps) > 0 && sc.MaxConcurrency == steps[len(steps)-1] {
		sc.Note = "every step passed: the limit is above the largest step"
	}
	return sc
}

// rateMaxSetupP95 is the setup p95 (INVITE to 200 OK) past which a rate step counts as
// overloaded: a fifth of SIP's 500 ms retransmission timer T1, and about 50 times the unloaded
// setup.
const rateMaxSetupP95 = 100 * time.Millisecond

func (r *Runner) rate(ctx context.Context) ScenarioResult {
	sc := ScenarioResult{Name: ScenarioRate}
	steps := append([]float64(nil), r.cfg.RateSteps...)
	sort.Float64s(steps)
	for _, cps := range steps {
		if ctx.Err() != nil || cps <= 0 {
			break
		}
		n := int(cps*r.cfg.RateStepDuration.Seconds() + 0.5)
		st := r.runStep(ctx, stepSpec{scenario: ScenarioRate, kind: KindSIP, calls: max(n, 1), rate: cps,
			interval: time.Duration(float64(time.Second) / cps), hold: r.cfg.RateHold})
		// Answering every call is not enough: a node past its capacity answers them all, seconds
		// late, as its queues grow. A step also fails when its setup p95 passes RateMaxSetupP95.
		late := st.Setup.N > 0 && st.Setup.P95 > Ms(rateMaxSetupP95)
		pass := st.Failed == 0 && !st.Saturated && !late
		st.Pass = &pass
		st.Verdict = fmt.Sprintf("%d/%d failed, setup p95 %s, first audio p95 %s", st.Failed, st.Calls, fmtMs(st.Setup.P95), fmtMs(st.Greeting.P95))
		if late {
			st.Verdict += fmt.Sprintf(", setup p95 over %s: overloaded", fmtMs(Ms(rateMaxSetupP95)))
		}
		if st.Saturated {
			st.Verdict += ", generator saturated"
		}
		sc.Steps = append(sc.Steps, st)
		r.progress("  rate %g/s: %s", cps, st.Verdict)
		if !pass {
			sc.Note = fmt.Sprintf("stopped at %g calls/s: %s", cps, st.Verdict)
			if len(st.Reasons) > 0 {
				sc.Note += " (" + fmtReasons(st.Reasons) + ")"
			}
			break
		}
		sc.MaxRate, sc.MaxRateSetup = cps, st.Setup.P95
	}
	return sc
}

// runStep places a step's calls on schedule, waits for them, measures the processes and joins
// the callers' turns with the conversations' metrics.
func (r *Runner) runStep(ctx context.Context, spec stepSpec) StepResult {
	if spec.calls > maxCallsPerStep {
		spec.calls = maxCallsPerStep
	}
	res := StepResult{Scenario: spec.scenario, Kind: spec.kind, Concurrency: spec.concurrency, Rate: spec.rate, Calls: spec.calls}
	// Every call is bounded by its script's timeouts; this bounds the step as a whole.
	budget := time.Duration(spec.calls)*spec.interval + 60*time.Second + time.Duration(spec.turns)*45*time.Second
	sctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	r.pacer.Reset()
	s0 := r.sampler.Snapshot()
	res.Started = s0.At
	calls := make([]CallResult, spec.calls)
	var prof chan error
	if r.cfg.ProfileDir != "" && (spec.scenario == ScenarioCapacity || spec.scenario == ScenarioWebRTC) {
		prof = make(chan error, 1)
		path := filepath.Join(r.cfg.ProfileDir, fmt.Sprintf("cpu-%s-%d.pprof", spec.scenario, spec.calls))
		// Start once every call is up (the ramp, then the first greeting).
		go func() {
			prof <- r.profile(sctx, time.Duration(spec.calls)*spec.interval+2*time.Second, 8*time.Second, path)
		}()
	}
	var wg sync.WaitGroup
	next := time.Now()
	for i := 0; i < spec.calls; i++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-sctx.Done():
			case <-time.After(d):
			}
		}
		if sctx.Err() != nil {
			for j := i; j < spec.calls; j++ {
				calls[j] = CallResult{Kind: spec.kind, Started: time.Now(), Reason: "not started", Failure: "the step ran out of time before this call started"}
			}
			break
		}
		next = next.Add(spec.interval)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			calls[i] = r.place(sctx, spec, i)
		}(i)
	}
	wg.Wait()
	if prof != nil {
		if err := <-prof; err != nil {
			r.progress("  profile: %v", err)
		}
	}
	s1 := r.sampler.Snapshot()
	res.WallSeconds = s1.At.Sub(s0.At).Seconds()
	res.Pacer = r.pacer.Stats()
	res.Saturated = saturated(res.Pacer, r.cfg.SaturationLag)

	r.measure(&res, calls, s0, s1)
	convs := r.conversations(ctx, spec, calls, s0.At)
	res.Turns = JoinTurns(calls, convs, r.cfg.Latencies)
	res.CrossCheck = Check(res.Turns, r.cfg.Latencies)
	var lat, ear, eng []float64
	for _, t := range res.Turns {
		lat, ear = append(lat, t.Latency), append(ear, t.ShareEar)
		if t.Match {
			eng = append(eng, t.ShareEngine)
		}
	}
	res.TurnLatency, res.ShareEar, res.ShareEngine = Summarize(lat), Summarize(ear), Summarize(eng)
	res.LatencySamples = lat
	r.progress("  %s %s at %s: %d calls, %d failed, turn p50 %s p99 %s, share(ear) p50 %s, setup p95 %s, cores/call %s, lag p99 %s",
		spec.scenario, spec.kind, loadOf(res), res.Calls, res.Failed, fmtMs(res.TurnLatency.P50), fmtMs(res.TurnLatency.P99),
		fmtMs(res.ShareEar.P50), fmtMs(res.Setup.P95), fmtSig(res.CoresPerCall), fmtMs(res.Pacer.P99))
	return res
}

// place runs call i of a step.
func (r *Runner) place(ctx context.Context, spec stepSpec, i int) CallResult {
	so := r.script(spec.turns, i)
	if spec.turns == 0 {
		so = ScriptOptions{Hold: spec.hold, Hangover: r.cfg.Hangover}
	}
	if spec.kind == KindWebRTC {
		so.Utterances = r.utt16k
		name := fmt.Sprintf("bench-%d", r.seq.Add(1))
		wc, err := r.api.CreateWebCall(ctx, r.st.AgentID, name)
		if err != nil {
			return CallResult{Kind: KindWebRTC, From: name, Started: time.Now(), Reason: "web call refused", Failure: "POST /v1/web-calls: " + err.Error()}
		}
		res := r.web.Call(ctx, name, wc.URL, wc.Token, so)
		if res.ConversationID == "" {
			res.ConversationID = wc.ConversationID
		}
		return res
	}
	return r.sip.Call(ctx, r.nextFrom(), so)
}

// measure fills the step's call statistics and resources.
func (r *Runner) measure(res *StepResult, calls []CallResult, s0, s1 Snapshot) {
	var greet, setup, conn, jit []float64
	var lost, got float64
	for _, c := range calls {
		if c.Failed() {
			res.Failed++
		}
		if c.Setup > 0 {
			setup = append(setup, Ms(c.Setup))
		}
		if c.Connect > 0 {
			conn = append(conn, Ms(c.Connect))
		}
		if c.Script.Greeting > 0 {
			greet = append(greet, Ms(c.Script.Greeting))
		}
		if c.PacketsReceived > 0 {
			jit = append(jit, Ms(c.Jitter))
			got += float64(c.PacketsReceived)
			lost += float64(max(c.PacketsLost, 0))
		}
		res.CallSeconds += c.Duration().Seconds()
	}
	res.Reasons, res.FailureNotes = Reasons(calls)
	if len(res.Reasons) == 0 {
		res.Reasons = nil
	}
	res.Greeting, res.Setup, res.Connect, res.Jitter = Summarize(greet), Summarize(setup), Summarize(conn), Summarize(jit)
	if got+lost > 0 {
		res.Loss = lost / (got + lost)
	}
	u := Between(s0, s1)
	res.ParleyCPU = u.CPU["parley"].Seconds()
	res.ParleyCores, res.FakesCores, res.HarnessCores, res.MachineBusy = u.Cores["parley"], u.Cores["fakes"], u.Cores["harness"], u.MachineBusy
	if res.CallSeconds > 0 {
		res.CoresPerCall = res.ParleyCPU / res.CallSeconds
	}
	if res.CallSeconds > 0 {
		res.RxPacketsPerSecond = got / res.CallSeconds
	}
	r.midCall(res, calls)
	peak := r.sampler.PeakRSS("parley", s0.At, s1.At)
	res.PeakRSSMB = float64(peak) / (1 << 20)
	// Memory per call is read only at a new high of concurrency: the Go heap does not give
	// memory back between steps, so a step after a bigger one would show none.
	if conc := PeakConcurrency(calls); conc > r.maxConc && peak > 0 && r.idleRSS > 0 {
		res.MBPerCall = float64(peak-r.idleRSS) / (1 << 20) / float64(conc)
		r.maxConc = conc
	}
}

// midCallMin is the shortest window of all calls up that gives a mid-call figure.
const midCallMin = 2 * time.Second

// midCall splits the step's CPU into the steady state and setup plus teardown: Parley's cores per
// call while every call was up (a second after the last answer, so the greetings' start and the
// last handshakes are out, to the first hang-up), and the rest of the step's CPU per call.
func (r *Runner) midCall(res *StepResult, calls []CallResult) {
	var from, to time.Time
	n := 0
	for _, c := range calls {
		if c.Answered.IsZero() || c.Ended.IsZero() {
			return // a call that never came up: no window with all of them
		}
		if c.Answered.After(from) {
			from = c.Answered
		}
		if to.IsZero() || c.Ended.Before(to) {
			to = c.Ended
		}
		n++
	}
	from = from.Add(time.Second)
	if n == 0 || to.Sub(from) < midCallMin {
		return
	}
	cpu, span, ok := r.sampler.CPUBetween("parley", from, to)
	if !ok || span < midCallMin {
		return
	}
	res.MidCallSeconds = span.Seconds()
	res.MidCallCoresPerCall = cpu.Seconds() / span.Seconds() / float64(n)
	rest := res.ParleyCPU - res.MidCallCoresPerCall*res.CallSeconds
	res.SetupTeardownCPUms = max(rest, 0) * 1000 / float64(n)
}

// profile waits after, then saves a CPU profile of Parley lasting d to path.
func (r *Runner) profile(ctx context.Context, after, d time.Duration, path string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(after):
	}
	b, err := r.api.Get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d/time.Second)))
	if err != nil {
		return fmt.Errorf("CPU profile (is PARLEY_PPROF on?): %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	// The heap in use at the same moment, for memory per call (next to it: heap-…).
	h, err := r.api.Get(ctx, "/debug/pprof/heap")
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	base := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "cpu-"), ".pprof")
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "heap-"+base+".pprof"), h, 0o644); err != nil {
		return err
	}
	// And the goroutines, counted by where they wait: how many each call keeps.
	g, err := r.api.Get(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return fmt.Errorf("goroutine profile: %w", err)
	}
	return os.WriteFile(filepath.Join(filepath.Dir(path), "goroutines-"+base+".txt"), g, 0o644)
}

// saturated says whether a step's load generator failed to keep its clock: a tick lag p99 over
// limit, or more than 1% of its ticks skipped (stalls of over 100 ms).
func saturated(p PacerStats, limit time.Duration) bool {
	return p.P99 > Ms(limit) || p.Ticks > 0 && p.Skipped*100 > p.Ticks
}

// PeakConcurrency is the largest number of calls answered and not yet ended at once.
func PeakConcurrency(calls []CallResult) int {
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, c := range calls {
		if c.Answered.IsZero() || c.Ended.IsZero() {
			continue
		}
		evs = append(evs, ev{c.Answered, 1}, ev{c.Ended, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].d < evs[j].d
		}
		return evs[i].at.Before(evs[j].at)
	})
	n, peak := 0, 0
	for _, e := range evs {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

// conversations reads the step's conversations once they have all ended (their turn metrics
// are stored at the end), keyed for JoinTurns. It waits at most 20 s.
func (r *Runner) conversations(ctx context.Context, spec stepSpec, calls []CallResult, since time.Time) map[string]Conversation {
	want := 0
	for _, c := range calls {
		if len(c.Script.Turns) > 0 {
			want++
		}
	}
	out := map[string]Conversation{}
	if want == 0 || r.st.AgentID == "" {
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := r.api.ListConversations(ctx, r.st.AgentID, since.Add(-time.Second), len(calls)+50)
		ended := 0
		clear(out)
		for _, cv := range list {
			key := cv.ID
			if spec.kind == KindSIP {
				if cv.FromNumber == nil {
					continue
				}
				key = *cv.FromNumber
			}
			out[key] = cv
			if cv.Status == "ended" || cv.Status == "completed" || cv.Status == "failed" {
				ended++
			}
		}
		if err == nil && ended >= len(out) && len(out) >= want {
			return out
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil && !errors.Is(err, context.Canceled) {
				r.progress("  reading conversations: %v", err)
			}
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Replies returns an upper bound of the LLM replies a run of c needs (every caller turn of
// every scenario, with room for retries): the size of the fakes' reply script.
func (c Config) Replies() int {
	c = c.withDefaults()
	n := c.Warmup
	for _, s := range c.Scenarios {
		switch s {
		case ScenarioLatency:
			n += c.LatencyCalls * c.LatencyTurns
		case ScenarioCapacity:
			for _, k := range c.CapacitySteps {
				n += k * c.CapacityTurns
			}
		case ScenarioWebRTC:
			for _, k := range c.WebRTCSteps {
				n += k * c.WebRTCTurns
			}
		case ScenarioEvaluations: // two latency steps, and the run's replies and judges (asked twice)
			n += 2*c.LatencyCalls*c.LatencyTurns + c.EvalConversations*(c.EvalTurns+2)
		}
	}
	return n*2 + 100
}
