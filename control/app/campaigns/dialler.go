package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
)

// The dialler. A periodic tick (any worker of any node, once a period between them) serves
// every campaign to run: it starts the scheduled ones whose time came, settles the attempts
// whose conversation moved on (answered, or ended: the outcome, a retry or a final state),
// pauses a campaign whose recent attempts keep failing for one cause, completes a campaign
// whose contacts all finished, and leases the due contacts that pacing and the calling hours
// allow. A lease mints the attempt's conversation id and enqueues an attempt job in one
// transaction; the job (AttemptJob) dials. The attempt becomes "placed" in the transaction
// that stores its conversation, before the INVITE, so a job run again after a crash, a lost
// lease or a second worker finds it placed and dials nothing: each attempt is dialled at most
// once, and the contact's attempts count every call that may have rung. The job is done in the
// commit that places its attempt. A dial that fails at once is settled by its job, with the
// cause it learned (the trunk unreachable, …), before the job ends the conversation: the tick
// settles only ended conversations, so the cause recorded, and counted by the circuit breaker,
// never depends on which of the two got there first.

// KindAttempt is the job kind of one campaign attempt.
const KindAttempt = "campaigns.attempt"

// Dialler settings.
const (
	// staleLease is how long a leased attempt may wait for its job before the tick gives it
	// back (the job's worker went away before it made the conversation: nothing was dialled).
	staleLease = 2 * time.Minute
	// slotRetry is the wait of an attempt refused by the organization's call limit.
	slotRetry = 5 * time.Second
	// breakerWindow attempts are looked at; breakerTrip of them failing for one cause pause
	// the campaign.
	breakerWindow = 10
	breakerTrip   = 8
	// campaignsPerTick bounds the campaigns one tick serves.
	campaignsPerTick = 100
)

// AttemptPayload is the payload of an attempt job.
type AttemptPayload struct {
	ConversationID store.ConversationID `json:"conversation_id"`
	// Start is the campaign's start rules as the tick that leased the attempt resolved them,
	// once for the campaign and tick. It is absent when they failed there (or the contact's
	// variables do not suit the agent): the job then runs every check itself and fails the
	// attempt with the problem's code. A job that runs later than startFresh after the tick
	// (a retry after a crash) runs them again too.
	Start *ResolvedStart `json:"start,omitempty"`
	// Dial is the attempt as the tick leased it, given with Start. A job that runs within
	// startFresh of the tick dials from it without reading the attempt again (see AttemptJob).
	Dial *LeasedAttempt `json:"dial,omitempty"`
}

// LeasedAttempt is what the tick read of a leased attempt: its number and contact's fields,
// its campaign and its organization's time zone. The campaign was running and the contact
// queued then; the attempt's placed mark checks again, as it stores the conversation, that the
// attempt is leased, the campaign running and the number not on the do-not-call list.
type LeasedAttempt struct {
	Attempt      int                     `json:"attempt"`
	CampaignID   store.CampaignID        `json:"campaign_id"`
	AgentID      store.AgentID           `json:"agent_id"`
	OrgID        store.OrgID             `json:"org_id"`
	ProjectID    store.ProjectID         `json:"project_id"`
	Mode         store.Mode              `json:"mode"`
	CampaignName string                  `json:"campaign_name"`
	Settings     json.RawMessage         `json:"settings,omitempty"`
	OrgTimezone  string                  `json:"org_timezone,omitempty"`
	ContactID    store.CampaignContactID `json:"campaign_contact_id"`
	ContactRef   store.ContactID         `json:"contact_id,omitempty"`
	ToNumber     string                  `json:"to_number"`
	Name         string                  `json:"name,omitempty"`
	Timezone     string                  `json:"timezone,omitempty"`
	ExternalID   string                  `json:"external_id,omitempty"`
	Variables    json.RawMessage         `json:"variables,omitempty"`
	Metadata     json.RawMessage         `json:"metadata,omitempty"`
}

