package bench

import "testing"

func TestTargets(t *testing.T) {
	r := sampleReport()
	got := map[string]Target{}
	for _, x := range r.Targets {
		got[x.Name] = x
	}
	cases := []struct{ name, met string }{
		{"Parley's share of turn latency, 200 concurrent G.711 calls", "no"}, // p50 12 ms ≤ 20, but p99 29.6 ms > 20
		{"Cores per G.711 call at 50 calls", "not measured"},                 // no 50-call step
		{"Cores per G.711 call", "yes"},                                      // 0.0018 ≤ 0.0020 at 200
		{"Memory per call", "yes"},                                           // 0.15 ≤ 0.18
		{"Call rate", "yes"},                                                 // 300/s, p95 setup 3.5 ms
		{"WebRTC Opus call", "no"},
	}
	for _, c := range cases {
		if got[c.name].Met != c.met {
			t.Errorf("%s: met %q, want %q (%+v)", c.name, got[c.name].Met, c.met, got[c.name])
		}
	}
	// Without a 200-call step the share goal is not measured, and the resources are judged
	// nowhere; a saturated step never meets a goal.
	r.Scenarios[0].Steps = r.Scenarios[0].Steps[:1]
	r.Scenarios[1].Steps = r.Scenarios[1].Steps[:1]
	r.Scenarios[1].Steps[0].Rate, r.Scenarios[1].MaxRate = 50, 50
	r.Scenarios[1].Steps = r.Scenarios[1].Steps[:1]
	r.Scenarios[2].Steps[0].Saturated = true
	for _, x := range Targets(r) {
		if x.Met != "not measured" {
			t.Errorf("%s: met %q with no step at the goal's load (%+v)", x.Name, x.Met, x)
		}
	}
	// A failing rate step below the goal says no.
	r.Scenarios[1].Steps = append(r.Scenarios[1].Steps, StepResult{Rate: 100, Failed: 1, Pass: boolp(false)})
	for _, x := range Targets(r) {
		if x.Name == "Call rate" && x.Met != "no" {
			t.Errorf("call rate: %+v", x)
		}
	}
}

func TestTargetsSkipFailedSteps(t *testing.T) {
	r := sampleReport()
	// The 200-call step failed: the goals are judged at the 5-call step, and not met or
	// measured at 200.
	r.Scenarios[0].Steps[1].Pass = boolp(false)
	for _, x := range Targets(r) {
		if x.Name == "Cores per G.711 call" && (x.Met != "not measured" || x.Measured != "0.0040 cores") {
			t.Errorf("%+v", x)
		}
	}
}

func TestTargetsCoresAt50(t *testing.T) {
	r := sampleReport()
	st := r.Scenarios[0].Steps[0]
	st.Concurrency, st.Calls, st.CoresPerCall, st.MidCallCoresPerCall, st.Pass = 50, 50, 0.0030, 0.0025, boolp(true)
	r.Scenarios[0].Steps = append(r.Scenarios[0].Steps, st)
	for _, x := range Targets(r) {
		if x.Name == "Cores per G.711 call at 50 calls" && (x.Met != "no" || x.Measured != "0.0030 cores (mid-call 0.0025)") {
			t.Errorf("%+v", x)
		}
	}
	r.Scenarios[0].Steps[2].CoresPerCall = 0.0021
	for _, x := range Targets(r) {
		if x.Name == "Cores per G.711 call at 50 calls" && x.Met != "yes" {
			t.Errorf("%+v", x)
		}
	}
}

// The WebRTC goal is judged at the largest step; a smaller step that misses it is named, and
// the marginal cost of a call comes from the mid-call figures.
func TestTargetsWebRTCSteps(t *testing.T) {
	r := sampleReport()
	web := &r.Scenarios[2]
	small := web.Steps[0]
	small.CoresPerCall, small.MidCallCoresPerCall = 0.0165, 0.0141
	big := small
	big.Concurrency, big.Calls, big.CoresPerCall, big.MidCallCoresPerCall = 20, 20, 0.0109, 0.0088
	web.Steps = []StepResult{small, big}
	web.MarginalCoresPerCall = MarginalCores(web.Steps)
	// (20×0.0088 − 5×0.0141) / 15 = 0.00703
	if m := web.MarginalCoresPerCall; m < 0.0070 || m > 0.0071 {
		t.Fatalf("marginal %v", m)
	}
	for _, x := range Targets(r) {
		if x.Name != "WebRTC Opus call" {
			continue
		}
		if x.Met != "yes" || x.Measured != "0.0165 cores at 5 calls, 0.0109 cores at 20 calls; one more call: 0.0070" || x.Note != "judged at 20 calls; missed at 5 calls" {
			t.Errorf("%+v", x)
		}
	}
	web.Steps[1].Failed = 2
	if m := MarginalCores(web.Steps); m != 0 {
		t.Errorf("marginal with a failed step: %v", m)
	}
	for _, x := range Targets(r) {
		if x.Name == "WebRTC Opus call" && x.Met != "no" {
			t.Errorf("a step with failed calls met the goal: %+v", x)
		}
	}
}
