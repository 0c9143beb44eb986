package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ContactID names a contact.
type ContactID string

// Contact is a person to call: an E.164 number, unique in its project, with an optional
// external id (unique in the project too), a time zone ("" the organization's), and the
// values a campaign's calls carry.
type Contact struct {
	ID         ContactID
	OrgID      OrgID
	ProjectID  ProjectID
	Number     string
	Name       string
	Timezone   string
	ExternalID string // "" when none
	Variables  json.RawMessage
	Metadata   json.RawMessage
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

const contactCols = `id, org_id, project_id, number, name, timezone, external_id, variables, metadata, created_at, updated_at`

func scanContact(r rowScanner) (Contact, error) {
	var c Contact
	err := r.Scan(&c.ID, &c.OrgID, &c.ProjectID, &c.Number, &c.Name, &c.Timezone, nullTextCol[string]{&c.ExternalID},
		jsonCol{&c.Variables}, jsonCol{&c.Metadata}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt})
	return c, err
}

// Contacts is the repository of contacts. Every read and write takes the caller's Scope.
type Contacts struct{ q *Queries }

// Contacts returns the contact repository.
func (q *Queries) Contacts() Contacts { return Contacts{q} }

// ContactFilter narrows a list of contacts.
type ContactFilter struct {
	ProjectID  ProjectID
	Number     string
	ExternalID string
}

func (r Contacts) sel(sc Scope) *sel {
	return newSel(`SELECT `+contactCols+` FROM contacts`).scope(sc, "org_id", "project_id", "")
}

func checkContact(sc Scope, c Contact) (vars, meta string, err error) {
	switch {
	case !validID(c.OrgID) || !validID(c.ProjectID):
		return "", "", fmt.Errorf("store: %w: contact ids", ErrInvalid)
	case c.OrgID != sc.Org || !sc.Reaches(c.ProjectID):
		return "", "", notFound("project", c.ProjectID)
	case !ValidE164(c.Number):
		return "", "", fmt.Errorf("store: %w: contact number %q is not E.164", ErrInvalid, c.Number)
	}
	if vars, err = objectOr("contact variables", c.Variables); err != nil {
		return "", "", err
	}
	meta, err = objectOr("contact metadata", c.Metadata)
	return vars, meta, err
}

// Create stores a new contact in a project the scope reaches (ErrNotFound otherwise). A number
// or external id the project has already is ErrConflict.
func (r Contacts) Create(ctx context.Context, sc Scope, c Contact) (Contact, error) {
	vars, meta, err := checkContact(sc, c)
	if err != nil {
		return Contact{}, err
	}
	if _, err := r.q.Projects().Get(ctx, sc, c.ProjectID); err != nil {
		return Contact{}, err
	}
	now := r.q.s.timeNow()
	c.ID, c.CreatedAt, c.UpdatedAt = newID[ContactID](), now, now
	c.Variables, c.Metadata = json.RawMessage(vars), json.RawMessage(meta)
	_, err = r.q.exec(ctx, "create contact", `INSERT INTO contacts (`+contactCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
		string(c.ID), string(c.OrgID), string(c.ProjectID), c.Number, c.Name, c.Timezone, nullText(c.ExternalID), vars, meta, ts(now))
	if err != nil {
		return Contact{}, err
	}
	return c, nil
}

// Get returns the scope's contact with id, or ErrNotFound.
func (r Contacts) Get(ctx context.Context, sc Scope, id ContactID) (Contact, error) {
	return one(ctx, r.q, "get contact", r.sel(sc).id("id", string(id)), scanContact)
}

// List returns the scope's contacts that f selects, newest first: a page of up to pg.Limit,
// and one more when another page follows.
func (r Contacts) List(ctx context.Context, sc Scope, f ContactFilter, pg Page) ([]Contact, error) {
	b := r.sel(sc).optID("project_id", string(f.ProjectID))
	if f.Number != "" {
		b.cond("number = ?", f.Number)
	}
	if f.ExternalID != "" {
		b.cond("external_id = ?", f.ExternalID)
	}
	return many(ctx, r.q, "list contacts", b, b.page("id", pg, true), scanContact)
}