// leasedAttempt is the LeasedAttempt of a, leased by the tick for cc of c.
func leasedAttempt(c store.Campaign, org store.Org, cc store.CampaignContact, a store.CampaignAttempt) *LeasedAttempt {
	return &LeasedAttempt{Attempt: a.Attempt, CampaignID: c.ID, AgentID: c.AgentID, OrgID: c.OrgID, ProjectID: c.ProjectID, Mode: c.Mode,
		CampaignName: c.Name, Settings: c.Settings, OrgTimezone: org.Timezone, ContactID: cc.ID, ContactRef: cc.ContactID,
		ToNumber: cc.ToNumber, Name: cc.Name, Timezone: cc.Timezone, ExternalID: cc.ExternalID, Variables: cc.Variables, Metadata: cc.Metadata}
}

// toDial is the attempt, its campaign (running), contact (dialing) and organization as the
// tick left them, as GetAttemptToDial would read them then (the organization: its id and
// time zone only).
func (l *LeasedAttempt) toDial(id store.ConversationID) store.AttemptToDial {
	return store.AttemptToDial{
		Attempt: store.CampaignAttempt{ConversationID: id, CampaignID: l.CampaignID, CampaignContactID: l.ContactID, Attempt: l.Attempt,
			State: store.AttemptLeased},
		Campaign: store.Campaign{ID: l.CampaignID, OrgID: l.OrgID, ProjectID: l.ProjectID, AgentID: l.AgentID, Mode: l.Mode, Name: l.CampaignName,
			Status: store.CampaignRunning, Settings: l.Settings},
		Contact: store.CampaignContact{ID: l.ContactID, CampaignID: l.CampaignID, OrgID: l.OrgID, ProjectID: l.ProjectID, ContactID: l.ContactRef,
			ToNumber: l.ToNumber, Name: l.Name, Timezone: l.Timezone, ExternalID: l.ExternalID, Variables: l.Variables, Metadata: l.Metadata,
			State: store.ContactDialing, Attempts: l.Attempt, ConversationID: id},
		Org: store.Org{ID: l.OrgID, Timezone: l.OrgTimezone},
	}
}

// ResolvedStart is what the start rules found for a campaign: the agent and version to run,
// the number to call from. The do-not-call list is not in it: the job reads it with the
// attempt, at dial time.
type ResolvedStart struct {
	AgentID    store.AgentID       `json:"agent_id"`
	ProjectID  store.ProjectID     `json:"project_id"`
	Version    int                 `json:"version"`
	Language   string              `json:"language"`
	FromID     store.PhoneNumberID `json:"from_id"`
	FromNumber string              `json:"from_number"`
	Trunk      string              `json:"trunk,omitempty"`
	At         time.Time           `json:"at"`

	def *agentdef.Definition // the tick's, to check each contact's variables
}

// startFresh is how long after the tick a job trusts the start rules it resolved.
const startFresh = 5 * time.Second

// TickResult counts what one tick did.
type TickResult struct {
	Leased   int
	Settled  int
	Started  int
	Finished int
}

// Tick serves every campaign to run once, as worker.
func (s *Service) Tick(ctx context.Context) (TickResult, error) {
	var res TickResult
	now := s.now()
	cs, err := s.Store.CampaignsToRun(ctx, now, campaignsPerTick)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, c := range cs {
		if err := s.serve(ctx, c, &res); err != nil {
			s.log().WarnContext(ctx, "campaign: tick failed", "campaign", c.ID, "err", err)
			errs = append(errs, err)
		}
	}
	if res.Leased > 0 && s.Wake != nil {
		s.Wake(ctx)
	}
	return res, errors.Join(errs...)
}

