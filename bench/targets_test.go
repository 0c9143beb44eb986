package bench

import "testing"

func TestTargets(t *testing.T) {
	r := sampleReport()
	got := map[string]Target{}
	for _, x := range r.Targets {
		got[x.Name] = x
	}
	cases := []struct{ name, met string }{
		{"Parley's share of turn latency, 200 concurrent G.711 calls", "yes"}, // p50 12 ms ≤ 20, p99 29.6 ms ≤ 40
		{"Cores per G.711 call", "yes"},
		{"Memory per call", "yes"},
		{"Call rate", "yes"},
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
