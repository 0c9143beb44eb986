package calls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// maxScheduleAhead is how far ahead a call may be scheduled.
const maxScheduleAhead = 30 * 24 * time.Hour

// maxScheduleBehind is how far in the past dial_at may be (clocks differ, requests take a
// while); further back it is refused.
const maxScheduleBehind = 5 * time.Minute

// ScheduledCallCreate is the body of a call to place later.
type ScheduledCallCreate struct {
	CallCreate
	DialAt *app.Time `json:"dial_at,omitempty" doc:"The earliest the call may be placed: now when omitted; at most 30 days ahead and 5 minutes behind (422 otherwise). With call_window, its first opening at or after dial_at must also fall within the 30 days." jsonschema:"nullable"`
}

// SchemaDoc describes the body in the document.
func (ScheduledCallCreate) SchemaDoc() string {
	return "A call to place later: the body of POST /v1/calls plus dial_at (now when omitted, at most 30 days ahead)."
}

// ScheduledCall is the ScheduledCall object.
type ScheduledCall struct {
	Object         string          `json:"object" jsonschema:"enum=scheduled_call"`
	ID             string          `json:"id" jsonschema:"format=uuid"`
	ProjectID      string          `json:"project_id" jsonschema:"format=uuid"`
	AgentID        string          `json:"agent_id" jsonschema:"format=uuid"`
	AgentVersion   *int            `json:"agent_version" jsonschema:"nullable"`
	Mode           string          `json:"mode" jsonschema:"enum=live,enum=test"`
	ToNumber       string          `json:"to_number"`
	FromNumber     *string         `json:"from_number" jsonschema:"nullable"`
	PhoneNumberID  *string         `json:"phone_number_id" jsonschema:"nullable"`
	Language       *string         `json:"language" jsonschema:"nullable"`
	ExternalID     *string         `json:"external_id" jsonschema:"nullable"`
	Metadata       json.RawMessage `json:"metadata" doc:"Your own data (an object), as sent." jsonschema:"type=object"`
	Variables      json.RawMessage `json:"variables" doc:"The values of the agent's {{placeholders}} (an object), as sent." jsonschema:"type=object"`
	CallWindow     *CallWindow     `json:"call_window" jsonschema:"nullable"`
	DialAt         app.Time        `json:"dial_at"`
	DueAt          app.Time        `json:"due_at" doc:"When a worker dials it: dial_at, or the window's first opening at or after it."`
	Status         string          `json:"status" jsonschema:"enum=scheduled,enum=dialing,enum=placed,enum=failed,enum=cancelled"`
	FailureCode    *string         `json:"failure_code" doc:"The problem code a call placed now would get (number_on_do_not_call_list, agent_not_published, credit_exhausted, …)." jsonschema:"nullable"`
	FailureReason  *string         `json:"failure_reason" jsonschema:"nullable"`
	ConversationID *string         `json:"conversation_id" jsonschema:"format=uuid,nullable"`
	Attempts       int             `json:"attempts" jsonschema:"minimum=0"`
	CreatedAt      app.Time        `json:"created_at"`
	UpdatedAt      app.Time        `json:"updated_at"`
	PlacedAt       *app.Time       `json:"placed_at" jsonschema:"nullable"`
	CancelledAt    *app.Time       `json:"cancelled_at" jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (ScheduledCall) SchemaDoc() string {
	return "A call to place later: scheduled, then dialing once a worker takes it, then placed or failed; or cancelled."
}

// ViewScheduled is the interface's form of a stored scheduled call.
func ViewScheduled(s store.ScheduledCall) ScheduledCall {
	var req struct {
		ScheduledCallCreate
		Metadata  json.RawMessage `json:"metadata"`
		Variables json.RawMessage `json:"variables"`
	}
	_ = json.Unmarshal(s.Request, &req)
	v := ScheduledCall{Object: "scheduled_call", ID: string(s.ID), ProjectID: string(s.ProjectID), AgentID: string(s.AgentID),
		AgentVersion: req.AgentVersion, Mode: string(s.Mode), ToNumber: s.ToNumber, FromNumber: req.FromNumber, PhoneNumberID: req.PhoneNumberID,
		Language: req.Language, ExternalID: req.ExternalID, Metadata: orEmpty(req.Metadata), Variables: orEmpty(req.Variables),
		CallWindow: req.CallWindow, DialAt: app.T(s.DialAt), DueAt: app.T(s.DueAt), Status: s.Status, FailureCode: nullable(s.FailureCode),
		FailureReason: nullable(s.FailureReason), Attempts: s.Attempts, CreatedAt: app.T(s.CreatedAt), UpdatedAt: app.T(s.UpdatedAt),
		PlacedAt: app.TP(s.PlacedAt), CancelledAt: app.TP(s.CancelledAt)}
	if s.Status == store.ScheduledPlaced || s.Status == store.ScheduledDialing {
		v.ConversationID = nullable(string(s.ConversationID))
	}
	return v
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Schedule stores a call to place at dial_at, or at the first opening of its window at or
// after it. The request is checked now and again when a worker dials it.
func (s *Service) Schedule(ctx context.Context, act app.Actor, body ScheduledCallCreate) (ScheduledCall, error) {
	now := s.now()
	mode := act.Mode()
	st, err := s.Rules.CheckCall(ctx, s.Store.Queries, act, mode, body.CallCreate, now, false)
	if err != nil {
		return ScheduledCall{}, err
	}
	dialAt := now
	if body.DialAt != nil {
		dialAt = body.DialAt.Time
		switch {
		case dialAt.Sub(now) > maxScheduleAhead:
			return ScheduledCall{}, app.Invalid(jsoncheck.Problem{Pointer: "/dial_at", Code: "out_of_range",
				Detail: fmt.Sprintf("dial_at may be at most 30 days ahead (until %s).", now.Add(maxScheduleAhead).UTC().Format(time.RFC3339))})
		case now.Sub(dialAt) > maxScheduleBehind:
			// A time well in the past is a mistake (a wrong zone, a stale job), not "now".
			return ScheduledCall{}, app.Invalid(jsoncheck.Problem{Pointer: "/dial_at", Code: "out_of_range",
				Detail: fmt.Sprintf("dial_at is %s in the past; give a time from %s on, or leave it out to call now.",
					now.Sub(dialAt).Round(time.Second), now.Add(-maxScheduleBehind).UTC().Format(time.RFC3339))})
		}
	}
	due := dialAt
	if due.Before(now) {
		due = now // a time that has just passed means now
	}
	if st.Window != nil {
		due, _ = st.Window.NextOpening(due)
		if due.Sub(now) > maxScheduleAhead {
			return ScheduledCall{}, app.Invalid(jsoncheck.Problem{Pointer: "/call_window", Code: "out_of_range",
				Detail: fmt.Sprintf("The call window first opens at %s, after the 30 days a call may be scheduled ahead (until %s).",
					due.UTC().Format(time.RFC3339), now.Add(maxScheduleAhead).UTC().Format(time.RFC3339))})
		}
	}
	if mode == store.ModeLive {
		if err := s.Media.CanPlace(store.ChannelPhone); err != nil {
			return ScheduledCall{}, err
		}
	}
	req, err := json.Marshal(body) // checked again when the call is dialled
	if err != nil {
		return ScheduledCall{}, err
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (ScheduledCall, error) {
		sc, err := tx.ScheduledCalls().Create(ctx, act.Scope, store.ScheduledCall{OrgID: act.Org.ID, ProjectID: st.Agent.ProjectID, AgentID: st.Agent.ID,
			Mode: mode, Request: req, ToNumber: body.ToNumber, DialAt: dialAt, DueAt: due})
		if err != nil {
			return ScheduledCall{}, err
		}
		if err := au.Record("scheduled_call.created", "scheduled_call", string(sc.ID), sc.ProjectID, map[string]any{
			"agent_id": sc.AgentID, "to_number": sc.ToNumber, "due_at": sc.DueAt}); err != nil {
			return ScheduledCall{}, err
		}
		return ViewScheduled(sc), nil
	})
}

// ScheduledFilter narrows a list of scheduled calls.
type ScheduledFilter struct {
	AgentID string
	Status  string
}

// ListScheduled returns a page of the actor's scheduled calls (of its mode), newest first,
// with one more when another page follows.
func (s *Service) ListScheduled(ctx context.Context, act app.Actor, f ScheduledFilter, pg store.Page) ([]ScheduledCall, error) {
	if _, err := store.ParseID[store.ScheduledCallID](pg.After); pg.After != "" && err != nil {
		return nil, fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
	}
	ss, err := s.Store.ScheduledCalls().List(ctx, act.Scope, store.ScheduledCallFilter{AgentID: store.AgentID(f.AgentID), Status: f.Status}, pg)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduledCall, len(ss))
	for i, sc := range ss {
		out[i] = ViewScheduled(sc)
	}
	return out, nil
}

// GetScheduled returns the actor's scheduled call with id.
func (s *Service) GetScheduled(ctx context.Context, act app.Actor, id string) (ScheduledCall, error) {
	sc, err := s.Store.ScheduledCalls().Get(ctx, act.Scope, store.ScheduledCallID(id))
	if err != nil {
		return ScheduledCall{}, app.NotFound(err, fault.CodeScheduledCallNotFound, "scheduled call", id)
	}
	return ViewScheduled(sc), nil
}

// CancelScheduled cancels the actor's scheduled call with id while it is still waiting (409
// scheduled_call_not_cancellable otherwise).
func (s *Service) CancelScheduled(ctx context.Context, act app.Actor, id string) (ScheduledCall, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (ScheduledCall, error) {
		sc, err := tx.ScheduledCalls().Get(ctx, act.Scope, store.ScheduledCallID(id))
		if err != nil {
			return ScheduledCall{}, app.NotFound(err, fault.CodeScheduledCallNotFound, "scheduled call", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, sc.ProjectID); err != nil {
			return ScheduledCall{}, err
		}
		got, err := tx.ScheduledCalls().Cancel(ctx, act.Scope, sc.ID, s.now())
		if errors.Is(err, store.ErrConflict) {
			return ScheduledCall{}, fault.E(fault.CodeScheduledNotCancelable, "The scheduled call is %s; only a call still waiting can be cancelled.", got.Status)
		}
		if err != nil {
			return ScheduledCall{}, err
		}
		if err := au.Record("scheduled_call.cancelled", "scheduled_call", string(sc.ID), sc.ProjectID, nil); err != nil {
			return ScheduledCall{}, err
		}
		return ViewScheduled(got), nil
	})
}

// Scheduled calls are dialled by workers. Each DialDue leases the calls that are due (FOR
// UPDATE SKIP LOCKED on PostgreSQL), so any number of workers on any number of nodes dial each
// call once. A leased call is checked again as if it were placed now (do-not-call, published,
// credit, frozen, the number, the variables): a call that no longer fits fails with the code
// the API would answer; one whose window closed meanwhile waits for its next opening; one over
// the concurrent-call limit waits a minute.
const (
	scheduledLease = 2 * time.Minute
	scheduledBatch = 10
	tooManyRetry   = time.Minute
)

// DialDue dials the scheduled calls due by now, as worker, and returns how many it placed.
func (s *Service) DialDue(ctx context.Context, worker string) (int, error) {
	if s.Media == nil {
		return 0, nil
	}
	leased, err := s.Store.LeaseDueScheduledCalls(ctx, worker, s.now(), scheduledLease, scheduledBatch)
	if err != nil {
		return 0, err
	}
	placed := 0
	for _, sc := range leased {
		status, code, reason, retry := s.dialScheduled(ctx, sc)
		if err := s.finish(ctx, sc, worker, status, code, reason, retry); err != nil {
			s.log().WarnContext(ctx, "scheduled call: cannot record how it went", "scheduled_call", sc.ID, "status", status, "err", err)
			continue
		}
		if status == store.ScheduledPlaced {
			placed++
		}
	}
	return placed, nil
}

// finish records how a leased call went and, once placed or failed, its event
// (scheduled_call.placed or scheduled_call.failed, issue 14), in one transaction.
func (s *Service) finish(ctx context.Context, sc store.ScheduledCall, worker, status, code, reason string, retry *time.Time) error {
	return s.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.FinishScheduledCall(ctx, sc.ID, worker, status, code, reason, s.now(), retry); err != nil {
			return err
		}
		typ := map[string]string{store.ScheduledPlaced: EventScheduledPlaced, store.ScheduledFailed: EventScheduledFailed}[status]
		if typ == "" {
			return nil
		}
		now, err := tx.ScheduledCalls().Get(ctx, store.OrgScope(sc.OrgID), sc.ID)
		if err != nil {
			return err
		}
		e := store.Event{OrgID: now.OrgID, ProjectID: now.ProjectID, Mode: now.Mode, Type: typ, AgentID: now.AgentID}
		if status == store.ScheduledPlaced {
			e.ConversationID = now.ConversationID
		}
		_, err = events.Emit(ctx, tx, e, ViewScheduled(now))
		return err
	})
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// dialScheduled checks a leased call again and places it, as the system acting for the call's
// organization in the call's project and mode.
func (s *Service) dialScheduled(ctx context.Context, sc store.ScheduledCall) (status, code, reason string, retry *time.Time) {
	fail := func(err error) (string, string, string, *time.Time) {
		var fe *fault.Error
		if errors.As(err, &fe) {
			return store.ScheduledFailed, fe.Code, fe.Detail, nil
		}
		s.log().WarnContext(ctx, "scheduled call failed", "scheduled_call", sc.ID, "err", err)
		return store.ScheduledFailed, fault.CodeInternal, "The call could not be placed.", nil
	}
	org, err := s.Store.GetOrg(ctx, sc.OrgID)
	if err != nil {
		return fail(err)
	}
	if org.Frozen {
		return fail(fault.E(fault.CodeOrganizationFrozen, "The organization is frozen."))
	}
	var body ScheduledCallCreate
	if err := json.Unmarshal(sc.Request, &body); err != nil {
		return fail(err)
	}
	act := app.SystemActor(org, "scheduler")
	act.Scope = act.Scope.Narrow(sc.ProjectID)
	act.Scope.Mode = sc.Mode
	now := s.now()
	st, err := s.Rules.CheckCall(ctx, s.Store.Queries, act, sc.Mode, body.CallCreate, now, false)
	if err != nil {
		return fail(err)
	}
	if st.Window != nil {
		if opens, _ := st.Window.NextOpening(now); !opens.Equal(now) {
			return store.ScheduledWaiting, "", "", &opens // the worker came after the window closed
		}
	}
	conv := NewConversation(act, sc.Mode, st, store.ChannelPhone, "outbound", store.ConvPending)
	conv.ID, conv.ToNumber = sc.ConversationID, body.ToNumber
	if err := s.Media.AcquireCallSlot(ctx, org.ID, conv.ID, s.MaxCalls); isCode(err, fault.CodeTooManyCalls) {
		t := now.Add(tooManyRetry)
		return store.ScheduledWaiting, "", "", &t
	} else if err != nil {
		return fail(err)
	}
	data := map[string]any{"scheduled_call_id": sc.ID, "agent_id": conv.AgentID, "to_number": conv.ToNumber}
	if _, err := StoreConversation(ctx, s.Store, act, conv, "call.created", data); err != nil {
		s.Media.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, conv.ID)
		return fail(err)
	}
	if err := s.Media.Place(ctx, conv.Mode, Placement{ConversationID: conv.ID, Trunk: st.From.Trunk}); err != nil {
		s.Media.Abandon(ctx, org.ID, conv.ID)
		return fail(err)
	}
	return store.ScheduledPlaced, "", "", nil
}

// isCode reports whether err is a classified error with code.
func isCode(err error, code string) bool {
	var fe *fault.Error
	return errors.As(err, &fe) && fe.Code == code
}
