package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CampaignID names a campaign; CampaignContactID one contact of a campaign.
type (
	CampaignID        string
	CampaignContactID string
)

// Campaign statuses: draft (made, not started), scheduled (to start at StartAt), running,
// paused (by the API, or by the circuit breaker with a reason), completed (every contact
// finished), cancelled (for good).
const (
	CampaignDraft     = "draft"
	CampaignScheduled = "scheduled"
	CampaignRunning   = "running"
	CampaignPaused    = "paused"
	CampaignCompleted = "completed"
	CampaignCancelled = "cancelled"
)

// Campaign contact states: queued (waiting for its turn, NextAttemptAt), dialing (an attempt
// is leased), in_call (answered), then one final state.
const (
	ContactQueued     = "queued"
	ContactDialing    = "dialing"
	ContactInCall     = "in_call"
	ContactCompleted  = "completed"
	ContactNoAnswer   = "no_answer"
	ContactBusy       = "busy"
	ContactVoicemail  = "voicemail"
	ContactFailed     = "failed"
	ContactSkippedDNC = "skipped_dnc"
	ContactCancelled  = "cancelled"
)

// ContactStates lists every campaign contact state, in the order of their life.
var ContactStates = []string{ContactQueued, ContactDialing, ContactInCall, ContactCompleted, ContactNoAnswer, ContactBusy,
	ContactVoicemail, ContactFailed, ContactSkippedDNC, ContactCancelled}

// Campaign is a list of people an outbound agent calls at a set pace within set hours.
// Settings is the domain's JSON of its calling hours, pacing, callbacks, voicemail and number.
type Campaign struct {
	ID           CampaignID
	OrgID        OrgID
	ProjectID    ProjectID
	AgentID      AgentID
	Mode         Mode
	Name         string
	Status       string
	Settings     json.RawMessage
	StartAt      *time.Time
	PausedReason string
	PausedCode   string // "" paused through the API; a problem code when the breaker paused it
	CreatedAt    time.Time
	UpdatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	// Counts is how many of its contacts are in each state (filled by Get and List).
	Counts map[string]int
}

const campaignCols = `id, org_id, project_id, agent_id, mode, name, status, settings, start_at, paused_reason, paused_code,
	created_at, updated_at, started_at, finished_at`

func scanCampaign(r rowScanner) (Campaign, error) {
	var c Campaign
	err := r.Scan(campaignDest(&c)...)
	return c, err
}

// campaignDest is the scan destination of campaignCols, in order (see orgDest).
func campaignDest(c *Campaign) []any {
	return []any{&c.ID, &c.OrgID, &c.ProjectID, &c.AgentID, &c.Mode, &c.Name, &c.Status, jsonCol{&c.Settings}, nullTimeCol{&c.StartAt},
		nullTextCol[string]{&c.PausedReason}, nullTextCol[string]{&c.PausedCode}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt},
		nullTimeCol{&c.StartedAt}, nullTimeCol{&c.FinishedAt}}
}

// CampaignContact is one person of a campaign: a copy of the contact as it was added (kept
// when the contact is deleted), its state, attempts and last outcome.
type CampaignContact struct {
	ID             CampaignContactID
	CampaignID     CampaignID
	OrgID          OrgID
	ProjectID      ProjectID
	ContactID      ContactID // "" when added without a contact
	ToNumber       string
	Name           string
	Timezone       string
	ExternalID     string
	Variables      json.RawMessage
	Metadata       json.RawMessage
	State          string
	Attempts       int
	LastOutcome    string
	LastDetail     string
	NextAttemptAt  *time.Time
	ConversationID ConversationID // the current or last attempt's
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     *time.Time
}

const ccCols = `id, campaign_id, org_id, project_id, contact_id, to_number, name, timezone, external_id, variables, metadata,
	state, attempts, last_outcome, last_detail, next_attempt_at, conversation_id, created_at, updated_at, finished_at`

func scanCampaignContact(r rowScanner) (CampaignContact, error) {
	var c CampaignContact
	err := r.Scan(campaignContactDest(&c)...)
	return c, err
}

