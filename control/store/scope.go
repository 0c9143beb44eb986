package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Scope is what a caller may see and change: one organization, the projects it reaches, and,
// for the objects that belong to a key mode (conversations, scheduled calls, …), live or test.
// Every repository read and write of a caller's object takes a Scope and applies it in the SQL
// WHERE, so an object outside it is ErrNotFound exactly like a missing one: tenancy is enforced
// here, once, and no handler compares organization ids.
type Scope struct {
	Org OrgID
	// AllProjects reaches every project of the organization, including later ones; otherwise
	// Projects lists the ones reached (none: nothing is reached).
	AllProjects bool
	Projects    []ProjectID
	// Mode is the key mode of the caller. Objects made in one mode are not seen from the other;
	// "" (the operator, the system) sees both.
	Mode Mode
}

// OrgScope reaches every project and both modes of an organization: the operator's and the
// system's scope.
func OrgScope(org OrgID) Scope { return Scope{Org: org, AllProjects: true} }

// KeyScope is the scope of an API key.
func KeyScope(k Key) Scope {
	return Scope{Org: k.OrgID, AllProjects: k.AllProjects, Projects: slices.Clone(k.ProjectIDs), Mode: k.Mode}
}

// Reaches reports whether the scope reaches project p. It is for the store's own checks; callers
// load objects through the scope instead.
func (s Scope) Reaches(p ProjectID) bool { return s.AllProjects || slices.Contains(s.Projects, p) }

// Narrow returns the scope reaching only project p (reaching nothing when s does not reach p).
func (s Scope) Narrow(p ProjectID) Scope {
	n := s
	n.AllProjects = false
	n.Projects = nil
	if s.Reaches(p) {
		n.Projects = []ProjectID{p}
	}
	return n
}

// Page is a keyset page: Limit rows after the row whose key is After ("" for the first page).
type Page struct {
	Limit int
	After string
}

// sel builds one SELECT: the scope, filters, a keyset position and a limit, with $N
// placeholders numbered as they are added. It is the one builder every repository's reads use.
type sel struct {
	base  string // SELECT … FROM … (no WHERE)
	where []string
	args  []any
	empty bool // a filter that can match nothing (an invalid id, no project reached)
	err   error
}

func newSel(base string) *sel { return &sel{base: base} }

// arg adds a value and returns its placeholder.
func (b *sel) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// cond adds a condition; each ? in it takes the next value.
func (b *sel) cond(c string, vals ...any) *sel {
	var sb strings.Builder
	i := 0
	for _, r := range c {
		if r == '?' && i < len(vals) {
			sb.WriteString(b.arg(vals[i]))
			i++
			continue
		}
		sb.WriteRune(r)
	}
	b.where = append(b.where, sb.String())
	return b
}

// scope applies sc: orgCol must be the organization, projectCol the project (reached ones
// only), and modeCol, when the table has one (""), the key mode.
func (b *sel) scope(sc Scope, orgCol, projectCol, modeCol string) *sel {
	if !validID(sc.Org) {
		b.err = fmt.Errorf("store: %w: organization %q is not a canonical UUID", ErrInvalid, sc.Org)
		return b
	}
	b.cond(orgCol+" = ?", string(sc.Org))
	if !sc.AllProjects {
		if len(sc.Projects) == 0 {
			b.empty = true
			return b
		}
		ph := make([]string, len(sc.Projects))
		for i, p := range sc.Projects {
			if !validID(p) {
				b.err = fmt.Errorf("store: %w: project %q is not a canonical UUID", ErrInvalid, p)
				return b
			}
			ph[i] = b.arg(string(p))
		}
		b.where = append(b.where, projectCol+" IN ("+strings.Join(ph, ", ")+")")
	}
	if modeCol != "" && sc.Mode != "" {
		b.cond(modeCol+" = ?", string(sc.Mode))
	}
	return b
}

// id adds col = id, or matches nothing when id is not a UUID. Ids are stored in canonical
// lowercase form; any form uuid.Parse reads of 36 characters (upper case, say) names the same
// row.
func (b *sel) id(col string, id string) *sel {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		b.empty = true
		return b
	}
	return b.cond(col+" = ?", u.String())
}

// optID adds col = id when id is set.
func (b *sel) optID(col string, id string) *sel {
	if id == "" {
		return b
	}
	return b.id(col, id)
}

// page adds the keyset position (rows whose col sorts after pg.After, or before it when desc)
// and the order and limit. It fetches one row more than the limit, so the caller knows whether
// another page follows.
func (b *sel) page(col string, pg Page, desc bool) string {
	if pg.After != "" {
		if !validID(pg.After) {
			b.err = fmt.Errorf("store: %w: cursor %q is not a canonical UUID", ErrInvalid, pg.After)
		} else if desc {
			b.cond(col+" < ?", pg.After)
		} else {
			b.cond(col+" > ?", pg.After)
		}
	}
	order := " ORDER BY " + col
	if desc {
		order += " DESC"
	}
	return order + " LIMIT " + b.arg(clampLimit(pg.Limit)+1)
}

// sql returns the statement without ordering.
func (b *sel) sql() string {
	if len(b.where) == 0 {
		return b.base
	}
	return b.base + " WHERE " + strings.Join(b.where, " AND ")
}

// one reads the single row b selects, or ErrNotFound (also when b can match nothing).
func one[T any](ctx context.Context, q *Queries, op string, b *sel, scan func(rowScanner) (T, error)) (T, error) {
	var v T
	if b.err != nil {
		return v, b.err
	}
	if b.empty {
		return v, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	err := q.get(ctx, op, b.sql(), b.args, func(r rowScanner) (err error) { v, err = scan(r); return err })
	return v, err
}

// many reads the rows of b, ordered and limited by tail (see page).
func many[T any](ctx context.Context, q *Queries, op string, b *sel, tail string, scan func(rowScanner) (T, error)) ([]T, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.empty {
		return nil, nil
	}
	return list(ctx, q, op, b.sql()+tail, b.args, scan)
}
