package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// StepResult is one load level of a scenario: what the callers measured, what the API
// reported, and what the processes used.
type StepResult struct {
	Scenario    string    `json:"scenario"`
	Kind        string    `json:"kind"`
	Concurrency int       `json:"concurrency,omitempty"`
	Rate        float64   `json:"rate_cps,omitempty"`
	Started     time.Time `json:"started"`
	WallSeconds float64   `json:"wall_seconds"`

	Calls        int            `json:"calls"`
	Failed       int            `json:"failed"`
	Reasons      map[string]int `json:"failure_reasons,omitempty"`
	FailureNotes []string       `json:"failure_examples,omitempty"`

	TurnLatency Summary    `json:"turn_latency"`
	ShareEar    Summary    `json:"parley_share_ear"`
	ShareEngine Summary    `json:"parley_share_engine"`
	Greeting    Summary    `json:"greeting_latency"`
	Setup       Summary    `json:"setup"`
	Connect     Summary    `json:"connect"`
	Jitter      Summary    `json:"jitter"`
	Loss        float64    `json:"loss_fraction"`
	CrossCheck  CrossCheck `json:"cross_check"`

	// Resources: Parley's CPU over the step and per call-second (cores per call), its memory
	// growth per concurrent call, and the load generator's own use.
	CallSeconds  float64 `json:"call_seconds"`
	ParleyCPU    float64 `json:"parley_cpu_seconds"`
	ParleyCores  float64 `json:"parley_cores"`
	CoresPerCall float64 `json:"cores_per_call"`
	// MidCallCoresPerCall is Parley's cores per call while every call of the step was up (from
	// a second after the last answer to the first hang-up, at least 2 s; 0 when the calls did
	// not overlap that long): the steady state, without setup and teardown.
	// SetupTeardownCPUms is then the rest of the step's CPU per call, in ms: signalling, ICE,
	// DTLS, the API and the store at the start and end of each call.
	MidCallCoresPerCall float64 `json:"mid_call_cores_per_call,omitempty"`
	MidCallSeconds      float64 `json:"mid_call_seconds,omitempty"`
	SetupTeardownCPUms  float64 `json:"setup_teardown_cpu_ms_per_call,omitempty"`
	// RxPacketsPerSecond is the RTP packets the callers received per call-second: the packet
	// rate Parley sent (33/s for 30 ms packets, 50/s for 20 ms; less while Opus DTX or silence
	// suppression holds packets back).
	RxPacketsPerSecond float64    `json:"rx_packets_per_call_second,omitempty"`
	PeakRSSMB          float64    `json:"parley_peak_rss_mb"`
	MBPerCall          float64    `json:"mb_per_call"`
	FakesCores         float64    `json:"fakes_cores"`
	HarnessCores       float64    `json:"harness_cores"`
	MachineBusy        float64    `json:"machine_busy"`
	Pacer              PacerStats `json:"pacer"`
	// Saturated marks a step whose load generator could not keep its 20 ms clock (tick lag p99
	// over 10 ms, or ticks skipped): its numbers are not valid.
	Saturated bool `json:"generator_saturated"`

	// Pass is the step's verdict where the scenario has one (capacity, rate); Verdict says why.
	Pass    *bool  `json:"pass,omitempty"`
	Verdict string `json:"verdict,omitempty"`

	Turns []TurnRecord `json:"turns,omitempty"`
	// LatencySamples are the turn latencies (ms), for the CDF.
	LatencySamples []float64 `json:"latency_samples_ms,omitempty"`
}

// FailRate is the fraction of calls that failed.
func (s StepResult) FailRate() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Failed) / float64(s.Calls)
}

// ScenarioResult is one scenario's steps and its headline.
type ScenarioResult struct {
	Name  string       `json:"name"`
	Steps []StepResult `json:"steps"`
	// Capacity: the unloaded baseline p95 and the highest concurrency that passed.
	BaselineP95    float64 `json:"baseline_p95_ms,omitempty"`
	MaxConcurrency int     `json:"max_passing_concurrency,omitempty"`
	// Rate: the highest rate with no failure, and its p95 setup.
	MaxRate      float64 `json:"max_passing_rate_cps,omitempty"`
	MaxRateSetup float64 `json:"max_rate_setup_p95_ms,omitempty"`
	// WebRTC: the cost of one more call, from the mid-call figures of the smallest and the
	// largest step (MarginalCores).
	MarginalCoresPerCall float64 `json:"marginal_cores_per_call,omitempty"`
	// Evaluations (issue 18): the run that went on during the second step.
	EvalRun *EvalRunResult `json:"evaluation_run,omitempty"`
	Note    string         `json:"note,omitempty"`
}

// Target is one goal of the issue and whether this run met it.
type Target struct {
	Name     string `json:"name"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	// Met is "yes", "no" or "not measured".
	Met  string `json:"met"`
	Note string `json:"note,omitempty"`
}

// Report is a whole run.
type Report struct {
	Started   time.Time   `json:"started"`
	Seconds   float64     `json:"seconds"`
	Command   string      `json:"command"`
	Machine   Machine     `json:"machine"`
	Parley    ParleyBuild `json:"parley"`
	Latencies Latencies   `json:"latencies"`
	Codec     string      `json:"codec"`
	Speech    string      `json:"speech_source"`
	// BackgroundBusy is the machine's busy fraction in the 2 s before the first call (Parley
	// and the fakes idle): what other processes were using.
	BackgroundBusy float64          `json:"background_busy"`
	Scenarios      []ScenarioResult `json:"scenarios"`
	Targets        []Target         `json:"targets"`
	// Valid is false when any step's load generator was saturated; Warnings say what else a
	// reader should know (machine saturated, cross-check disagreements, missing parts).
	Valid    bool     `json:"valid"`
	Warnings []string `json:"warnings,omitempty"`
	Errors   []string `json:"errors,omitempty"`
}

// ReadReport reads a report written by WriteFiles (its .json).
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	return &r, nil
}

// WriteFiles writes base+".json", base+".md" and base+".svg".
func (r *Report) WriteFiles(base string) error {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(r.Markdown(filepath.Base(base)+".svg")), 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".svg", []byte(r.SVG()), 0o644)
}

// fmtMs formats milliseconds for tables: one decimal under 100, none above.
func fmtMs(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	if math.Abs(v) < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
}

func fmtInt(n int) string { return strconv.Itoa(n) }

// fmtSig formats v with 2 significant digits (at least 4 decimals for small values).
func fmtSig(v float64) string {
	if v == 0 {
		return "0"
	}
	if math.Abs(v) < 0.1 {
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func fmtPct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
