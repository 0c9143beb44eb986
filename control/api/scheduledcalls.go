package api

import (
	"context"

	"github.com/parley-voice/parley/control/app/calls"
)

type createScheduledCallIn struct {
	Body calls.ScheduledCallCreate `body:"required"`
}

func (a *API) createScheduledCall(ctx context.Context, c *call, in *createScheduledCallIn) (*calls.ScheduledCall, error) {
	s, err := a.Calls.Schedule(ctx, c.actor(ctx), in.Body)
	return &s, err
}

type listScheduledCallsIn struct {
	listQuery
	AgentID string `query:"agent_id" format:"uuid" doc:"Only this agent's calls."`
	Status  string `query:"status" enum:"scheduled,dialing,placed,failed,cancelled"`
}

func (a *API) listScheduledCalls(ctx context.Context, c *call, in *listScheduledCallsIn) (*list[calls.ScheduledCall], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ss, err := a.Calls.ListScheduled(ctx, c.actor(ctx), calls.ScheduledFilter{AgentID: in.AgentID, Status: in.Status}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ss, func(s calls.ScheduledCall) string { return s.ID }), nil
}

type scheduledCallIn struct {
	ID string `path:"scheduled_call_id" format:"uuid" doc:"The scheduled call."`
}

func (a *API) getScheduledCall(ctx context.Context, c *call, in *scheduledCallIn) (*calls.ScheduledCall, error) {
	s, err := a.Calls.GetScheduled(ctx, c.actor(ctx), in.ID)
	return &s, err
}

func (a *API) cancelScheduledCall(ctx context.Context, c *call, in *scheduledCallIn) (*calls.ScheduledCall, error) {
	s, err := a.Calls.CancelScheduled(ctx, c.actor(ctx), in.ID)
	return &s, err
}

// scheduledCallPath is the Location of a scheduled call (v is the answer, or the result of the
// change that kept it).
func scheduledCallPath(v any) string {
	if x, ok := v.(calls.ScheduledCall); ok {
		return "/v1/scheduled-calls/" + x.ID
	}
	return ""
}
