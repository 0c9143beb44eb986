package bench

import (
	"fmt"
	"strings"
	"time"
)

// Markdown renders the report as the tables the README's Performance section shows; svgName
// is the picture's file name, linked under the tables.
func (r *Report) Markdown(svgName string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	s := func(v Summary, f func(Summary) float64) string {
		if v.N == 0 {
			return "–"
		}
		return fmtMs(f(v))
	}
	p50 := func(v Summary) float64 { return v.P50 }
	p90 := func(v Summary) float64 { return v.P90 }
	p95 := func(v Summary) float64 { return v.P95 }
	p99 := func(v Summary) float64 { return v.P99 }
	mx := func(v Summary) float64 { return v.Max }

	w("# Parley benchmark\n\n")
	valid := "yes"
	if !r.Valid {
		valid = "**NO**: the load generator was saturated in at least one step (see the lag column)"
	}
	w("- Machine: %d cores, %s, %d MB, Linux %s, %s\n", r.Machine.Cores, r.Machine.CPUModel, r.Machine.MemoryMB, r.Machine.Kernel, r.Machine.GoVersion)
	w("- Parley: %s (commit %s", r.Parley.Version, r.Parley.Commit)
	if r.Parley.Tree != "" {
		w(", tree %s", r.Parley.Tree)
	}
	w(")\n- Run: %s, %.0f s; command: `%s`\n", r.Started.UTC().Format(time.RFC3339), r.Seconds, r.Command)
	l := r.Latencies
	w("- Fakes (jambonz's mock latencies unless changed): STT interim every %v, final +%v after the endpointing silence; LLM first token %v, then %.0f tokens/s (first chunk after %d token); TTS first audio %v, %.0f× real time. Agent endpointing %v. Caller audio: %s, %s.\n",
		l.STTInterimEvery, l.STTFinalDelay, l.LLMFirstToken, l.LLMTokensPerSec, l.LLMFirstChunkTokens, l.TTSFirstByte, l.TTSSpeed, l.Endpointing, r.Codec, r.Speech)
	w("- Machine busy before the run (other processes): %s\n", fmtPct(r.BackgroundBusy))
	w("- Valid: %s\n\n", valid)
	w("Turn latency is measured at the caller: from the last frame of its speech leaving to the first loud 5 ms of the agent's reply arriving. ")
	w("Parley's share (ear) is that minus the configured outside latencies (%s: endpointing, STT final, LLM to first chunk, TTS first byte); ", fmtMs(Ms(l.Outside())))
	w("Parley's share (engine) is what the conversation's own turn metrics report (`latency_ms.parley_share`).\n\n")

	w("## Turn latency\n\n")
	w("| scenario | kind | load | calls | failed | turns | p50 | p90 | p99 | max | share (ear) p50 / p99 | share (engine) p50 / p99 | greeting p50 |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, sc := range r.Scenarios {
		for _, st := range sc.Steps {
			if st.TurnLatency.N == 0 && st.Greeting.N == 0 {
				continue
			}
			w("| %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s / %s | %s / %s | %s |\n", sc.Name, st.Kind, loadOf(st), st.Calls, st.Failed,
				st.TurnLatency.N, s(st.TurnLatency, p50), s(st.TurnLatency, p90), s(st.TurnLatency, p99), s(st.TurnLatency, mx),
				s(st.ShareEar, p50), s(st.ShareEar, p99), s(st.ShareEngine, p50), s(st.ShareEngine, p99), s(st.Greeting, p50))
		}
	}
	w("\n## Resources\n\n")
	w("| scenario | kind | load | Parley cores | cores per call | mid-call cores per call | setup + teardown CPU per call | peak RSS | MB per call | fakes cores | harness cores | machine busy | tick lag p99 / max, skipped | generator |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, sc := range r.Scenarios {
		for _, st := range sc.Steps {
			load := fmt.Sprintf("%d calls", st.Concurrency)
			if st.Rate > 0 {
				load = fmt.Sprintf("%g calls/s", st.Rate)
			}
			gen := "ok"
			if st.Saturated {
				gen = "**saturated**"
			}
			mb := "–"
			if st.MBPerCall != 0 {
				mb = fmtSig(st.MBPerCall)
			}
			mid, setup := "–", "–"
			if st.MidCallSeconds > 0 {
				mid = fmt.Sprintf("%s (%.0f s)", fmtSig(st.MidCallCoresPerCall), st.MidCallSeconds)
				setup = fmt.Sprintf("%.1f ms", st.SetupTeardownCPUms)
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %.0f MB | %s | %s | %s | %s | %s / %s, %d | %s |\n", sc.Name, st.Kind, load, fmtSig(st.ParleyCores), fmtSig(st.CoresPerCall),
				mid, setup, st.PeakRSSMB, mb, fmtSig(st.FakesCores), fmtSig(st.HarnessCores), fmtPct(st.MachineBusy), fmtMs(st.Pacer.P99), fmtMs(st.Pacer.Max), st.Pacer.Skipped, gen)
		}
	}
	w("\n## Calls\n\n")
	w("| scenario | kind | load | calls | failed | setup p50 | setup p95 | setup max | media connect p50 | packets/s per call | loss | jitter p50 | verdict | failures |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, sc := range r.Scenarios {
		for _, st := range sc.Steps {
			load := fmt.Sprintf("%d concurrent", st.Concurrency)
			if st.Rate > 0 {
				load = fmt.Sprintf("%g/s", st.Rate)
			}
			verdict := st.Verdict
			if st.Pass != nil {
				if *st.Pass {
					verdict = "pass " + verdict
				} else {
					verdict = "**fail** " + verdict
				}
			}
			pps := "–"
			if st.RxPacketsPerSecond > 0 {
				pps = fmt.Sprintf("%.1f", st.RxPacketsPerSecond)
			}
			w("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc.Name, st.Kind, load, st.Calls, st.Failed,
				s(st.Setup, p50), s(st.Setup, p95), s(st.Setup, mx), s(st.Connect, p50), pps, fmtPct(st.Loss), s(st.Jitter, p50), strings.TrimSpace(verdict), fmtReasons(st.Reasons))
		}
	}
	w("\n## Headlines\n\n")
	for _, sc := range r.Scenarios {
		switch {
		case sc.Name == "capacity":
			w("- capacity: baseline p95 %s; highest concurrency passing (p95 within +25%% of the baseline, under 0.5%% failed): **%d**", fmtMs(sc.BaselineP95), sc.MaxConcurrency)
		case sc.Name == "rate":
			w("- rate: highest rate with no failure: **%g calls/s**, p95 setup %s", sc.MaxRate, fmtMs(sc.MaxRateSetup))
		case len(sc.Steps) > 0:
			st := sc.Steps[len(sc.Steps)-1]
			w("- %s (%s, %d concurrent, %d calls, %d failed): turn latency p50 %s, p99 %s; Parley's share by ear p50 %s, p99 %s; by the engine p50 %s, p99 %s",
				sc.Name, st.Kind, st.Concurrency, st.Calls, st.Failed, s(st.TurnLatency, p50), s(st.TurnLatency, p99),
				s(st.ShareEar, p50), s(st.ShareEar, p99), s(st.ShareEngine, p50), s(st.ShareEngine, p99))
			if sc.MarginalCoresPerCall > 0 {
				w("; one more call costs %s cores (mid-call, %d to %d calls)", fmtSig(sc.MarginalCoresPerCall), sc.Steps[0].Concurrency, st.Concurrency)
			}
		default:
			w("- %s: no step ran", sc.Name)
		}
		if sc.Note != "" {
			w(" (%s)", sc.Note)
		}
		w("\n")
	}
	w("\n## Cross-check against the conversations' turn metrics\n\n")
	w("| scenario | load | turns matched | endpointing+STT (cfg / p50) | LLM first token (cfg / p50) | LLM first chunk (cfg / p50) | TTS first byte (cfg / p50) | ingress p50 | egress p50 | engine total p50 |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, sc := range r.Scenarios {
		for _, st := range sc.Steps {
			cc := st.CrossCheck
			if cc.Turns == 0 {
				continue
			}
			comp := func(c Component) string { return fmtMs(c.ConfiguredMS) + " / " + s(c.Measured, p50) }
			w("| %s | %d | %d/%d | %s | %s | %s | %s | %s | %s | %s |\n", sc.Name, st.Concurrency, cc.Matched, cc.Turns, comp(cc.Endpointing),
				comp(cc.LLMFirstToken), comp(cc.LLMFirstChunk), comp(cc.TTSFirstByte), s(cc.Ingress, p50), s(cc.Egress, p50), s(cc.EngineTotal, p50))
		}
	}
	w("\n## Targets (this machine)\n\n| target | goal | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		m := t.Met
		if m == "no" {
			m = "**no**"
		}
		note := ""
		if t.Note != "" {
			note = " (" + t.Note + ")"
		}
		w("| %s | %s | %s%s | %s |\n", t.Name, t.Goal, t.Measured, note, m)
	}
	if len(r.Warnings) > 0 {
		w("\n## Warnings\n\n")
		for _, x := range r.Warnings {
			w("- %s\n", x)
		}
	}
	if len(r.Errors) > 0 {
		w("\n## Errors\n\n")
		for _, x := range r.Errors {
			w("- %s\n", x)
		}
	}
	if svgName != "" {
		w("\n![turn latency CDF and cores per call](%s)\n", svgName)
	}
	return b.String()
}
