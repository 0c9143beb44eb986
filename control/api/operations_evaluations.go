package api

// issue 18: saved conversations (evaluations) and their runs.

import (
	"context"
	"net/http"

	"github.com/parley-voice/parley/control/app/evaluations"
	"github.com/parley-voice/parley/control/fault"
)

// evaluationOperations are the operations of evaluations (tag Agents).
func evaluationOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "runEvaluations", Method: http.MethodPost, Path: "/agents/{agent_id}/evaluation-runs", Tag: "Agents",
			Summary: "Rehearse every saved conversation of the agent and judge each one",
			Description: "No body. Queued (202): read the run with GET /v1/evaluation-runs/{run_id} until its status is finished (or failed, with a reason). " +
				"Each saved conversation is rehearsed against the agent as it is now, in text mode through the engine that serves chats; tool calls are answered by the saved mocks and never reach real systems. " +
				"The agent's LLM judges each against a fixed rubric (structured output checked against a schema, asked once more, then the evaluation is an error); expected tool calls are checked without the LLM. " +
				"Charged as testing. 402 when the credit is used up; 409 while saved conversations are already being rehearsed in this organization, or when the project is frozen. " +
				"Parley's extension (x-extension): the query parameter version pins a published version to rehearse. The run's end is the event evaluation_run.finished or evaluation_run.failed.",
			Permission: "evaluations:run", Changes: true,
			Codes:  []string{fault.CodeAgentNotFound, fault.CodeVersionNotFound, fault.CodeCreditExhausted, fault.CodeEvaluationRunActive, fault.CodeProjectFrozen},
			Status: http.StatusAccepted,
		}, (*API).runEvaluations),
		typed(operation{
			ID: "listEvaluations", Method: http.MethodGet, Path: "/agents/{agent_id}/evaluations", Tag: "Agents",
			Summary:    "List the agent's saved conversations, oldest first",
			Permission: "agents:read",
			Codes:      []string{fault.CodeAgentNotFound},
			Status:     http.StatusOK,
		}, (*API).listEvaluations),
		typed(operation{
			ID: "createEvaluation", Method: http.MethodPost, Path: "/agents/{agent_id}/evaluations", Tag: "Agents",
			Summary: "Save a conversation to rehearse: from a real conversation or written by hand",
			Description: "With conversation_id, the conversation's user turns and keys become the script and the tool results it received the mocks (404 conversation_not_found for a conversation of another agent or project; 422 evaluation_channel_mismatch for a chat saved for a voice run). " +
				"Written by hand: turns and mocks by tool name. Mocks must name tools the agent's conversations have (422 unknown_mock_tool).",
			Permission: "agents:write", Changes: true, Idempotency: idemOptional,
			Codes: []string{fault.CodeAgentNotFound, fault.CodeConversationNotFound, fault.CodeProjectFrozen, fault.CodeEvaluationChannel,
				fault.CodeUnknownMockTool, fault.CodeEvaluationEmpty},
			Status: http.StatusCreated,
		}, (*API).createEvaluation),
		typed(operation{
			ID: "deleteEvaluation", Method: http.MethodDelete, Path: "/agents/{agent_id}/evaluations/{evaluation_id}", Tag: "Agents",
			Summary:    "Delete a saved conversation",
			Permission: "agents:write", Changes: true,
			Codes:  []string{fault.CodeAgentNotFound, fault.CodeEvaluationNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteEvaluation),
		typed(operation{
			ID: "getEvaluationRun", Method: http.MethodGet, Path: "/evaluation-runs/{run_id}", Tag: "Agents",
			Summary:    "Get an evaluation run: its status, results per saved conversation and totals",
			Permission: "agents:read",
			Codes:      []string{fault.CodeEvaluationRunNotFound},
			Status:     http.StatusOK,
		}, (*API).getEvaluationRun),
	}
}

type runEvaluationsIn struct {
	AgentID string `path:"agent_id" format:"uuid" doc:"The agent."`
	Version int    `query:"version" min:"1" max:"1000000" extension:"true" doc:"Parley's extension: rehearse this published version instead of the current definition (404 version_not_found when the agent never published it). Left out: the current definition."`
}

func (a *API) runEvaluations(ctx context.Context, c *call, in *runEvaluationsIn) (*evaluations.EvaluationRun, error) {
	r, err := a.Evaluations.Run(ctx, c.actor(ctx), in.AgentID, evaluations.RunOptions{Version: in.Version})
	return &r, err
}

type listEvaluationsIn struct {
	listQuery
	AgentID string `path:"agent_id" format:"uuid" doc:"The agent."`
}

func (a *API) listEvaluations(ctx context.Context, c *call, in *listEvaluationsIn) (*list[evaluations.Evaluation], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	es, err := a.Evaluations.List(ctx, c.actor(ctx), in.AgentID, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, es, func(e evaluations.Evaluation) string { return e.ID }), nil
}

type createEvaluationIn struct {
	AgentID string                       `path:"agent_id" format:"uuid" doc:"The agent."`
	Body    evaluations.EvaluationCreate `body:"required"`
}

func (a *API) createEvaluation(ctx context.Context, c *call, in *createEvaluationIn) (*evaluations.Evaluation, error) {
	e, err := a.Evaluations.Create(ctx, c.actor(ctx), in.AgentID, in.Body)
	return &e, err
}

type deleteEvaluationIn struct {
	AgentID string `path:"agent_id" format:"uuid" doc:"The agent."`
	ID      string `path:"evaluation_id" format:"uuid" doc:"The saved conversation."`
}

func (a *API) deleteEvaluation(ctx context.Context, c *call, in *deleteEvaluationIn) (*evaluations.EvaluationDeleted, error) {
	d, err := a.Evaluations.Delete(ctx, c.actor(ctx), in.AgentID, in.ID)
	return &d, err
}

type evaluationRunIn struct {
	ID string `path:"run_id" format:"uuid" doc:"The run."`
}

func (a *API) getEvaluationRun(ctx context.Context, c *call, in *evaluationRunIn) (*evaluations.EvaluationRun, error) {
	r, err := a.Evaluations.GetRun(ctx, c.actor(ctx), in.ID)
	return &r, err
}
