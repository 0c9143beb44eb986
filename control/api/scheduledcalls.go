package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// maxScheduleAhead is how far ahead a call may be scheduled.
const maxScheduleAhead = 30 * 24 * time.Hour

// scheduledView is the ScheduledCall object.
type scheduledView struct {
	Object         string              `json:"object"`
	ID             string              `json:"id"`
	ProjectID      string              `json:"project_id"`
	AgentID        string              `json:"agent_id"`
	AgentVersion   *int                `json:"agent_version"`
	Mode           string              `json:"mode"`
	ToNumber       string              `json:"to_number"`
	FromNumber     *string             `json:"from_number"`
	PhoneNumberID  *string             `json:"phone_number_id"`
	Language       *string             `json:"language"`
	ExternalID     *string             `json:"external_id"`
	Metadata       json.RawMessage     `json:"metadata"`
	Variables      json.RawMessage     `json:"variables"`
	CallWindow     *runtime.CallWindow `json:"call_window"`
	DialAt         time.Time           `json:"dial_at"`
	DueAt          time.Time           `json:"due_at"`
	Status         string              `json:"status"`
	FailureCode    *string             `json:"failure_code"`
	FailureReason  *string             `json:"failure_reason"`
	ConversationID *string             `json:"conversation_id"`
	Attempts       int                 `json:"attempts"`
	CreatedAt      time.Time           `json:"created_at"`
	UpdatedAt      time.Time           `json:"updated_at"`
	PlacedAt       *time.Time          `json:"placed_at"`
	CancelledAt    *time.Time          `json:"cancelled_at"`
}

func viewScheduled(s store.ScheduledCall) scheduledView {
	var req struct {
		callBody
		Metadata  json.RawMessage `json:"metadata"`
		Variables json.RawMessage `json:"variables"`
	}
	_ = json.Unmarshal(s.Request, &req)
	v := scheduledView{Object: "scheduled_call", ID: string(s.ID), ProjectID: string(s.ProjectID), AgentID: string(s.AgentID),
		AgentVersion: req.AgentVersion, Mode: string(s.Mode), ToNumber: s.ToNumber, FromNumber: req.FromNumber, PhoneNumberID: req.PhoneNumberID,
		Language: req.Language, ExternalID: req.ExternalID, Metadata: orEmpty(req.Metadata), Variables: orEmpty(req.Variables),
		CallWindow: req.CallWindow, DialAt: s.DialAt, DueAt: s.DueAt, Status: s.Status, FailureCode: strPtr(s.FailureCode),
		FailureReason: strPtr(s.FailureReason), Attempts: s.Attempts, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		PlacedAt: s.PlacedAt, CancelledAt: s.CancelledAt}
	if s.Status == store.ScheduledPlaced || s.Status == store.ScheduledDialing {
		v.ConversationID = strPtr(string(s.ConversationID))
	}
	return v
}

func (a *API) createScheduledCall(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var body callBody
	if err := c.bind(&body); err != nil {
		return err
	}
	now := a.now()
	who := callerOf(c.p)
	cs, err := a.checkCall(ctx, a.Store.Queries, who, c.value, body, now, false)
	if err != nil {
		return err
	}
	dialAt := now
	if body.DialAt != nil {
		dialAt = *body.DialAt
		if dialAt.Sub(now) > maxScheduleAhead {
			return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/dial_at", Code: "out_of_range",
				Detail: fmt.Sprintf("dial_at may be at most 30 days ahead (until %s).", now.Add(maxScheduleAhead).UTC().Format(time.RFC3339))}})
		}
	}
	due := dialAt
	if due.Before(now) {
		due = now // a time that has passed means now
	}
	if cs.window != nil {
		due, _ = cs.window.NextOpening(due)
	}
	if c.p.Live() {
		if a.Runtime == nil {
			return mapRuntimeError(runtime.ErrNoMedia, true)
		}
		if err := a.Runtime.CanPlace(); err != nil {
			return mapRuntimeError(err, true)
		}
	}
	req, err := json.Marshal(c.value) // the body as sent, checked again when the call is dialled
	if err != nil {
		return err
	}
	return a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		s, err := tx.CreateScheduledCall(ctx, store.ScheduledCall{OrgID: c.p.Org.ID, ProjectID: cs.agent.ProjectID, AgentID: cs.agent.ID,
			Mode: c.p.Key.Mode, Request: req, ToNumber: body.ToNumber, DialAt: dialAt, DueAt: due})
		if err != nil {
			return 0, nil, err
		}
		if err := au.record("scheduled_call.created", "scheduled_call", string(s.ID), s.ProjectID, map[string]any{
			"agent_id": s.AgentID, "to_number": s.ToNumber, "due_at": s.DueAt}); err != nil {
			return 0, nil, err
		}
		au.location = "/v1/scheduled-calls/" + string(s.ID)
		return http.StatusCreated, viewScheduled(s), nil
	})
}

