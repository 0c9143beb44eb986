package store

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// AgentID names an agent.
type AgentID string

// AgentStatus is where an agent is in its life.
type AgentStatus string

// Agent statuses. A deleted agent is archived until it is purged; only the operator's restore
// brings it back, and the API treats it as gone.
const (
	AgentDraft     AgentStatus = "draft"
	AgentPublished AgentStatus = "published"
	AgentArchived  AgentStatus = "archived"
)

// Agent is a conversational agent of a project. Its definition is the document of package
// agentdef, kept as JSON; the store does not read it.
type Agent struct {
	ID          AgentID
	OrgID       OrgID
	ProjectID   ProjectID
	Name        string // unique in the project, ignoring case, among agents not deleted
	Description string
	Kind        string
	Direction   string
	Status      AgentStatus
	Channels    []string
	Definition  json.RawMessage
	Version     int        // the newest published version; 0 before the first publish
	PublishedAt *time.Time // when the newest version was published
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeletedAt   *time.Time
	PurgesAt    *time.Time // when a deleted agent is removed for good
}

// Deleted reports whether the agent was deleted and awaits its purge.
func (a Agent) Deleted() bool { return a.DeletedAt != nil }

// NewAgent describes an agent to create in a project of the scope's organization.
type NewAgent struct {
	ProjectID   ProjectID
	Name        string
	UniqueName  bool // take "Name (2)", "Name (3)", … when Name is taken, instead of ErrConflict
	Description string
	Kind        string
	Direction   string
	Channels    []string
	Definition  json.RawMessage
}

// AgentChange is a new definition for an agent; a nil Name keeps the name.
type AgentChange struct {
	Name        *string
	Description string
	Channels    []string
	Definition  json.RawMessage
}

// AgentFilter narrows a list of agents. Deleted agents are never listed.
type AgentFilter struct {
	ProjectID ProjectID   // only this project's
	Status    AgentStatus // "" means any status but archived
	Direction string
	Kind      string
}

const agentCols = `id, org_id, project_id, name, description, kind, direction, status, channels, definition, current_version, published_at, created_at, updated_at, deleted_at, purges_at`

func scanAgent(r rowScanner) (Agent, error) {
	var a Agent
	err := r.Scan(agentDest(&a)...)
	return a, err
}

func agentDest(a *Agent) []any {
	return []any{&a.ID, &a.OrgID, &a.ProjectID, &a.Name, &a.Description, &a.Kind, &a.Direction, &a.Status,
		jsonCol{&a.Channels}, jsonCol{&a.Definition}, &a.Version, nullTimeCol{&a.PublishedAt},
		timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt}, nullTimeCol{&a.DeletedAt}, nullTimeCol{&a.PurgesAt}}
}

// nameKey is how names are compared for uniqueness.
func nameKey(name string) string { return strings.ToLower(name) }

// checkAgent refuses an agent the table should not hold.
func checkAgent(name, kind, direction string, channels []string, def json.RawMessage) error {
	if err := checkName("agent", name); err != nil {
		return err
	}
	switch kind {
	case "form_filling", "workflow", "faq", "custom", "desk":
	default:
		return fmt.Errorf("store: %w: agent kind %q", ErrInvalid, kind)
	}
	if direction != "inbound" && direction != "outbound" {
		return fmt.Errorf("store: %w: agent direction %q", ErrInvalid, direction)
	}
	if len(channels) == 0 {
		return fmt.Errorf("store: %w: an agent needs at least one channel", ErrInvalid)
	}
	if !isJSONObject(def) {
		return fmt.Errorf("store: %w: agent definition is not a JSON object", ErrInvalid)
	}
	return nil
}

// Agents is the repository of agents and their published versions. Every method takes the
// caller's Scope and applies it in SQL: an agent outside it, like a deleted or unknown one, is
// ErrNotFound. Agents have no key mode: live and test keys share them.
type Agents struct{ q *Queries }

// Agents returns the agent repository.
func (q *Queries) Agents() Agents { return Agents{q} }

