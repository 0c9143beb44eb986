package evaluations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/analysis"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Criterion is the judge's finding on one criterion.
type Criterion struct {
	Kind      string `json:"kind" doc:"success (the success condition), must_not (a thing that must not happen) or tool_call (an expected tool call, checked without the LLM)." jsonschema:"enum=success,enum=must_not,enum=tool_call"`
	Criterion string `json:"criterion"`
	Passed    bool   `json:"passed"`
	Rationale string `json:"rationale"`
}

// ToolCall is a tool call of a rehearsal.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments" jsonschema:"type=object"`
	Result    string          `json:"result" doc:"The mock's answer."`
}

// TurnDiff is a turn whose content changed from the saved conversation.
type TurnDiff struct {
	Index int    `json:"index" doc:"The agent turn's position (from 0) among the agent's lines."`
	Saved string `json:"saved" doc:"What the agent said in the saved conversation (empty: it said nothing there)."`
	Now   string `json:"now" doc:"What it says now (empty: it says nothing now)."`
}

// Differences are the differences from the saved conversation.
type Differences struct {
	Turns            []TurnDiff `json:"turns" doc:"Agent turns whose content changed."`
	ToolCallsMissing []string   `json:"tool_calls_missing" doc:"Tools the saved conversation (or the criteria) called that the rehearsal did not."`
	ToolCallsAdded   []string   `json:"tool_calls_added" doc:"Tools the rehearsal called that the saved conversation did not."`
}

// Result is the outcome of one saved conversation in a run.
type Result struct {
	EvaluationID string      `json:"evaluation_id" jsonschema:"format=uuid"`
	Status       string      `json:"status" jsonschema:"enum=pass,enum=fail,enum=error"`
	Reason       *string     `json:"reason" doc:"Why it is an error (null otherwise)." jsonschema:"nullable"`
	Criteria     []Criterion `json:"criteria"`
	Transcript   []SavedLine `json:"transcript" doc:"The rehearsal's transcript."`
	ToolCalls    []ToolCall  `json:"tool_calls"`
	Differences  Differences `json:"differences"`
	DurationMS   int64       `json:"duration_ms"`
	CostUSD      string      `json:"cost_usd" doc:"The rehearsal's and the judge's cost, a decimal string."`
}

// Totals sum up a run.
type Totals struct {
	Evaluations int    `json:"evaluations"`
	Passed      int    `json:"passed"`
	Failed      int    `json:"failed"`
	Errors      int    `json:"errors"`
	DurationMS  int64  `json:"duration_ms"`
	CostUSD     string `json:"cost_usd"`
}

// EvaluationRun is the EvaluationRunObject of the interface.
type EvaluationRun struct {
	Object       string    `json:"object" jsonschema:"enum=evaluation_run"`
	ID           string    `json:"id" jsonschema:"format=uuid"`
	ProjectID    string    `json:"project_id" jsonschema:"format=uuid"`
	AgentID      string    `json:"agent_id" jsonschema:"format=uuid"`
	AgentVersion *int      `json:"agent_version" doc:"The published version rehearsed; null: the current definition." jsonschema:"nullable"`
	Status       string    `json:"status" doc:"queued, running, finished, or failed (reason says why)." jsonschema:"enum=queued,enum=running,enum=finished,enum=failed"`
	Reason       *string   `json:"reason" jsonschema:"nullable"`
	Results      []Result  `json:"results"`
	Totals       Totals    `json:"totals"`
	CreatedAt    app.Time  `json:"created_at"`
	StartedAt    *app.Time `json:"started_at" jsonschema:"nullable"`
	FinishedAt   *app.Time `json:"finished_at" jsonschema:"nullable"`
}

// SchemaDoc describes the object.
func (EvaluationRun) SchemaDoc() string {
	return "A run of an agent's saved conversations: queued, then running, then finished (or failed with a reason); results per saved conversation and totals."
}