// reachableScheduled returns the scheduled call at the path if the key reaches it.
func reachableScheduled(r *http.Request, q *store.Queries) (store.ScheduledCall, error) {
	raw := pathParam(r, "scheduled_call_id")
	p := PrincipalFrom(r.Context())
	notFound := fault.E(fault.CodeScheduledCallNotFound, "No scheduled call %s is reachable with this key.", quoteID(raw))
	id, err := store.ParseID[store.ScheduledCallID](raw)
	if err != nil {
		return store.ScheduledCall{}, notFound
	}
	s, err := q.GetScheduledCall(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (s.OrgID != p.Org.ID || !p.Key.Reaches(s.ProjectID) || s.Mode != p.Key.Mode) {
		return store.ScheduledCall{}, notFound
	}
	return s, err
}

func (a *API) listScheduledCalls(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	f := store.ScheduledCallFilter{OrgID: c.p.Org.ID, Mode: c.p.Key.Mode, ProjectIDs: reach(c.p), Status: c.query["status"], Limit: pg.limit + 1}
	if raw, ok := c.query["agent_id"]; ok {
		f.AgentID, _ = store.ParseID[store.AgentID](raw)
	}
	if pg.after != "" {
		if f.BeforeID, err = store.ParseID[store.ScheduledCallID](pg.after); err != nil {
			return fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
		}
	}
	ss, err := a.Store.ListScheduledCalls(ctx, f)
	if err != nil {
		return err
	}
	views := make([]scheduledView, len(ss))
	for i, s := range ss {
		views[i] = viewScheduled(s)
	}
	respond(w, http.StatusOK, makeList(pg, views, func(v scheduledView) string { return v.ID }))
	return nil
}

func (a *API) getScheduledCall(w http.ResponseWriter, r *http.Request) error {
	s, err := reachableScheduled(r, a.Store.Queries)
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, viewScheduled(s))
	return nil
}

func (a *API) cancelScheduledCall(w http.ResponseWriter, r *http.Request) error {
	return a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		s, err := reachableScheduled(r, tx.Queries)
		if err != nil {
			return 0, nil, err
		}
		if err := writableProject(r, tx.Queries, s.ProjectID); err != nil {
			return 0, nil, err
		}
		got, err := tx.CancelScheduledCall(r.Context(), s.ID, a.now())
		if errors.Is(err, store.ErrConflict) {
			return 0, nil, fault.E(fault.CodeScheduledNotCancelable, "The scheduled call is %s; only a call still waiting can be cancelled.", got.Status)
		}
		if err != nil {
			return 0, nil, err
		}
		if err := au.record("scheduled_call.cancelled", "scheduled_call", string(s.ID), s.ProjectID, nil); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, viewScheduled(got), nil
	})
}

// Scheduled calls are dialled by workers. Each DialDueCalls leases the calls that are due
// (FOR UPDATE SKIP LOCKED on PostgreSQL), so any number of workers on any number of nodes
// dial each call once. A leased call is checked again as if it were placed now (do-not-call,
// published, credit, frozen, the number, the variables): a call that no longer fits fails with
// the code the API would answer; one whose window closed meanwhile waits for its next opening;
// one over the concurrent-call limit waits a minute.
const (
	scheduledLease = 2 * time.Minute
	scheduledBatch = 10
	tooManyRetry   = time.Minute
)

