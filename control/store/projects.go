package store

import (
	"context"
	"time"
)

// Project belongs to an organization and holds its agents, webhook receivers and conversations.
type Project struct {
	ID        ProjectID
	OrgID     OrgID
	Name      string // unique within the organization
	Frozen    bool   // a frozen project refuses changes (409)
	CreatedAt time.Time
	UpdatedAt time.Time
}

const projectCols = `id, org_id, name, frozen, created_at, updated_at`

func scanProject(r rowScanner) (Project, error) {
	var p Project
	err := r.Scan(projectDest(&p)...)
	return p, err
}

func projectDest(p *Project) []any {
	return []any{&p.ID, &p.OrgID, &p.Name, &p.Frozen, timeCol{&p.CreatedAt}, timeCol{&p.UpdatedAt}}
}

// CreateProject creates a project in an organization. A name the organization already uses is
// ErrConflict; an unknown organization is ErrNotFound.
func (q *Queries) CreateProject(ctx context.Context, org OrgID, name string) (Project, error) {
	if err := checkName("project", name); err != nil {
		return Project{}, err
	}
	if !validID(org) {
		return Project{}, notFound("organization", org)
	}
	now := q.s.timeNow()
	p := Project{ID: newID[ProjectID](), OrgID: org, Name: name, CreatedAt: now, UpdatedAt: now}
	_, err := q.exec(ctx, "create project",
		`INSERT INTO projects (id, org_id, name, frozen, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		string(p.ID), string(org), name, false, ts(now), ts(now))
	if err != nil {
		return Project{}, err
	}
	return p, nil
}

// GetProject returns the project with id, or ErrNotFound.
func (q *Queries) GetProject(ctx context.Context, id ProjectID) (Project, error) {
	if !validID(id) {
		return Project{}, notFound("project", id)
	}
	var p Project
	err := q.get(ctx, "get project", `SELECT `+projectCols+` FROM projects WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { p, err = scanProject(r); return err })
	return p, err
}

// FindProjectByName returns the organization's project called name, or ErrNotFound.
func (q *Queries) FindProjectByName(ctx context.Context, org OrgID, name string) (Project, error) {
	if !validID(org) {
		return Project{}, notFound("organization", org)
	}
	var p Project
	err := q.get(ctx, "find project", `SELECT `+projectCols+` FROM projects WHERE org_id = $1 AND name = $2`,
		[]any{string(org), name},
		func(r rowScanner) (err error) { p, err = scanProject(r); return err })
	return p, err
}

// ListProjects returns an organization's projects, oldest first (none for an unknown one).
func (q *Queries) ListProjects(ctx context.Context, org OrgID) ([]Project, error) {
	if !validID(org) {
		return nil, nil
	}
	return list(ctx, q, "list projects", `SELECT `+projectCols+` FROM projects WHERE org_id = $1 ORDER BY id`,
		[]any{string(org)}, scanProject)
}

// SetProjectFrozen freezes or unfreezes a project.
func (q *Queries) SetProjectFrozen(ctx context.Context, id ProjectID, frozen bool) error {
	if !validID(id) {
		return notFound("project", id)
	}
	res, err := q.exec(ctx, "freeze project", `UPDATE projects SET frozen = $2, updated_at = $3 WHERE id = $1`,
		string(id), frozen, ts(q.s.timeNow()))
	return affectedOne(res, err, "project", id)
}

// Projects is the repository of projects.
type Projects struct{ q *Queries }

// Projects returns the project repository.
func (q *Queries) Projects() Projects { return Projects{q} }

// Get returns the project with id if the scope reaches it, or ErrNotFound.
func (r Projects) Get(ctx context.Context, sc Scope, id ProjectID) (Project, error) {
	b := newSel(`SELECT `+projectCols+` FROM projects`).scope(sc, "org_id", "id", "").id("id", string(id))
	return one(ctx, r.q, "get project", b, scanProject)
}

// List returns the projects the scope reaches, oldest first: a page of up to pg.Limit, and one
// more when another page follows.
func (r Projects) List(ctx context.Context, sc Scope, pg Page) ([]Project, error) {
	b := newSel(`SELECT `+projectCols+` FROM projects`).scope(sc, "org_id", "id", "")
	return many(ctx, r.q, "list projects", b, b.page("id", pg, false), scanProject)
}
