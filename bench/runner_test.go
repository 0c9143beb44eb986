package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeAPI serves the part of Parley's API the runner reads (GET /v1/conversations), from what
// the test UAS saw.
func fakeAPI(t *testing.T, uas *testUAS) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk_test" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":"unauthorized","detail":"no"}`))
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/v1/conversations" || r.URL.Query().Get("agent_id") != "agent-1" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":"not_found","detail":"` + r.URL.Path + `"}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": uas.conversations(), "has_more": false, "next_cursor": nil})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRunnerScenariosAgainstAFakeParley runs the capacity and rate scenarios against the test
// UAS (answering after known delays) and a fake API that reports the UAS's own timings, and
// checks the steps, verdicts, joins and resources end to end.
func TestRunnerScenariosAgainstAFakeParley(t *testing.T) {
	if testing.Short() {
		t.Skip("places real calls for several seconds")
	}
	uas := newTestUAS(t, 150*time.Millisecond, []time.Duration{250 * time.Millisecond})
	api := fakeAPI(t, uas)
	st := AttachStack(api.URL, "sk_test", "agent-1", "+15550100", uas.addr, os.Getpid(), 0)
	var progress strings.Builder
	cfg := Config{Scenarios: []string{ScenarioCapacity, ScenarioRate}, CapacitySteps: []int{3, 1}, CapacityTurns: 1,
		RateSteps: []float64{4, 8}, RateStepDuration: 500 * time.Millisecond, RateHold: 300 * time.Millisecond,
		Ramp: 200 * time.Millisecond, Latencies: Latencies{TTSSpeed: 1}, Speech: SourceSynthetic, Lines: []string{"hi there"},
		Hangover: 300 * time.Millisecond, Warmup: -1, Shards: 2, Command: "go test", Progress: &progress,
		// CI machines are shared: the scenario logic is under test here, not the machine.
		SaturationLag: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := NewRunner(ctx, cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(ctx)
	r.Close()
	t.Log(progress.String())
	if len(rep.Errors) > 0 {
		t.Fatalf("errors: %v", rep.Errors)
	}
	if len(rep.Scenarios) != 2 {
		t.Fatalf("%d scenarios", len(rep.Scenarios))
	}
	capa := rep.Scenarios[0]
	if capa.Name != ScenarioCapacity || len(capa.Steps) != 2 || capa.Steps[0].Concurrency != 1 || capa.Steps[1].Concurrency != 3 {
		t.Fatalf("capacity steps: %+v", capa)
	}
	for _, s := range capa.Steps {
		if s.Failed != 0 || s.Pass == nil || !*s.Pass {
			t.Errorf("step %d: failed %d, pass %v, verdict %q, reasons %v", s.Concurrency, s.Failed, s.Pass, s.Verdict, s.FailureNotes)
		}
		if s.TurnLatency.N != s.Concurrency || s.CrossCheck.Matched != s.Concurrency {
			t.Errorf("step %d: %d turns, %d matched", s.Concurrency, s.TurnLatency.N, s.CrossCheck.Matched)
		}
		// The fake engine's numbers are the UAS's own: ingress and egress are the network.
		if s.CrossCheck.Ingress.Max > 20 || s.CrossCheck.Egress.Max > 20 || s.CrossCheck.Egress.Min < -5 {
			t.Errorf("step %d: ingress %+v egress %+v", s.Concurrency, s.CrossCheck.Ingress, s.CrossCheck.Egress)
		}
		if s.ShareEngine.P50 != 0.5 || s.ShareEar.P50 < 240 || s.ShareEar.P50 > 500 {
			t.Errorf("step %d: share engine %v, ear %v", s.Concurrency, s.ShareEngine.P50, s.ShareEar.P50)
		}
		if s.CallSeconds <= 0 || s.ParleyCPU <= 0 || s.CoresPerCall <= 0 || s.HarnessCores <= 0 || s.Pacer.Ticks == 0 {
			t.Errorf("step %d resources: %+v", s.Concurrency, s)
		}
		if s.Greeting.N != s.Concurrency || s.Setup.N != s.Concurrency {
			t.Errorf("step %d: greetings %d, setups %d", s.Concurrency, s.Greeting.N, s.Setup.N)
		}
	}
	if capa.MaxConcurrency != 3 {
		t.Errorf("capacity max %d", capa.MaxConcurrency)
	}
	rate := rep.Scenarios[1]
	if len(rate.Steps) != 2 || rate.Steps[0].Calls != 2 || rate.Steps[1].Calls != 4 {
		t.Fatalf("rate steps: %+v", rate.Steps)
	}
	for _, s := range rate.Steps {
		if s.Failed != 0 || s.Setup.N != s.Calls || s.TurnLatency.N != 0 {
			t.Errorf("rate %g: %+v", s.Rate, s)
		}
	}
	if rate.MaxRate != 8 {
		t.Errorf("max rate %v", rate.MaxRate)
	}
	// Everything renders.
	md := rep.Markdown("latest.svg")
	for _, want := range []string{"| capacity | sip | 3 calls |", "rate: highest rate with no failure: **8 calls/s**", "| Call rate |", "latest.svg"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir + "/out/latest"); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".json", ".md", ".svg"} {
		if fi, err := os.Stat(dir + "/out/latest" + ext); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", ext, err)
		}
	}
}

func TestPeakConcurrency(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	calls := []CallResult{
		{Answered: at(0), Ended: at(10)}, {Answered: at(2), Ended: at(5)}, {Answered: at(5), Ended: at(8)}, // 5: one ends as one starts
		{Answered: at(3), Ended: at(4)}, {Started: at(1)}, // never answered
	}
	if got := PeakConcurrency(calls); got != 3 {
		t.Errorf("peak %d, want 3", got)
	}
	if PeakConcurrency(nil) != 0 {
		t.Error("peak of nothing")
	}
}

func TestConfigReplies(t *testing.T) {
	c := Config{Scenarios: []string{ScenarioLatency, ScenarioCapacity, ScenarioRate, ScenarioWebRTC}, LatencyCalls: 10, LatencyTurns: 3,
		CapacitySteps: []int{5, 10}, CapacityTurns: 2, WebRTCCalls: 5, WebRTCTurns: 2}
	// 1 warm-up + 30 + 30 + 10 = 71 turns, doubled, plus 100.
	if got := c.Replies(); got != 242 {
		t.Errorf("replies %d", got)
	}
}

// TestConfigRepliesEvaluations: the evaluations scenario's two latency steps and the run's
// rehearsals and judges (asked twice) are scripted replies too; the run is bounded.
func TestConfigRepliesEvaluations(t *testing.T) {
	c := Config{Scenarios: []string{ScenarioEvaluations}, LatencyCalls: 10, LatencyTurns: 3}
	// 1 warm-up + 2×30 + 50×(10+2) = 661 turns, doubled, plus 100.
	if got := c.Replies(); got != 1422 {
		t.Errorf("replies %d", got)
	}
	if d := (Config{EvalConversations: 10000}).withDefaults(); d.EvalConversations != 500 || d.EvalTurns != DefaultEvalTurns {
		t.Errorf("defaults %d × %d", d.EvalConversations, d.EvalTurns)
	}
}

func TestSaturated(t *testing.T) {
	cases := []struct {
		p    PacerStats
		want bool
	}{
		{PacerStats{Ticks: 1000, P99: 2}, false},
		{PacerStats{Ticks: 1000, P99: 12}, true},
		{PacerStats{Ticks: 1000, P99: 2, Skipped: 10}, false}, // one 200 ms stall in 20 s
		{PacerStats{Ticks: 1000, P99: 2, Skipped: 11}, true},
		{PacerStats{}, false},
	}
	for _, c := range cases {
		if got := saturated(c.p, 10*time.Millisecond); got != c.want {
			t.Errorf("%+v: %v", c.p, got)
		}
	}
}
