package api

import (
	"context"

	"github.com/parley-voice/parley/control/app/numbers"
)

type listPhoneNumbersIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid" doc:"Only this project's numbers; 404 when the key reaches no such project."`
	AgentID   string `query:"agent_id" format:"uuid" doc:"Only the numbers assigned to this agent."`
}

func (a *API) listPhoneNumbers(ctx context.Context, c *call, in *listPhoneNumbersIn) (*list[numbers.PhoneNumber], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ns, err := a.Numbers.List(ctx, c.actor(ctx), numbers.Filter{ProjectID: in.ProjectID, AgentID: in.AgentID}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ns, func(n numbers.PhoneNumber) string { return n.ID }), nil
}

type updatePhoneNumberIn struct {
	ID   string                    `path:"phone_number_id" format:"uuid" doc:"The phone number."`
	Body numbers.PhoneNumberUpdate `body:"required"`
}

func (a *API) updatePhoneNumber(ctx context.Context, c *call, in *updatePhoneNumberIn) (*numbers.PhoneNumber, error) {
	n, err := a.Numbers.Update(ctx, c.actor(ctx), in.ID, in.Body)
	return &n, err
}