func (s *Service) serve(ctx context.Context, c store.Campaign, res *TickResult) error {
	now := s.now()
	if c.Status == store.CampaignScheduled {
		err := s.Store.Tx(ctx, func(tx *store.Tx) error {
			got, err := tx.Campaigns().Move(ctx, c.ID, []string{store.CampaignScheduled}, store.CampaignRunning, "", "", now)
			if err != nil {
				return err
			}
			c = got
			return campaignEvent(ctx, tx.Queries, got, "campaign.started", map[string]any{"start_at": got.StartAt})
		})
		if errors.Is(err, store.ErrConflict) {
			return nil // paused or cancelled meanwhile
		}
		if err != nil {
			return err
		}
		res.Started++
	}
	org, err := s.Store.GetOrg(ctx, c.OrgID)
	if err != nil {
		return err
	}
	st := readSettings(c.Settings)
	n, err := s.settle(ctx, c, st, now)
	res.Settled += n
	if err != nil {
		return err
	}
	if c.Status != store.CampaignRunning {
		return nil
	}
	if tripped, err := s.breaker(ctx, c, now); err != nil || tripped {
		return err
	}
	load, err := s.Store.CampaignLoadAt(ctx, c.ID, now)
	if err != nil {
		return err
	}
	if load.Unfinished == 0 {
		return s.complete(ctx, c, now, res)
	}
	free := min(st.Pacing.MaxConcurrent-load.Active, st.Pacing.StartsPerMinute-load.StartedMinute)
	if free <= 0 {
		return nil
	}
	due, err := s.Store.DueCampaignContacts(ctx, c.ID, now, free*2)
	if err != nil {
		return err
	}
	var open []store.CampaignContact
	for _, cc := range due {
		if len(open) == free {
			break
		}
		loc := zoneOf(cc.Timezone, org.Timezone)
		if !st.CallingHours.Open(now, loc) {
			if err := s.Store.DeferCampaignContact(ctx, cc.ID, st.CallingHours.NextOpening(now, loc), now); err != nil {
				return err
			}
			continue
		}
		open = append(open, cc)
	}
	if len(open) == 0 {
		return nil
	}
	// The tick's leases, each with its job, commit together: one transaction per tick, not
	// per contact. A contact another tick took meanwhile is left out (its lease is a
	// conditional update that changes nothing, not an error).
	rs := s.resolveStart(ctx, c, org, st, open[0], now)
	suits := make(map[store.CampaignContactID]bool, len(open))
	byID := make(map[store.CampaignContactID]store.CampaignContact, len(open))
	for _, cc := range open {
		suits[cc.ID], byID[cc.ID] = rs.suits(cc), cc
	}
	job := func(a store.CampaignAttempt) store.AttemptJob {
		p := AttemptPayload{ConversationID: a.ConversationID}
		if suits[a.CampaignContactID] {
			p.Start, p.Dial = rs, leasedAttempt(c, org, byID[a.CampaignContactID], a)
		}
		payload, _ := json.Marshal(p)
		return store.AttemptJob{Kind: KindAttempt, Payload: payload, DedupeKey: "campaign_attempt:" + string(a.ConversationID), MaxAttempts: 5}
	}
	leased := 0
	err = s.Store.Tx(ctx, func(tx *store.Tx) error {
		as, err := tx.LeaseCampaignAttempts(ctx, open, now, job)
		leased = len(as)
		return err
	})
	if err != nil {
		return err
	}
	res.Leased += leased
	return nil
}

// campaignActor is the system actor a campaign's calls are made as: its organization, narrowed
// to its project and mode.
func campaignActor(org store.Org, c store.Campaign) app.Actor {
	act := app.SystemActor(org, "campaign")
	act.Scope = act.Scope.Narrow(c.ProjectID)
	act.Scope.Mode = c.Mode
	return act
}

// resolveStart runs the campaign's start rules once for the tick (the agent, its project and
// definition, the number to call from, the credit), for cc, the first of the tick's contacts.
// It is nil when they fail (each job then runs them, and fails its attempt with the problem):
// the do-not-call list is left to each job, and each contact's variables to suits.
func (s *Service) resolveStart(ctx context.Context, c store.Campaign, org store.Org, st settings, cc store.CampaignContact, now time.Time) *ResolvedStart {
	var vars calls.Variables
	_ = json.Unmarshal(cc.Variables, &vars)
	body := calls.CallCreate{AgentID: string(c.AgentID), ToNumber: cc.ToNumber, StartOptions: calls.StartOptions{Variables: vars}}
	if st.PhoneNumberID != "" {
		body.PhoneNumberID = &st.PhoneNumberID
	}
	start, err := s.Calls.Rules.CheckCall(ctx, s.Store.Queries, campaignActor(org, c), c.Mode, body, now, false)
	var fe *fault.Error
	if err != nil && (!errors.As(err, &fe) || fe.Code != fault.CodeDoNotCall) || start.Def == nil || start.From.ID == "" {
		return nil
	}
	return &ResolvedStart{AgentID: start.Agent.ID, ProjectID: start.Agent.ProjectID, Version: start.Version, Language: start.Language,
		FromID: start.From.ID, FromNumber: start.From.Number, Trunk: start.From.Trunk, At: now, def: start.Def}
}

