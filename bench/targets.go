package bench

import "fmt"

// The goals on this 2-core machine.
const (
	goalShareP50        = 20.0  // ms, Parley's share at 200 concurrent G.711 calls
	goalShareP99        = 40.0  // ms
	goalCoresPerCall    = 0.003 // cores per G.711 call
	goalMBPerCall       = 0.25  // MB RSS per call
	goalRate            = 150.0 // calls/s with no failure
	goalRateSetupP95    = 5.0   // ms
	goalWebRTCCores     = 0.012 // cores per WebRTC Opus call
	goalShareLoadLevel  = 200   // concurrent calls the share goal is stated at
	goalResourceLoadMin = 200
)

// Targets checks a report against the goals and says plainly which are met, which are
// not, and which this run did not measure.
func Targets(r *Report) []Target {
	var ts []Target
	var capSteps, latSteps []StepResult
	var rate *ScenarioResult
	var web []StepResult
	for i, sc := range r.Scenarios {
		switch sc.Name {
		case ScenarioCapacity:
			capSteps = append(capSteps, sc.Steps...)
		case ScenarioLatency:
			latSteps = append(latSteps, sc.Steps...)
		case ScenarioRate:
			rate = &r.Scenarios[i]
		case ScenarioWebRTC:
			web = append(web, sc.Steps...)
		}
	}
	sipSteps := append(append([]StepResult(nil), capSteps...), latSteps...)
	// The step the per-call goals are judged at: 200 concurrent calls, else the largest step
	// that passed (a step that failed had fewer calls up than its name says).
	var at *StepResult
	for i := range sipSteps {
		s := &sipSteps[i]
		if s.Pass != nil && !*s.Pass {
			continue
		}
		if s.Concurrency == goalShareLoadLevel {
			at = s
			break
		}
		if at == nil || s.Concurrency > at.Concurrency {
			at = s
		}
	}
	yesNo := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	validNote := func(s *StepResult, note string) string {
		if s.Saturated {
			note += "; the generator was saturated: not valid"
		}
		if s.Concurrency != goalShareLoadLevel {
			note += fmt.Sprintf("; measured at %d concurrent calls, not %d", s.Concurrency, goalShareLoadLevel)
		}
		if len(note) > 2 && note[:2] == "; " {
			note = note[2:]
		}
		return note
	}

	share := Target{Name: "Parley's share of turn latency, 200 concurrent G.711 calls", Goal: "p50 ≤ 20 ms, p99 ≤ 40 ms", Met: "not measured"}
	cores := Target{Name: "Cores per G.711 call", Goal: "≤ 0.003", Met: "not measured"}
	mem := Target{Name: "Memory per call", Goal: "≤ 0.25 MB RSS", Met: "not measured"}
	if at != nil && at.ShareEar.N > 0 {
		share.Measured = fmt.Sprintf("ear p50 %s, p99 %s (engine p50 %s, p99 %s)", fmtMs(at.ShareEar.P50), fmtMs(at.ShareEar.P99),
			fmtMs(at.ShareEngine.P50), fmtMs(at.ShareEngine.P99))
		if at.Concurrency == goalShareLoadLevel && !at.Saturated {
			share.Met = yesNo(at.ShareEar.P50 <= goalShareP50 && at.ShareEar.P99 <= goalShareP99)
		}
		share.Note = validNote(at, "")
	}
	if at != nil && at.CoresPerCall > 0 {
		cores.Measured = fmtSig(at.CoresPerCall) + " cores"
		if at.MBPerCall > 0 {
			mem.Measured = fmtSig(at.MBPerCall) + " MB"
		}
		if at.Concurrency >= goalResourceLoadMin && !at.Saturated {
			cores.Met = yesNo(at.CoresPerCall <= goalCoresPerCall)
			if at.MBPerCall > 0 {
				mem.Met = yesNo(at.MBPerCall <= goalMBPerCall)
			}
		}
		cores.Note = validNote(at, "")
		mem.Note = validNote(at, "")
	}
	ts = append(ts, share, cores, mem)

	rt := Target{Name: "Call rate", Goal: "≥ 150 calls/s with 0 failures, p95 setup ≤ 5 ms", Met: "not measured"}
	if rate != nil && len(rate.Steps) > 0 {
		rt.Measured = fmt.Sprintf("%g calls/s with 0 failures, p95 setup %s", rate.MaxRate, fmtMs(rate.MaxRateSetup))
		last := rate.Steps[len(rate.Steps)-1]
		lastFailed := last.Pass != nil && !*last.Pass
		switch {
		case rate.MaxRate >= goalRate:
			rt.Met = yesNo(rate.MaxRateSetup <= goalRateSetupP95)
		case lastFailed:
			rt.Met = "no"
			rt.Note = fmt.Sprintf("%g calls/s failed: %s", last.Rate, last.Verdict)
		default:
			rt.Note = fmt.Sprintf("every step passed, but the steps stopped at %g calls/s", last.Rate)
		}
	}
	ts = append(ts, rt)

	wt := Target{Name: "WebRTC Opus call", Goal: "≤ 0.012 cores", Met: "not measured"}
	if len(web) > 0 && web[0].CoresPerCall > 0 {
		s := web[len(web)-1]
		wt.Measured = fmt.Sprintf("%s cores at %d calls", fmtSig(s.CoresPerCall), s.Concurrency)
		if !s.Saturated {
			wt.Met = yesNo(s.CoresPerCall <= goalWebRTCCores)
		} else {
			wt.Note = "the generator was saturated: not valid"
		}
	}
	ts = append(ts, wt)
	return ts
}
