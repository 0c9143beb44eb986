// Package campaigns holds the rules of contacts, the do-not-call list and campaigns: lists of
// people an outbound agent calls at a set pace, within calling hours read on each person's own
// wall clock, with retries by outcome, voicemail handling and a circuit breaker; and the
// dialler that the job workers run, which leases each attempt on the job queue with its
// conversation id minted before anything is dialled, so that no attempt is ever dialled twice.
//
// It must never import net/http or the runtime: calls are placed through control/app/calls.
package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// Service runs contacts, the do-not-call list and campaigns.
type Service struct {
	Store *store.Store
	// Calls has the start rules, the media and the organization's call limit.
	Calls *calls.Service
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log takes what the dialler cannot answer to anyone (nil: discarded).
	Log *slog.Logger
	// Wake, when set, tells the job workers that attempts were enqueued.
	Wake func(ctx context.Context)
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// MaxCreateContacts is how many contacts one request adds to a campaign.
const MaxCreateContacts = 1000

// CampaignPacing bounds how fast a campaign calls.
type CampaignPacing struct {
	MaxConcurrent      int `json:"max_concurrent,omitempty" doc:"Calls of the campaign going at once (5 when omitted); the organization's call limit applies on top." jsonschema:"minimum=1,maximum=1000"`
	StartsPerMinute    int `json:"starts_per_minute,omitempty" doc:"Calls started in any minute (60 when omitted)." jsonschema:"minimum=1,maximum=6000"`
	RingTimeoutSeconds int `json:"ring_timeout_seconds,omitempty" doc:"How long a call rings before it ends no_answer (30 when omitted)." jsonschema:"minimum=5,maximum=120"`
}

// SchemaDoc describes the object in the document.
func (CampaignPacing) SchemaDoc() string { return "How fast the campaign calls." }

// CampaignCallbacks are the retries of a campaign.
type CampaignCallbacks struct {
	MaxAttempts  int      `json:"max_attempts,omitempty" doc:"Attempts per contact, the first included (3 when omitted)." jsonschema:"minimum=1,maximum=10"`
	RetryOn      []string `json:"retry_on,omitempty" doc:"The outcomes that are tried again: no_answer when omitted. busy (486, 600, 603 and other declines) and voicemail are final unless named here." jsonschema:"maxItems=3,enum=no_answer,enum=busy,enum=voicemail"`
	DelaySeconds int      `json:"delay_seconds,omitempty" doc:"The wait before the first retry (1800 when omitted); each later retry waits backoff times longer. A retry due outside the calling hours waits for their next opening." jsonschema:"minimum=1,maximum=604800"`
	Backoff      float64  `json:"backoff,omitempty" doc:"How much longer each retry waits than the one before (2 when omitted)." jsonschema:"minimum=1,maximum=10"`
}

// SchemaDoc describes the object in the document.
func (CampaignCallbacks) SchemaDoc() string {
	return "Retries by outcome: no_answer is tried again after delay_seconds, then longer each time, up to max_attempts, always inside the calling hours; busy and voicemail only when named in retry_on."
}

// CampaignVoicemail says what a call answered by a machine does.
type CampaignVoicemail struct {
	Detect  *bool  `json:"detect,omitempty" doc:"Run answering-machine detection (true when omitted)."`
	Action  string `json:"action,omitempty" doc:"hang_up (when omitted) ends the call at once; leave_message waits for the beep (or the end of the greeting) and says message in the agent's voice. Either way the contact's outcome is voicemail." jsonschema:"enum=hang_up,enum=leave_message"`
	Message string `json:"message,omitempty" doc:"What leave_message says; {{name}} and the contact's {{variables}} are filled in." jsonschema:"maxLength=2000"`
}

// SchemaDoc describes the object in the document.
func (CampaignVoicemail) SchemaDoc() string {
	return "What a call answered by an answering machine does."
}

// CampaignContactCreate is a person to add to a campaign: a number, or a contact.
type CampaignContactCreate struct {
	ContactID *string `json:"contact_id,omitempty" doc:"A contact of the campaign's project: its number, name, time zone and values are copied (the members sent here replace them)." jsonschema:"format=uuid,nullable"`
	ToNumber  string  `json:"to_number,omitempty" doc:"E.164; required without contact_id."`
	ContactFields
}

// SchemaDoc describes the object in the document.
func (CampaignContactCreate) SchemaDoc() string {
	return "A person to call: to_number (E.164) or contact_id, with the values of the agent's {{placeholders}}, your metadata and the person's time zone."
}

// CampaignCreate is the body of a new campaign.
type CampaignCreate struct {
	AgentID       string                  `json:"agent_id" doc:"The outbound agent." jsonschema:"format=uuid"`
	Name          string                  `json:"name" jsonschema:"minLength=1,maxLength=200"`
	CallingHours  *CallingHours           `json:"calling_hours,omitempty" jsonschema:"nullable"`
	Contacts      []CampaignContactCreate `json:"contacts,omitempty" doc:"Up to 1,000; add more with POST /v1/campaigns/{campaign_id}/contacts." jsonschema:"maxItems=1000"`
	Callbacks     *CampaignCallbacks      `json:"callbacks,omitempty" jsonschema:"nullable"`
	Pacing        *CampaignPacing         `json:"pacing,omitempty" jsonschema:"nullable"`
	Voicemail     *CampaignVoicemail      `json:"voicemail,omitempty" jsonschema:"nullable"`
	PhoneNumberID *string                 `json:"phone_number_id,omitempty" doc:"One of the agent's numbers; the agent's own when omitted." jsonschema:"format=uuid,nullable"`
	Start         bool                    `json:"start,omitempty" doc:"Start dialling now."`
	StartAt       *app.Time               `json:"start_at,omitempty" doc:"Start at this moment (with its offset; none is UTC). Not with start." jsonschema:"nullable"`
}

// SchemaDoc describes the body in the document.
func (CampaignCreate) SchemaDoc() string {
	return "A campaign: a draft, started now with start: true, at start_at, or later with POST /v1/campaigns/{campaign_id}/start."
}

// settings is what a campaign keeps of its creation body.
type settings struct {
	CallingHours  *CallingHours     `json:"calling_hours,omitempty"`
	Callbacks     CampaignCallbacks `json:"callbacks"`
	Pacing        CampaignPacing    `json:"pacing"`
	Voicemail     CampaignVoicemail `json:"voicemail"`
	PhoneNumberID string            `json:"phone_number_id,omitempty"`
}

func (st *settings) defaults() {
	if st.Pacing.MaxConcurrent == 0 {
		st.Pacing.MaxConcurrent = 5
	}
	if st.Pacing.StartsPerMinute == 0 {
		st.Pacing.StartsPerMinute = 60
	}
	if st.Pacing.RingTimeoutSeconds == 0 {
		st.Pacing.RingTimeoutSeconds = 30
	}
	if st.Callbacks.MaxAttempts == 0 {
		st.Callbacks.MaxAttempts = 3
	}
	if st.Callbacks.RetryOn == nil {
		st.Callbacks.RetryOn = []string{store.ContactNoAnswer}
	}
	if st.Callbacks.DelaySeconds == 0 {
		st.Callbacks.DelaySeconds = 1800
	}
	if st.Callbacks.Backoff == 0 {
		st.Callbacks.Backoff = 2
	}
	if st.Voicemail.Detect == nil {
		t := true
		st.Voicemail.Detect = &t
	}
	if st.Voicemail.Action == "" {
		st.Voicemail.Action = "hang_up"
	}
}

func readSettings(raw json.RawMessage) settings {
	var st settings
	_ = json.Unmarshal(raw, &st)
	st.defaults()
	return st
}

// CampaignCounts is how many of a campaign's contacts are in each state.
type CampaignCounts struct {
	Total      int `json:"total" jsonschema:"minimum=0"`
	Queued     int `json:"queued" jsonschema:"minimum=0"`
	Dialing    int `json:"dialing" jsonschema:"minimum=0"`
	InCall     int `json:"in_call" jsonschema:"minimum=0"`
	Completed  int `json:"completed" jsonschema:"minimum=0"`
	NoAnswer   int `json:"no_answer" jsonschema:"minimum=0"`
	Busy       int `json:"busy" jsonschema:"minimum=0"`
	Voicemail  int `json:"voicemail" jsonschema:"minimum=0"`
	Failed     int `json:"failed" jsonschema:"minimum=0"`
	SkippedDNC int `json:"skipped_dnc" jsonschema:"minimum=0"`
	Cancelled  int `json:"cancelled" jsonschema:"minimum=0"`
}

// SchemaDoc describes the object in the document.
func (CampaignCounts) SchemaDoc() string {
	return "How many of the campaign's contacts are in each state."
}

// Campaign is the Campaign object.
type Campaign struct {
	Object        string            `json:"object" jsonschema:"enum=campaign"`
	ID            string            `json:"id" jsonschema:"format=uuid"`
	ProjectID     string            `json:"project_id" jsonschema:"format=uuid"`
	AgentID       string            `json:"agent_id" jsonschema:"format=uuid"`
	Name          string            `json:"name"`
	Status        string            `json:"status" doc:"draft → scheduled (start_at) → running ⇄ paused → completed (every contact finished) or cancelled." jsonschema:"enum=draft,enum=scheduled,enum=running,enum=paused,enum=completed,enum=cancelled"`
	PausedReason  *string           `json:"paused_reason" doc:"Why it is paused: null when paused through the API; the circuit breaker's reason otherwise." jsonschema:"nullable"`
	PausedCode    *string           `json:"paused_code" doc:"The problem code the breaker saw again and again (upstream_unreachable, credit_exhausted, …)." jsonschema:"nullable"`
	CallingHours  *CallingHours     `json:"calling_hours" jsonschema:"nullable"`
	Callbacks     CampaignCallbacks `json:"callbacks"`
	Pacing        CampaignPacing    `json:"pacing"`
	Voicemail     CampaignVoicemail `json:"voicemail"`
	PhoneNumberID *string           `json:"phone_number_id" jsonschema:"format=uuid,nullable"`
	Contacts      CampaignCounts    `json:"contacts"`
	StartAt       *app.Time         `json:"start_at" jsonschema:"nullable"`
	CreatedAt     app.Time          `json:"created_at"`
	UpdatedAt     app.Time          `json:"updated_at"`
	StartedAt     *app.Time         `json:"started_at" jsonschema:"nullable"`
	FinishedAt    *app.Time         `json:"finished_at" jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (Campaign) SchemaDoc() string {
	return "A list of people an outbound agent calls at a set pace within set hours, with how many of them are in each state."
}

// ViewCampaign is the interface's form of a stored campaign.
func ViewCampaign(c store.Campaign) Campaign {
	st := readSettings(c.Settings)
	n := c.Counts
	v := Campaign{Object: "campaign", ID: string(c.ID), ProjectID: string(c.ProjectID), AgentID: string(c.AgentID), Name: c.Name,
		Status: c.Status, PausedReason: nullable(c.PausedReason), PausedCode: nullable(c.PausedCode), CallingHours: st.CallingHours,
		Callbacks: st.Callbacks, Pacing: st.Pacing, Voicemail: st.Voicemail, PhoneNumberID: nullable(st.PhoneNumberID),
		Contacts: CampaignCounts{Queued: n[store.ContactQueued], Dialing: n[store.ContactDialing], InCall: n[store.ContactInCall],
			Completed: n[store.ContactCompleted], NoAnswer: n[store.ContactNoAnswer], Busy: n[store.ContactBusy], Voicemail: n[store.ContactVoicemail],
			Failed: n[store.ContactFailed], SkippedDNC: n[store.ContactSkippedDNC], Cancelled: n[store.ContactCancelled]},
		StartAt: app.TP(c.StartAt), CreatedAt: app.T(c.CreatedAt), UpdatedAt: app.T(c.UpdatedAt), StartedAt: app.TP(c.StartedAt), FinishedAt: app.TP(c.FinishedAt)}
	for _, k := range n {
		v.Contacts.Total += k
	}
	return v
}

// CampaignContact is the CampaignContact object.
type CampaignContact struct {
	Object          string          `json:"object" jsonschema:"enum=campaign_contact"`
	ID              string          `json:"id" jsonschema:"format=uuid"`
	CampaignID      string          `json:"campaign_id" jsonschema:"format=uuid"`
	ContactID       *string         `json:"contact_id" doc:"The contact it was copied from, if any (it may since have been deleted: the campaign keeps its copy)." jsonschema:"format=uuid,nullable"`
	ToNumber        string          `json:"to_number"`
	Name            string          `json:"name"`
	Timezone        *string         `json:"timezone" jsonschema:"nullable"`
	ExternalID      *string         `json:"external_id" jsonschema:"nullable"`
	Variables       json.RawMessage `json:"variables" jsonschema:"type=object"`
	Metadata        json.RawMessage `json:"metadata" jsonschema:"type=object"`
	State           string          `json:"state" doc:"queued → dialing → in_call → completed, or no_answer, busy, voicemail, failed, skipped_dnc (on the do-not-call list when dialled), cancelled." jsonschema:"enum=queued,enum=dialing,enum=in_call,enum=completed,enum=no_answer,enum=busy,enum=voicemail,enum=failed,enum=skipped_dnc,enum=cancelled"`
	Attempts        int             `json:"attempts" doc:"Calls placed to the person so far." jsonschema:"minimum=0"`
	LastOutcome     *string         `json:"last_outcome" jsonschema:"nullable"`
	LastDetail      *string         `json:"last_detail" doc:"What ended the last attempt, such as the conversation's end reason or a problem code." jsonschema:"nullable"`
	NextAttemptAt   *app.Time       `json:"next_attempt_at" jsonschema:"nullable"`
	ConversationIDs []string        `json:"conversation_ids" doc:"The conversations of the attempts, oldest first."`
	CreatedAt       app.Time        `json:"created_at"`
	UpdatedAt       app.Time        `json:"updated_at"`
	FinishedAt      *app.Time       `json:"finished_at" jsonschema:"nullable"`
}

// SchemaDoc describes the object in the document.
func (CampaignContact) SchemaDoc() string {
	return "A person of a campaign: the number and values it is called with, its state, attempts, last outcome and the conversations of its attempts."
}

func viewCampaignContact(c store.CampaignContact, attempts []store.CampaignAttempt) CampaignContact {
	v := CampaignContact{Object: "campaign_contact", ID: string(c.ID), CampaignID: string(c.CampaignID), ContactID: nullable(string(c.ContactID)),
		ToNumber: c.ToNumber, Name: c.Name, Timezone: nullable(c.Timezone), ExternalID: nullable(c.ExternalID), Variables: orEmpty(c.Variables),
		Metadata: orEmpty(c.Metadata), State: c.State, Attempts: c.Attempts, LastOutcome: nullable(c.LastOutcome), LastDetail: nullable(c.LastDetail),
		NextAttemptAt: app.TP(c.NextAttemptAt), ConversationIDs: []string{}, CreatedAt: app.T(c.CreatedAt), UpdatedAt: app.T(c.UpdatedAt), FinishedAt: app.TP(c.FinishedAt)}
	for _, a := range attempts {
		if a.State == store.AttemptPlaced || a.State == store.AttemptFinished && a.Outcome != store.ContactSkippedDNC && a.Outcome != store.ContactCancelled {
			v.ConversationIDs = append(v.ConversationIDs, string(a.ConversationID))
		}
	}
	return v
}

// CampaignContactsAdded is the answer of adding contacts to a campaign.
type CampaignContactsAdded struct {
	Object   string   `json:"object" jsonschema:"enum=campaign_contacts_added"`
	Added    int      `json:"added" jsonschema:"minimum=0"`
	Skipped  int      `json:"skipped" doc:"Numbers the campaign had already." jsonschema:"minimum=0"`
	Campaign Campaign `json:"campaign" doc:"The campaign with its new counts."`
}

// SchemaDoc describes the object in the document.
func (CampaignContactsAdded) SchemaDoc() string { return "How many people were added and skipped." }

// CampaignContactsAdd is the body of more contacts for a campaign.
type CampaignContactsAdd struct {
	Contacts []CampaignContactCreate `json:"contacts" jsonschema:"minItems=1,maxItems=1000"`
}

// SchemaDoc describes the body in the document.
func (CampaignContactsAdd) SchemaDoc() string {
	return "Up to 1,000 more people; a number the campaign has already is skipped."
}

// checkContacts reads a request's contacts into the campaign's copies: every one that does not
// fit is named by its place in contacts; a number on the do-not-call list is 409.
func (s *Service) checkContacts(ctx context.Context, q *store.Queries, act app.Actor, p store.ProjectID, def *agentdef.Definition, in []CampaignContactCreate) ([]store.CampaignContact, error) {
	var ps []jsoncheck.Problem
	out := make([]store.CampaignContact, 0, len(in))
	seen := map[string]int{}
	for i, cc := range in {
		at := fmt.Sprintf("/contacts/%d", i)
		number, f := cc.ToNumber, cc.ContactFields
		var contactID store.ContactID
		if cc.ContactID != nil {
			c, err := q.Contacts().Get(ctx, act.Scope.Narrow(p), store.ContactID(*cc.ContactID))
			if errors.Is(err, store.ErrNotFound) {
				ps = append(ps, jsoncheck.Problem{Pointer: at + "/contact_id", Code: "invalid_value", Detail: fmt.Sprintf("No contact %s in the campaign's project.", app.QuoteID(*cc.ContactID))})
				continue
			}
			if err != nil {
				return nil, err
			}
			contactID = c.ID
			if number == "" {
				number = c.Number
			}
			if f.Name == "" {
				f.Name = c.Name
			}
			if f.Timezone == nil && c.Timezone != "" {
				f.Timezone = &c.Timezone
			}
			if f.ExternalID == nil && c.ExternalID != "" {
				f.ExternalID = &c.ExternalID
			}
			if f.Variables == nil {
				_ = json.Unmarshal(c.Variables, &f.Variables)
			}
			if f.Metadata == nil {
				_ = json.Unmarshal(c.Metadata, &f.Metadata)
			}
		} else if number == "" {
			ps = append(ps, jsoncheck.Problem{Pointer: at + "/to_number", Code: jsoncheck.CodeRequired, Detail: "Give to_number or contact_id."})
			continue
		}
		c, cps := checkFields(number, f)
		for _, p := range cps {
			if p.Pointer == "/number" {
				p.Pointer = "/to_number"
			}
			ps = append(ps, jsoncheck.Problem{Pointer: at + p.Pointer, Code: p.Code, Detail: p.Detail})
		}
		if def != nil {
			for _, p := range def.CheckVariables(orMap(f.Variables)) {
				ps = append(ps, jsoncheck.Problem{Pointer: at + "/variables" + p.Pointer, Code: p.Code, Detail: p.Detail})
			}
		}
		if len(cps) > 0 {
			continue
		}
		if first, dup := seen[c.Number]; dup {
			ps = append(ps, jsoncheck.Problem{Pointer: at + "/to_number", Code: "not_unique", Detail: fmt.Sprintf("contacts/%d has this number already.", first)})
			continue
		}
		seen[c.Number] = i
		out = append(out, store.CampaignContact{ContactID: contactID, ToNumber: c.Number, Name: c.Name, Timezone: c.Timezone,
			ExternalID: c.ExternalID, Variables: c.Variables, Metadata: c.Metadata})
	}
	if len(ps) > 0 {
		return nil, app.Invalid(ps...)
	}
	for _, c := range out {
		if on, err := q.OnDoNotCall(ctx, act.Org.ID, c.ToNumber); err != nil {
			return nil, err
		} else if on {
			return nil, fault.E(fault.CodeDoNotCall, "%s is on the organization's do-not-call list; leave it out of the campaign.", c.ToNumber)
		}
	}
	return out, nil
}

// Create makes a campaign: a draft, running (start), or scheduled (start_at).
func (s *Service) Create(ctx context.Context, act app.Actor, body CampaignCreate) (Campaign, error) {
	now := s.now()
	var ps []jsoncheck.Problem
	if body.Start && body.StartAt != nil {
		ps = append(ps, jsoncheck.Problem{Pointer: "/start_at", Code: "not_allowed", Detail: "Give start or start_at, not both."})
	}
	if body.StartAt != nil && !body.StartAt.After(now) {
		ps = append(ps, jsoncheck.Problem{Pointer: "/start_at", Code: "out_of_range", Detail: fmt.Sprintf("start_at %s has passed; give a later time, or start: true to start now.", body.StartAt.UTC().Format(time.RFC3339))})
	}
	if body.CallingHours != nil {
		for _, p := range body.CallingHours.check() {
			ps = append(ps, jsoncheck.Problem{Pointer: "/calling_hours" + p.Pointer, Code: p.Code, Detail: p.Detail})
		}
	}
	if body.Voicemail != nil && body.Voicemail.Action == "leave_message" && strings.TrimSpace(body.Voicemail.Message) == "" {
		ps = append(ps, jsoncheck.Problem{Pointer: "/voicemail/message", Code: jsoncheck.CodeRequired, Detail: "leave_message needs the message to say."})
	}
	if len(ps) > 0 {
		return Campaign{}, app.Invalid(ps...)
	}
	q := s.Store.Queries
	st, err := s.Calls.Rules.Check(ctx, q, act, act.Mode(), body.AgentID, calls.StartOptions{}, calls.Need{Direction: "outbound", Channel: agentdef.ChannelPhone})
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Code == fault.CodeValidationFailed {
		err = nil // the agent's variables are checked contact by contact below
	}
	if err != nil {
		return Campaign{}, err
	}
	nums, err := q.AgentPhoneNumbers(ctx, st.Agent.ID)
	if err != nil {
		return Campaign{}, err
	}
	set := settings{CallingHours: body.CallingHours}
	switch {
	case body.PhoneNumberID != nil:
		if !slices.ContainsFunc(nums, func(n store.PhoneNumber) bool { return string(n.ID) == *body.PhoneNumberID }) {
			return Campaign{}, fault.E(fault.CodePhoneNumberNotFound, "Number %s is not one of agent %s's numbers.", app.QuoteID(*body.PhoneNumberID), st.Agent.Name)
		}
		set.PhoneNumberID = *body.PhoneNumberID
	case len(nums) == 0:
		return Campaign{}, fault.E(fault.CodeNoNumberToCallFrom, "Agent %s has no phone number to call from; assign one (PATCH /v1/phone-numbers/{id}).", st.Agent.Name)
	}
	if body.Callbacks != nil {
		set.Callbacks = *body.Callbacks
	}
	if body.Pacing != nil {
		set.Pacing = *body.Pacing
	}
	if body.Voicemail != nil {
		set.Voicemail = *body.Voicemail
	}
	set.defaults()
	if act.Live() {
		if err := s.Calls.Media.CanPlace(store.ChannelPhone); err != nil {
			return Campaign{}, err
		}
	}
	contacts, err := s.checkContacts(ctx, q, act, st.Agent.ProjectID, st.Def, body.Contacts)
	if err != nil {
		return Campaign{}, err
	}
	raw, err := json.Marshal(set)
	if err != nil {
		return Campaign{}, err
	}
	status := store.CampaignDraft
	switch {
	case body.Start:
		status = store.CampaignRunning
	case body.StartAt != nil:
		status = store.CampaignScheduled
	}
	var startAt *time.Time
	if body.StartAt != nil {
		startAt = &body.StartAt.Time
	}
	mode := act.Mode()
	if mode == "" {
		mode = store.ModeLive
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Campaign, error) {
		c, err := tx.Campaigns().Create(ctx, act.Scope, store.Campaign{OrgID: act.Org.ID, ProjectID: st.Agent.ProjectID, AgentID: st.Agent.ID,
			Mode: mode, Name: body.Name, Status: status, Settings: raw, StartAt: startAt}, contacts)
		if err != nil {
			return Campaign{}, err
		}
		if err := au.Record("campaign.created", "campaign", string(c.ID), c.ProjectID, map[string]any{"agent_id": c.AgentID, "status": c.Status, "contacts": len(contacts)}); err != nil {
			return Campaign{}, err
		}
		if status == store.CampaignRunning {
			if err := campaignEvent(ctx, tx.Queries, c, "campaign.started", nil); err != nil {
				return Campaign{}, err
			}
		}
		return ViewCampaign(c), nil
	})
}

// campaignEvent records one of the campaign's events on the change's transaction.
func campaignEvent(ctx context.Context, q *store.Queries, c store.Campaign, typ string, extra map[string]any) error {
	e, err := campaignEventOf(c, typ, extra)
	if err != nil {
		return err
	}
	_, err = q.InsertEvent(ctx, e)
	return err
}

// campaignEventOf is the event campaignEvent records.
func campaignEventOf(c store.Campaign, typ string, extra map[string]any) (store.Event, error) {
	data := map[string]any{"campaign_id": c.ID, "name": c.Name, "status": c.Status}
	for k, v := range extra {
		data[k] = v
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return store.Event{}, err
	}
	return store.Event{OrgID: c.OrgID, ProjectID: c.ProjectID, Mode: c.Mode, Type: typ, AgentID: c.AgentID, Data: raw}, nil
}

// CampaignFilter narrows a list of campaigns.
type CampaignFilter struct {
	AgentID string
	Status  string
}

// List returns a page of the actor's campaigns, newest first. A test key lists none (campaigns
// are made with live keys only).
func (s *Service) List(ctx context.Context, act app.Actor, f CampaignFilter, pg store.Page) ([]Campaign, error) {
	if _, err := store.ParseID[store.CampaignID](pg.After); pg.After != "" && err != nil {
		return nil, fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
	}
	cs, err := s.Store.Campaigns().List(ctx, act.Scope, store.CampaignFilter{AgentID: store.AgentID(f.AgentID), Status: f.Status}, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Campaign, len(cs))
	for i, c := range cs {
		out[i] = ViewCampaign(c)
	}
	return out, nil
}

// Get returns the actor's campaign with id.
func (s *Service) Get(ctx context.Context, act app.Actor, id string) (Campaign, error) {
	c, err := s.Store.Campaigns().Get(ctx, act.Scope, store.CampaignID(id))
	if err != nil {
		return Campaign{}, app.NotFound(err, fault.CodeCampaignNotFound, "campaign", id)
	}
	return ViewCampaign(c), nil
}

// moves are the status changes of the API: from which statuses, to which, and the event.
var moves = map[string]struct {
	from  []string
	to    string
	event string
}{
	"start":  {[]string{store.CampaignDraft, store.CampaignScheduled}, store.CampaignRunning, "campaign.started"},
	"pause":  {[]string{store.CampaignRunning, store.CampaignScheduled}, store.CampaignPaused, "campaign.paused"},
	"resume": {[]string{store.CampaignPaused}, store.CampaignRunning, "campaign.resumed"},
	"cancel": {[]string{store.CampaignDraft, store.CampaignScheduled, store.CampaignRunning, store.CampaignPaused}, store.CampaignCancelled, "campaign.cancelled"},
}

// Move applies one of the API's status changes: start, pause, resume or cancel (409
// campaign_state_conflict from a status it does not apply to). Cancel stops for good: the
// contacts waiting are cancelled; calls in progress carry on.
func (s *Service) Move(ctx context.Context, act app.Actor, id, op string) (Campaign, error) {
	m := moves[op]
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Campaign, error) {
		c, err := tx.Campaigns().Get(ctx, act.Scope, store.CampaignID(id))
		if err != nil {
			return Campaign{}, app.NotFound(err, fault.CodeCampaignNotFound, "campaign", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, c.ProjectID); err != nil {
			return Campaign{}, err
		}
		if op == "start" && act.Live() {
			if err := s.Calls.Media.CanPlace(store.ChannelPhone); err != nil {
				return Campaign{}, err
			}
		}
		now := s.now()
		got, err := tx.Campaigns().Move(ctx, c.ID, m.from, m.to, "", "", now)
		if errors.Is(err, store.ErrConflict) {
			return Campaign{}, fault.E(fault.CodeCampaignState, "The campaign is %s; %s applies to a campaign that is %s.", got.Status, op, strings.Join(m.from, " or "))
		}
		if err != nil {
			return Campaign{}, err
		}
		if op == "cancel" {
			if _, err := tx.Campaigns().CancelQueued(ctx, c.ID, now); err != nil {
				return Campaign{}, err
			}
			if got, err = tx.Campaigns().Get(ctx, act.Scope, c.ID); err != nil {
				return Campaign{}, err
			}
		}
		if err := au.Record("campaign."+map[string]string{"start": "started", "pause": "paused", "resume": "resumed", "cancel": "cancelled"}[op],
			"campaign", string(c.ID), c.ProjectID, app.Changed(c.Status, got.Status)); err != nil {
			return Campaign{}, err
		}
		if err := campaignEvent(ctx, tx.Queries, got, m.event, nil); err != nil {
			return Campaign{}, err
		}
		return ViewCampaign(got), nil
	})
}

// AddCampaignContacts adds up to 1,000 people to a campaign that is not finished; numbers it has
// already are skipped.
func (s *Service) AddCampaignContacts(ctx context.Context, act app.Actor, id string, body CampaignContactsAdd) (CampaignContactsAdded, error) {
	c, err := s.Store.Campaigns().Get(ctx, act.Scope, store.CampaignID(id))
	if err != nil {
		return CampaignContactsAdded{}, app.NotFound(err, fault.CodeCampaignNotFound, "campaign", id)
	}
	if c.Status == store.CampaignCompleted || c.Status == store.CampaignCancelled {
		return CampaignContactsAdded{}, fault.E(fault.CodeCampaignState, "The campaign is %s: it takes no more contacts.", c.Status)
	}
	ag, err := s.Store.Queries.AgentInScope(ctx, act.Scope, c.AgentID)
	var def *agentdef.Definition
	if err == nil && s.Calls.Rules.Definitions != nil {
		def, _, _ = s.Calls.Rules.Definitions.Definition(ctx, s.Store.Queries, ag, 0)
	}
	contacts, err := s.checkContacts(ctx, s.Store.Queries, act, c.ProjectID, def, body.Contacts)
	if err != nil {
		return CampaignContactsAdded{}, err
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (CampaignContactsAdded, error) {
		if err := app.WritableProject(ctx, tx.Queries, act, c.ProjectID); err != nil {
			return CampaignContactsAdded{}, err
		}
		cur, err := tx.Campaigns().Get(ctx, act.Scope, c.ID)
		if err != nil {
			return CampaignContactsAdded{}, err
		}
		if cur.Status == store.CampaignCompleted || cur.Status == store.CampaignCancelled {
			return CampaignContactsAdded{}, fault.E(fault.CodeCampaignState, "The campaign is %s: it takes no more contacts.", cur.Status)
		}
		added, err := tx.Campaigns().AddContacts(ctx, cur, contacts)
		if err != nil {
			return CampaignContactsAdded{}, err
		}
		if cur, err = tx.Campaigns().Get(ctx, act.Scope, c.ID); err != nil {
			return CampaignContactsAdded{}, err
		}
		if err := au.Record("campaign.contacts_added", "campaign", string(c.ID), c.ProjectID, map[string]any{"added": len(added)}); err != nil {
			return CampaignContactsAdded{}, err
		}
		return CampaignContactsAdded{Object: "campaign_contacts_added", Added: len(added), Skipped: len(contacts) - len(added), Campaign: ViewCampaign(cur)}, nil
	})
}

// ListCampaignContacts returns a page of a campaign's contacts in the order they were added, each
// with the conversations of its attempts.
func (s *Service) ListCampaignContacts(ctx context.Context, act app.Actor, id, state string, pg store.Page) ([]CampaignContact, error) {
	c, err := s.Store.Campaigns().Get(ctx, act.Scope, store.CampaignID(id))
	if err != nil {
		return nil, app.NotFound(err, fault.CodeCampaignNotFound, "campaign", id)
	}
	if _, err := store.ParseID[store.CampaignContactID](pg.After); pg.After != "" && err != nil {
		return nil, fault.E(fault.CodeInvalidCursor, "The cursor is not one this list gave out.")
	}
	ccs, err := s.Store.Campaigns().ListContacts(ctx, c, store.CampaignContactFilter{State: state}, pg)
	if err != nil {
		return nil, err
	}
	out := make([]CampaignContact, len(ccs))
	for i, cc := range ccs {
		as, err := s.Store.Campaigns().ContactAttempts(ctx, cc.ID)
		if err != nil {
			return nil, err
		}
		out[i] = viewCampaignContact(cc, as)
	}
	return out, nil
}
