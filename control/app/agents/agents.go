// Package agents holds the rules of agents: creating one from a definition with a name unique
// in its project, replacing its definition (never its kind or direction), publishing frozen
// versions, deleting it (restorable for PurgeAfter, its phone numbers released) and the purge
// of deleted agents when that time has come.
//
// Definitions are read and checked by package agentdef; this package never imports net/http.
package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/numbers"
	"github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// PurgeAfter is how long a deleted agent can be restored before it is purged for good.
const PurgeAfter = 30 * 24 * time.Hour

// purgeBatch is how many agents one purge transaction removes.
const purgeBatch = 100

// Service serves agents.
type Service struct {
	Store *store.Store
	// Now is the clock of purges_at and exported_at (nil: time.Now).
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Filter narrows a list of agents.
type Filter struct {
	ProjectID string // only this project's (404 when the actor reaches no such project)
	Status    string
	Direction string
	Kind      string
}

// List returns a page of the actor's agents that f selects, oldest first, with one more when
// another page follows. Deleted agents are never listed.
func (s *Service) List(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]Agent, error) {
	sf := store.AgentFilter{Status: store.AgentStatus(f.Status), Direction: f.Direction, Kind: f.Kind}
	if f.ProjectID != "" {
		p, err := project(ctx, s.Store.Queries, act, f.ProjectID)
		if err != nil {
			return nil, err
		}
		sf.ProjectID = p.ID
	}
	if pg.After != "" {
		after, err := store.ParseID[store.AgentID](pg.After)
		if err != nil {
			return nil, errCursor()
		}
		pg.After = string(after)
	}
	as, err := s.Store.Agents().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Agent, len(as))
	for i, a := range as {
		out[i] = view(a)
	}
	return out, nil
}

// Get returns the actor's agent with id, with its languages, schemas and phone numbers.
func (s *Service) Get(ctx context.Context, act app.Actor, id string) (AgentDetail, error) {
	a, err := agent(ctx, s.Store.Queries, act, id)
	if err != nil {
		return AgentDetail{}, err
	}
	return detail(ctx, s.Store.Queries, a, nil)
}

// Create makes a draft agent from a definition, recording agent.created. Without a name the
// definition's is used, made unique in the project (Support, Support (2), …); a name given is
// taken as it is (409 agent_name_taken when the project has it).
func (s *Service) Create(ctx context.Context, act app.Actor, in AgentCreate) (AgentDetail, error) {
	def, err := parseDefinition(in.Definition)
	if err != nil {
		return AgentDetail{}, err
	}
	p, err := project(ctx, s.Store.Queries, act, in.ProjectID)
	if err != nil {
		return AgentDetail{}, err
	}
	if p.Frozen {
		return AgentDetail{}, fault.E(fault.CodeProjectFrozen, "The project %s is frozen: no agent can be made in it.", p.Name)
	}
	if err := checkToolRefs(ctx, s.Store.Queries, p.OrgID, p.ID, def); err != nil {
		return AgentDetail{}, err
	}
	unique := in.Name == nil
	if !unique {
		def.Agent.Name = string(*in.Name)
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return AgentDetail{}, err
	}
	// With a name made unique, a racing creator may take the same name first: try again.
	for attempt := 1; ; attempt++ {
		d, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (AgentDetail, error) {
			a, err := tx.Agents().Create(ctx, act.Scope, store.NewAgent{
				ProjectID: p.ID, Name: def.Agent.Name, UniqueName: unique, Description: def.Agent.Description,
				Kind: string(def.Agent.Kind), Direction: string(def.Agent.Direction), Channels: channelsOf(def), Definition: raw,
			})
			if err != nil {
				return AgentDetail{}, err
			}
			if a.Name != def.Agent.Name { // the stored definition carries the name it got
				named := def.Clone()
				named.Agent.Name = a.Name
				b, err := json.Marshal(named)
				if err != nil {
					return AgentDetail{}, err
				}
				if a, err = tx.Agents().Change(ctx, act.Scope, a.ID, store.AgentChange{Description: a.Description, Channels: a.Channels, Definition: b}); err != nil {
					return AgentDetail{}, err
				}
			}
			if err := au.Record("agent.created", "agent", string(a.ID), a.ProjectID, map[string]any{
				"name": a.Name, "kind": a.Kind, "direction": a.Direction}); err != nil {
				return AgentDetail{}, err
			}
			return detail(ctx, tx.Queries, a, []store.PhoneNumber{})
		})
		if errors.Is(err, store.ErrConflict) && unique && attempt < 3 {
			continue
		}
		if errors.Is(err, store.ErrConflict) {
			return AgentDetail{}, errNameTaken(def.Agent.Name)
		}
		return d, err
	}
}