func runView(r store.EvaluationRun) EvaluationRun {
	out := EvaluationRun{Object: "evaluation_run", ID: string(r.ID), ProjectID: string(r.ProjectID), AgentID: string(r.AgentID), Status: r.Status,
		Results: []Result{}, CreatedAt: app.T(r.CreatedAt), StartedAt: app.TP(r.StartedAt), FinishedAt: app.TP(r.FinishedAt)}
	if r.AgentVersion > 0 {
		v := r.AgentVersion
		out.AgentVersion = &v
	}
	if r.Reason != "" {
		why := r.Reason
		out.Reason = &why
	}
	_ = json.Unmarshal(r.Results, &out.Results)
	_ = json.Unmarshal(r.Totals, &out.Totals)
	if out.Totals.CostUSD == "" {
		out.Totals.CostUSD = billing.FormatUSD(0)
	}
	if out.Results == nil {
		out.Results = []Result{}
	}
	return out
}

type runPayload struct {
	RunID store.EvaluationRunID `json:"run_id"`
}

// RunOptions are the choices of a run (Parley's extension of the operation, which the
// specification gives no body).
type RunOptions struct {
	// Version pins the published version to rehearse; 0 rehearses the current definition.
	Version int
}

// Run queues a run of every saved conversation of the agent: 402 when the credit is used up,
// 404 for a pinned version the agent never published, 409 while another run of the
// organization is queued or running, or the project is frozen.
func (s *Service) Run(ctx context.Context, act app.Actor, agentID string, o RunOptions) (EvaluationRun, error) {
	if o.Version < 0 {
		return EvaluationRun{}, fault.Invalid(fault.CodeInvalidParameter, []fault.FieldError{{Pointer: "version", Code: "minimum", Detail: "A version is 1 or more."}})
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (EvaluationRun, error) {
		a, err := agentOf(ctx, tx.Queries, act, agentID)
		if err != nil {
			return EvaluationRun{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, a.ProjectID); err != nil {
			return EvaluationRun{}, err
		}
		if o.Version > 0 {
			if _, err := tx.SystemAgents().Version(ctx, a.ID, o.Version); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return EvaluationRun{}, fault.E(fault.CodeVersionNotFound, "The agent %s has no published version %d.", a.ID, o.Version)
				}
				return EvaluationRun{}, err
			}
		}
		if act.Live() {
			if err := billing.CheckCanSpend(ctx, tx.Queries, a.OrgID, s.now()); err != nil {
				return EvaluationRun{}, err
			}
		}
		mode := store.ModeLive
		if !act.Live() {
			mode = store.ModeTest
		}
		r, err := tx.EvaluationRuns().Create(ctx, store.EvaluationRun{OrgID: a.OrgID, ProjectID: a.ProjectID, AgentID: a.ID, AgentVersion: o.Version, Mode: mode})
		if errors.Is(err, store.ErrConflict) {
			return EvaluationRun{}, fault.E(fault.CodeEvaluationRunActive, "Saved conversations are already being rehearsed in this organization; wait until that run has finished.")
		}
		if err != nil {
			return EvaluationRun{}, err
		}
		b, _ := json.Marshal(runPayload{r.ID})
		if _, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: store.EvaluationRunKind, Payload: b, MaxAttempts: 3, DedupeKey: string(r.ID)}); err != nil {
			return EvaluationRun{}, err
		}
		if err := au.Record("evaluation_run.queued", "evaluation_run", string(r.ID), a.ProjectID, map[string]any{"agent_id": a.ID, "agent_version": o.Version}); err != nil {
			return EvaluationRun{}, err
		}
		return runView(r), nil
	})
}

// GetRun returns a run the actor reaches.
func (s *Service) GetRun(ctx context.Context, act app.Actor, id string) (EvaluationRun, error) {
	r, err := s.Store.EvaluationRuns().Get(ctx, act.Scope, store.EvaluationRunID(id))
	if err != nil {
		return EvaluationRun{}, app.NotFound(err, fault.CodeEvaluationRunNotFound, "evaluation run", id)
	}
	return runView(r), nil
}

// Completer completes the run's job in the transaction that stores its outcome (*jobs.Job).
type Completer interface {
	CompleteIn(ctx context.Context, tx *store.Tx) error
}

