// Package numbers holds the rules of phone numbers: which numbers a caller sees, and assigning
// a number to an agent of its project or labelling it. Numbers themselves are added by the
// operator (parley admin numbers add).
package numbers

import (
	"context"
	"errors"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// PhoneNumber is the PhoneNumber object of the interface.
type PhoneNumber struct {
	Object    string   `json:"object" jsonschema:"enum=phone_number"`
	ID        string   `json:"id" jsonschema:"format=uuid"`
	ProjectID string   `json:"project_id" jsonschema:"format=uuid"`
	Number    string   `json:"number" doc:"E.164: + and 7 to 15 digits." jsonschema:"pattern=^\\+[1-9][0-9]{6\\,14}$"`
	Label     string   `json:"label" doc:"The customer's own label." jsonschema:"maxLength=120"`
	AgentID   *string  `json:"agent_id" doc:"The agent that answers calls to the number and calls from it; null when none." jsonschema:"format=uuid,nullable"`
	Trunk     *string  `json:"trunk" doc:"The SIP trunk the number is reached through, by name; null when none is set." jsonschema:"nullable"`
	CreatedAt app.Time `json:"created_at"`
	UpdatedAt app.Time `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (PhoneNumber) SchemaDoc() string {
	return "A phone number of a project, added by the operator, that an agent answers or calls from."
}

// PhoneNumberUpdate is the body of a number's partial update. Members left out are left as they are.
type PhoneNumberUpdate struct {
	AgentID app.Patch[string] `json:"agent_id,omitzero" doc:"The agent to assign (an agent of the number's project); null clears the assignment." jsonschema:"format=uuid,nullable"`
	Label   *string           `json:"label,omitempty" doc:"The customer's own label, at most 120 characters, without control characters." jsonschema:"maxLength=120,pattern=^[^\\p{Cc}]*$"`
}

// SchemaExtras adds what the field tags cannot say: the body names at least one member.
func (PhoneNumberUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// SchemaDoc describes the body in the document.
func (PhoneNumberUpdate) SchemaDoc() string {
	return "Members left out are left as they are; agent_id null clears the assignment."
}

// Filter narrows a list of numbers.
type Filter struct {
	ProjectID string // only this project's (404 when the actor reaches no such project)
	AgentID   string // only the numbers of this agent
}

// Service serves phone numbers.
type Service struct {
	Store *store.Store
}

// View is the interface's form of a stored number.
func View(n store.PhoneNumber) PhoneNumber {
	v := PhoneNumber{Object: "phone_number", ID: string(n.ID), ProjectID: string(n.ProjectID), Number: n.Number,
		Label: n.Label, CreatedAt: app.T(n.CreatedAt), UpdatedAt: app.T(n.UpdatedAt)}
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

// List returns a page of the actor's numbers that f selects, oldest first, with one more when
// another page follows.
func (s *Service) List(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]PhoneNumber, error) {
	sf := store.PhoneNumberFilter{AgentID: store.AgentID(f.AgentID)}
	var err error
	if sf.ProjectID, err = app.FilterProject(ctx, s.Store.Queries, act, f.ProjectID); err != nil {
		return nil, err
	}
	ns, err := s.Store.Numbers().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]PhoneNumber, len(ns))
	for i, n := range ns {
		out[i] = View(n)
	}
	return out, nil
}

// Update assigns or clears the number's agent and sets its label, recording
// phone_number.updated with the fields that changed.
func (s *Service) Update(ctx context.Context, act app.Actor, id string, u PhoneNumberUpdate) (PhoneNumber, error) {
	var change store.PhoneNumberChange
	if u.AgentID.Set {
		var agent store.AgentID // null clears
		if !u.AgentID.Null {
			var err error
			if agent, err = store.ParseID[store.AgentID](u.AgentID.Value); err != nil {
				return PhoneNumber{}, fault.E(fault.CodeAgentNotFound, "No agent %s is reachable with this key.", app.QuoteID(u.AgentID.Value))
			}
		}
		change.AgentID = &agent
	}
	change.Label = u.Label
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (PhoneNumber, error) {
		n, err := tx.Numbers().Get(ctx, act.Scope, store.PhoneNumberID(id))
		if err != nil {
			return PhoneNumber{}, app.NotFound(err, fault.CodePhoneNumberNotFound, "phone number", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, n.ProjectID); err != nil {
			return PhoneNumber{}, err
		}
		changed, err := tx.Numbers().Change(ctx, act.Scope, n.ID, change)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// The number was found above, so what is missing is the agent.
			return PhoneNumber{}, fault.E(fault.CodeAgentNotFound, "No agent %s is reachable with this key.", app.QuoteID(u.AgentID.Value))
		case errors.Is(err, store.ErrOtherProject):
			return PhoneNumber{}, fault.E(fault.CodeAgentOtherProject, "The agent is in another project than the number; assign numbers to agents of their own project.")
		case err != nil:
			return PhoneNumber{}, err
		}
		data := map[string]any{"number": n.Number}
		if change.AgentID != nil {
			data["agent_id"] = app.Changed(app.Nullable(n.AgentID), app.Nullable(changed.AgentID))
		}
		if change.Label != nil {
			data["label"] = app.Changed(n.Label, changed.Label)
		}
		if err := au.Record("phone_number.updated", "phone_number", string(n.ID), n.ProjectID, data); err != nil {
			return PhoneNumber{}, err
		}
		return View(changed), nil
	})
}
