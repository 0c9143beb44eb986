package bench

import (
	"fmt"
	"strings"
)

// The goals on this 2-core machine (issue 20, "Performance II").
const (
	goalShareP50        = 20.0   // ms, Parley's share at 200 concurrent G.711 calls
	goalShareP99        = 20.0   // ms: one frame
	goalCoresAt50       = 0.0024 // cores per G.711 call at 50 concurrent calls
	goalCoresPerCall    = 0.0020 // cores per G.711 call at 200 concurrent calls
	goalMBPerCall       = 0.18   // MB RSS per call
	goalRate            = 300.0  // calls/s with no failure
	goalRateSetupP95    = 5.0    // ms
	goalWebRTCCores     = 0.012  // cores per WebRTC Opus call
	goalShareLoadLevel  = 200    // concurrent calls the share goal is stated at
	goalCoresLoadLow    = 50
	goalResourceLoadMin = 200
)

// Targets checks a report against the goals and says plainly which are met, which are
// not, and which this run did not measure.
func Targets(r *Report) []Target {
	var ts []Target
	var capSteps, latSteps []StepResult
	var rate *ScenarioResult
	var web []StepResult
	var webMarginal float64
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
			webMarginal = sc.MarginalCoresPerCall
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

	share := Target{Name: "Parley's share of turn latency, 200 concurrent G.711 calls", Goal: "p50 ≤ 20 ms, p99 ≤ 20 ms (one frame)", Met: "not measured"}
	cores50 := Target{Name: "Cores per G.711 call at 50 calls", Goal: "≤ 0.0024", Met: "not measured"}
	for i := range capSteps {
		if s := &capSteps[i]; s.Concurrency == goalCoresLoadLow && s.CoresPerCall > 0 && (s.Pass == nil || *s.Pass) {
			cores50.Measured = fmtSig(s.CoresPerCall) + " cores"
			if s.MidCallCoresPerCall > 0 {
				cores50.Measured += fmt.Sprintf(" (mid-call %s)", fmtSig(s.MidCallCoresPerCall))
			}
			if !s.Saturated {
				cores50.Met = yesNo(s.CoresPerCall <= goalCoresAt50)
			} else {
				cores50.Note = "the generator was saturated: not valid"
			}
		}
	}
	cores := Target{Name: "Cores per G.711 call", Goal: "≤ 0.0020", Met: "not measured"}
	mem := Target{Name: "Memory per call", Goal: "≤ 0.18 MB RSS", Met: "not measured"}
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
	ts = append(ts, share, cores50, cores, mem)

	rt := Target{Name: "Call rate", Goal: "≥ 300 calls/s with 0 failures, p95 setup ≤ 5 ms", Met: "not measured"}
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

	// The WebRTC goal is judged at the largest step, as the G.711 goals are at load; every
	// step's figure is shown, so a small step that misses it is not hidden.
	wt := Target{Name: "WebRTC Opus call", Goal: "≤ 0.012 cores", Met: "not measured"}
	var big *StepResult
	var each []string
	for i := range web {
		s := &web[i]
		if s.CoresPerCall <= 0 {
			continue
		}
		each = append(each, fmt.Sprintf("%s cores at %d calls", fmtSig(s.CoresPerCall), s.Concurrency))
		if big == nil || s.Concurrency > big.Concurrency {
			big = s
		}
	}
	if big != nil {
		wt.Measured = strings.Join(each, ", ")
		if webMarginal > 0 {
			wt.Measured += fmt.Sprintf("; one more call: %s", fmtSig(webMarginal))
		}
		switch {
		case big.Saturated:
			wt.Note = "the generator was saturated: not valid"
		case big.Failed > 0:
			wt.Met = "no"
			wt.Note = fmt.Sprintf("%d calls failed at %d calls", big.Failed, big.Concurrency)
		default:
			wt.Met = yesNo(big.CoresPerCall <= goalWebRTCCores)
			wt.Note = fmt.Sprintf("judged at %d calls", big.Concurrency)
			for _, s := range web {
				if s.Concurrency != big.Concurrency && s.CoresPerCall > goalWebRTCCores {
					wt.Note += fmt.Sprintf("; missed at %d calls", s.Concurrency)
				}
			}
		}
	}
	ts = append(ts, wt)
	return ts
}
