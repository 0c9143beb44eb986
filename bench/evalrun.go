package bench

// issue 18: live-call latency while an evaluation run goes on. The evaluations scenario saves
// EvalConversations saved conversations of EvalTurns turns each on the bench agent, measures
// the latency scenario's calls once with no run, then again while a run of them rehearses
// (started just before the calls), and reports the turn latency of both, with the run's own
// outcome and whether it lasted through the measured calls. It is not part of the standard
// profile (make bench-e2e): run it with --scenarios evaluations.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// ScenarioEvaluations is the scenario's name.
const ScenarioEvaluations = "evaluations"

// Defaults of the evaluations scenario: the run of 50 saved conversations × 10 turns.
const (
	DefaultEvalConversations = 50
	DefaultEvalTurns         = 10
	// evalRunWait bounds the wait for the run to end after the measured calls.
	evalRunWait = 10 * time.Minute
)

// evalRun is what the scenario reads of an evaluation run.
type evalRun struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Reason     *string `json:"reason"`
	StartedAt  *string `json:"started_at"`
	FinishedAt *string `json:"finished_at"`
	Totals     struct {
		Evaluations int   `json:"evaluations"`
		Passed      int   `json:"passed"`
		Failed      int   `json:"failed"`
		Errors      int   `json:"errors"`
		DurationMS  int64 `json:"duration_ms"`
	} `json:"totals"`
}

// EvalRunResult is the run's part of the scenario's report.
type EvalRunResult struct {
	Conversations int     `json:"saved_conversations"`
	Turns         int     `json:"turns_each"`
	Status        string  `json:"status"`
	Passed        int     `json:"passed"`
	Failed        int     `json:"failed"`
	Errors        int     `json:"errors"`
	RunSeconds    float64 `json:"run_seconds"`
	// Overlapped: the run was still rehearsing when the last measured call ended, so every
	// measured turn happened during the run.
	Overlapped bool `json:"overlapped_whole_step"`
}

// saveEvaluations saves n hand-written conversations of turns turns on the bench agent and
// returns their ids.
func (r *Runner) saveEvaluations(ctx context.Context, n, turns int) ([]string, error) {
	path := "/v1/agents/" + url.PathEscape(r.st.AgentID) + "/evaluations"
	ts := make([]any, turns)
	for i := range ts {
		ts[i] = map[string]any{"text": r.cfg.Lines[i%len(r.cfg.Lines)]}
	}
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var out struct {
			ID string `json:"id"`
		}
		body := map[string]any{"name": fmt.Sprintf("parley-bench %d", i+1), "turns": ts,
			"criteria": map[string]any{"success": "The agent answers every message politely."}}
		if err := r.api.do(ctx, http.MethodPost, path, body, &out); err != nil {
			return ids, err
		}
		ids = append(ids, out.ID)
	}
	return ids, nil
}

// deleteEvaluations removes the saved conversations the scenario made.
func (r *Runner) deleteEvaluations(ctx context.Context, ids []string) {
	for _, id := range ids {
		_ = r.api.do(ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(r.st.AgentID)+"/evaluations/"+url.PathEscape(id), nil, nil)
	}
}

func (r *Runner) getRun(ctx context.Context, id string) (evalRun, error) {
	var run evalRun
	err := r.api.do(ctx, http.MethodGet, "/v1/evaluation-runs/"+url.PathEscape(id), nil, &run)
	return run, err
}

// evaluations runs the scenario.
func (r *Runner) evaluations(ctx context.Context) ScenarioResult {
	sc := ScenarioResult{Name: ScenarioEvaluations}
	n, turns := r.cfg.EvalConversations, r.cfg.EvalTurns
	ids, err := r.saveEvaluations(ctx, n, turns)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		r.deleteEvaluations(dctx, ids)
	}()
	if err != nil {
		sc.Note = "the saved conversations could not be made: " + err.Error()
		return sc
	}
	r.progress("  saved %d conversations of %d turns on agent %s", n, turns, r.st.AgentID)
	spec := stepSpec{scenario: ScenarioEvaluations, kind: KindSIP, calls: r.cfg.LatencyCalls, concurrency: r.cfg.LatencyCalls,
		turns: r.cfg.LatencyTurns, interval: r.cfg.Ramp / time.Duration(max(r.cfg.LatencyCalls, 1))}
	base := r.runStep(ctx, spec)
	base.Verdict = "without an evaluation run"
	sc.Steps = append(sc.Steps, base)
	r.progress("  without a run: turn latency p50 %s, p95 %s (%d turns)", fmtMs(base.TurnLatency.P50), fmtMs(base.TurnLatency.P95), base.TurnLatency.N)

	var run evalRun
	if err := r.api.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(r.st.AgentID)+"/evaluation-runs", nil, &run); err != nil {
		sc.Note = "the evaluation run could not be started: " + err.Error()
		return sc
	}
	runStart := time.Now()
	// The calls start once the run is rehearsing (a worker claimed its job), bounded.
	for deadline := time.Now().Add(30 * time.Second); run.Status == "queued" && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(100 * time.Millisecond)
		if run, err = r.getRun(ctx, run.ID); err != nil {
			sc.Note = "the evaluation run could not be read: " + err.Error()
			return sc
		}
	}
	during := r.runStep(ctx, spec)
	stepEnd := time.Now()
	res := EvalRunResult{Conversations: n, Turns: turns}
	if run, err = r.getRun(ctx, run.ID); err == nil {
		res.Overlapped = run.Status == "queued" || run.Status == "running"
	}
	for deadline := stepEnd.Add(evalRunWait); err == nil && (run.Status == "queued" || run.Status == "running") && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(500 * time.Millisecond)
		run, err = r.getRun(ctx, run.ID)
	}
	res.Status, res.Passed, res.Failed, res.Errors = run.Status, run.Totals.Passed, run.Totals.Failed, run.Totals.Errors
	res.RunSeconds = float64(run.Totals.DurationMS) / 1000
	if res.RunSeconds == 0 {
		res.RunSeconds = time.Since(runStart).Seconds()
	}
	during.Verdict = fmt.Sprintf("during an evaluation run of %d saved conversations × %d turns", n, turns)
	if !res.Overlapped {
		during.Verdict += " (the run ended before the last call: only part of the step overlapped it)"
	}
	sc.Steps = append(sc.Steps, during)
	sc.EvalRun = &res
	change := 0.0
	if base.TurnLatency.P95 > 0 {
		change = during.TurnLatency.P95/base.TurnLatency.P95 - 1
	}
	sc.Note = fmt.Sprintf("turn latency p50/p95 %s/%s without a run, %s/%s during it (p95 %+.1f%%); the run: %s in %.1f s (%d passed, %d failed, %d errors)%s",
		fmtMs(base.TurnLatency.P50), fmtMs(base.TurnLatency.P95), fmtMs(during.TurnLatency.P50), fmtMs(during.TurnLatency.P95), 100*change,
		res.Status, res.RunSeconds, res.Passed, res.Failed, res.Errors, map[bool]string{true: ", still rehearsing when the last call ended", false: ", over before the last call ended"}[res.Overlapped])
	r.progress("  %s", sc.Note)
	return sc
}