// campaignContactDest is the scan destination of ccCols, in order (see orgDest).
func campaignContactDest(c *CampaignContact) []any {
	return []any{&c.ID, &c.CampaignID, &c.OrgID, &c.ProjectID, nullTextCol[ContactID]{&c.ContactID}, &c.ToNumber, &c.Name, &c.Timezone,
		nullTextCol[string]{&c.ExternalID}, jsonCol{&c.Variables}, jsonCol{&c.Metadata}, &c.State, &c.Attempts,
		nullTextCol[string]{&c.LastOutcome}, nullTextCol[string]{&c.LastDetail}, nullTimeCol{&c.NextAttemptAt},
		nullTextCol[ConversationID]{&c.ConversationID}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt}, nullTimeCol{&c.FinishedAt}}
}

// Campaigns is the repository of campaigns and their contacts. Every read and write takes the
// caller's Scope, mode included. The dialler's reads and writes cross organizations and live
// on Queries (campaign_dial.go).
type Campaigns struct{ q *Queries }

// Campaigns returns the campaign repository.
func (q *Queries) Campaigns() Campaigns { return Campaigns{q} }

// CampaignFilter narrows a list of campaigns.
type CampaignFilter struct {
	AgentID AgentID
	Status  string
}

// Create stores a campaign and its first contacts in the scope's organization and a project it
// reaches (ErrNotFound otherwise).
func (r Campaigns) Create(ctx context.Context, sc Scope, c Campaign, contacts []CampaignContact) (Campaign, error) {
	switch {
	case !validID(c.OrgID) || !validID(c.ProjectID) || !validID(c.AgentID):
		return Campaign{}, fmt.Errorf("store: %w: campaign ids", ErrInvalid)
	case c.OrgID != sc.Org || !sc.Reaches(c.ProjectID) || sc.Mode != "" && c.Mode != sc.Mode:
		return Campaign{}, notFound("project", c.ProjectID)
	case c.Mode != ModeLive && c.Mode != ModeTest:
		return Campaign{}, fmt.Errorf("store: %w: mode %q", ErrInvalid, c.Mode)
	case c.Status != CampaignDraft && c.Status != CampaignScheduled && c.Status != CampaignRunning:
		return Campaign{}, fmt.Errorf("store: %w: a campaign starts as draft, scheduled or running, not %q", ErrInvalid, c.Status)
	}
	if err := checkName("campaign name", c.Name); err != nil {
		return Campaign{}, err
	}
	settings, err := objectOr("campaign settings", c.Settings)
	if err != nil {
		return Campaign{}, err
	}
	now := r.q.s.timeNow()
	c.ID, c.CreatedAt, c.UpdatedAt, c.Settings = newID[CampaignID](), now, now, json.RawMessage(settings)
	if c.Status == CampaignRunning {
		c.StartedAt = &now
	}
	if c.StartAt != nil {
		t := normTime(*c.StartAt)
		c.StartAt = &t
	}
	err = r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.exec(ctx, "create campaign", `INSERT INTO campaigns (`+campaignCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, NULL, $10, $10, $11, NULL)`,
			string(c.ID), string(c.OrgID), string(c.ProjectID), string(c.AgentID), string(c.Mode), c.Name, c.Status, settings,
			nullTS(c.StartAt), ts(now), nullTS(c.StartedAt)); err != nil {
			return err
		}
		_, err := q.Campaigns().addContacts(ctx, c, contacts, now)
		return err
	})
	if err != nil {
		return Campaign{}, err
	}
	return r.withCounts(ctx, c)
}

// AddContacts adds contacts to the campaign (loaded through the caller's scope) and returns the
// ones added; a number the campaign has already is left out.
func (r Campaigns) AddContacts(ctx context.Context, c Campaign, contacts []CampaignContact) ([]CampaignContact, error) {
	var out []CampaignContact
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		out, err = q.Campaigns().addContacts(ctx, c, contacts, q.s.timeNow())
		return err
	})
	return out, err
}

func (r Campaigns) addContacts(ctx context.Context, c Campaign, contacts []CampaignContact, now time.Time) ([]CampaignContact, error) {
	var out []CampaignContact
	for start := 0; start < len(contacts); start += upsertChunk {
		chunk := contacts[start:min(start+upsertChunk, len(contacts))]
		var args []any
		rows := make([]string, 0, len(chunk))
		for _, cc := range chunk {
			if !ValidE164(cc.ToNumber) {
				return nil, fmt.Errorf("store: %w: campaign contact number %q is not E.164", ErrInvalid, cc.ToNumber)
			}
			vars, err := objectOr("contact variables", cc.Variables)
			if err != nil {
				return nil, err
			}
			meta, err := objectOr("contact metadata", cc.Metadata)
			if err != nil {
				return nil, err
			}
			cc.ID, cc.CampaignID, cc.OrgID, cc.ProjectID = newID[CampaignContactID](), c.ID, c.OrgID, c.ProjectID
			cc.State, cc.Attempts, cc.CreatedAt, cc.UpdatedAt = ContactQueued, 0, now, now
			cc.Variables, cc.Metadata = json.RawMessage(vars), json.RawMessage(meta)
			ph := make([]string, 0, 13)
			for _, v := range []any{string(cc.ID), string(cc.CampaignID), string(cc.OrgID), string(cc.ProjectID), nullText(cc.ContactID),
				cc.ToNumber, cc.Name, cc.Timezone, nullText(cc.ExternalID), vars, meta, cc.State, ts(now)} {
				args = append(args, v)
				ph = append(ph, fmt.Sprintf("$%d", len(args)))
			}
			rows = append(rows, "("+strings.Join(ph[:12], ", ")+", 0, NULL, NULL, NULL, NULL, "+ph[12]+", "+ph[12]+", NULL)")
			out = append(out, cc)
		}
		if len(rows) == 0 {
			continue
		}
		added, err := list(ctx, r.q, "add campaign contacts", `INSERT INTO campaign_contacts (`+ccCols+`) VALUES `+strings.Join(rows, ", ")+
			` ON CONFLICT (campaign_id, to_number) DO NOTHING RETURNING id`, args, func(r rowScanner) (id CampaignContactID, err error) {
			return id, r.Scan(&id)
		})
		if err != nil {
			return nil, err
		}
		if len(added) < len(chunk) { // drop the numbers the campaign had already
			kept := out[:len(out)-len(chunk)]
			for _, cc := range out[len(out)-len(chunk):] {
				if slices.Contains(added, cc.ID) {
					kept = append(kept, cc)
				}
			}
			out = kept
		}
	}
	return out, nil
}

func (r Campaigns) sel(sc Scope) *sel {
	return newSel(`SELECT `+campaignCols+` FROM campaigns`).scope(sc, "org_id", "project_id", "mode")
}

// Get returns the scope's campaign with id, with its counts, or ErrNotFound.
func (r Campaigns) Get(ctx context.Context, sc Scope, id CampaignID) (Campaign, error) {
	c, err := one(ctx, r.q, "get campaign", r.sel(sc).id("id", string(id)), scanCampaign)
	if err != nil {
		return Campaign{}, err
	}
	return r.withCounts(ctx, c)
}

// List returns the scope's campaigns that f selects, newest first, with their counts: a page
// of up to pg.Limit, and one more when another page follows.
func (r Campaigns) List(ctx context.Context, sc Scope, f CampaignFilter, pg Page) ([]Campaign, error) {
	b := r.sel(sc).optID("agent_id", string(f.AgentID))
	if f.Status != "" {
		b.cond("status = ?", f.Status)
	}
	cs, err := many(ctx, r.q, "list campaigns", b, b.page("id", pg, true), scanCampaign)
	if err != nil || len(cs) == 0 {
		return cs, err
	}
	var args []any
	ph := make([]string, len(cs))
	for i, c := range cs {
		args = append(args, string(c.ID))
		ph[i] = fmt.Sprintf("$%d", i+1)
		cs[i].Counts = map[string]int{}
	}
	type count struct {
		id    CampaignID
		state string
		n     int
	}
	counts, err := list(ctx, r.q, "count campaign contacts", `SELECT campaign_id, state, count(*) FROM campaign_contacts WHERE campaign_id IN (`+
		strings.Join(ph, ", ")+`) GROUP BY campaign_id, state`, args, func(r rowScanner) (c count, err error) {
		return c, r.Scan(&c.id, &c.state, &c.n)
	})
	if err != nil {
		return nil, err
	}
	for _, n := range counts {
		for i := range cs {
			if cs[i].ID == n.id {
				cs[i].Counts[n.state] = n.n
			}
		}
	}
	return cs, nil
}

func (r Campaigns) withCounts(ctx context.Context, c Campaign) (Campaign, error) {
	type count struct {
		state string
		n     int
	}
	counts, err := list(ctx, r.q, "count campaign contacts", `SELECT state, count(*) FROM campaign_contacts WHERE campaign_id = $1 GROUP BY state`,
		[]any{string(c.ID)}, func(r rowScanner) (c count, err error) { return c, r.Scan(&c.state, &c.n) })
	if err != nil {
		return Campaign{}, err
	}
	c.Counts = map[string]int{}
	for _, n := range counts {
		c.Counts[n.state] = n.n
	}
	return c, nil
}

// Move changes the status of campaign id (already loaded through the caller's scope, or the
// system's) from one of from to to, with the pause reason and code when to is paused. A
// campaign in another status is ErrConflict; the campaign returned shows its status then.
func (r Campaigns) Move(ctx context.Context, id CampaignID, from []string, to, reason, code string, at time.Time) (Campaign, error) {
	now := ts(normTime(at))
	ph := make([]string, len(from))
	args := []any{string(id), to, now, nullText(reason), nullText(code)}
	for i, f := range from {
		args = append(args, f)
		ph[i] = fmt.Sprintf("$%d", len(args))
	}
	set := `status = $2, updated_at = $3, paused_reason = $4, paused_code = $5`
	switch to {
	case CampaignRunning:
		set += `, started_at = COALESCE(started_at, $3)`
	case CampaignCompleted, CampaignCancelled:
		set += `, finished_at = $3`
	}
	var c Campaign
	err := r.q.get(ctx, "move campaign", `UPDATE campaigns SET `+set+` WHERE id = $1 AND status IN (`+strings.Join(ph, ", ")+`) RETURNING `+campaignCols,
		args, func(rs rowScanner) (err error) { c, err = scanCampaign(rs); return err })
	if isNotFound(err) {
		cur, gerr := one(ctx, r.q, "get campaign", newSel(`SELECT `+campaignCols+` FROM campaigns`).id("id", string(id)), scanCampaign)
		if gerr != nil {
			return Campaign{}, gerr
		}
		return cur, fmt.Errorf("store: move campaign %s to %s: %w: it is %s", id, to, ErrConflict, cur.Status)
	}
	if err != nil {
		return Campaign{}, err
	}
	return r.withCounts(ctx, c)
}

// CampaignContactFilter narrows a list of a campaign's contacts.
type CampaignContactFilter struct {
	State string
}

// ListContacts returns contacts of campaign c (loaded through the caller's scope) in the order
// they were added: a page of up to pg.Limit, and one more when another page follows.
func (r Campaigns) ListContacts(ctx context.Context, c Campaign, f CampaignContactFilter, pg Page) ([]CampaignContact, error) {
	b := newSel(`SELECT `+ccCols+` FROM campaign_contacts`).cond("campaign_id = ?", string(c.ID))
	if f.State != "" {
		b.cond("state = ?", f.State)
	}
	return many(ctx, r.q, "list campaign contacts", b, b.page("id", pg, false), scanCampaignContact)
}

// ContactAttempts lists the conversations of a campaign contact's attempts, oldest first.
func (r Campaigns) ContactAttempts(ctx context.Context, id CampaignContactID) ([]CampaignAttempt, error) {
	return list(ctx, r.q, "list attempts", `SELECT `+attemptCols+` FROM campaign_attempts WHERE campaign_contact_id = $1 ORDER BY created_at`,
		[]any{string(id)}, scanAttempt)
}

// CancelQueued marks every contact of the campaign that is not being called and not finished
// as cancelled.
func (r Campaigns) CancelQueued(ctx context.Context, id CampaignID, at time.Time) (int64, error) {
	now := ts(normTime(at))
	res, err := r.q.exec(ctx, "cancel campaign contacts",
		`UPDATE campaign_contacts SET state = 'cancelled', updated_at = $2, finished_at = $2, next_attempt_at = NULL
		WHERE campaign_id = $1 AND state = 'queued'`, string(id), now)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
