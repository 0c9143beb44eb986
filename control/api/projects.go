package api

import (
	"context"

	"github.com/parley-voice/parley/control/app/projects"
)

type listProjectsIn struct{ listQuery }

func (a *API) listProjects(ctx context.Context, c *call, _ *listProjectsIn) (*list[projects.Project], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ps, err := a.Projects.List(ctx, c.actor(ctx), pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ps, func(p projects.Project) string { return p.ID }), nil
}