// Delete archives the actor's agent, releases its phone numbers and sets it to be purged after
// PurgeAfter, recording agent.deleted.
func (s *Service) Delete(ctx context.Context, act app.Actor, id string) (AgentDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (AgentDeleted, error) {
		a, err := writableAgent(ctx, tx.Queries, act, id)
		if err != nil {
			return AgentDeleted{}, err
		}
		del, released, err := tx.Agents().Delete(ctx, act.Scope, a.ID, s.now().Add(PurgeAfter))
		if err != nil {
			return AgentDeleted{}, err
		}
		nums := make([]string, len(released))
		for i, n := range released {
			nums[i] = string(n.ID)
		}
		// Its scheduled calls would fail when due: they are cancelled now, saying why.
		cancelled, err := tx.ScheduledCalls().CancelForAgent(ctx, act.Org.ID, a.ID, fault.CodeAgentNotFound,
			"The agent was deleted before the call was due.", s.now())
		if err != nil {
			return AgentDeleted{}, err
		}
		calls := make([]string, len(cancelled))
		for i, c := range cancelled {
			calls[i] = string(c.ID)
		}
		if err := au.Record("agent.deleted", "agent", string(a.ID), a.ProjectID, map[string]any{
			"name": a.Name, "purges_at": del.PurgesAt, "released_phone_number_ids": nums, "cancelled_scheduled_call_ids": calls}); err != nil {
			return AgentDeleted{}, err
		}
		return AgentDeleted{Object: "agent", Deleted: true, ID: string(del.ID), PurgesAt: app.T(*del.PurgesAt)}, nil
	})
}

// Definition exports the current definition of the actor's agent.
func (s *Service) Definition(ctx context.Context, act app.Actor, id string) (Definition, error) {
	a, err := agent(ctx, s.Store.Queries, act, id)
	if err != nil {
		return Definition{}, err
	}
	def, err := storedDefinition(a.Definition)
	if err != nil {
		return Definition{}, err
	}
	def.Agent.Name = a.Name
	return Definition{def.Export(s.now())}, nil
}

// ReplaceDefinition replaces the definition of the actor's agent, whose kind and direction it
// must keep, and renames it when in.Name is set, recording agent.definition_replaced.
func (s *Service) ReplaceDefinition(ctx context.Context, act app.Actor, id string, in AgentDefinitionReplace) (AgentWritten, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (AgentWritten, error) {
		a, err := writableAgent(ctx, tx.Queries, act, id)
		if err != nil {
			return AgentWritten{}, err
		}
		def, err := parseDefinition(in.Definition)
		if err != nil {
			return AgentWritten{}, err
		}
		if string(def.Agent.Kind) != a.Kind {
			return AgentWritten{}, mismatch(fault.CodeKindMismatch, "/definition/agent/kind", "kind_mismatch",
				fmt.Sprintf("The definition is for a %s agent; this agent is %s. Its kind cannot change: create another agent instead.", def.Agent.Kind, a.Kind))
		}
		if string(def.Agent.Direction) != a.Direction {
			return AgentWritten{}, mismatch(fault.CodeDirectionMismatch, "/definition/agent/direction", "direction_mismatch",
				fmt.Sprintf("The definition is for an %s agent; this agent is %s. Its direction cannot change: create another agent instead.", def.Agent.Direction, a.Direction))
		}
		if err := checkToolRefs(ctx, tx.Queries, a.OrgID, a.ProjectID, def); err != nil {
			return AgentWritten{}, err
		}
		def.Agent.Name = a.Name
		if in.Name != nil {
			def.Agent.Name = string(*in.Name)
		}
		raw, err := json.Marshal(def)
		if err != nil {
			return AgentWritten{}, err
		}
		changed, err := tx.Agents().Change(ctx, act.Scope, a.ID, store.AgentChange{Name: &def.Agent.Name, Description: def.Agent.Description,
			Channels: channelsOf(def), Definition: raw})
		if errors.Is(err, store.ErrConflict) {
			return AgentWritten{}, errNameTaken(def.Agent.Name)
		}
		if err != nil {
			return AgentWritten{}, err
		}
		data := map[string]any{"name": changed.Name, "status": changed.Status}
		if changed.Name != a.Name {
			data["previous_name"] = a.Name
		}
		if err := au.Record("agent.definition_replaced", "agent", string(a.ID), a.ProjectID, data); err != nil {
			return AgentWritten{}, err
		}
		d, err := detailOf(ctx, tx.Queries, changed, def, nil)
		return AgentWritten{d}, err
	})
}

