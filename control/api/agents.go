package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/parley-voice/parley/control/app/numbers"
	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// PurgeAfter is how long a deleted agent can be restored before it is purged for good.
const PurgeAfter = 30 * 24 * time.Hour

// agentView is the Agent object.
type agentView struct {
	Object      string     `json:"object"`
	ID          string     `json:"id"`
	ProjectID   string     `json:"project_id"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Kind        string     `json:"kind"`
	Direction   string     `json:"direction"`
	Status      string     `json:"status"`
	Channels    []string   `json:"channels"`
	PublishedAt *time.Time `json:"published_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

func viewAgent(a store.Agent) agentView {
	ch := a.Channels
	if ch == nil {
		ch = []string{}
	}
	return agentView{Object: "agent", ID: string(a.ID), ProjectID: string(a.ProjectID), Name: a.Name, Description: a.Description,
		Kind: a.Kind, Direction: a.Direction, Status: string(a.Status), Channels: ch, PublishedAt: a.PublishedAt,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// agentDetailView is the AgentDetail object (and AgentWritten).
type agentDetailView struct {
	agentView
	Languages       languagesView         `json:"languages"`
	VariablesSchema map[string]any        `json:"variables_schema"`
	CollectedSchema map[string]any        `json:"collected_schema"`
	AnalysisEnabled bool                  `json:"analysis_enabled"`
	AnalysisSchema  map[string]any        `json:"analysis_schema"`
	PhoneNumbers    []numbers.PhoneNumber `json:"phone_numbers"`
}

type languagesView struct {
	Object    string   `json:"object"`
	Default   string   `json:"default"`
	Available []string `json:"available"`
}

func viewAgentDetail(a store.Agent, def *agentdef.Definition, nums []store.PhoneNumber) agentDetailView {
	langs := languagesView{Object: "languages", Default: def.Agent.Language, Available: []string{def.Agent.Language}}
	for _, l := range def.Agent.Languages {
		langs.Available = append(langs.Available, l.Code)
	}
	nv := make([]numbers.PhoneNumber, 0, len(nums))
	for _, n := range nums {
		nv = append(nv, numbers.View(n))
	}
	return agentDetailView{
		agentView: viewAgent(a), Languages: langs,
		VariablesSchema: def.VariablesSchema(), CollectedSchema: def.CollectedSchema(),
		AnalysisEnabled: def.Agent.Analysis.Enabled, AnalysisSchema: def.AnalysisSchema(), PhoneNumbers: nv,
	}
}

// storedDefinition reads the definition an agent or version keeps.
func storedDefinition(raw json.RawMessage) (*agentdef.Definition, error) {
	d := agentdef.Defaults()
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("stored definition: %w", err)
	}
	return &d, nil
}

// definitionJSON renders a definition for the store.
func definitionJSON(d *agentdef.Definition) (json.RawMessage, error) {
	return json.Marshal(d)
}

func channelsOf(d *agentdef.Definition) []string {
	out := make([]string, len(d.Agent.Channels))
	for i, c := range d.Agent.Channels {
		out[i] = string(c)
	}
	return out
}

// errAgentNotFound is the 404 of an agent the key does not reach, the same whether the agent
// is missing, deleted or in a project outside the key's reach.
func errAgentNotFound(id string) error {
	return fault.E(fault.CodeAgentNotFound, "No agent %s is reachable with this key.", quoteID(id))
}

func quoteID(id string) string {
	if len(id) > 64 {
		id = id[:64] + "…"
	}
	return strconv.Quote(id)
}

// reachableAgent returns the agent at the path parameter agent_id if the key reaches it.
func reachableAgent(r *http.Request, q *store.Queries) (store.Agent, error) {
	raw := pathParam(r, "agent_id")
	p := PrincipalFrom(r.Context())
	id, err := store.ParseID[store.AgentID](raw)
	if err != nil {
		return store.Agent{}, errAgentNotFound(raw)
	}
	a, err := q.GetAgent(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (a.OrgID != p.Org.ID || !p.Key.Reaches(a.ProjectID)) {
		return store.Agent{}, errAgentNotFound(raw)
	}
	return a, err
}

// reachableProject returns the project id if the key reaches it (404 otherwise).
func reachableProject(r *http.Request, q *store.Queries, raw string) (store.Project, error) {
	p := PrincipalFrom(r.Context())
	id, err := store.ParseID[store.ProjectID](raw)
	notFound := fault.E(fault.CodeProjectNotFound, "No project %s is reachable with this key.", quoteID(raw))
	if err != nil {
		return store.Project{}, notFound
	}
	pr, err := q.GetProject(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (pr.OrgID != p.Org.ID || !p.Key.Reaches(pr.ID)) {
		return store.Project{}, notFound
	}
	return pr, err
}

// writableProject refuses changes in a frozen project.
func writableProject(r *http.Request, q *store.Queries, id store.ProjectID) error {
	pr, err := q.GetProject(r.Context(), id)
	if err != nil {
		return err
	}
	if pr.Frozen {
		return fault.E(fault.CodeProjectFrozen, "The project %s is frozen: its objects cannot be changed.", pr.Name)
	}
	return nil
}

// reach is the project filter of a key for lists: nil reaches every project.
func reach(p *Principal) []store.ProjectID {
	if p.Key.AllProjects {
		return nil
	}
	out := make([]store.ProjectID, len(p.Key.ProjectIDs))
	copy(out, p.Key.ProjectIDs)
	return out
}

// parseDefinition checks the definition member of a request body.
func parseDefinition(c *call) (*agentdef.Definition, error) {
	obj, _ := c.value.(map[string]any)
	def, err := agentdef.ParseValue(obj["definition"])
	var ve *agentdef.ValidationError
	if errors.As(err, &ve) {
		ps := make([]jsoncheck.Problem, len(ve.Problems))
		for i, p := range ve.Problems {
			ps[i] = jsoncheck.Problem{Pointer: "/definition" + p.Pointer, Code: p.Code, Detail: p.Detail}
		}
		return nil, invalid(fault.CodeInvalidDefinition, ps)
	}
	return def, err
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	f := store.AgentFilter{OrgID: c.p.Org.ID, ProjectIDs: reach(c.p), Status: store.AgentStatus(c.query["status"]),
		Direction: c.query["direction"], Kind: c.query["kind"], Limit: pg.limit + 1}
	if raw, ok := c.query["project_id"]; ok {
		pr, err := reachableProject(r, a.Store.Queries, raw)
		if err != nil {
			return err
		}
		f.ProjectID = pr.ID
	}
	if pg.after != "" {
		if f.AfterID, err = store.ParseID[store.AgentID](pg.after); err != nil {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	agents, err := a.Store.ListAgents(ctx, f)
	if err != nil {
		return err
	}
	views := make([]agentView, len(agents))
	for i, ag := range agents {
		views[i] = viewAgent(ag)
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v agentView) string { return v.ID }))
	return nil
}

func (a *API) createAgent(w http.ResponseWriter, r *http.Request) error {
	c := callFrom(r.Context())
	var body struct {
		ProjectID string  `json:"project_id"`
		Name      *string `json:"name"`
	}
	if err := c.bind(&body); err != nil {
		return err
	}
	def, err := parseDefinition(c)
	if err != nil {
		return err
	}
	pr, err := reachableProject(r, a.Store.Queries, body.ProjectID)
	if err != nil {
		return err
	}
	if pr.Frozen {
		return fault.E(fault.CodeProjectFrozen, "The project %s is frozen: no agent can be made in it.", pr.Name)
	}
	unique := body.Name == nil
	if !unique {
		def.Agent.Name = *body.Name
	}
	// With a name made unique, a racing creator may take the same name first: try again.
	for attempt := 1; ; attempt++ {
		err = a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
			raw, err := definitionJSON(def)
			if err != nil {
				return 0, nil, err
			}
			ag, err := tx.CreateAgent(r.Context(), store.NewAgent{
				OrgID: c.p.Org.ID, ProjectID: pr.ID, Name: def.Agent.Name, UniqueName: unique,
				Description: def.Agent.Description, Kind: string(def.Agent.Kind), Direction: string(def.Agent.Direction),
				Channels: channelsOf(def), Definition: raw,
			})
			if err != nil {
				return 0, nil, err
			}
			if ag.Name != def.Agent.Name { // the stored definition carries the name it got
				d := def.Clone()
				d.Agent.Name = ag.Name
				if raw, err = definitionJSON(d); err != nil {
					return 0, nil, err
				}
				if ag, err = tx.ChangeAgent(r.Context(), ag.ID, store.AgentChange{Description: ag.Description, Channels: ag.Channels, Definition: raw}); err != nil {
					return 0, nil, err
				}
			}
			if err := au.record("agent.created", "agent", string(ag.ID), ag.ProjectID, map[string]any{
				"name": ag.Name, "kind": ag.Kind, "direction": ag.Direction}); err != nil {
				return 0, nil, err
			}
			au.location = "/v1/agents/" + string(ag.ID)
			d, err := storedDefinition(ag.Definition)
			if err != nil {
				return 0, nil, err
			}
			return http.StatusCreated, viewAgentDetail(ag, d, nil), nil
		})
		if !errors.Is(err, store.ErrConflict) || !unique || attempt == 3 {
			break
		}
	}
	if errors.Is(err, store.ErrConflict) {
		return fault.E(fault.CodeAgentNameTaken, "The project already has an agent named %q; choose another name.", def.Agent.Name)
	}
	return err
}

func (a *API) getAgent(w http.ResponseWriter, r *http.Request) error {
	ag, err := reachableAgent(r, a.Store.Queries)
	if err != nil {
		return err
	}
	def, err := storedDefinition(ag.Definition)
	if err != nil {
		return err
	}
	nums, err := a.Store.AgentPhoneNumbers(r.Context(), ag.ID)
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, viewAgentDetail(ag, def, nums))
	return nil
}

// agentDeleted is the AgentDeleted object.
type agentDeleted struct {
	Object   string    `json:"object"`
	Deleted  bool      `json:"deleted"`
	ID       string    `json:"id"`
	PurgesAt time.Time `json:"purges_at"`
}

func (a *API) deleteAgent(w http.ResponseWriter, r *http.Request) error {
	return a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		ag, err := reachableAgent(r, tx.Queries)
		if err != nil {
			return 0, nil, err
		}
		if err := writableProject(r, tx.Queries, ag.ProjectID); err != nil {
			return 0, nil, err
		}
		del, released, err := tx.DeleteAgent(r.Context(), ag.ID, a.now().Add(PurgeAfter))
		if err != nil {
			return 0, nil, err
		}
		nums := make([]string, len(released))
		for i, n := range released {
			nums[i] = string(n.ID)
		}
		if err := au.record("agent.deleted", "agent", string(ag.ID), ag.ProjectID, map[string]any{
			"name": ag.Name, "purges_at": del.PurgesAt, "released_phone_number_ids": nums}); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, agentDeleted{Object: "agent", Deleted: true, ID: string(del.ID), PurgesAt: *del.PurgesAt}, nil
	})
}