// suits reports whether a contact's variables pass the agent's checks (as the start rules
// check them); one that does not gets no resolved start, and its job reports the problem.
func (rs *ResolvedStart) suits(cc store.CampaignContact) bool {
	if rs == nil || rs.def == nil {
		return false
	}
	var vars calls.Variables
	if len(cc.Variables) > 0 && json.Unmarshal(cc.Variables, &vars) != nil {
		return false
	}
	if vars == nil {
		vars = calls.Variables{}
	}
	if len(rs.def.CheckVariables(vars)) > 0 {
		return false
	}
	for _, v := range vars {
		if s, ok := v.(string); ok && strings.Contains(s, "{{") {
			return false
		}
	}
	return true
}

// start is the calls.Start of a resolved start for one contact.
func (rs *ResolvedStart) start(vars calls.Variables, meta calls.Metadata, external string) (calls.Start, error) {
	st := calls.Start{Agent: store.Agent{ID: rs.AgentID, ProjectID: rs.ProjectID}, Version: rs.Version, Language: rs.Language,
		External: external, From: store.PhoneNumber{ID: rs.FromID, Number: rs.FromNumber, Trunk: rs.Trunk}}
	if vars == nil {
		vars = calls.Variables{}
	}
	var err error
	if st.Variables, err = json.Marshal(vars); err != nil {
		return st, err
	}
	st.Metadata, err = json.Marshal(meta)
	return st, err
}

// zoneOf loads the contact's zone, else the organization's, else UTC. Zones were checked when
// stored; one that no longer loads falls back rather than being dialled at a guessed hour.
func zoneOf(contactTZ, orgTZ string) *time.Location {
	for _, name := range []string{contactTZ, orgTZ} {
		if loc, err := loadZone(name); err == nil {
			return loc
		}
	}
	return time.UTC
}

// complete marks a running campaign whose contacts all finished as completed.
func (s *Service) complete(ctx context.Context, c store.Campaign, now time.Time, res *TickResult) error {
	err := s.Store.Tx(ctx, func(tx *store.Tx) error {
		got, err := tx.Campaigns().Move(ctx, c.ID, []string{store.CampaignRunning}, store.CampaignCompleted, "", "", now)
		if err != nil {
			return err
		}
		return campaignEvent(ctx, tx.Queries, got, "campaign.completed", map[string]any{"contacts": got.Counts})
	})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err == nil {
		res.Finished++
	}
	return err
}

// breaker pauses a campaign whose last attempts mostly failed for one cause (a trunk down,
// calls refused with 403, credit used up), with the cause as its reason and an event.
func (s *Service) breaker(ctx context.Context, c store.Campaign, now time.Time) (bool, error) {
	recent, err := s.Store.RecentAttemptOutcomes(ctx, c.ID, breakerWindow)
	if err != nil || len(recent) < breakerWindow {
		return false, err
	}
	causes := map[string]int{}
	for _, a := range recent {
		if a.Outcome == store.ContactFailed && a.Detail != "" {
			causes[a.Detail]++
		}
	}
	for cause, n := range causes {
		if n < breakerTrip {
			continue
		}
		reason := fmt.Sprintf("%d of the last %d calls failed: %s. Fix the cause, then resume the campaign.", n, len(recent), cause)
		code := cause
		if _, ok := fault.Codes[code]; !ok {
			code = fault.CodeUpstreamUnreachable
			if cause == "failed" || strings.HasPrefix(cause, "sip") {
				code = "call_failed"
			}
		}
		err := s.Store.Tx(ctx, func(tx *store.Tx) error {
			got, err := tx.Campaigns().Move(ctx, c.ID, []string{store.CampaignRunning}, store.CampaignPaused, reason, code, now)
			if err != nil {
				return err
			}
			return campaignEvent(ctx, tx.Queries, got, "campaign.paused", map[string]any{"reason": reason, "code": code, "by": "circuit_breaker"})
		})
		if errors.Is(err, store.ErrConflict) {
			return true, nil
		}
		return err == nil, err
	}
	return false, nil
}

