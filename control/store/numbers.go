package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// PhoneNumberID names a phone number.
type PhoneNumberID string

// PhoneNumber is a number of a project that an agent answers or calls from. Numbers come from
// the operator (`parley admin numbers add`); the API assigns them to agents.
type PhoneNumber struct {
	ID         PhoneNumberID
	OrgID      OrgID
	ProjectID  ProjectID
	Number     string     // E.164: + and 7 to 15 digits
	Trunk      string     // the SIP trunk it is reached through, by name; "" when none is set
	AgentID    AgentID    // "" when no agent answers it
	Label      string     // the customer's own label
	AssignedAt *time.Time // when AgentID was set
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// NewPhoneNumber describes a number to add.
type NewPhoneNumber struct {
	OrgID     OrgID
	ProjectID ProjectID
	Number    string
	Trunk     string
	AgentID   AgentID // optional; an agent of the same project
	Label     string
}

// PhoneNumberChange changes a number. Nil members are left as they are; an AgentID pointing at
// "" clears the assignment.
type PhoneNumberChange struct {
	AgentID *AgentID
	Label   *string
}

// PhoneNumberFilter narrows a list of numbers.
type PhoneNumberFilter struct {
	ProjectID ProjectID // only this project's
	AgentID   AgentID   // only the numbers this agent answers or calls from
}

// MaxLabel is the longest label of a number, in characters.
const MaxLabel = 120

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// ValidE164 reports whether s is a phone number in E.164 form (ITU-T E.164: + country code
// and subscriber number, at most 15 digits).
func ValidE164(s string) bool { return e164.MatchString(s) }

const numberCols = `id, org_id, project_id, number, trunk, agent_id, label, assigned_at, created_at, updated_at`

func scanNumber(r rowScanner) (PhoneNumber, error) {
	var n PhoneNumber
	err := r.Scan(numberDest(&n)...)
	return n, err
}

func numberDest(n *PhoneNumber) []any {
	return []any{&n.ID, &n.OrgID, &n.ProjectID, &n.Number, nullTextCol[string]{&n.Trunk}, nullTextCol[AgentID]{&n.AgentID},
		&n.Label, nullTimeCol{&n.AssignedAt}, timeCol{&n.CreatedAt}, timeCol{&n.UpdatedAt}}
}

func checkLabel(s string) error {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxLabel || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Errorf("store: %w: a label is UTF-8 of at most %d characters without control characters", ErrInvalid, MaxLabel)
	}
	return nil
}

// CreatePhoneNumber adds a number to a project. A number already added (to any project) is
// ErrConflict; an unknown project, or an agent not in the project, is ErrNotFound.
func (q *Queries) CreatePhoneNumber(ctx context.Context, nn NewPhoneNumber) (PhoneNumber, error) {
	if !ValidE164(nn.Number) {
		return PhoneNumber{}, fmt.Errorf("store: %w: %q is not an E.164 number (+ and 7 to 15 digits)", ErrInvalid, nn.Number)
	}
	if err := checkLabel(nn.Label); err != nil {
		return PhoneNumber{}, err
	}
	if nn.Trunk != "" {
		if err := checkName("trunk", nn.Trunk); err != nil {
			return PhoneNumber{}, err
		}
	}
	if !validID(nn.OrgID) || !validID(nn.ProjectID) {
		return PhoneNumber{}, notFound("project", nn.ProjectID)
	}
	var n PhoneNumber
	err := q.atomic(ctx, func(q *Queries) error {
		p, err := q.GetProject(ctx, nn.ProjectID)
		if err != nil {
			return err
		}
		if p.OrgID != nn.OrgID {
			return notFound("project", nn.ProjectID)
		}
		now := q.s.timeNow()
		n = PhoneNumber{ID: newID[PhoneNumberID](), OrgID: nn.OrgID, ProjectID: nn.ProjectID, Number: nn.Number,
			Trunk: nn.Trunk, Label: nn.Label, CreatedAt: now, UpdatedAt: now}
		if nn.AgentID != "" {
			if err := q.checkAssignable(ctx, OrgScope(nn.OrgID), nn.AgentID, nn.ProjectID); err != nil {
				return err
			}
			n.AgentID, n.AssignedAt = nn.AgentID, &now
		}
		_, err = q.exec(ctx, "add phone number",
			`INSERT INTO phone_numbers (`+numberCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			string(n.ID), string(n.OrgID), string(n.ProjectID), n.Number, nullText(n.Trunk), nullText(n.AgentID), n.Label,
			nullTS(n.AssignedAt), ts(now), ts(now))
		return err
	})
	if err != nil {
		return PhoneNumber{}, err
	}
	return n, nil
}

// ErrOtherProject is wrapped (with ErrInvalid) when an agent and a number are in different
// projects.
var ErrOtherProject = fmt.Errorf("%w: the agent is in another project", ErrInvalid)