// scoped selects the scope's agents that are not deleted.
func scopedAgents(sc Scope) *sel {
	return newSel(`SELECT `+agentCols+` FROM agents`).scope(sc, "org_id", "project_id", "").cond("deleted_at IS NULL")
}

// Get returns the scope's agent with id, or ErrNotFound (also when it is deleted).
func (r Agents) Get(ctx context.Context, sc Scope, id AgentID) (Agent, error) {
	return one(ctx, r.q, "get agent", scopedAgents(sc).id("id", string(id)), scanAgent)
}

// List returns the scope's agents that f selects, oldest first: a page of up to pg.Limit, and
// one more when another page follows.
func (r Agents) List(ctx context.Context, sc Scope, f AgentFilter, pg Page) ([]Agent, error) {
	b := scopedAgents(sc).optID("project_id", string(f.ProjectID))
	if f.Status != "" {
		b.cond("status = ?", string(f.Status))
	}
	if f.Direction != "" {
		b.cond("direction = ?", f.Direction)
	}
	if f.Kind != "" {
		b.cond("kind = ?", f.Kind)
	}
	return many(ctx, r.q, "list agents", b, b.page("id", pg, false), scanAgent)
}

// Create creates a draft agent in a project the scope reaches. A name the project already uses
// is ErrConflict unless UniqueName is set; a project outside the scope is ErrNotFound.
func (r Agents) Create(ctx context.Context, sc Scope, na NewAgent) (Agent, error) {
	if err := checkAgent(na.Name, na.Kind, na.Direction, na.Channels, na.Definition); err != nil {
		return Agent{}, err
	}
	channels, err := jsonText(na.Channels)
	if err != nil {
		return Agent{}, err
	}
	var a Agent
	err = r.q.atomic(ctx, func(q *Queries) error {
		p, err := q.Projects().Get(ctx, sc, na.ProjectID)
		if err != nil {
			return err
		}
		name := na.Name
		if na.UniqueName {
			taken, err := q.agentNames(ctx, p.ID)
			if err != nil {
				return err
			}
			name = UniqueName(na.Name, func(n string) bool { return taken[nameKey(n)] })
		}
		now := q.s.timeNow()
		a = Agent{
			ID: newID[AgentID](), OrgID: p.OrgID, ProjectID: p.ID, Name: name, Description: na.Description,
			Kind: na.Kind, Direction: na.Direction, Status: AgentDraft, Channels: slices.Clone(na.Channels),
			Definition: slices.Clone(na.Definition), CreatedAt: now, UpdatedAt: now,
		}
		_, err = q.exec(ctx, "create agent",
			`INSERT INTO agents (id, org_id, project_id, name, name_key, description, kind, direction, status, channels, definition, current_version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, $12, $13)`,
			string(a.ID), string(a.OrgID), string(a.ProjectID), a.Name, nameKey(a.Name), a.Description, a.Kind, a.Direction,
			string(a.Status), channels, string(a.Definition), ts(now), ts(now))
		return err
	})
	if err != nil {
		return Agent{}, err
	}
	return a, nil
}

// Change replaces the definition of the scope's agent (and its name when c.Name is set) and
// returns the agent as changed. A name another agent of the project has is ErrConflict; an
// agent outside the scope, deleted or unknown is ErrNotFound.
func (r Agents) Change(ctx context.Context, sc Scope, id AgentID, c AgentChange) (Agent, error) {
	var a Agent
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if a, err = q.Agents().Get(ctx, sc, id); err != nil {
			return err
		}
		if c.Name != nil {
			a.Name = *c.Name
		}
		if err := checkAgent(a.Name, a.Kind, a.Direction, c.Channels, c.Definition); err != nil {
			return err
		}
		channels, err := jsonText(c.Channels)
		if err != nil {
			return err
		}
		a.Description, a.Channels, a.Definition, a.UpdatedAt = c.Description, slices.Clone(c.Channels), slices.Clone(c.Definition), q.s.timeNow()
		res, err := q.exec(ctx, "change agent",
			`UPDATE agents SET name = $2, name_key = $3, description = $4, channels = $5, definition = $6, updated_at = $7
			WHERE id = $1 AND deleted_at IS NULL`,
			string(a.ID), a.Name, nameKey(a.Name), a.Description, channels, string(a.Definition), ts(a.UpdatedAt))
		return affectedOne(res, err, "agent", id)
	})
	if err != nil {
		return Agent{}, err
	}
	return a, nil
}