func (a *API) getAgentDefinition(w http.ResponseWriter, r *http.Request) error {
	ag, err := reachableAgent(r, a.Store.Queries)
	if err != nil {
		return err
	}
	def, err := storedDefinition(ag.Definition)
	if err != nil {
		return err
	}
	def.Agent.Name = ag.Name
	respond(w, http.StatusOK, def.Export(a.now()))
	return nil
}

func (a *API) replaceAgentDefinition(w http.ResponseWriter, r *http.Request) error {
	c := callFrom(r.Context())
	var body struct {
		Name *string `json:"name"`
	}
	if err := c.bind(&body); err != nil {
		return err
	}
	err := a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		ag, err := reachableAgent(r, tx.Queries)
		if err != nil {
			return 0, nil, err
		}
		if err := writableProject(r, tx.Queries, ag.ProjectID); err != nil {
			return 0, nil, err
		}
		def, err := parseDefinition(c)
		if err != nil {
			return 0, nil, err
		}
		if string(def.Agent.Kind) != ag.Kind {
			return 0, nil, mismatch(fault.CodeKindMismatch, "/definition/agent/kind", "kind_mismatch",
				fmt.Sprintf("The definition is for a %s agent; this agent is %s. Its kind cannot change: create another agent instead.", def.Agent.Kind, ag.Kind))
		}
		if string(def.Agent.Direction) != ag.Direction {
			return 0, nil, mismatch(fault.CodeDirectionMismatch, "/definition/agent/direction", "direction_mismatch",
				fmt.Sprintf("The definition is for an %s agent; this agent is %s. Its direction cannot change: create another agent instead.", def.Agent.Direction, ag.Direction))
		}
		def.Agent.Name = ag.Name
		if body.Name != nil {
			def.Agent.Name = *body.Name
		}
		raw, err := definitionJSON(def)
		if err != nil {
			return 0, nil, err
		}
		changed, err := tx.ChangeAgent(r.Context(), ag.ID, store.AgentChange{Name: &def.Agent.Name, Description: def.Agent.Description,
			Channels: channelsOf(def), Definition: raw})
		if errors.Is(err, store.ErrConflict) {
			return 0, nil, fault.E(fault.CodeAgentNameTaken, "The project already has an agent named %q; choose another name.", def.Agent.Name)
		}
		if err != nil {
			return 0, nil, err
		}
		data := map[string]any{"name": changed.Name, "status": changed.Status}
		if changed.Name != ag.Name {
			data["previous_name"] = ag.Name
		}
		if err := au.record("agent.definition_replaced", "agent", string(ag.ID), ag.ProjectID, data); err != nil {
			return 0, nil, err
		}
		nums, err := tx.AgentPhoneNumbers(r.Context(), ag.ID)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, viewAgentDetail(changed, def, nums), nil
	})
	return err
}