// Execute is the job's work: it (re)starts the run the payload names, rehearses and judges
// every saved conversation with bounded concurrency, and stores the outcome, the charge and
// the job's completion in one transaction. After a crash the job is claimed again and the run
// starts over (its attempt counted); on the last attempt, failure stores the run as failed,
// so no run stays running.
func (s *Service) Execute(ctx context.Context, j Completer, raw json.RawMessage, attempt, maxAttempts int) error {
	var p runPayload
	if err := json.Unmarshal(raw, &p); err != nil || p.RunID == "" {
		return fmt.Errorf("evaluations: payload %s: %w", raw, store.ErrInvalid)
	}
	run, err := s.Store.EvaluationRuns().Start(ctx, p.RunID, s.now())
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return s.Store.Tx(ctx, func(tx *store.Tx) error { return j.CompleteIn(ctx, tx) }) // already over
	}
	if err != nil {
		return err
	}
	results, totals, micros, err := s.rehearseAll(ctx, run)
	if err != nil {
		if ctx.Err() == nil && attempt >= maxAttempts {
			return s.finish(ctx, j, run, store.EvalRunFailed, err.Error(), nil, Totals{CostUSD: billing.FormatUSD(0)}, 0)
		}
		return err
	}
	return s.finish(ctx, j, run, store.EvalRunFinished, "", results, totals, micros)
}

func (s *Service) finish(ctx context.Context, j Completer, run store.EvaluationRun, status, reason string, results []Result, totals Totals, micros int64) error {
	if results == nil {
		results = []Result{}
	}
	rb, _ := json.Marshal(results)
	tb, _ := json.Marshal(totals)
	return s.Store.Tx(ctx, func(tx *store.Tx) error {
		at := s.now()
		ok, err := tx.EvaluationRuns().Finish(ctx, run.ID, status, reason, rb, tb, at)
		if err != nil {
			return err
		}
		if ok {
			if err := runEvent(ctx, tx, run, status, reason, totals, at); err != nil {
				return err
			}
		}
		if ok && micros > 0 && run.Mode == store.ModeLive {
			if _, _, err := tx.Credit().Record(ctx, store.CreditEntry{OrgID: run.OrgID, Kind: store.CreditTesting, AmountMicros: -micros,
				Reason: fmt.Sprintf("Evaluation run %s: %d saved conversations", run.ID, totals.Evaluations)}); err != nil {
				return err
			}
		}
		return j.CompleteIn(ctx, tx)
	})
}

// ReapOrphaned stores as failed the runs queued or running whose job is dead (its attempts
// used up by crashes) or gone, each with its evaluation_run.failed event, so that no run stays
// running. It returns how many it failed.
func (s *Service) ReapOrphaned(ctx context.Context) (int, error) {
	runs, err := s.Store.EvaluationRuns().Orphaned(ctx, s.now(), 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, run := range runs {
		failed := false
		err := s.Store.Tx(ctx, func(tx *store.Tx) error {
			at := s.now()
			ok, err := tx.EvaluationRuns().Finish(ctx, run.ID, store.EvalRunFailed, store.EvalRunOrphanedReason, json.RawMessage(`[]`), json.RawMessage(`{}`), at)
			if err != nil || !ok { // ended meanwhile: its end sent its own event
				return err
			}
			failed = true
			return runEvent(ctx, tx, run, store.EvalRunFailed, store.EvalRunOrphanedReason, Totals{}, at)
		})
		if err != nil {
			return n, err
		}
		if failed {
			n++
		}
	}
	return n, nil
}

// rehearseAll rehearses and judges the run's saved conversations, at most Concurrency at once.
func (s *Service) rehearseAll(ctx context.Context, run store.EvaluationRun) ([]Result, Totals, int64, error) {
	started := time.Now()
	evals, err := s.Store.Evaluations().All(ctx, run.AgentID, MaxPerRun)
	if err != nil {
		return nil, Totals{}, 0, err
	}
	ag, err := s.Store.GetAgent(ctx, run.AgentID)
	if err != nil {
		return nil, Totals{}, 0, fmt.Errorf("the agent cannot be read: %w", err)
	}
	def, err := runtime.LoadDefinition(ctx, s.Store.Queries, ag, run.AgentVersion)
	if err != nil {
		return nil, Totals{}, 0, fmt.Errorf("the agent's definition cannot be read: %w", err)
	}
	judge := &judge{engine: s.Engine, def: def, mode: run.Mode}
	n := s.Concurrency
	if n <= 0 {
		n = 4
	}
	results := make([]Result, len(evals))
	micros := make([]int64, len(evals))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, e := range evals {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, Totals{}, 0, ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i], micros[i] = s.one(ctx, run, e, judge)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, Totals{}, 0, err
	}
	t := Totals{Evaluations: len(evals), DurationMS: time.Since(started).Milliseconds()}
	var sum int64
	for i, r := range results {
		sum += micros[i]
		switch r.Status {
		case Pass:
			t.Passed++
		case Fail:
			t.Failed++
		default:
			t.Errors++
		}
	}
	t.CostUSD = billing.FormatUSD(sum)
	return results, t, sum, nil
}