// outcomeOf maps a conversation's end reason to the contact's outcome.
func outcomeOf(endReason string) string {
	switch endReason {
	case "no_answer":
		return store.ContactNoAnswer
	case "busy":
		return store.ContactBusy
	case "voicemail":
		return store.ContactVoicemail
	case "invalid_number", "failed", "provider_error", "credit_exhausted", "network_lost", "media_timeout":
		return store.ContactFailed
	}
	return store.ContactCompleted
}

// retryDelay is the wait before attempt n+1 after n attempts.
func retryDelay(cb CampaignCallbacks, attempts int) time.Duration {
	d := float64(cb.DelaySeconds) * math.Pow(cb.Backoff, float64(max(attempts-1, 0)))
	return time.Duration(min(d, 30*24*3600) * float64(time.Second))
}

// settle records what happened to the campaign's attempts whose conversation moved on.
func (s *Service) settle(ctx context.Context, c store.Campaign, st settings, now time.Time) (int, error) {
	todo, err := s.Store.AttemptsToSettle(ctx, c.ID, now.Add(-staleLease), 500)
	if err != nil {
		return 0, err
	}
	if len(todo) == 0 {
		return 0, nil
	}
	// The tick's settles commit together, one transaction per tick, the outcomes and their
	// events written in a few statements for them all. One that finds its attempt settled
	// meanwhile is left out (a conditional update that changes nothing).
	n := 0
	err = s.Store.Tx(ctx, func(tx *store.Tx) error {
		n = 0
		var outs []store.CampaignAttemptOutcome
		var evs []*store.Event
		for _, t := range todo {
			a := t.Attempt
			var err error
			switch {
			case a.State == store.AttemptLeased: // its job never made the conversation: nothing was dialled
				err = tx.GiveBackAttempt(ctx, a, "the worker went away before dialling", nil, now)
			case t.ConvStatus == store.ConvInProgress:
				err = tx.MarkContactInCall(ctx, a, now)
			default:
				o, ev, err := s.decide(ctx, tx, c, st, a, t.Contact, outcomeOf(t.EndReason), t.EndReason, now)
				if err != nil {
					return err
				}
				outs, evs = append(outs, o), append(evs, ev)
				continue
			}
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			n++
		}
		done, err := tx.FinishAttempts(ctx, outs, now)
		if err != nil {
			return err
		}
		var finished []store.Event
		for i, ok := range done {
			if !ok {
				continue
			}
			n++
			if evs[i] != nil {
				finished = append(finished, *evs[i])
			}
		}
		_, err = tx.InsertEvents(ctx, finished)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// finish records an attempt's outcome: a retry when the outcome is retried and attempts are
// left (queued, its next attempt after the growing delay), or the contact's final state with
// a contact_finished event.
func (s *Service) finish(ctx context.Context, c store.Campaign, st settings, a store.CampaignAttempt, cc store.CampaignContact, outcome, detail string, now time.Time) error {
	return s.Store.Tx(ctx, func(tx *store.Tx) error { return s.finishTx(ctx, tx, c, st, a, cc, outcome, detail, now) })
}

// finishTx is finish in the caller's transaction. cc is the attempt's contact as read with the
// attempt (its attempts count does not move while the attempt is open).
func (s *Service) finishTx(ctx context.Context, tx *store.Tx, c store.Campaign, st settings, a store.CampaignAttempt, cc store.CampaignContact, outcome, detail string, now time.Time) error {
	o, ev, err := s.decide(ctx, tx, c, st, a, cc, outcome, detail, now)
	if err != nil {
		return err
	}
	if err := tx.FinishAttempt(ctx, a, o.Outcome, o.Detail, o.State, o.Next, now); err != nil {
		return err
	}
	if ev == nil {
		return nil
	}
	_, err = tx.InsertEvent(ctx, *ev)
	return err
}

// decide is what an attempt's outcome does: a retry when the outcome is retried and attempts
// are left (the contact queued again, its next attempt after the growing delay), or the
// contact's final state with its contact_finished event.
func (s *Service) decide(ctx context.Context, tx *store.Tx, c store.Campaign, st settings, a store.CampaignAttempt, cc store.CampaignContact, outcome, detail string, now time.Time) (store.CampaignAttemptOutcome, *store.Event, error) {
	o := store.CampaignAttemptOutcome{Attempt: a, Outcome: outcome, Detail: detail, State: outcome}
	retry := slices.Contains(st.Callbacks.RetryOn, outcome) && cc.Attempts < st.Callbacks.MaxAttempts
	if retry {
		cur, err := tx.GetCampaign(ctx, c.ID)
		if err != nil {
			return o, nil, err
		}
		retry = cur.Status != store.CampaignCancelled
	}
	if retry {
		next := now.Add(retryDelay(st.Callbacks, cc.Attempts))
		o.State, o.Next = store.ContactQueued, &next
		return o, nil, nil
	}
	ev, err := campaignEventOf(c, "campaign.contact_finished", map[string]any{"campaign_contact_id": cc.ID,
		"contact_id": app.Nullable(cc.ContactID), "to_number": cc.ToNumber, "outcome": outcome, "detail": detail,
		"attempts": cc.Attempts, "conversation_id": a.ConversationID})
	return o, &ev, err
}

// RunAttempt is the handler of KindAttempt: it runs AttemptJob on the job's payload. A job run
// again (its second attempt or later: after a crash, a lost lease, an error) reads its attempt
// before anything else, whatever its payload says: its first run may have placed the attempt,
// and the call slot the first run took for it must not be taken and given back again (the
// slot is the conversation's: giving it back would free the slot of the call going on).
func (s *Service) RunAttempt(ctx context.Context, j *jobs.Job) error {
	var p AttemptPayload
	if err := j.Decode(&p); err != nil {
		return err
	}
	if j.Attempt > 1 {
		p.Dial = nil
	}
	return s.AttemptJob(ctx, p, j)
}

// AttemptJob dials one leased attempt (the job of KindAttempt: see RunAttempt). It is safe to
// run again for the same attempt: once the attempt is placed, or settled, it dials nothing.
//
// A job that runs within startFresh of the tick that leased its attempt dials from what the
// tick read (the payload's Start and Dial): no read before the write that places the attempt,
// whose conditions (leased, the campaign running, the number not on the do-not-call list) are
// the ones the read would check. When that write refuses, the job reads the attempt and does
// what it finds (notPlaced). Without Dial (a job run again, or late) it reads the attempt first.
//
// j, the attempt's job (nil when run outside the job queue), is marked done in the commit that
// places the attempt: from then on the job has nothing left to do.
func (s *Service) AttemptJob(ctx context.Context, p AttemptPayload, j *jobs.Job) error {
	if now := s.now(); p.Dial != nil && p.Start != nil && p.Start.AgentID == p.Dial.AgentID && now.Sub(p.Start.At).Abs() < startFresh {
		return s.dial(ctx, p, p.Dial.toDial(p.ConversationID), now, j)
	}
	// One joined read: the attempt, its campaign, the contact, the organization, and whether
	// the number is on the do-not-call list now.
	d, err := s.Store.GetAttemptToDial(ctx, p.ConversationID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || d.Attempt.State != store.AttemptLeased {
		return err // placed or settled: never dialled again
	}
	return s.dial(ctx, p, d, s.now(), j)
}

// dial dials the leased attempt d: its checks (the campaign's status, the calling hours, the
// start rules with the do-not-call list), its call slot, its conversation stored with the
// attempt's placed mark, then the INVITE.
func (s *Service) dial(ctx context.Context, p AttemptPayload, d store.AttemptToDial, now time.Time, j *jobs.Job) error {
	a, c, cc, org := d.Attempt, d.Campaign, d.Contact, d.Org
	st := readSettings(c.Settings)
	var err error
	giveBack := func(why string, next *time.Time) error {
		err := s.Store.GiveBackAttempt(ctx, a, why, next, now)
		if errors.Is(err, store.ErrConflict) {
			return nil
		}
		return err
	}
	switch c.Status {
	case store.CampaignRunning:
	case store.CampaignCancelled, store.CampaignCompleted:
		return s.skip(ctx, c, a, cc, store.ContactCancelled, "the campaign was "+c.Status, now)
	default: // paused: the contact waits for the resume
		return giveBack("the campaign was "+c.Status, nil)
	}
	// Checked again at dial time: the calling hours here, the do-not-call list with the start
	// rules below (CheckCall answers number_on_do_not_call_list: the contact is skipped) and
	// again by the placed mark (from the tick's read, only there: notPlaced skips it).
	loc := zoneOf(cc.Timezone, org.Timezone)
	if !st.CallingHours.Open(now, loc) {
		next := st.CallingHours.NextOpening(now, loc)
		return giveBack("outside the calling hours", &next)
	}
	act := campaignActor(org, c)
	var vars calls.Variables
	var meta calls.Metadata
	_ = json.Unmarshal(cc.Variables, &vars)
	_ = json.Unmarshal(cc.Metadata, &meta)
	if meta == nil {
		meta = calls.Metadata{}
	}
	meta["campaign_id"], meta["campaign_contact_id"] = string(c.ID), string(cc.ID)
	if cc.ContactID != "" {
		meta["contact_id"] = string(cc.ContactID)
	}
	body := calls.CallCreate{AgentID: string(c.AgentID), ToNumber: cc.ToNumber,
		StartOptions: calls.StartOptions{Variables: vars, Metadata: meta, ExternalID: nullable(cc.ExternalID)}}
	if st.PhoneNumberID != "" {
		body.PhoneNumberID = &st.PhoneNumberID
	}
	var start calls.Start
	if rs := p.Start; rs != nil && rs.AgentID == c.AgentID && now.Sub(rs.At).Abs() < startFresh {
		// The tick resolved the start rules a moment ago; the do-not-call list is read now
		// (OnDNC), or, dialling from the tick's read, checked by the placed mark.
		if d.OnDNC {
			err = fault.E(fault.CodeDoNotCall, "%s is on the organization's do-not-call list.", cc.ToNumber)
		} else {
			start, err = rs.start(vars, meta, cc.ExternalID)
		}
	} else {
		start, err = s.Calls.Rules.CheckCall(ctx, s.Store.Queries, act, c.Mode, body, now, false)
	}
	var fe *fault.Error
	switch {
	case errors.As(err, &fe) && fe.Code == fault.CodeDoNotCall:
		return s.skip(ctx, c, a, cc, store.ContactSkippedDNC, fe.Code, now)
	case errors.As(err, &fe):
		return s.failAttempt(ctx, c, st, a, cc, fe.Code, now)
	case err != nil:
		return err
	}
	conv := calls.NewConversation(act, c.Mode, start, store.ChannelPhone, "outbound", store.ConvPending)
	conv.ID, conv.ToNumber = a.ConversationID, cc.ToNumber
	if err := s.Calls.Media.AcquireCallSlot(ctx, org.ID, conv.ID, s.Calls.MaxCalls); err != nil {
		if errors.As(err, &fe) && fe.Code == fault.CodeTooManyCalls {
			next := now.Add(slotRetry)
			return giveBack("the organization's call limit", &next)
		}
		return err
	}
	// The conversation, its call.created audit event, the attempt's placed mark and its job's
	// completion commit together, before the INVITE (one statement on PostgreSQL).
	ev, err := act.AuditEvent("call.created", "conversation", string(conv.ID), conv.ProjectID, callCreated{
		AgentID: conv.AgentID, Attempt: a.Attempt, CampaignContactID: cc.ID, CampaignID: c.ID, ToNumber: conv.ToNumber})
	if err == nil {
		var lease *store.JobLease
		if j != nil {
			if l := j.Lease(); l.ID != "" { // a Job made outside a claim holds no lease
				lease = &l
			}
		}
		var completed bool
		_, completed, err = s.Store.PlaceAttempt(ctx, conv, ev, lease, s.now())
		if completed {
			j.Completed()
		}
	}
	if err != nil {
		s.Calls.Media.ReleaseCallSlot(context.WithoutCancel(ctx), org.ID, conv.ID)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		return s.notPlaced(ctx, a.ConversationID, now)
	}
	pl := calls.Placement{ConversationID: conv.ID, Trunk: start.From.Trunk, RingTimeout: time.Duration(st.Pacing.RingTimeoutSeconds) * time.Second}
	if *st.Voicemail.Detect {
		pl.AMD = &calls.AMD{LeaveMessage: st.Voicemail.Action == "leave_message", Message: fillPlaceholders(st.Voicemail.Message, cc)}
	}
	if err := s.Calls.Media.Place(ctx, conv.Mode, pl); err != nil {
		// The attempt is settled now, with the cause the circuit breaker counts, and only then
		// does the conversation end failed and give its slot back: the tick settles ended
		// conversations, and must not settle this one first with the bare "failed" of its end
		// (the job that would have held it off is done since the placing). Had the call ended
		// some other way meanwhile, the tick settled it already (ErrConflict here).
		code := "failed"
		if errors.As(err, &fe) {
			code = fe.Code
		}
		ferr := s.finish(ctx, c, st, a, cc, store.ContactFailed, code, s.now())
		s.Calls.Media.Abandon(context.WithoutCancel(ctx), org.ID, conv.ID)
		if ferr != nil && !errors.Is(ferr, store.ErrConflict) {
			return ferr
		}
	}
	return nil
}

// callCreated is the data of an attempt's call.created audit event: the members a map would
// give, in the same (sorted) order, without a map's encoding cost per attempt.
type callCreated struct {
	AgentID           store.AgentID           `json:"agent_id"`
	Attempt           int                     `json:"attempt"`
	CampaignContactID store.CampaignContactID `json:"campaign_contact_id"`
	CampaignID        store.CampaignID        `json:"campaign_id"`
	ToNumber          string                  `json:"to_number"`
}

// notPlaced follows an attempt whose placed mark was refused (nothing was dialled): settled
// meanwhile (given back by a tick), the campaign stopped running (given back, or the contact
// cancelled with it), or the number put on the do-not-call list (skipped).
func (s *Service) notPlaced(ctx context.Context, id store.ConversationID, now time.Time) error {
	d, err := s.Store.GetAttemptToDial(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || d.Attempt.State != store.AttemptLeased {
		return err
	}
	c := d.Campaign
	switch {
	case c.Status == store.CampaignCancelled || c.Status == store.CampaignCompleted:
		return s.skip(ctx, c, d.Attempt, d.Contact, store.ContactCancelled, "the campaign was "+c.Status, now)
	case d.OnDNC:
		return s.skip(ctx, c, d.Attempt, d.Contact, store.ContactSkippedDNC, fault.CodeDoNotCall, now)
	}
	err = s.Store.GiveBackAttempt(ctx, d.Attempt, "the campaign was "+c.Status, nil, now)
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// skip ends a contact without a call.
func (s *Service) skip(ctx context.Context, c store.Campaign, a store.CampaignAttempt, cc store.CampaignContact, state, detail string, now time.Time) error {
	err := s.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.SkipCampaignContact(ctx, a, state, detail, now); err != nil {
			return err
		}
		return campaignEvent(ctx, tx.Queries, c, "campaign.contact_finished", map[string]any{"campaign_contact_id": cc.ID,
			"contact_id": app.Nullable(cc.ContactID), "to_number": cc.ToNumber, "outcome": state, "detail": detail, "attempts": cc.Attempts - 1})
	})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// failAttempt ends an attempt that could not be placed (the agent unpublished, credit used up,
// …) as failed with the problem code, for the breaker to count.
func (s *Service) failAttempt(ctx context.Context, c store.Campaign, st settings, a store.CampaignAttempt, cc store.CampaignContact, code string, now time.Time) error {
	err := s.finish(ctx, c, st, a, cc, store.ContactFailed, code, now)
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

// fillPlaceholders fills {{name}} and the contact's {{variables}} into a voicemail message;
// an unknown placeholder is left out.
func fillPlaceholders(msg string, cc store.CampaignContact) string {
	var vars map[string]any
	_ = json.Unmarshal(cc.Variables, &vars)
	return placeholder.ReplaceAllStringFunc(msg, func(m string) string {
		k := placeholder.FindStringSubmatch(m)[1]
		if k == "name" && cc.Name != "" {
			return cc.Name
		}
		if v, ok := vars[k]; ok {
			return fmt.Sprint(v)
		}
		return ""
	})
}