// Delete soft-deletes the scope's agent: it is archived, purged for good at purgesAt, and the
// phone numbers assigned to it are released. It returns the agent as deleted and the numbers it
// released. An agent outside the scope, deleted or unknown is ErrNotFound.
func (r Agents) Delete(ctx context.Context, sc Scope, id AgentID, purgesAt time.Time) (Agent, []PhoneNumber, error) {
	var a Agent
	var released []PhoneNumber
	err := r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.Agents().Get(ctx, sc, id); err != nil {
			return err
		}
		now := q.s.timeNow()
		// Archiving first takes the agent's row lock, so that a number being assigned to it at
		// the same moment (lockAgent) is either released here or refused there.
		err := q.get(ctx, "delete agent",
			`UPDATE agents SET status = $2, deleted_at = $3, purges_at = $4, updated_at = $3
			WHERE id = $1 AND deleted_at IS NULL RETURNING `+agentCols,
			[]any{string(id), string(AgentArchived), ts(now), ts(normTime(purgesAt))},
			func(r rowScanner) (err error) { a, err = scanAgent(r); return err })
		if err != nil {
			return err
		}
		if released, err = q.AgentPhoneNumbers(ctx, id); err != nil {
			return err
		}
		_, err = q.exec(ctx, "release phone numbers",
			`UPDATE phone_numbers SET agent_id = NULL, assigned_at = NULL, updated_at = $2 WHERE agent_id = $1`, string(id), ts(now))
		return err
	})
	if err != nil {
		return Agent{}, nil, err
	}
	for i := range released {
		released[i].AgentID, released[i].AssignedAt = "", nil
	}
	return a, released, nil
}

// GetAgent returns the agent with id in any organization, or ErrNotFound; a deleted agent is
// not found. It does not apply a scope: it remains for the call-start checks of control/api
// (agentFor, which compares the organization and reach itself) until they load agents through
// Agents().Get. Nothing new should call it.
func (q *Queries) GetAgent(ctx context.Context, id AgentID) (Agent, error) {
	return q.SystemAgents().Get(ctx, id)
}

// SystemAgents is the agent lookups of Parley's own paths that legitimately cross
// organizations: routing an inbound SIP call to the agent of the number dialled, running a
// conversation of an agent deleted meanwhile, the operator's restore (given only an agent id)
// and the purge worker. They take no Scope; a caller's request must use Agents instead.
type SystemAgents struct{ q *Queries }

// SystemAgents returns the unscoped agent lookups of the system paths.
func (q *Queries) SystemAgents() SystemAgents { return SystemAgents{q} }

// Get returns the agent with id in any organization, or ErrNotFound; a deleted agent is not
// found.
func (r SystemAgents) Get(ctx context.Context, id AgentID) (Agent, error) {
	a, err := r.GetIncludingDeleted(ctx, id)
	if err == nil && a.Deleted() {
		return Agent{}, notFound("agent", id)
	}
	return a, err
}

