package api

import (
	"net/http"
	"time"
)

// meResponse is the answer of GET /v1/me.
type meResponse struct {
	Object       string    `json:"object"`
	Organization orgBrief  `json:"organization"`
	Key          keyBrief  `json:"key"`
	ServerTime   time.Time `json:"server_time"`
}

type orgBrief struct {
	Object string `json:"object"`
	ID     string `json:"id"`
	Name   string `json:"name"`
	Frozen bool   `json:"frozen"`
}

type keyBrief struct {
	Object      string     `json:"object"`
	ID          string     `json:"id"`
	Mode        string     `json:"mode"`
	Prefix      string     `json:"prefix"`
	Scopes      []string   `json:"scopes"`
	AllProjects bool       `json:"all_projects"`
	ProjectIDs  []string   `json:"project_ids"`
	ExpiresAt   *time.Time `json:"expires_at"`
}

func (a *API) getMe(w http.ResponseWriter, r *http.Request) {
	p := PrincipalFrom(r.Context())
	mode := string(p.Key.Mode)
	pids := make([]string, 0, len(p.Key.ProjectIDs))
	for _, id := range p.Key.ProjectIDs {
		pids = append(pids, string(id))
	}
	scopes := p.Key.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	respond(w, http.StatusOK, meResponse{
		Object:       "me",
		Organization: orgBrief{Object: "organization", ID: string(p.Org.ID), Name: p.Org.Name, Frozen: p.Org.Frozen},
		Key: keyBrief{Object: "api_key", ID: string(p.Key.ID), Mode: mode, Prefix: p.Key.Prefix, Scopes: scopes,
			AllProjects: p.Key.AllProjects, ProjectIDs: pids, ExpiresAt: utcPtr(p.Key.ExpiresAt)},
		ServerTime: time.Now().UTC().Truncate(time.Second),
	})
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// httpHandler adapts a handler method for tests.
type httpHandler func(http.ResponseWriter, *http.Request)

func (f httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { f(w, r) }
