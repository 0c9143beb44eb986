package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func boolp(b bool) *bool { return &b }

// sampleReport is a small report with every kind of step.
func sampleReport() *Report {
	lat := func(base float64, n int) []float64 {
		var xs []float64
		for i := 0; i < n; i++ {
			xs = append(xs, base+float64(i%17))
		}
		return xs
	}
	step := func(name string, conc int, cpc, mb float64, samples []float64) StepResult {
		return StepResult{Scenario: name, Kind: KindSIP, Concurrency: conc, Calls: conc, TurnLatency: Summarize(samples),
			ShareEar: Summarize([]float64{8, 12, 30}), ShareEngine: Summarize([]float64{0.2, 0.4}), Greeting: Summarize([]float64{160}),
			Setup: Summarize([]float64{1.2, 2}), CoresPerCall: cpc, MBPerCall: mb, ParleyCores: cpc * float64(conc), PeakRSSMB: 60,
			LatencySamples: samples, Pacer: PacerStats{P99: 0.4}, MachineBusy: 0.5,
			CrossCheck: CrossCheck{Turns: 3, Matched: 3, Endpointing: Component{600, Summarize([]float64{601})}}}
	}
	capa := ScenarioResult{Name: ScenarioCapacity, BaselineP95: 1180, MaxConcurrency: 200, Steps: []StepResult{
		step("capacity", 5, 0.004, 0.4, lat(1160, 10)), step("capacity", 200, 0.0018, 0.15, lat(1170, 400))}}
	for i := range capa.Steps {
		capa.Steps[i].Pass, capa.Steps[i].Verdict = boolp(true), "p95 ok"
	}
	rate := ScenarioResult{Name: ScenarioRate, MaxRate: 300, MaxRateSetup: 3.5, Steps: []StepResult{
		{Scenario: "rate", Kind: KindSIP, Rate: 300, Calls: 600, Setup: Summarize([]float64{2, 3.5}), Pass: boolp(true)},
		{Scenario: "rate", Kind: KindSIP, Rate: 400, Calls: 800, Failed: 3, Reasons: map[string]int{"sip 503": 3}, Pass: boolp(false)}}}
	web := ScenarioResult{Name: ScenarioWebRTC, Steps: []StepResult{step("webrtc", 5, 0.02, 1, lat(1190, 10))}}
	web.Steps[0].Kind = KindWebRTC
	r := &Report{Started: time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC), Seconds: 200, Command: "make bench-e2e",
		Machine: Machine{Cores: 2, CPUModel: "AMD EPYC <test> & co", Kernel: "6.1", GoVersion: "go1.26", MemoryMB: 4000},
		Parley:  ParleyBuild{Version: "v1", Commit: "abc1234"}, Latencies: JambonzLatencies(), Codec: "G.711", Speech: "espeak-ng",
		Scenarios: []ScenarioResult{capa, rate, web}, Valid: true, Warnings: []string{"a warning"}}
	r.Targets = Targets(r)
	return r
}

func TestWriteFiles(t *testing.T) {
	r := sampleReport()
	base := filepath.Join(t.TempDir(), "results", "latest")
	if err := r.WriteFiles(base); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Parley.Commit != "abc1234" || len(back.Scenarios) != 3 || back.Scenarios[0].Steps[1].TurnLatency.N != 400 {
		t.Errorf("round trip: %+v", back.Parley)
	}
	svg, _ := os.ReadFile(base + ".svg")
	checkXML(t, string(svg))
	md, _ := os.ReadFile(base + ".md")
	if !strings.Contains(string(md), "(latest.svg)") {
		t.Error("the markdown does not link the picture")
	}
}
