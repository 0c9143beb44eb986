package api

import (
	"context"
	"time"

	"github.com/parley-voice/parley/control/app"
)

// Me is the answer of GET /v1/me: the calling key and its organization.
type Me struct {
	Object       string   `json:"object" jsonschema:"enum=me"`
	Organization OrgBrief `json:"organization"`
	Key          KeyBrief `json:"key"`
	ServerTime   app.Time `json:"server_time"`
}

// OrgBrief is the calling key's organization.
type OrgBrief struct {
	Object string `json:"object" jsonschema:"enum=organization"`
	ID     string `json:"id" jsonschema:"format=uuid"`
	Name   string `json:"name"`
	Frozen bool   `json:"frozen"`
}

// KeyBrief is the calling key, without its secret.
type KeyBrief struct {
	Object      string    `json:"object" jsonschema:"enum=api_key"`
	ID          string    `json:"id" jsonschema:"format=uuid"`
	Mode        string    `json:"mode" jsonschema:"enum=live,enum=test"`
	Prefix      string    `json:"prefix" doc:"The visible start of the key."`
	Scopes      []string  `json:"scopes" doc:"The permissions the key holds; * holds all."`
	AllProjects bool      `json:"all_projects" doc:"The key reaches every project of the organization."`
	ProjectIDs  []string  `json:"project_ids" doc:"The projects the key reaches when all_projects is false." jsonschema:"format=uuid"`
	ExpiresAt   *app.Time `json:"expires_at" jsonschema:"nullable"`
}

type getMeIn struct{}

func (a *API) getMe(_ context.Context, c *call, _ *getMeIn) (*Me, error) {
	p := c.p
	pids := make([]string, 0, len(p.Key.ProjectIDs))
	for _, id := range p.Key.ProjectIDs {
		pids = append(pids, string(id))
	}
	scopes := p.Key.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return &Me{
		Object:       "me",
		Organization: OrgBrief{Object: "organization", ID: string(p.Org.ID), Name: p.Org.Name, Frozen: p.Org.Frozen},
		Key: KeyBrief{Object: "api_key", ID: string(p.Key.ID), Mode: string(p.Key.Mode), Prefix: p.Key.Prefix, Scopes: scopes,
			AllProjects: p.Key.AllProjects, ProjectIDs: pids, ExpiresAt: app.TP(utcPtr(p.Key.ExpiresAt))},
		ServerTime: app.T(a.now().UTC().Truncate(time.Second)),
	}, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