// Publish freezes the current definition of the actor's agent as its next version, recording
// agent.published.
func (s *Service) Publish(ctx context.Context, act app.Actor, id string, in AgentPublishRequest) (AgentVersionObject, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (AgentVersionObject, error) {
		a, err := writableAgent(ctx, tx.Queries, act, id)
		if err != nil {
			return AgentVersionObject{}, err
		}
		v, _, err := tx.Agents().Publish(ctx, act.Scope, a.ID, in.Note, act.ID)
		if err != nil {
			return AgentVersionObject{}, err
		}
		if err := au.Record("agent.published", "agent", string(a.ID), a.ProjectID, map[string]any{"version": v.Version, "note": v.Note}); err != nil {
			return AgentVersionObject{}, err
		}
		return viewVersion(v)
	})
}

// Versions returns a page of the published versions of the actor's agent, newest first, with
// one more when another page follows; pg.After is the version the previous page ended with.
func (s *Service) Versions(ctx context.Context, act app.Actor, id string, pg store.Page) ([]AgentVersionObject, error) {
	a, err := agent(ctx, s.Store.Queries, act, id)
	if err != nil {
		return nil, err
	}
	if pg.After != "" {
		if n, err := strconv.Atoi(pg.After); err != nil || n < 1 {
			return nil, errCursor()
		}
	}
	vs, err := s.Store.Agents().Versions(ctx, act.Scope, a.ID, pg)
	if err != nil {
		return nil, err
	}
	out := make([]AgentVersionObject, len(vs))
	for i, v := range vs {
		if out[i], err = viewVersion(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// VersionDefinition exports the definition frozen as version (as the path gives it: 1, 2, …)
// of the actor's agent.
func (s *Service) VersionDefinition(ctx context.Context, act app.Actor, id, version string) (Definition, error) {
	a, err := agent(ctx, s.Store.Queries, act, id)
	if err != nil {
		return Definition{}, err
	}
	notFound := fault.E(fault.CodeVersionNotFound, "Agent %s has no published version %s.", a.ID, app.QuoteID(version))
	n, err := strconv.Atoi(version)
	if err != nil || n < 1 || strconv.Itoa(n) != version {
		return Definition{}, notFound
	}
	v, err := s.Store.Agents().Version(ctx, act.Scope, a.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return Definition{}, notFound
	}
	if err != nil {
		return Definition{}, err
	}
	def, err := storedDefinition(v.Definition)
	if err != nil {
		return Definition{}, err
	}
	return Definition{def.Export(s.now())}, nil
}

// Purge removes for good the deleted agents of every organization whose purge time has come by
// now, recording agent.purged (by the system actor "purge") in the same transaction as each
// batch, and returns how many it purged. The worker role calls it periodically; any number of
// workers may run it at once.
func (s *Service) Purge(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		gone, err := app.Change(ctx, s.Store, app.Actor{Type: store.ActorSystem, ID: "purge"}, func(tx *store.Tx, au *app.Audit) ([]store.Agent, error) {
			gone, err := tx.SystemAgents().PurgeDue(ctx, now, purgeBatch)
			if err != nil {
				return nil, err
			}
			for _, a := range gone {
				by := au.As(app.Actor{Org: store.Org{ID: a.OrgID}, Type: store.ActorSystem, ID: "purge"})
				if err := by.Record("agent.purged", "agent", string(a.ID), a.ProjectID, map[string]any{"name": a.Name, "deleted_at": a.DeletedAt}); err != nil {
					return nil, err
				}
			}
			return gone, nil
		})
		if err != nil {
			return total, err
		}
		total += len(gone)
		if len(gone) < purgeBatch {
			return total, nil
		}
	}
}

// Restore brings back a deleted agent of any organization before it is purged, as the operator
// who (at the admin CLI) asks, renaming it when name is set; it records agent.restored. An agent
// that is not deleted, or was purged, is store.ErrNotFound; a name taken meanwhile
// store.ErrConflict.
func (s *Service) Restore(ctx context.Context, who string, id store.AgentID, name string) (store.Agent, error) {
	return app.Change(ctx, s.Store, app.Actor{Type: store.ActorOperator, ID: who}, func(tx *store.Tx, au *app.Audit) (store.Agent, error) {
		a, err := tx.SystemAgents().Restore(ctx, id, name)
		if err != nil {
			return store.Agent{}, err
		}
		by := au.As(app.OperatorActor(store.Org{ID: a.OrgID}, who))
		return a, by.Record("agent.restored", "agent", string(a.ID), a.ProjectID, map[string]any{"name": a.Name, "status": a.Status})
	})
}

// agent loads the actor's agent with the id a client sent (404 agent_not_found outside the
// actor's scope, deleted or unknown).
func agent(ctx context.Context, q *store.Queries, act app.Actor, raw string) (store.Agent, error) {
	id, _ := store.ParseID[store.AgentID](raw) // "" when not a UUID: not found
	a, err := q.Agents().Get(ctx, act.Scope, id)
	return a, app.NotFound(err, fault.CodeAgentNotFound, "agent", raw)
}

// writableAgent loads the actor's agent and refuses changes when its project is frozen.
func writableAgent(ctx context.Context, q *store.Queries, act app.Actor, raw string) (store.Agent, error) {
	a, err := agent(ctx, q, act, raw)
	if err != nil {
		return store.Agent{}, err
	}
	return a, app.WritableProject(ctx, q, act, a.ProjectID)
}

// project loads the actor's project with the id a client sent (404 project_not_found).
func project(ctx context.Context, q *store.Queries, act app.Actor, raw string) (store.Project, error) {
	id, _ := store.ParseID[store.ProjectID](raw)
	p, err := q.Projects().Get(ctx, act.Scope, id)
	return p, app.NotFound(err, fault.CodeProjectNotFound, "project", raw)
}

// checkToolRefs refuses a definition whose references.tools name something that is neither a
// tool, an MCP server nor an allowed MCP tool of the agent's project (issue 17): 422
// unknown_tool_reference pointing at each name.
func checkToolRefs(ctx context.Context, q *store.Queries, org store.OrgID, p store.ProjectID, def *agentdef.Definition) error {
	res, err := tools.Resolve(ctx, q, org, p, def.References.Tools)
	if err != nil {
		return err
	}
	if len(res.Unknown) == 0 {
		return nil
	}
	fes := make([]fault.FieldError, len(res.Unknown))
	for i, n := range res.Unknown {
		fes[i] = fault.FieldError{Pointer: fmt.Sprintf("/definition/references/tools/%d", n), Code: "unknown_reference",
			Detail: fmt.Sprintf("No tool, MCP server or MCP tool of the project is named %q.", def.References.Tools[n])}
	}
	return fault.Invalid(fault.CodeUnknownToolReference, fes)
}

// parseDefinition reads and checks the definition member of a body: every problem is a 422
// invalid_definition naming its place under /definition.
func parseDefinition(raw DefinitionInput) (*agentdef.Definition, error) {
	def, err := agentdef.Parse(raw)
	var ve *agentdef.ValidationError
	if errors.As(err, &ve) {
		fes := make([]fault.FieldError, len(ve.Problems))
		for i, p := range ve.Problems {
			fes[i] = fault.FieldError{Pointer: "/definition" + p.Pointer, Code: p.Code, Detail: p.Detail}
		}
		return nil, fault.Invalid(fault.CodeInvalidDefinition, fes)
	}
	return def, err
}

// storedDefinition reads the definition an agent or version keeps, over the defaults.
func storedDefinition(raw json.RawMessage) (*agentdef.Definition, error) {
	d := agentdef.Defaults()
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("stored definition: %w", err)
	}
	return &d, nil
}

func channelsOf(d *agentdef.Definition) []string {
	out := make([]string, len(d.Agent.Channels))
	for i, c := range d.Agent.Channels {
		out[i] = string(c)
	}
	return out
}

func mismatch(code, pointer, fieldCode, detail string) error {
	e := fault.E(code, "%s", detail)
	e.Errors = []fault.FieldError{{Pointer: pointer, Code: fieldCode, Detail: detail}}
	return e
}

func errNameTaken(name string) error {
	return fault.E(fault.CodeAgentNameTaken, "The project already has an agent named %q; choose another name.", name)
}

func errCursor() error {
	return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
}

// view is the interface's form of a stored agent.
func view(a store.Agent) Agent {
	ch := a.Channels
	if ch == nil {
		ch = []string{}
	}
	return Agent{Object: "agent", ID: string(a.ID), ProjectID: string(a.ProjectID), Name: a.Name, Description: a.Description,
		Kind: a.Kind, Direction: a.Direction, Status: string(a.Status), Channels: ch, PublishedAt: app.TP(a.PublishedAt),
		CreatedAt: app.T(a.CreatedAt), UpdatedAt: app.T(a.UpdatedAt)}
}

// detail is the AgentDetail of a stored agent; nums are its phone numbers, read when nil.
func detail(ctx context.Context, q *store.Queries, a store.Agent, nums []store.PhoneNumber) (AgentDetail, error) {
	def, err := storedDefinition(a.Definition)
	if err != nil {
		return AgentDetail{}, err
	}
	return detailOf(ctx, q, a, def, nums)
}

// detailOf is the AgentDetail of a stored agent with its definition def.
func detailOf(ctx context.Context, q *store.Queries, a store.Agent, def *agentdef.Definition, nums []store.PhoneNumber) (AgentDetail, error) {
	if nums == nil {
		var err error
		if nums, err = q.AgentPhoneNumbers(ctx, a.ID); err != nil {
			return AgentDetail{}, err
		}
	}
	langs := Languages{Object: "languages", Default: def.Agent.Language, Available: []string{def.Agent.Language}}
	for _, l := range def.Agent.Languages {
		langs.Available = append(langs.Available, l.Code)
	}
	nv := make([]numbers.PhoneNumber, 0, len(nums))
	for _, n := range nums {
		nv = append(nv, numbers.View(n))
	}
	return AgentDetail{
		Agent: view(a), Languages: langs,
		VariablesSchema: def.VariablesSchema(), CollectedSchema: def.CollectedSchema(),
		AnalysisEnabled: def.Agent.Analysis.Enabled, AnalysisSchema: def.AnalysisSchema(), PhoneNumbers: nv,
	}, nil
}

func viewVersion(v store.AgentVersion) (AgentVersionObject, error) {
	def, err := storedDefinition(v.Definition)
	if err != nil {
		return AgentVersionObject{}, err
	}
	return AgentVersionObject{Object: "agent_version", AgentID: string(v.AgentID), Note: v.Note, PublishedAt: app.T(v.PublishedAt),
		VariablesSchema: def.VariablesSchema(), Version: v.Version}, nil
}
