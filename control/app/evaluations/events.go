package evaluations

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/store"
)

// Event types of runs (issue 18), registered in the event catalogue (issue 14). Each run sends
// exactly one of them, in the transaction that stores its end.
const (
	EventRunFinished = "evaluation_run.finished"
	EventRunFailed   = "evaluation_run.failed"
)

// EvaluationRunEventData is the data of evaluation_run.finished and evaluation_run.failed: the run as it
// ended, without the results per saved conversation (read them with GET
// /v1/evaluation-runs/{run_id}).
type EvaluationRunEventData struct {
	RunID        string   `json:"run_id" jsonschema:"format=uuid"`
	AgentID      string   `json:"agent_id" jsonschema:"format=uuid"`
	AgentVersion *int     `json:"agent_version" doc:"The published version rehearsed; null: the definition as it was when the run started." jsonschema:"nullable"`
	Status       string   `json:"status" jsonschema:"enum=finished,enum=failed"`
	Reason       *string  `json:"reason" doc:"Why the run failed (null when it finished)." jsonschema:"nullable"`
	Totals       Totals   `json:"totals"`
	FinishedAt   app.Time `json:"finished_at"`
}

func init() {
	events.Register(EventRunFinished, "An evaluation run finished: every saved conversation was rehearsed and judged; totals count the passes, failures and errors.", EvaluationRunEventData{})
	events.Register(EventRunFailed, "An evaluation run failed as a whole (reason says why): it was interrupted too many times, or its agent could not be read.", EvaluationRunEventData{})
}

// runEvent records the event of run's end, status and reason, in tx.
func runEvent(ctx context.Context, tx *store.Tx, run store.EvaluationRun, status, reason string, totals Totals, at time.Time) error {
	typ := EventRunFinished
	if status == store.EvalRunFailed {
		typ = EventRunFailed
	}
	if totals.CostUSD == "" {
		totals.CostUSD = billing.FormatUSD(0)
	}
	d := EvaluationRunEventData{RunID: string(run.ID), AgentID: string(run.AgentID), Status: status, Totals: totals, FinishedAt: app.T(at)}
	if run.AgentVersion > 0 {
		v := run.AgentVersion
		d.AgentVersion = &v
	}
	if reason != "" {
		d.Reason = &reason
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = tx.InsertEvent(ctx, store.Event{OrgID: run.OrgID, ProjectID: run.ProjectID, Mode: run.Mode, Type: typ, AgentID: run.AgentID, Data: b})
	return err
}
