package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// Contact is the Contact object.
type Contact struct {
	Object     string          `json:"object" jsonschema:"enum=contact"`
	ID         string          `json:"id" jsonschema:"format=uuid"`
	ProjectID  string          `json:"project_id" jsonschema:"format=uuid"`
	Number     string          `json:"number" doc:"E.164: a plus sign and 7 to 15 digits."`
	Name       string          `json:"name"`
	Timezone   *string         `json:"timezone" doc:"An IANA time zone name; the organization's is used when null." jsonschema:"nullable"`
	ExternalID *string         `json:"external_id" doc:"Your own id of the person, unique in the project." jsonschema:"nullable"`
	Variables  json.RawMessage `json:"variables" doc:"The values of the agent's {{placeholders}} for this person (an object)." jsonschema:"type=object"`
	Metadata   json.RawMessage `json:"metadata" doc:"Your own data (an object)." jsonschema:"type=object"`
	CreatedAt  app.Time        `json:"created_at"`
	UpdatedAt  app.Time        `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (Contact) SchemaDoc() string {
	return "A person to call: a number unique in its project, with an optional external id (unique too), a time zone and the values its calls carry."
}

// ViewContact is the interface's form of a stored contact.
func ViewContact(c store.Contact) Contact {
	return Contact{Object: "contact", ID: string(c.ID), ProjectID: string(c.ProjectID), Number: c.Number, Name: c.Name,
		Timezone: nullable(c.Timezone), ExternalID: nullable(c.ExternalID), Variables: orEmpty(c.Variables), Metadata: orEmpty(c.Metadata),
		CreatedAt: app.T(c.CreatedAt), UpdatedAt: app.T(c.UpdatedAt)}
}

// ContactFields are the members a contact is written with, in a create, an import row or a
// campaign's contact.
type ContactFields struct {
	Name       string          `json:"name,omitempty" jsonschema:"maxLength=200"`
	Timezone   *string         `json:"timezone,omitempty" doc:"An IANA time zone name such as America/Chicago; the organization's when null." jsonschema:"maxLength=64,nullable"`
	ExternalID *string         `json:"external_id,omitempty" jsonschema:"maxLength=255,nullable"`
	Variables  calls.Variables `json:"variables,omitempty"`
	Metadata   calls.Metadata  `json:"metadata,omitempty"`
}

// ContactCreate is the body of a new contact.
type ContactCreate struct {
	ProjectID *string `json:"project_id,omitempty" doc:"The project; the first the key reaches when omitted." jsonschema:"format=uuid,nullable"`
	Number    string  `json:"number" doc:"A phone number in E.164 form, such as +14155550100."`
	ContactFields
}

// SchemaDoc describes the body in the document.
func (ContactCreate) SchemaDoc() string { return "A new contact." }

// ContactUpdate is the body of a change to a contact: the members sent replace the contact's.
type ContactUpdate struct {
	Number     *string           `json:"number,omitempty" doc:"A phone number in E.164 form."`
	Name       *string           `json:"name,omitempty" jsonschema:"maxLength=200"`
	Timezone   app.Patch[string] `json:"timezone,omitzero" doc:"An IANA time zone name; null: the organization's." jsonschema:"maxLength=64,nullable"`
	ExternalID app.Patch[string] `json:"external_id,omitzero" jsonschema:"maxLength=255,nullable"`
	Variables  *calls.Variables  `json:"variables,omitempty"`
	Metadata   *calls.Metadata   `json:"metadata,omitempty"`
}

// SchemaDoc describes the body in the document.
func (ContactUpdate) SchemaDoc() string { return "The members to change; the others are kept." }

// SchemaExtras adds what the tags cannot say.
func (ContactUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// NormalizeNumber reads a phone number in international form and returns it in E.164, or a
// problem saying why it does not fit.
func NormalizeNumber(s string) (string, string, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "+") {
		return "", fmt.Sprintf("%q is not an international number: write it with a plus sign and the country code, such as +14155550100.", s), false
	}
	n, err := phonenumbers.Parse(s, "")
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return "", fmt.Sprintf("%q is not a valid phone number.", s), false
	}
	e := phonenumbers.Format(n, phonenumbers.E164)
	if !store.ValidE164(e) {
		return "", fmt.Sprintf("%q is not a valid phone number.", s), false
	}
	return e, "", true
}

// checkFields checks the values of a contact; pointers are relative to the contact.
func checkFields(number string, f ContactFields) (store.Contact, []jsoncheck.Problem) {
	var ps []jsoncheck.Problem
	c := store.Contact{Name: strings.TrimSpace(f.Name)}
	if n, why, ok := NormalizeNumber(number); ok {
		c.Number = n
	} else {
		ps = append(ps, jsoncheck.Problem{Pointer: "/number", Code: "invalid_format", Detail: why})
	}
	if !utf8.ValidString(c.Name) || utf8.RuneCountInString(c.Name) > 200 || strings.IndexFunc(c.Name, unicode.IsControl) >= 0 {
		ps = append(ps, jsoncheck.Problem{Pointer: "/name", Code: "invalid_value", Detail: "name is at most 200 characters, without control characters."})
	}
	if f.Timezone != nil && *f.Timezone != "" {
		if _, err := loadZone(*f.Timezone); err != nil {
			ps = append(ps, jsoncheck.Problem{Pointer: "/timezone", Code: "invalid_value", Detail: fmt.Sprintf("%q is not a time zone name (such as America/Chicago).", *f.Timezone)})
		}
		c.Timezone = *f.Timezone
	}
	if f.ExternalID != nil {
		c.ExternalID = *f.ExternalID
		if len(c.ExternalID) > 255 {
			ps = append(ps, jsoncheck.Problem{Pointer: "/external_id", Code: "invalid_value", Detail: "external_id is at most 255 characters."})
		}
	}
	for k, v := range f.Variables {
		if s, ok := v.(string); ok && strings.Contains(s, "{{") {
			ps = append(ps, jsoncheck.Problem{Pointer: "/variables/" + jsoncheck.EscapePointer(k), Code: "invalid_value", Detail: fmt.Sprintf("Variable %q cannot hold \"{{\".", k)})
		}
	}
	c.Variables, _ = json.Marshal(orMap(f.Variables))
	c.Metadata, _ = json.Marshal(orMap(f.Metadata))
	return c, ps
}

func orMap[M ~map[string]any](m M) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// project picks the project of a new object: the one named (404 when the actor does not reach
// it), else the first project the actor reaches.
func project(ctx context.Context, q *store.Queries, act app.Actor, id *string) (store.Project, error) {
	if id != nil {
		pid, _ := store.ParseID[store.ProjectID](*id)
		p, err := q.Projects().Get(ctx, act.Scope, pid)
		return p, app.NotFound(err, fault.CodeProjectNotFound, "project", *id)
	}
	ps, err := q.Projects().List(ctx, act.Scope, store.Page{Limit: 1})
	if err != nil {
		return store.Project{}, err
	}
	if len(ps) == 0 {
		return store.Project{}, fault.E(fault.CodeProjectNotFound, "This key reaches no project.")
	}
	return ps[0], nil
}

// CreateContact stores a new contact (409 contact_exists when the project has its number or
// external id; 409 number_on_do_not_call_list when the number is on the list).
func (s *Service) CreateContact(ctx context.Context, act app.Actor, body ContactCreate) (Contact, error) {
	c, ps := checkFields(body.Number, body.ContactFields)
	if len(ps) > 0 {
		return Contact{}, app.Invalid(ps...)
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Contact, error) {
		p, err := project(ctx, tx.Queries, act, body.ProjectID)
		if err != nil {
			return Contact{}, err
		}
		if err := app.Writable(p); err != nil {
			return Contact{}, err
		}
		if on, err := tx.OnDoNotCall(ctx, act.Org.ID, c.Number); err != nil {
			return Contact{}, err
		} else if on {
			return Contact{}, fault.E(fault.CodeDoNotCall, "%s is on the organization's do-not-call list.", c.Number)
		}
		c.OrgID, c.ProjectID = act.Org.ID, p.ID
		got, err := tx.Contacts().Create(ctx, act.Scope, c)
		if errors.Is(err, store.ErrConflict) {
			return Contact{}, fault.E(fault.CodeContactExists, "The project has a contact with number %s or external_id already; change that one (PATCH) or import to update it.", c.Number)
		}
		if err != nil {
			return Contact{}, err
		}
		return ViewContact(got), au.Record("contact.created", "contact", string(got.ID), got.ProjectID, nil)
	})
}

// ContactFilter narrows a list of contacts.
type ContactFilter struct {
	ProjectID  string
	Number     string
	ExternalID string
}

// ListContacts returns a page of the actor's contacts, newest first.
func (s *Service) ListContacts(ctx context.Context, act app.Actor, f ContactFilter, pg store.Page) ([]Contact, error) {
	if _, err := store.ParseID[store.ContactID](pg.After); pg.After != "" && err != nil {
		return nil, fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
	}
	cs, err := s.Store.Contacts().List(ctx, act.Scope, store.ContactFilter{ProjectID: store.ProjectID(f.ProjectID), Number: f.Number, ExternalID: f.ExternalID}, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Contact, len(cs))
	for i, c := range cs {
		out[i] = ViewContact(c)
	}
	return out, nil
}

// GetContact returns the actor's contact with id.
func (s *Service) GetContact(ctx context.Context, act app.Actor, id string) (Contact, error) {
	c, err := s.Store.Contacts().Get(ctx, act.Scope, store.ContactID(id))
	if err != nil {
		return Contact{}, app.NotFound(err, fault.CodeContactNotFound, "contact", id)
	}
	return ViewContact(c), nil
}

// UpdateContact changes the members sent.
func (s *Service) UpdateContact(ctx context.Context, act app.Actor, id string, u ContactUpdate) (Contact, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Contact, error) {
		old, err := tx.Contacts().Get(ctx, act.Scope, store.ContactID(id))
		if err != nil {
			return Contact{}, app.NotFound(err, fault.CodeContactNotFound, "contact", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, old.ProjectID); err != nil {
			return Contact{}, err
		}
		f := ContactFields{Name: old.Name}
		number := old.Number
		if old.Timezone != "" {
			f.Timezone = &old.Timezone
		}
		if old.ExternalID != "" {
			f.ExternalID = &old.ExternalID
		}
		_ = json.Unmarshal(old.Variables, &f.Variables)
		_ = json.Unmarshal(old.Metadata, &f.Metadata)
		if u.Number != nil {
			number = *u.Number
		}
		if u.Name != nil {
			f.Name = *u.Name
		}
		if u.Timezone.Set {
			f.Timezone = nil
			if !u.Timezone.Null {
				f.Timezone = &u.Timezone.Value
			}
		}
		if u.ExternalID.Set {
			f.ExternalID = nil
			if !u.ExternalID.Null {
				f.ExternalID = &u.ExternalID.Value
			}
		}
		if u.Variables != nil {
			f.Variables = *u.Variables
		}
		if u.Metadata != nil {
			f.Metadata = *u.Metadata
		}
		c, ps := checkFields(number, f)
		if len(ps) > 0 {
			return Contact{}, app.Invalid(ps...)
		}
		c.ID = old.ID
		got, err := tx.Contacts().Update(ctx, act.Scope, c)
		if errors.Is(err, store.ErrConflict) {
			return Contact{}, fault.E(fault.CodeContactExists, "Another contact of the project has number %s or this external_id.", c.Number)
		}
		if err != nil {
			return Contact{}, err
		}
		return ViewContact(got), au.Record("contact.updated", "contact", string(got.ID), got.ProjectID, nil)
	})
}

// DeleteContact removes the actor's contact. Campaigns keep their copy of it.
func (s *Service) DeleteContact(ctx context.Context, act app.Actor, id string) (ContactDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (ContactDeleted, error) {
		c, err := tx.Contacts().Get(ctx, act.Scope, store.ContactID(id))
		if err != nil {
			return ContactDeleted{}, app.NotFound(err, fault.CodeContactNotFound, "contact", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, c.ProjectID); err != nil {
			return ContactDeleted{}, err
		}
		if _, err := tx.Contacts().Delete(ctx, act.Scope, c.ID); err != nil {
			return ContactDeleted{}, err
		}
		return ContactDeleted{Object: "contact", ID: string(c.ID), Deleted: true}, au.Record("contact.deleted", "contact", string(c.ID), c.ProjectID, nil)
	})
}

// ContactDeleted is the answer of deleteContact.
type ContactDeleted struct {
	Object  string `json:"object" jsonschema:"enum=contact"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaDoc describes the object in the document.
func (ContactDeleted) SchemaDoc() string {
	return "The contact deleted. Campaigns that called it keep their own copy of the person (number, name, values) and its attempts."
}

// SchemaExtras: deleted is the constant true.
func (ContactDeleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object":  map[string]any{"const": "contact"},
		"id":      map[string]any{"type": "string", "format": "uuid"},
		"deleted": map[string]any{"const": true},
	}}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}