// one rehearses and judges one saved conversation.
func (s *Service) one(ctx context.Context, run store.EvaluationRun, e store.Evaluation, j *judge) (Result, int64) {
	start := time.Now()
	var sp spec
	_ = json.Unmarshal(e.Spec, &sp)
	res := Result{EvaluationID: string(e.ID), Criteria: []Criterion{}, Transcript: []SavedLine{}, ToolCalls: []ToolCall{},
		Differences: Differences{Turns: []TurnDiff{}, ToolCallsMissing: []string{}, ToolCallsAdded: []string{}}, CostUSD: billing.FormatUSD(0)}
	fail := func(reason string, micros int64) (Result, int64) {
		res.Status, res.Reason = Error, &reason
		res.DurationMS, res.CostUSD = time.Since(start).Milliseconds(), billing.FormatUSD(micros)
		return res, micros
	}
	vars := map[string]any{}
	_ = json.Unmarshal(sp.Variables, &vars)
	voice := sp.Channel == ChannelVoice
	turns := make([]string, 0, len(sp.Turns))
	var keys []string
	var barge []bool
	for _, t := range sp.Turns {
		switch {
		case voice: // spoken, and the keys pressed, as a caller would
			turns, keys, barge = append(turns, t.Text), append(keys, t.DTMF), append(barge, t.BargeIn)
		case t.DTMF != "" && t.Text == "":
			turns = append(turns, "(The caller pressed the keys "+t.DTMF+".)")
		default:
			turns = append(turns, t.Text)
		}
	}
	rh := runtime.Rehearsal{OrgID: run.OrgID, ProjectID: run.ProjectID, AgentID: run.AgentID, AgentVersion: run.AgentVersion,
		Mode: run.Mode, Language: sp.Language, Variables: vars, Turns: turns, Mocks: sp.Mocks, Voice: voice, DTMF: keys, BargeIn: barge}
	if sim := sp.Simulation; sim != nil {
		rh.Turns, rh.DTMF, rh.BargeIn = nil, nil, nil
		rh.Simulation = &runtime.Simulation{Persona: sim.Persona, Goal: sim.Goal, MaxTurns: sim.MaxTurns}
	}
	out, err := s.Engine.Rehearse(ctx, rh)
	if err != nil {
		return fail("The rehearsal failed: "+err.Error(), 0)
	}
	micros := out.CostMicros
	for _, l := range out.Lines {
		res.Transcript = append(res.Transcript, SavedLine{Role: string(l.Role), Text: l.Text, Interrupted: l.Interrupted})
	}
	for _, c := range out.ToolCalls {
		res.ToolCalls = append(res.ToolCalls, ToolCall{Name: c.Name, Arguments: c.Arguments, Result: c.Result})
	}
	res.Differences = differences(sp, out)
	// Expected tool calls: checked here, not by the LLM.
	allPassed := true
	for _, x := range sp.Criteria.ExpectedToolCalls {
		ok, why := expectedCall(x, out.ToolCalls)
		allPassed = allPassed && ok
		res.Criteria = append(res.Criteria, Criterion{Kind: "tool_call", Criterion: describeCall(x), Passed: ok, Rationale: why})
		if !ok && !contains(res.Differences.ToolCallsMissing, x.Name) {
			res.Differences.ToolCallsMissing = append(res.Differences.ToolCallsMissing, x.Name)
		}
	}
	verdict, in, outTok, err := j.judge(ctx, sp.Criteria, out.Lines)
	micros += j.price(in, outTok)
	if err != nil {
		return fail("The judge's answer could not be used: "+err.Error(), micros)
	}
	res.Criteria = append(res.Criteria, Criterion{Kind: "success", Criterion: sp.Criteria.Success, Passed: verdict.Success.Met, Rationale: verdict.Success.Rationale})
	allPassed = allPassed && verdict.Success.Met
	for i, m := range sp.Criteria.MustNot {
		c := Criterion{Kind: "must_not", Criterion: m, Passed: true, Rationale: "The judge found nothing about it."}
		if i < len(verdict.MustNot) {
			c.Passed, c.Rationale = !verdict.MustNot[i].Happened, verdict.MustNot[i].Rationale
		}
		allPassed = allPassed && c.Passed
		res.Criteria = append(res.Criteria, c)
	}
	res.Status = Fail
	if allPassed {
		res.Status = Pass
	}
	res.DurationMS, res.CostUSD = time.Since(start).Milliseconds(), billing.FormatUSD(micros)
	return res, micros
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func describeCall(x ExpectedToolCall) string {
	if len(x.Arguments) == 0 && len(x.Patterns) == 0 {
		return "calls " + x.Name
	}
	b, _ := json.Marshal(x.Arguments)
	p, _ := json.Marshal(x.Patterns)
	return fmt.Sprintf("calls %s with arguments %s matching %s", x.Name, b, p)
}

// expectedCall reports whether some call of the rehearsal fits x.
func expectedCall(x ExpectedToolCall, calls []runtime.RehearsedCall) (bool, string) {
	seen := 0
	var last string
	for _, c := range calls {
		if c.Name != x.Name {
			continue
		}
		seen++
		var args map[string]json.RawMessage
		_ = json.Unmarshal(c.Arguments, &args)
		if why := argsFit(x, args); why != "" {
			last = why
			continue
		}
		return true, fmt.Sprintf("%s was called with %s.", x.Name, c.Arguments)
	}
	if seen == 0 {
		return false, fmt.Sprintf("%s was not called.", x.Name)
	}
	return false, fmt.Sprintf("%s was called %d times, never with the expected arguments: %s", x.Name, seen, last)
}

func argsFit(x ExpectedToolCall, args map[string]json.RawMessage) string {
	for k, want := range x.Arguments {
		got, ok := args[k]
		if !ok {
			return fmt.Sprintf("argument %s is missing.", k)
		}
		var a, b any
		_ = json.Unmarshal(want, &a)
		_ = json.Unmarshal(got, &b)
		wa, _ := json.Marshal(a)
		ga, _ := json.Marshal(b)
		if string(wa) != string(ga) {
			return fmt.Sprintf("argument %s is %s, not %s.", k, ga, wa)
		}
	}
	for k, pat := range x.Patterns {
		var s string
		if err := json.Unmarshal(args[k], &s); err != nil {
			return fmt.Sprintf("argument %s is not a string.", k)
		}
		if re, err := regexp.Compile(pat); err != nil || !re.MatchString(s) {
			return fmt.Sprintf("argument %s (%q) does not match %s.", k, s, pat)
		}
	}
	return ""
}

// differences compares the rehearsal with the saved conversation: agent turns whose text
// changed, and tools called differently (by name, counting repeats).
func differences(sp spec, out runtime.RehearsalResult) Differences {
	d := Differences{Turns: []TurnDiff{}, ToolCallsMissing: []string{}, ToolCallsAdded: []string{}}
	if len(sp.Transcript) == 0 {
		return d
	}
	var saved, now []string
	for _, l := range sp.Transcript {
		if l.Role == "agent" {
			saved = append(saved, l.Text)
		}
	}
	for _, l := range out.Lines {
		if l.Role == session.RoleAgent {
			now = append(now, l.Text)
		}
	}
	for i := 0; i < max(len(saved), len(now)); i++ {
		var a, b string
		if i < len(saved) {
			a = saved[i]
		}
		if i < len(now) {
			b = now[i]
		}
		if normalize(a) != normalize(b) {
			d.Turns = append(d.Turns, TurnDiff{Index: i, Saved: a, Now: b})
		}
	}
	count := map[string]int{}
	for _, c := range sp.ToolCalls {
		count[c.Name]++
	}
	for _, c := range out.ToolCalls {
		count[c.Name]--
	}
	for _, c := range sp.ToolCalls {
		if count[c.Name] > 0 {
			count[c.Name]--
			d.ToolCallsMissing = append(d.ToolCallsMissing, c.Name)
		}
	}
	for _, c := range out.ToolCalls {
		if count[c.Name] < 0 {
			count[c.Name]++
			d.ToolCallsAdded = append(d.ToolCallsAdded, c.Name)
		}
	}
	return d
}

func normalize(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// verdict is the judge's structured answer.
type verdict struct {
	Success struct {
		Met       bool   `json:"met"`
		Rationale string `json:"rationale"`
	} `json:"success"`
	MustNot []struct {
		Happened  bool   `json:"happened"`
		Rationale string `json:"rationale"`
	} `json:"must_not"`
}

// judgeSchema is the schema the judge's answer must fit.
func judgeSchema(mustNot int) map[string]any {
	item := func(flag string) map[string]any {
		return map[string]any{"type": "object", "required": []any{flag, "rationale"}, "additionalProperties": false,
			"properties": map[string]any{flag: map[string]any{"type": "boolean"}, "rationale": map[string]any{"type": "string", "minLength": 1}}}
	}
	return map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": []any{"success", "must_not"}, "additionalProperties": false,
		"properties": map[string]any{
			"success":  item("met"),
			"must_not": map[string]any{"type": "array", "items": item("happened"), "minItems": mustNot, "maxItems": mustNot},
		}}
}

// rubric is the judge's fixed prompt.
const rubric = `You judge a rehearsal of a conversation between a user and an AI agent. Read the transcript and call record_verdict.
success: met is true only if the transcript shows the success condition fully met; rationale quotes or cites the turns that show it.
must_not: one item per numbered item below, in order; happened is true if the transcript shows it happening; rationale cites the turns.
Judge only from the transcript; tool lines show the tool results the agent received.`

type judge struct {
	engine Engine
	def    *agentdef.Definition
	mode   store.Mode
}

func (j *judge) price(in, out int) int64 {
	if p, ok := j.engine.(interface {
		PriceTokens(in, out int) int64
	}); ok {
		return p.PriceTokens(in, out)
	}
	return 0
}

func (j *judge) judge(ctx context.Context, c Criteria, lines []session.Line) (verdict, int, int, error) {
	client, model, err := j.engine.AnalysisLLM(store.Conversation{Mode: j.mode}, j.def)
	if err != nil {
		return verdict{}, 0, 0, err
	}
	var b strings.Builder
	b.WriteString(rubric)
	b.WriteString("\n\nSuccess condition: " + c.Success + "\n")
	if len(c.MustNot) > 0 {
		b.WriteString("Must not happen:\n")
		for i, m := range c.MustNot {
			fmt.Fprintf(&b, "%d. %s\n", i+1, m)
		}
	} else {
		b.WriteString("Must not happen: nothing listed; must_not is an empty array.\n")
	}
	var t strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&t, "%s: %s\n", l.Role, l.Text)
	}
	raw, in, out, err := analysis.Fill(ctx, client, model, "record_verdict", b.String(), t.String(), judgeSchema(len(c.MustNot)))
	if err != nil {
		return verdict{}, in, out, err
	}
	var v verdict
	if err := json.Unmarshal(raw, &v); err != nil {
		return verdict{}, in, out, err
	}
	return v, in, out, nil
}
