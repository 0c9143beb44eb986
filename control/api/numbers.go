package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

// phoneNumberView is the PhoneNumber object.
type phoneNumberView struct {
	Object    string    `json:"object"`
	ID        string    `json:"id"`
	ProjectID string    `json:"project_id"`
	Number    string    `json:"number"`
	Label     string    `json:"label"`
	AgentID   *string   `json:"agent_id"`
	Trunk     *string   `json:"trunk"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func viewPhoneNumber(n store.PhoneNumber) phoneNumberView {
	v := phoneNumberView{Object: "phone_number", ID: string(n.ID), ProjectID: string(n.ProjectID), Number: n.Number,
		Label: n.Label, CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt}
	if n.AgentID != "" {
		s := string(n.AgentID)
		v.AgentID = &s
	}
	if n.Trunk != "" {
		s := n.Trunk
		v.Trunk = &s
	}
	return v
}

func (a *API) listPhoneNumbers(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	f := store.PhoneNumberFilter{OrgID: c.p.Org.ID, ProjectIDs: reach(c.p), Limit: pg.limit + 1}
	if raw, ok := c.query["project_id"]; ok {
		pr, err := reachableProject(r, a.Store.Queries, raw)
		if err != nil {
			return err
		}
		f.ProjectID = pr.ID
	}
	if raw, ok := c.query["agent_id"]; ok {
		f.AgentID, _ = store.ParseID[store.AgentID](raw) // checked as a UUID by checkQuery
	}
	if pg.after != "" {
		if f.AfterID, err = store.ParseID[store.PhoneNumberID](pg.after); err != nil {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	nums, err := a.Store.ListPhoneNumbers(ctx, f)
	if err != nil {
		return err
	}
	views := make([]phoneNumberView, len(nums))
	for i, n := range nums {
		views[i] = viewPhoneNumber(n)
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v phoneNumberView) string { return v.ID }))
	return nil
}

func (a *API) updatePhoneNumber(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	obj, _ := c.value.(map[string]any)
	var change store.PhoneNumberChange
	if v, ok := obj["agent_id"]; ok {
		id := store.AgentID("")
		if s, ok := v.(string); ok {
			var err error
			if id, err = store.ParseID[store.AgentID](s); err != nil {
				return errAgentNotFound(s)
			}
		}
		change.AgentID = &id
	}
	if v, ok := obj["label"].(string); ok {
		change.Label = &v
	}
	raw := pathParam(r, "phone_number_id")
	notFound := fault.E(fault.CodePhoneNumberNotFound, "No phone number %s is reachable with this key.", quoteID(raw))
	return a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		id, err := store.ParseID[store.PhoneNumberID](raw)
		if err != nil {
			return 0, nil, notFound
		}
		n, err := tx.GetPhoneNumber(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && (n.OrgID != c.p.Org.ID || !c.p.Key.Reaches(n.ProjectID)) {
			return 0, nil, notFound
		}
		if err != nil {
			return 0, nil, err
		}
		if err := writableProject(r, tx.Queries, n.ProjectID); err != nil {
			return 0, nil, err
		}
		if change.AgentID != nil && *change.AgentID != "" {
			ag, err := tx.GetAgent(ctx, *change.AgentID)
			if errors.Is(err, store.ErrNotFound) || err == nil && (ag.OrgID != c.p.Org.ID || !c.p.Key.Reaches(ag.ProjectID)) {
				return 0, nil, errAgentNotFound(string(*change.AgentID))
			}
			if err != nil {
				return 0, nil, err
			}
		}
		changed, err := tx.ChangePhoneNumber(ctx, id, change)
		if errors.Is(err, store.ErrOtherProject) {
			return 0, nil, fault.E(fault.CodeAgentOtherProject, "The agent is in another project than the number; assign numbers to agents of their own project.")
		}
		if err != nil {
			return 0, nil, err
		}
		data := map[string]any{"number": n.Number}
		if change.AgentID != nil {
			data["agent_id"] = map[string]any{"from": nullable(string(n.AgentID)), "to": nullable(string(changed.AgentID))}
		}
		if change.Label != nil {
			data["label"] = map[string]any{"from": n.Label, "to": changed.Label}
		}
		if err := au.record("phone_number.updated", "phone_number", string(id), n.ProjectID, data); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, viewPhoneNumber(changed), nil
	})
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