// Update replaces the mutable members of the scope's contact c.ID (number, name, time zone,
// external id, variables, metadata). A number or external id another contact of the project
// has is ErrConflict.
func (r Contacts) Update(ctx context.Context, sc Scope, c Contact) (Contact, error) {
	old, err := r.Get(ctx, sc, c.ID)
	if err != nil {
		return Contact{}, err
	}
	c.OrgID, c.ProjectID, c.CreatedAt = old.OrgID, old.ProjectID, old.CreatedAt
	vars, meta, err := checkContact(sc, c)
	if err != nil {
		return Contact{}, err
	}
	c.UpdatedAt = r.q.s.timeNow()
	c.Variables, c.Metadata = json.RawMessage(vars), json.RawMessage(meta)
	_, err = r.q.exec(ctx, "update contact",
		`UPDATE contacts SET number = $2, name = $3, timezone = $4, external_id = $5, variables = $6, metadata = $7, updated_at = $8 WHERE id = $1`,
		string(c.ID), c.Number, c.Name, c.Timezone, nullText(c.ExternalID), vars, meta, ts(c.UpdatedAt))
	if err != nil {
		return Contact{}, err
	}
	return c, nil
}

// Delete removes the scope's contact with id (ErrNotFound when it is not there). The campaigns
// that called it keep their own copy of it.
func (r Contacts) Delete(ctx context.Context, sc Scope, id ContactID) (Contact, error) {
	var c Contact
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if c, err = q.Contacts().Get(ctx, sc, id); err != nil {
			return err
		}
		_, err = q.exec(ctx, "delete contact", `DELETE FROM contacts WHERE id = $1`, string(c.ID))
		return err
	})
	return c, err
}

// UpsertResult says what Upsert did with each contact given, in order.
type UpsertResult struct {
	Contacts []Contact
	Created  []bool
}

// upsertChunk bounds the rows of one statement on SQLite, which finds a numbered argument by a
// scan, so a statement of many costs their square.
const upsertChunk = 100

// upsertChunkPG is the chunk on PostgreSQL, where a chunk's lists and columns travel as a few
// array arguments.
const upsertChunkPG = 1000

// contactColsC are contactCols of the table named c.
var contactColsC = "c." + strings.ReplaceAll(contactCols, ", ", ", c.")

// anyStrings turns a list of strings held as values into a []string (an array argument).
func anyStrings(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.(string)
	}
	return out
}