// DialDueCalls dials the scheduled calls due by now and returns how many it placed.
func (a *API) DialDueCalls(ctx context.Context, worker string) (int, error) {
	if a.Runtime == nil {
		return 0, nil
	}
	leased, err := a.Store.LeaseDueScheduledCalls(ctx, worker, a.now(), scheduledLease, scheduledBatch)
	if err != nil {
		return 0, err
	}
	placed := 0
	for _, s := range leased {
		status, code, reason, retry := a.dialScheduled(ctx, s)
		if err := a.Store.FinishScheduledCall(ctx, s.ID, worker, status, code, reason, a.now(), retry); err != nil {
			a.Log.WarnContext(ctx, "scheduled call: cannot record how it went", "scheduled_call", s.ID, "status", status, "err", err)
			continue
		}
		if status == store.ScheduledPlaced {
			placed++
		}
	}
	return placed, nil
}

// dialScheduled checks a leased call again and places it.
func (a *API) dialScheduled(ctx context.Context, s store.ScheduledCall) (status, code, reason string, retry *time.Time) {
	fail := func(err error) (string, string, string, *time.Time) {
		var pe *fault.Error
		if errors.As(err, &pe) {
			return store.ScheduledFailed, pe.Code, pe.Detail, nil
		}
		a.Log.WarnContext(ctx, "scheduled call failed", "scheduled_call", s.ID, "err", err)
		return store.ScheduledFailed, fault.CodeInternal, "The call could not be placed.", nil
	}
	org, err := a.Store.GetOrg(ctx, s.OrgID)
	if err != nil {
		return fail(err)
	}
	if org.Frozen {
		return fail(fault.E(fault.CodeOrganizationFrozen, "The organization is frozen."))
	}
	value, err := jsoncheck.Decode(s.Request)
	if err != nil {
		return fail(err)
	}
	var body callBody
	if err := json.Unmarshal(s.Request, &body); err != nil {
		return fail(err)
	}
	who := caller{org: org, mode: s.Mode, reaches: func(p store.ProjectID) bool { return p == s.ProjectID }}
	now := a.now()
	cs, err := a.checkCall(ctx, a.Store.Queries, who, value, body, now, false)
	if err != nil {
		return fail(err)
	}
	if cs.window != nil {
		if opens, _ := cs.window.NextOpening(now); !opens.Equal(now) {
			return store.ScheduledWaiting, "", "", &opens // the worker came after the window closed
		}
	}
	conv := newConversation(who, cs, store.ChannelPhone, "outbound", store.ConvPending)
	conv.ID, conv.ToNumber = s.ConversationID, body.ToNumber
	if err := a.Runtime.AcquireCallSlot(ctx, org.ID, conv.ID, a.MaxCalls); errors.Is(err, runtime.ErrTooMany) {
		t := now.Add(tooManyRetry)
		return store.ScheduledWaiting, "", "", &t
	} else if err != nil {
		return fail(mapRuntimeError(err, true))
	}
	err = a.Store.Tx(ctx, func(tx *store.Tx) error {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return err
		}
		conv = created
		data, _ := json.Marshal(map[string]any{"scheduled_call_id": s.ID, "agent_id": conv.AgentID, "to_number": conv.ToNumber})
		return tx.InsertAudit(ctx, store.AuditEvent{OrgID: org.ID, ProjectID: conv.ProjectID, ActorType: store.ActorSystem, ActorID: "scheduler",
			Action: "call.created", ObjectType: "conversation", ObjectID: string(conv.ID), Data: data})
	})
	if err != nil {
		a.Runtime.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, conv.ID)
		return fail(err)
	}
	if err := a.Runtime.Place(ctx, conv.Mode, runtime.PlaceRequest{ConversationID: conv.ID, Trunk: cs.from.Trunk}); err != nil {
		a.abandon(ctx, conv, session.EndFailed)
		return fail(mapRuntimeError(err, true))
	}
	return store.ScheduledPlaced, "", "", nil
}
