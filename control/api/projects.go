package api

import (
	"net/http"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

// projectView is the Project object.
type projectView struct {
	Object    string    `json:"object"`
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Frozen    bool      `json:"frozen"`
	CreatedAt time.Time `json:"created_at"`
}

func (a *API) listProjects(w http.ResponseWriter, r *http.Request) error {
	c := callFrom(r.Context())
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	var after store.ProjectID
	if pg.after != "" {
		if after, err = store.ParseID[store.ProjectID](pg.after); err != nil {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	// An organization has few projects: they are read at once and paged here.
	all, err := a.Store.ListProjects(r.Context(), c.p.Org.ID)
	if err != nil {
		return err
	}
	views := []projectView{}
	for _, p := range all {
		if !c.p.Key.Reaches(p.ID) || (after != "" && p.ID <= after) {
			continue
		}
		views = append(views, projectView{Object: "project", ID: string(p.ID), Name: p.Name, Frozen: p.Frozen, CreatedAt: p.CreatedAt})
		if len(views) > pg.limit {
			break
		}
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v projectView) string { return v.ID }))
	return nil
}
