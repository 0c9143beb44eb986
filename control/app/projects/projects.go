// Package projects serves the projects an actor reaches. Projects are made by the operator
// (parley admin projects add); the API only lists them.
package projects

import (
	"context"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// Project is the Project object of the interface.
type Project struct {
	Object    string   `json:"object" jsonschema:"enum=project"`
	ID        string   `json:"id" jsonschema:"format=uuid"`
	Name      string   `json:"name"`
	Frozen    bool     `json:"frozen" doc:"A frozen project's objects cannot be changed (409 project_frozen)."`
	CreatedAt app.Time `json:"created_at"`
}

// Service serves projects.
type Service struct {
	Store *store.Store
}

// List returns a page of the projects the actor reaches, oldest first, with one more when
// another page follows.
func (s *Service) List(ctx context.Context, act app.Actor, pg store.Page) ([]Project, error) {
	ps, err := s.Store.Projects().List(ctx, act.Scope, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Project, len(ps))
	for i, p := range ps {
		out[i] = Project{Object: "project", ID: string(p.ID), Name: p.Name, Frozen: p.Frozen, CreatedAt: app.T(p.CreatedAt)}
	}
	return out, nil
}