func mismatch(code, pointer, fieldCode, detail string) error {
	e := fault.E(code, "%s", detail)
	e.Errors = []fault.FieldError{{Pointer: pointer, Code: fieldCode, Detail: detail}}
	return e
}

// versionView is the AgentVersionObject.
type versionView struct {
	Object          string         `json:"object"`
	AgentID         string         `json:"agent_id"`
	Note            string         `json:"note"`
	PublishedAt     time.Time      `json:"published_at"`
	VariablesSchema map[string]any `json:"variables_schema"`
	Version         int            `json:"version"`
}

func viewVersion(v store.AgentVersion) (versionView, error) {
	def, err := storedDefinition(v.Definition)
	if err != nil {
		return versionView{}, err
	}
	return versionView{Object: "agent_version", AgentID: string(v.AgentID), Note: v.Note, PublishedAt: v.PublishedAt,
		VariablesSchema: def.VariablesSchema(), Version: v.Version}, nil
}

func (a *API) publishAgent(w http.ResponseWriter, r *http.Request) error {
	c := callFrom(r.Context())
	var body struct {
		Note string `json:"note"`
	}
	if err := c.bind(&body); err != nil {
		return err
	}
	return a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		ag, err := reachableAgent(r, tx.Queries)
		if err != nil {
			return 0, nil, err
		}
		if err := writableProject(r, tx.Queries, ag.ProjectID); err != nil {
			return 0, nil, err
		}
		v, _, err := tx.PublishAgent(r.Context(), ag.ID, body.Note, string(c.p.Key.ID))
		if err != nil {
			return 0, nil, err
		}
		if err := au.record("agent.published", "agent", string(ag.ID), ag.ProjectID, map[string]any{"version": v.Version, "note": v.Note}); err != nil {
			return 0, nil, err
		}
		view, err := viewVersion(v)
		return http.StatusCreated, view, err
	})
}