// GetIncludingDeleted returns the agent with id even when it is deleted (a conversation that
// outlives its agent, the operator's restore).
func (r SystemAgents) GetIncludingDeleted(ctx context.Context, id AgentID) (Agent, error) {
	if !validID(id) {
		return Agent{}, notFound("agent", id)
	}
	var a Agent
	err := r.q.get(ctx, "get agent", `SELECT `+agentCols+` FROM agents WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { a, err = scanAgent(r); return err })
	return a, err
}

// Restore brings back a deleted agent that is not purged yet, as a draft or, when it was ever
// published, published. A non-empty name renames it; a name taken meanwhile is ErrConflict. An
// agent that is not deleted, or is unknown, is ErrNotFound.
func (r SystemAgents) Restore(ctx context.Context, id AgentID, name string) (Agent, error) {
	var a Agent
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if a, err = q.SystemAgents().GetIncludingDeleted(ctx, id); err != nil {
			return err
		}
		if !a.Deleted() {
			return fmt.Errorf("store: agent %s is not deleted: %w", id, ErrNotFound)
		}
		if name != "" {
			if err := checkName("agent", name); err != nil {
				return err
			}
			a.Name = name
		}
		a.Status = AgentDraft
		if a.Version > 0 {
			a.Status = AgentPublished
		}
		a.DeletedAt, a.PurgesAt, a.UpdatedAt = nil, nil, q.s.timeNow()
		_, err = q.exec(ctx, "restore agent",
			`UPDATE agents SET name = $2, name_key = $3, status = $4, deleted_at = NULL, purges_at = NULL, updated_at = $5 WHERE id = $1`,
			string(id), a.Name, nameKey(a.Name), string(a.Status), ts(a.UpdatedAt))
		return err
	})
	if err != nil {
		return Agent{}, err
	}
	return a, nil
}

// PurgeDue removes for good, with their versions, up to limit deleted agents of any
// organization whose purge time is at or before now, and returns them. Call it on a Tx to
// record each purge in the audit log in the same transaction.
func (r SystemAgents) PurgeDue(ctx context.Context, now time.Time, limit int) ([]Agent, error) {
	var gone []Agent
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		gone, err = list(ctx, q, "find agents to purge",
			`SELECT `+agentCols+` FROM agents WHERE deleted_at IS NOT NULL AND purges_at <= $1 ORDER BY purges_at, id LIMIT $2 `+q.s.d.skipLocked,
			[]any{ts(now), clampLimit(limit)}, scanAgent)
		if err != nil {
			return err
		}
		for _, a := range gone {
			if _, err := q.exec(ctx, "purge agent", `DELETE FROM agents WHERE id = $1`, string(a.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	return gone, err
}

// agentNames returns the name keys of a project's agents that are not deleted.
func (q *Queries) agentNames(ctx context.Context, p ProjectID) (map[string]bool, error) {
	keys, err := list(ctx, q, "list agent names", `SELECT name_key FROM agents WHERE project_id = $1 AND deleted_at IS NULL`,
		[]any{string(p)}, func(r rowScanner) (string, error) { var s string; return s, r.Scan(&s) })
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m, nil
}

var numberedName = regexp.MustCompile(`^(.*\S) \((\d+)\)$`)

// UniqueName returns name, or when taken reports it used, "name (2)", "name (3)", … (a
// trailing " (n)" of name itself is replaced, not repeated), shortened so that it stays within
// 120 characters.
func UniqueName(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	base, start := name, 2
	if m := numberedName.FindStringSubmatch(name); m != nil {
		if n, err := strconv.Atoi(m[2]); err == nil && n < 1_000_000 {
			base, start = m[1], n+1
		}
	}
	for n := start; ; n++ {
		suffix := " (" + strconv.Itoa(n) + ")"
		b := base
		if utf8.RuneCountInString(b)+len(suffix) > maxName {
			r := []rune(b)
			b = strings.TrimRight(string(r[:maxName-len(suffix)]), " ")
		}
		if cand := b + suffix; !taken(cand) {
			return cand
		}
	}
}

// lockAgent returns an agent that is not deleted, holding its row lock until the transaction
// ends (a no-op UPDATE locks the row on PostgreSQL; SQLite's one writer needs no more).
func (q *Queries) lockAgent(ctx context.Context, id AgentID) (Agent, error) {
	if !validID(id) {
		return Agent{}, notFound("agent", id)
	}
	var a Agent
	err := q.get(ctx, "lock agent",
		`UPDATE agents SET updated_at = updated_at WHERE id = $1 AND deleted_at IS NULL RETURNING `+agentCols,
		[]any{string(id)}, func(r rowScanner) (err error) { a, err = scanAgent(r); return err })
	return a, err
}