// Upsert stores contacts in project p of the scope: one whose external id, or else whose
// number, the project has already replaces that contact's values (keeping its id); the others
// are created. Contacts must be checked already (numbers E.164, objects) and must not repeat
// a number or an external id among themselves. It runs in the caller's transaction, or one of
// its own, and writes in batches, so ten thousand contacts take a few statements per 500.
func (r Contacts) Upsert(ctx context.Context, sc Scope, p ProjectID, cs []Contact) (UpsertResult, error) {
	var res UpsertResult
	err := r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.Projects().Get(ctx, sc, p); err != nil {
			return err
		}
		res = UpsertResult{Contacts: make([]Contact, len(cs)), Created: make([]bool, len(cs))}
		now := q.s.timeNow()
		chunk := upsertChunk
		if q.s.d.name != SQLite {
			chunk = upsertChunkPG
		}
		for start := 0; start < len(cs); start += chunk {
			end := min(start+chunk, len(cs))
			if err := q.Contacts().upsertChunk(ctx, sc, p, cs[start:end], now, res.Contacts[start:end], res.Created[start:end]); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

func (r Contacts) upsertChunk(ctx context.Context, sc Scope, p ProjectID, cs []Contact, now time.Time, out []Contact, created []bool) error {
	// The contacts of the project that any of cs names, by external id or number.
	var nums, exts []any
	for _, c := range cs {
		nums = append(nums, c.Number)
		if c.ExternalID != "" {
			exts = append(exts, c.ExternalID)
		}
	}
	// The project was read under the scope in this transaction, so project_id alone keeps to
	// the organization. Two selects, each on its own unique index: with "number IN … OR
	// external_id IN …" (or an org_id condition) PostgreSQL, whose statistics still see the
	// table empty during a first import, filtered every contact of the project for each chunk
	// (5.4 s for 10,000 rows).
	args := []any{string(p)}
	in := func(vals []any) string {
		ph := make([]string, len(vals))
		for i, v := range vals {
			args = append(args, v)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		return strings.Join(ph, ", ")
	}
	query := `SELECT ` + contactCols + ` FROM contacts WHERE project_id = $1 AND number IN (` + in(nums) + `)`
	if len(exts) > 0 {
		query += ` UNION ALL SELECT ` + contactCols + ` FROM contacts WHERE project_id = $1 AND external_id IN (` + in(exts) + `)`
	}
	if r.q.s.d.name != SQLite {
		// PostgreSQL: one array argument per list, joined to the table, so each value is one
		// probe of its unique index whatever the statistics say and the plan does not depend
		// on the list's length.
		args = []any{string(p), anyStrings(nums), anyStrings(exts)}
		query = `SELECT ` + contactColsC + ` FROM unnest($2::text[]) AS k(v) JOIN contacts c ON c.project_id = $1 AND c.number = k.v
			UNION ALL SELECT ` + contactColsC + ` FROM unnest($3::text[]) AS k(v) JOIN contacts c ON c.project_id = $1 AND c.external_id = k.v`
	}
	existing, err := list(ctx, r.q, "find contacts to update", query, args, scanContact)
	if err != nil {
		return err
	}
	byNum, byExt := map[string]Contact{}, map[string]Contact{}
	for _, c := range existing {
		byNum[c.Number] = c
		if c.ExternalID != "" {
			byExt[c.ExternalID] = c
		}
	}
	var gone []any
	used := map[ContactID]bool{}
	for i, c := range cs {
		c.OrgID, c.ProjectID = sc.Org, p
		vars, meta, err := checkContact(sc, c)
		if err != nil {
			return err
		}
		c.Variables, c.Metadata, c.UpdatedAt = json.RawMessage(vars), json.RawMessage(meta), now
		old, ok := byExt[c.ExternalID]
		if c.ExternalID == "" || !ok {
			old, ok = byNum[c.Number]
		}
		if ok && !used[old.ID] {
			used[old.ID] = true
			c.ID, c.CreatedAt = old.ID, old.CreatedAt
			if c.ExternalID == "" {
				c.ExternalID = old.ExternalID // an import without ids keeps the one it has
			}
			gone = append(gone, string(old.ID))
			// The number may move to this contact from another of the project.
			if o2, ok := byNum[c.Number]; ok && o2.ID != old.ID && !used[o2.ID] {
				used[o2.ID] = true
				gone = append(gone, string(o2.ID))
			}
		} else {
			c.ID, c.CreatedAt = newID[ContactID](), now
			created[i] = true
		}
		out[i] = c
	}
	if len(gone) > 0 {
		args = nil
		del := `DELETE FROM contacts WHERE id IN (` + in(gone) + `)`
		if r.q.s.d.name != SQLite {
			del, args = `DELETE FROM contacts WHERE id = ANY($1::uuid[])`, []any{anyStrings(gone)}
		}
		if _, err := r.q.exec(ctx, "replace contacts", del, args...); err != nil {
			return err
		}
	}
	if r.q.s.d.name != SQLite {
		// PostgreSQL: one array per column, so the statement is the same for every chunk and
		// costs no per-row planning.
		cols := make([][]string, 11)
		for i := range cols {
			cols[i] = make([]string, len(out))
		}
		for i, c := range out {
			for k, v := range []string{string(c.ID), string(c.OrgID), string(c.ProjectID), c.Number, c.Name, c.Timezone,
				c.ExternalID, string(c.Variables), string(c.Metadata), ts(c.CreatedAt), ts(c.UpdatedAt)} {
				cols[k][i] = v
			}
		}
		args = make([]any, len(cols))
		for i := range cols {
			args[i] = cols[i]
		}
		_, err = r.q.exec(ctx, "upsert contacts", `INSERT INTO contacts (`+contactCols+`)
			SELECT id::uuid, org_id::uuid, project_id::uuid, number, name, timezone, NULLIF(external_id, ''), variables::jsonb, metadata::jsonb, created_at::timestamptz, updated_at::timestamptz
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
			AS r(id, org_id, project_id, number, name, timezone, external_id, variables, metadata, created_at, updated_at)`, args...)
		return err
	}
	args = nil
	rows := make([]string, len(out))
	for i, c := range out {
		rows[i] = "(" + in([]any{string(c.ID), string(c.OrgID), string(c.ProjectID), c.Number, c.Name, c.Timezone,
			nullText(c.ExternalID), string(c.Variables), string(c.Metadata), ts(c.CreatedAt), ts(c.UpdatedAt)}) + ")"
	}
	_, err = r.q.exec(ctx, "upsert contacts", `INSERT INTO contacts (`+contactCols+`) VALUES `+strings.Join(rows, ", "), args...)
	return err
}