func (a *API) listAgentVersions(w http.ResponseWriter, r *http.Request) error {
	c := callFrom(r.Context())
	ag, err := reachableAgent(r, a.Store.Queries)
	if err != nil {
		return err
	}
	pg, err := pageOf(c, string(ag.ID))
	if err != nil {
		return err
	}
	f := store.VersionFilter{AgentID: ag.ID, Limit: pg.limit + 1}
	if pg.after != "" {
		if f.BeforeVersion, err = strconv.Atoi(pg.after); err != nil || f.BeforeVersion < 1 {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	vs, err := a.Store.ListAgentVersions(r.Context(), f)
	if err != nil {
		return err
	}
	views := make([]versionView, len(vs))
	for i, v := range vs {
		if views[i], err = viewVersion(v); err != nil {
			return err
		}
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v versionView) string { return strconv.Itoa(v.Version) }))
	return nil
}

func (a *API) getAgentVersionDefinition(w http.ResponseWriter, r *http.Request) error {
	ag, err := reachableAgent(r, a.Store.Queries)
	if err != nil {
		return err
	}
	raw := pathParam(r, "version")
	n, err := strconv.Atoi(raw)
	notFound := fault.E(fault.CodeVersionNotFound, "Agent %s has no published version %s.", ag.ID, quoteID(raw))
	if err != nil || n < 1 || strconv.Itoa(n) != raw {
		return notFound
	}
	v, err := a.Store.GetAgentVersion(r.Context(), ag.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	def, err := storedDefinition(v.Definition)
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, def.Export(a.now()))
	return nil
}
