package campaigns

import (
	"context"
	"errors"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// DoNotCall is the DoNotCallEntry object.
type DoNotCall struct {
	Object    string   `json:"object" jsonschema:"enum=do_not_call"`
	Number    string   `json:"number" doc:"E.164."`
	Reason    string   `json:"reason"`
	Source    string   `json:"source" doc:"How the number came onto the list: api (the API or console), caller_request (the person asked the agent during a call), import." jsonschema:"enum=api,enum=caller_request,enum=import"`
	CreatedAt app.Time `json:"created_at"`
}

// SchemaDoc describes the object in the document.
func (DoNotCall) SchemaDoc() string {
	return "A number of the organization's do-not-call list: no call, scheduled call or campaign of any project calls it. It is checked when a call, scheduled call, campaign or contact is made (409) and again when a call is dialled (a campaign's contact ends skipped_dnc)."
}

// DoNotCallCreate is the body of a number to add.
type DoNotCallCreate struct {
	Number string `json:"number" doc:"A phone number in E.164 form."`
	Reason string `json:"reason,omitempty" jsonschema:"maxLength=500"`
	Source string `json:"source,omitempty" doc:"api when omitted." jsonschema:"enum=api,enum=caller_request,enum=import"`
}

// SchemaDoc describes the body in the document.
func (DoNotCallCreate) SchemaDoc() string {
	return "A number to put on the organization's do-not-call list. A number on it already is kept as it was (200)."
}

// DoNotCallRemoved is the answer of removing a number.
type DoNotCallRemoved struct {
	DoNotCall
	Deleted bool `json:"deleted" doc:"Always true."`
}

// SchemaDoc describes the object in the document.
func (DoNotCallRemoved) SchemaDoc() string { return "The entry taken off the list." }

// ViewDoNotCall is the interface's form of an entry.
func ViewDoNotCall(d store.DoNotCall) DoNotCall {
	return DoNotCall{Object: "do_not_call", Number: d.Number, Reason: d.Reason, Source: d.Source, CreatedAt: app.T(d.CreatedAt)}
}

// AddDoNotCall puts a number on the actor's organization's list and reports whether it was
// added (false: it was there, and the entry kept is returned).
func (s *Service) AddDoNotCall(ctx context.Context, act app.Actor, body DoNotCallCreate) (DoNotCall, bool, error) {
	n, why, ok := NormalizeNumber(body.Number)
	if !ok {
		return DoNotCall{}, false, app.Invalid(jsoncheck.Problem{Pointer: "/number", Code: "invalid_format", Detail: why})
	}
	if body.Source == "" {
		body.Source = store.DNCSourceAPI
	}
	type out struct {
		d     DoNotCall
		added bool
	}
	o, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (out, error) {
		d, added, err := tx.DoNotCallList().Add(ctx, act.Scope, store.DoNotCall{Number: n, Reason: body.Reason, Source: body.Source})
		if err != nil || !added {
			return out{ViewDoNotCall(d), added}, err
		}
		return out{ViewDoNotCall(d), true}, au.Record("do_not_call.added", "do_not_call", d.Number, "", map[string]any{"source": d.Source})
	})
	return o.d, o.added, err
}

// ListDoNotCall returns a page of the organization's list, by number (a key that reaches every
// project only: the list is the whole organization's).
func (s *Service) ListDoNotCall(ctx context.Context, act app.Actor, prefix string, pg store.Page) ([]DoNotCall, error) {
	if !act.Scope.AllProjects {
		return nil, fault.E(fault.CodeAllProjectsRequired, "The do-not-call list is the whole organization's: read it with a key that reaches every project.")
	}
	ds, err := s.Store.DoNotCallList().List(ctx, act.Scope, prefix, pg)
	if err != nil {
		return nil, err
	}
	out := make([]DoNotCall, len(ds))
	for i, d := range ds {
		out[i] = ViewDoNotCall(d)
	}
	return out, nil
}

// RemoveDoNotCall takes a number off the list.
func (s *Service) RemoveDoNotCall(ctx context.Context, act app.Actor, number string) (DoNotCallRemoved, error) {
	n, _, ok := NormalizeNumber(number)
	if !ok {
		n = number
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (DoNotCallRemoved, error) {
		d, err := tx.DoNotCallList().Remove(ctx, act.Scope, n)
		if errors.Is(err, store.ErrNotFound) {
			return DoNotCallRemoved{}, fault.E(fault.CodeDoNotCallNotFound, "The number is not on the do-not-call list this key reaches.")
		}
		if err != nil {
			return DoNotCallRemoved{}, err
		}
		return DoNotCallRemoved{DoNotCall: ViewDoNotCall(d), Deleted: true}, au.Record("do_not_call.removed", "do_not_call", d.Number, "", nil)
	})
}