// checkAssignable checks that the agent exists, is not deleted and lives in project p, and
// locks it so that it cannot be deleted before the assignment commits. Call it in a
// transaction.
func (q *Queries) checkAssignable(ctx context.Context, sc Scope, id AgentID, p ProjectID) error {
	a, err := q.lockAgent(ctx, id)
	if err != nil {
		return err
	}
	if a.OrgID != sc.Org || !sc.Reaches(a.ProjectID) {
		return notFound("agent", id)
	}
	if a.ProjectID != p {
		return fmt.Errorf("store: agent %s: %w", id, ErrOtherProject)
	}
	return nil
}

// GetPhoneNumber returns the number with id, or ErrNotFound.
func (q *Queries) GetPhoneNumber(ctx context.Context, id PhoneNumberID) (PhoneNumber, error) {
	if !validID(id) {
		return PhoneNumber{}, notFound("phone number", id)
	}
	var n PhoneNumber
	err := q.get(ctx, "get phone number", `SELECT `+numberCols+` FROM phone_numbers WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { n, err = scanNumber(r); return err })
	return n, err
}

// FindPhoneNumber returns the row of an E.164 number, or ErrNotFound.
func (q *Queries) FindPhoneNumber(ctx context.Context, number string) (PhoneNumber, error) {
	var n PhoneNumber
	err := q.get(ctx, "find phone number", `SELECT `+numberCols+` FROM phone_numbers WHERE number = $1`, []any{number},
		func(r rowScanner) (err error) { n, err = scanNumber(r); return err })
	return n, err
}

// AgentPhoneNumbers returns the numbers assigned to an agent, in the order a call picks from
// when it names none: the earliest assigned first.
func (q *Queries) AgentPhoneNumbers(ctx context.Context, id AgentID) ([]PhoneNumber, error) {
	if !validID(id) {
		return nil, nil
	}
	return list(ctx, q, "list agent phone numbers",
		`SELECT `+numberCols+` FROM phone_numbers WHERE agent_id = $1 ORDER BY assigned_at, id`, []any{string(id)}, scanNumber)
}

// Numbers is the repository of phone numbers.
type Numbers struct{ q *Queries }

// Numbers returns the phone-number repository.
func (q *Queries) Numbers() Numbers { return Numbers{q} }

// Get returns the scope's number with id, or ErrNotFound.
func (r Numbers) Get(ctx context.Context, sc Scope, id PhoneNumberID) (PhoneNumber, error) {
	b := newSel(`SELECT `+numberCols+` FROM phone_numbers`).scope(sc, "org_id", "project_id", "").id("id", string(id))
	return one(ctx, r.q, "get phone number", b, scanNumber)
}

// List returns the scope's numbers that f selects, oldest first: a page of up to pg.Limit, and
// one more when another page follows.
func (r Numbers) List(ctx context.Context, sc Scope, f PhoneNumberFilter, pg Page) ([]PhoneNumber, error) {
	b := newSel(`SELECT `+numberCols+` FROM phone_numbers`).scope(sc, "org_id", "project_id", "").
		optID("project_id", string(f.ProjectID)).optID("agent_id", string(f.AgentID))
	return many(ctx, r.q, "list phone numbers", b, b.page("id", pg, false), scanNumber)
}

// Change assigns or clears a number of the scope's agent and sets its label, and returns the
// number as changed. Assigning the agent it already has keeps its place in the agent's order.
// An agent that is unknown or deleted is ErrNotFound; one of another project wraps
// ErrOtherProject.
func (r Numbers) Change(ctx context.Context, sc Scope, id PhoneNumberID, c PhoneNumberChange) (PhoneNumber, error) {
	if c.Label != nil {
		if err := checkLabel(*c.Label); err != nil {
			return PhoneNumber{}, err
		}
	}
	var n PhoneNumber
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if n, err = q.Numbers().Get(ctx, sc, id); err != nil {
			return err
		}
		now := q.s.timeNow()
		if c.AgentID != nil && *c.AgentID != n.AgentID {
			if *c.AgentID == "" {
				n.AgentID, n.AssignedAt = "", nil
			} else {
				if err := q.checkAssignable(ctx, sc, *c.AgentID, n.ProjectID); err != nil {
					return err
				}
				n.AgentID, n.AssignedAt = *c.AgentID, &now
			}
		}
		if c.Label != nil {
			n.Label = *c.Label
		}
		n.UpdatedAt = now
		_, err = q.exec(ctx, "change phone number",
			`UPDATE phone_numbers SET agent_id = $2, assigned_at = $3, label = $4, updated_at = $5 WHERE id = $1`,
			string(id), nullText(n.AgentID), nullTS(n.AssignedAt), n.Label, ts(now))
		return err
	})
	if err != nil {
		return PhoneNumber{}, err
	}
	return n, nil
}
