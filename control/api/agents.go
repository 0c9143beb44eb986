package api

import (
	"context"
	"strconv"

	"github.com/parley-voice/parley/control/app/agents"
)

type listAgentsIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid" doc:"Only this project's agents; 404 when the key reaches no such project."`
	Status    string `query:"status" enum:"draft,published,archived" doc:"Only agents in this status (deleted agents, archived, are never listed)."`
	Direction string `query:"direction" enum:"inbound,outbound"`
	Kind      string `query:"kind" enum:"form_filling,workflow,faq,custom,desk"`
}

func (a *API) listAgents(ctx context.Context, c *call, in *listAgentsIn) (*list[agents.Agent], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	as, err := a.Agents.List(ctx, c.actor(ctx), agents.Filter{ProjectID: in.ProjectID, Status: in.Status, Direction: in.Direction, Kind: in.Kind}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, as, func(v agents.Agent) string { return v.ID }), nil
}

type createAgentIn struct {
	Body agents.AgentCreate `body:"required"`
}

func (a *API) createAgent(ctx context.Context, c *call, in *createAgentIn) (*agents.AgentDetail, error) {
	d, err := a.Agents.Create(ctx, c.actor(ctx), in.Body)
	return &d, err
}

// agentIn names the agent of the path.
type agentIn struct {
	ID string `path:"agent_id" format:"uuid" doc:"The agent."`
}

func (a *API) getAgent(ctx context.Context, c *call, in *agentIn) (*agents.AgentDetail, error) {
	d, err := a.Agents.Get(ctx, c.actor(ctx), in.ID)
	return &d, err
}

func (a *API) deleteAgent(ctx context.Context, c *call, in *agentIn) (*agents.AgentDeleted, error) {
	d, err := a.Agents.Delete(ctx, c.actor(ctx), in.ID)
	return &d, err
}

func (a *API) getAgentDefinition(ctx context.Context, c *call, in *agentIn) (*agents.Definition, error) {
	d, err := a.Agents.Definition(ctx, c.actor(ctx), in.ID)
	return &d, err
}

type replaceAgentDefinitionIn struct {
	agentIn
	Body agents.AgentDefinitionReplace `body:"required"`
}

func (a *API) replaceAgentDefinition(ctx context.Context, c *call, in *replaceAgentDefinitionIn) (*agents.AgentWritten, error) {
	w, err := a.Agents.ReplaceDefinition(ctx, c.actor(ctx), in.ID, in.Body)
	return &w, err
}

type publishAgentIn struct {
	agentIn
	Body agents.AgentPublishRequest `body:"optional"`
}

func (a *API) publishAgent(ctx context.Context, c *call, in *publishAgentIn) (*agents.AgentVersionObject, error) {
	v, err := a.Agents.Publish(ctx, c.actor(ctx), in.ID, in.Body)
	return &v, err
}

type listAgentVersionsIn struct {
	listQuery
	agentIn
}

func (a *API) listAgentVersions(ctx context.Context, c *call, in *listAgentVersionsIn) (*list[agents.AgentVersionObject], error) {
	pg, err := c.page(in.ID)
	if err != nil {
		return nil, err
	}
	vs, err := a.Agents.Versions(ctx, c.actor(ctx), in.ID, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, vs, func(v agents.AgentVersionObject) string { return strconv.Itoa(v.Version) }), nil
}

type agentVersionIn struct {
	agentIn
	Version string `path:"version" type:"integer" min:"1" max:"2147483647" doc:"The version number (1, 2, …)."`
}

func (a *API) getAgentVersionDefinition(ctx context.Context, c *call, in *agentVersionIn) (*agents.Definition, error) {
	d, err := a.Agents.VersionDefinition(ctx, c.actor(ctx), in.ID, in.Version)
	return &d, err
}
