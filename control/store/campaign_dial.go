package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The campaign dialler's reads and writes. They cross organizations (the workers serve every
// campaign) and so live on Queries, like the scheduled calls' lease.

// Attempt states: leased (its conversation id minted, no conversation yet), placed (the
// conversation exists: the INVITE may have gone out, so the attempt is never dialled again),
// finished (its outcome recorded), not_dialled (given back before any conversation was made:
// paused, outside the hours, no slot).
const (
	AttemptLeased     = "leased"
	AttemptPlaced     = "placed"
	AttemptFinished   = "finished"
	AttemptNotDialled = "not_dialled"
)

// CampaignAttempt is one attempt at calling a campaign contact. Its ConversationID is minted
// when the attempt is leased, before anything is dialled.
type CampaignAttempt struct {
	ConversationID    ConversationID
	CampaignID        CampaignID
	CampaignContactID CampaignContactID
	Attempt           int
	State             string
	Outcome           string
	Detail            string
	CreatedAt         time.Time
	FinishedAt        *time.Time
}

const attemptCols = `conversation_id, campaign_id, campaign_contact_id, attempt, state, outcome, detail, created_at, finished_at`

func scanAttempt(r rowScanner) (CampaignAttempt, error) {
	var a CampaignAttempt
	err := r.Scan(attemptDest(&a)...)
	return a, err
}

// attemptDest is the scan destination of attemptCols, in order (see orgDest).
func attemptDest(a *CampaignAttempt) []any {
	return []any{&a.ConversationID, &a.CampaignID, &a.CampaignContactID, &a.Attempt, &a.State, nullTextCol[string]{&a.Outcome},
		nullTextCol[string]{&a.Detail}, timeCol{&a.CreatedAt}, nullTimeCol{&a.FinishedAt}}
}

// GetCampaign returns a campaign by id, whatever its organization (for the workers), without
// its counts (counting is a scan of its contacts; the dialler reads a campaign per attempt).
func (q *Queries) GetCampaign(ctx context.Context, id CampaignID) (Campaign, error) {
	return one(ctx, q, "get campaign", newSel(`SELECT `+campaignCols+` FROM campaigns`).id("id", string(id)), scanCampaign)
}

// CampaignsToRun returns the campaigns the dialler serves at now: the running ones and the
// scheduled ones whose start time has come, oldest first.
func (q *Queries) CampaignsToRun(ctx context.Context, now time.Time, limit int) ([]Campaign, error) {
	return list(ctx, q, "campaigns to run", `SELECT `+campaignCols+` FROM campaigns
		WHERE status = 'running' OR (status = 'scheduled' AND start_at <= $1) ORDER BY id LIMIT $2`,
		[]any{ts(normTime(now)), clampLimit(limit)}, scanCampaign)
}

// CampaignLoad is what pacing needs to know of a campaign at a moment: the contacts being
// called, the attempts started in the last minute, the contacts not finished.
type CampaignLoad struct {
	Active        int
	StartedMinute int
	Unfinished    int
}

// CampaignLoadAt counts a campaign's calls going, starts in the minute before now, and the
// contacts still to finish.
func (q *Queries) CampaignLoadAt(ctx context.Context, id CampaignID, now time.Time) (CampaignLoad, error) {
	var l CampaignLoad
	err := q.get(ctx, "campaign load", `SELECT
		(SELECT count(*) FROM campaign_contacts WHERE campaign_id = $1 AND state IN ('dialing', 'in_call')),
		(SELECT count(*) FROM campaign_attempts WHERE campaign_id = $1 AND created_at > $2 AND state <> 'not_dialled'),
		(SELECT count(*) FROM campaign_contacts WHERE campaign_id = $1 AND state IN ('queued', 'dialing', 'in_call'))`,
		[]any{string(id), ts(normTime(now.Add(-time.Minute)))}, func(r rowScanner) error { return r.Scan(&l.Active, &l.StartedMinute, &l.Unfinished) })
	return l, err
}

// DueCampaignContacts returns up to limit queued contacts of a campaign whose next attempt is
// due at now, the longest waiting first.
func (q *Queries) DueCampaignContacts(ctx context.Context, id CampaignID, now time.Time, limit int) ([]CampaignContact, error) {
	return list(ctx, q, "due campaign contacts", `SELECT `+ccCols+` FROM campaign_contacts
		WHERE campaign_id = $1 AND state = 'queued' AND (next_attempt_at IS NULL OR next_attempt_at <= $2)
		ORDER BY next_attempt_at, id LIMIT $3`, []any{string(id), ts(normTime(now)), clampLimit(limit)}, scanCampaignContact)
}

// DeferCampaignContact moves a queued contact's next attempt to at (its calling hours open then).
func (q *Queries) DeferCampaignContact(ctx context.Context, id CampaignContactID, at, now time.Time) error {
	_, err := q.exec(ctx, "defer campaign contact", `UPDATE campaign_contacts SET next_attempt_at = $2, updated_at = $3 WHERE id = $1 AND state = 'queued'`,
		string(id), ts(normTime(at)), ts(normTime(now)))
	return err
}

// LeaseCampaignAttempt takes the next attempt of a queued contact: it mints the conversation id
// the call will take, records the attempt and marks the contact dialing, in the caller's
// transaction (with the job that will dial it). It is ErrConflict when the contact is no longer
// queued at that attempt count (another worker took it).
func (q *Queries) LeaseCampaignAttempt(ctx context.Context, cc CampaignContact, now time.Time) (CampaignAttempt, error) {
	a := CampaignAttempt{ConversationID: newID[ConversationID](), CampaignID: cc.CampaignID, CampaignContactID: cc.ID,
		Attempt: cc.Attempts + 1, State: AttemptLeased, CreatedAt: normTime(now)}
	res, err := q.exec(ctx, "lease campaign contact",
		`UPDATE campaign_contacts SET state = 'dialing', attempts = attempts + 1, conversation_id = $3, next_attempt_at = NULL, updated_at = $4
		WHERE id = $1 AND state = 'queued' AND attempts = $2`, string(cc.ID), cc.Attempts, string(a.ConversationID), ts(a.CreatedAt))
	if err != nil {
		return CampaignAttempt{}, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return CampaignAttempt{}, fmt.Errorf("store: lease campaign contact %s: %w", cc.ID, ErrConflict)
	}
	if _, err := q.exec(ctx, "record attempt", `INSERT INTO campaign_attempts (`+attemptCols+`) VALUES ($1, $2, $3, $4, 'leased', NULL, NULL, $5, NULL)`,
		string(a.ConversationID), string(a.CampaignID), string(a.CampaignContactID), a.Attempt, ts(a.CreatedAt)); err != nil {
		return CampaignAttempt{}, err
	}
	return a, nil
}

// GetCampaignAttempt returns the attempt whose conversation id is id.
func (q *Queries) GetCampaignAttempt(ctx context.Context, id ConversationID) (CampaignAttempt, error) {
	return one(ctx, q, "get attempt", newSel(`SELECT `+attemptCols+` FROM campaign_attempts`).id("conversation_id", string(id)), scanAttempt)
}

// GetCampaignContact returns a campaign contact by id, whatever its organization.
func (q *Queries) GetCampaignContact(ctx context.Context, id CampaignContactID) (CampaignContact, error) {
	return one(ctx, q, "get campaign contact", newSel(`SELECT `+ccCols+` FROM campaign_contacts`).id("id", string(id)), scanCampaignContact)
}

// MarkAttemptPlaced records, in the transaction that stores its conversation, that an
// attempt's conversation exists: from then on it is never dialled again. It is ErrConflict when
// the attempt is no longer leased, its campaign is no longer running (paused or cancelled
// meanwhile: nothing new is dialled) or its number is on the organization's do-not-call list
// (added meanwhile: the number is not dialled).
func (q *Queries) MarkAttemptPlaced(ctx context.Context, id ConversationID) error {
	res, err := q.exec(ctx, "attempt placed", `UPDATE campaign_attempts SET state = 'placed' WHERE conversation_id = $1 AND `+attemptPlaceable, string(id))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: attempt %s: %w: not leased", id, ErrConflict)
	}
	return nil
}

// attemptPlaceable is the condition on a campaign_attempts row for its placed mark: leased, its
// campaign running, its contact's number not on the organization's do-not-call list.
const attemptPlaceable = `campaign_attempts.state = 'leased'
	AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = campaign_attempts.campaign_id AND c.status = 'running')
	AND NOT EXISTS (SELECT 1 FROM campaign_contacts cc JOIN do_not_call d ON d.org_id = cc.org_id AND d.number = cc.to_number
		WHERE cc.id = campaign_attempts.campaign_contact_id)`

// PlaceAttempt stores a leased attempt's conversation (conv, its ID the attempt's) with its
// placed mark (MarkAttemptPlaced) and the audit event of its creation, all or nothing, before
// the INVITE. It is ErrConflict, and writes nothing, when the attempt is no longer leased, its
// campaign no longer runs or its number is on the do-not-call list; ErrNotFound when conv's
// project is not in its organization.
//
// With job (the lease of the attempt's job), the job is marked done at in the same commit:
// once the attempt is placed its job has nothing left to do (run again, it finds the attempt
// placed and dials nothing). completed reports whether it was; a lease lost meanwhile (another
// worker claimed the job) leaves the job alone and does not stop the placing, since the placed
// mark alone keeps the attempt to one call.
//
// On PostgreSQL it is one statement (no transaction of its own: one round trip instead of six
// with BEGIN and COMMIT), each write taking the row of the one before it; on SQLite the
// statements in a transaction.
func (q *Queries) PlaceAttempt(ctx context.Context, conv Conversation, audit AuditEvent, job *JobLease, at time.Time) (_ Conversation, completed bool, _ error) {
	if q.s.d.name != Postgres {
		err := q.atomic(ctx, func(q *Queries) error {
			if err := q.MarkAttemptPlaced(ctx, conv.ID); err != nil {
				return err
			}
			var err error
			if conv, err = q.CreateConversation(ctx, conv); err != nil {
				return err
			}
			if err := q.InsertAudit(ctx, audit); err != nil {
				return err
			}
			if job != nil {
				res, err := q.exec(ctx, "complete job", `UPDATE jobs SET state = 'done', finished_at = $4, updated_at = $4, lease_expires_at = NULL
					WHERE `+leaseCond, leaseArgs(*job, ts(normTime(at)))...)
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				completed = n == 1
			}
			return nil
		})
		if err != nil {
			return conv, false, err
		}
		return conv, completed, nil
	}
	if !validID(conv.ID) {
		return Conversation{}, false, fmt.Errorf("store: %w: conversation ids", ErrInvalid)
	}
	conv, args, err := q.newConversation(conv)
	if err != nil {
		return Conversation{}, false, err
	}
	au, err := q.auditArgs(audit)
	if err != nil {
		return Conversation{}, false, err
	}
	// The audit event's values follow the conversation's: $21 to $32; the job's lease and the
	// time it is done, $33 to $36 (a NULL id, which matches no job, when there is none).
	args = append(args, au...)
	if job != nil {
		args = append(args, string(job.ID), job.Owner, job.Attempt, ts(normTime(at)))
	} else {
		args = append(args, nil, "", 0, ts(normTime(at)))
	}
	var done int
	err = q.get(ctx, "place attempt", `WITH placed AS (
			UPDATE campaign_attempts SET state = 'placed' WHERE conversation_id = $1 AND `+attemptPlaceable+`
				AND EXISTS (SELECT 1 FROM projects p WHERE p.id = $3 AND p.org_id = $2)
			RETURNING conversation_id),
		conv AS (INSERT INTO conversations (`+convInsertCols+`) SELECT `+convInsertVals+` FROM placed RETURNING id),
		done AS (UPDATE jobs SET state = 'done', finished_at = $36, updated_at = $36, lease_expires_at = NULL
			WHERE id = $33 AND state = 'running' AND lease_owner = $34 AND attempts = $35 AND EXISTS (SELECT 1 FROM placed)
			RETURNING id)
		INSERT INTO audit_events (`+auditCols+`) SELECT $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32 FROM conv
		RETURNING (SELECT count(*) FROM done)`,
		args, func(r rowScanner) error { return r.Scan(&done) })
	if err == nil {
		return conv, done == 1, nil
	}
	if !isNotFound(err) {
		return Conversation{}, false, err
	}
	// Nothing was written: say why, as the three statements would have.
	var placeable, projectOK bool
	if err := q.get(ctx, "place attempt", `SELECT
		EXISTS (SELECT 1 FROM campaign_attempts WHERE conversation_id = $1 AND `+attemptPlaceable+`),
		EXISTS (SELECT 1 FROM projects p WHERE p.id = $3 AND p.org_id = $2)`,
		[]any{string(conv.ID), string(conv.OrgID), string(conv.ProjectID)}, func(r rowScanner) error { return r.Scan(&placeable, &projectOK) }); err != nil {
		return Conversation{}, false, err
	}
	if placeable && !projectOK {
		return Conversation{}, false, notFound("project", conv.ProjectID)
	}
	return Conversation{}, false, fmt.Errorf("store: attempt %s: %w: not leased", conv.ID, ErrConflict)
}

// GiveBackAttempt undoes a leased attempt that dialled nothing: the attempt is not_dialled, and
// the contact is queued again (its attempt count restored) with its next attempt at next.
func (q *Queries) GiveBackAttempt(ctx context.Context, a CampaignAttempt, reason string, next *time.Time, now time.Time) error {
	res, err := q.exec(ctx, "give back attempt", `UPDATE campaign_attempts SET state = 'not_dialled', detail = $2, finished_at = $3
		WHERE conversation_id = $1 AND state = 'leased'`, string(a.ConversationID), nullText(reason), ts(normTime(now)))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: attempt %s: %w: not leased", a.ConversationID, ErrConflict)
	}
	_, err = q.exec(ctx, "requeue campaign contact", `UPDATE campaign_contacts SET state = 'queued', attempts = attempts - 1, next_attempt_at = $3,
		updated_at = $4 WHERE id = $1 AND conversation_id = $2 AND state = 'dialing'`,
		string(a.CampaignContactID), string(a.ConversationID), nullTS(next), ts(normTime(now)))
	return err
}

// AttemptToSettle is an open attempt whose conversation has moved on: answered, or ended.
type AttemptToSettle struct {
	Attempt    CampaignAttempt
	ConvStatus string
	EndReason  string
	// What the settle needs of the contact: its id, attempts, number and contact (ID,
	// Attempts, ToNumber and ContactID are set; the rest is not read).
	Contact CampaignContact
}

// AttemptsToSettle returns up to limit placed attempts of a campaign whose conversation is in
// progress (the contact is in_call) or has ended (the outcome is to be recorded), and the
// leased attempts older than stale whose conversation never came (the worker went away before
// making it: nothing was dialled). An attempt job whose dial fails settles its attempt itself,
// before it ends the conversation, so the tick never finds that conversation ended first.
func (q *Queries) AttemptsToSettle(ctx context.Context, id CampaignID, stale time.Time, limit int) ([]AttemptToSettle, error) {
	return list(ctx, q, "attempts to settle", `SELECT a.conversation_id, a.campaign_id, a.campaign_contact_id, a.attempt, a.state, a.outcome, a.detail,
		a.created_at, a.finished_at, COALESCE(c.status, ''), COALESCE(c.end_reason, ''), cc.attempts, cc.to_number, cc.contact_id
		FROM campaign_attempts a JOIN campaign_contacts cc ON cc.id = a.campaign_contact_id
		LEFT JOIN conversations c ON c.id = a.conversation_id
		WHERE a.campaign_id = $1 AND (
			(a.state = 'placed' AND (c.status = 'ended' OR (c.status = 'in_progress' AND cc.state = 'dialing')))
			OR (a.state = 'leased' AND a.created_at < $2 AND c.id IS NULL))
		ORDER BY a.created_at LIMIT $3`, []any{string(id), ts(normTime(stale)), clampLimit(limit)},
		func(r rowScanner) (s AttemptToSettle, err error) {
			a := &s.Attempt
			err = r.Scan(&a.ConversationID, &a.CampaignID, &a.CampaignContactID, &a.Attempt, &a.State, nullTextCol[string]{&a.Outcome},
				nullTextCol[string]{&a.Detail}, timeCol{&a.CreatedAt}, nullTimeCol{&a.FinishedAt}, &s.ConvStatus, &s.EndReason,
				&s.Contact.Attempts, &s.Contact.ToNumber, nullTextCol[ContactID]{&s.Contact.ContactID})
			s.Contact.ID, s.Contact.CampaignID = a.CampaignContactID, a.CampaignID
			return s, err
		})
}

// MarkContactInCall records that a contact's current attempt was answered.
func (q *Queries) MarkContactInCall(ctx context.Context, a CampaignAttempt, now time.Time) error {
	_, err := q.exec(ctx, "campaign contact in call", `UPDATE campaign_contacts SET state = 'in_call', updated_at = $3
		WHERE id = $1 AND conversation_id = $2 AND state = 'dialing'`, string(a.CampaignContactID), string(a.ConversationID), ts(normTime(now)))
	return err
}

// FinishAttempt records an attempt's outcome and moves its contact: to state (final, or queued
// again with its next attempt at next). It is ErrConflict when the attempt was settled already.
func (q *Queries) FinishAttempt(ctx context.Context, a CampaignAttempt, outcome, detail, state string, next *time.Time, now time.Time) error {
	n := ts(normTime(now))
	res, err := q.exec(ctx, "finish attempt", `UPDATE campaign_attempts SET state = 'finished', outcome = $2, detail = $3, finished_at = $4
		WHERE conversation_id = $1 AND state IN ('leased', 'placed')`, string(a.ConversationID), outcome, nullText(detail), n)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return fmt.Errorf("store: attempt %s: %w: settled already", a.ConversationID, ErrConflict)
	}
	var finished any
	if state != ContactQueued {
		finished = n
	}
	_, err = q.exec(ctx, "campaign contact outcome", `UPDATE campaign_contacts SET state = $3, last_outcome = $4, last_detail = $5,
		next_attempt_at = $6, updated_at = $7, finished_at = $8 WHERE id = $1 AND conversation_id = $2`,
		string(a.CampaignContactID), string(a.ConversationID), state, outcome, nullText(detail), nullTS(next), n, finished)
	return err
}

// SkipCampaignContact ends a contact without a call (skipped_dnc, cancelled): its leased
// attempt is marked not dialled and no longer counts, and the contact takes the final state.
func (q *Queries) SkipCampaignContact(ctx context.Context, a CampaignAttempt, state, detail string, now time.Time) error {
	n := ts(normTime(now))
	res, err := q.exec(ctx, "skip attempt", `UPDATE campaign_attempts SET state = 'not_dialled', outcome = $2, detail = $3, finished_at = $4
		WHERE conversation_id = $1 AND state = 'leased'`, string(a.ConversationID), state, nullText(detail), n)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return fmt.Errorf("store: attempt %s: %w: not leased", a.ConversationID, ErrConflict)
	}
	_, err = q.exec(ctx, "skip campaign contact", `UPDATE campaign_contacts SET state = $3, attempts = attempts - 1, last_outcome = $3,
		last_detail = $4, next_attempt_at = NULL, updated_at = $5, finished_at = $5 WHERE id = $1 AND conversation_id = $2`,
		string(a.CampaignContactID), string(a.ConversationID), state, nullText(detail), n)
	return err
}

// RecentAttemptOutcomes returns the outcomes of a campaign's last n finished attempts, newest
// first (for the circuit breaker).
func (q *Queries) RecentAttemptOutcomes(ctx context.Context, id CampaignID, n int) ([]CampaignAttempt, error) {
	return list(ctx, q, "recent attempts", `SELECT `+attemptCols+` FROM campaign_attempts WHERE campaign_id = $1 AND state = 'finished'
		ORDER BY finished_at DESC LIMIT $2`, []any{string(id), clampLimit(n)}, scanAttempt)
}

// AttemptToDial is what an attempt job reads before it dials: the attempt, its campaign (with
// no counts), the contact, the organization, and whether the contact's number is on the
// organization's do-not-call list now.
type AttemptToDial struct {
	Attempt  CampaignAttempt
	Campaign Campaign
	Contact  CampaignContact
	Org      Org
	OnDNC    bool
}

// GetAttemptToDial reads an attempt's rows in one joined query (the attempt job's one read
// before it dials). It is ErrNotFound when there is no such attempt.
func (q *Queries) GetAttemptToDial(ctx context.Context, id ConversationID) (AttemptToDial, error) {
	var d AttemptToDial
	if !validID(id) {
		return d, notFound("attempt", id)
	}
	err := q.get(ctx, "attempt to dial", attemptToDialQuery, []any{string(id)},
		func(r rowScanner) error {
			dest := append(attemptDest(&d.Attempt), campaignDest(&d.Campaign)...)
			dest = append(dest, campaignContactDest(&d.Contact)...)
			dest = append(dest, orgDest(&d.Org)...)
			return r.Scan(append(dest, &d.OnDNC)...)
		})
	return d, err
}

// attemptToDialQuery is GetAttemptToDial's query, made once (its column lists are long).
var attemptToDialQuery = `SELECT ` + prefixCols("a", attemptCols) + `, ` + prefixCols("c", campaignCols) + `,
	` + prefixCols("cc", ccCols) + `, ` + prefixCols("o", orgCols) + `,
	EXISTS (SELECT 1 FROM do_not_call d WHERE d.org_id = c.org_id AND d.number = cc.to_number)
	FROM campaign_attempts a JOIN campaigns c ON c.id = a.campaign_id JOIN campaign_contacts cc ON cc.id = a.campaign_contact_id
	JOIN organizations o ON o.id = c.org_id WHERE a.conversation_id = $1`

// jsonRows renders n rows as one JSON array of arrays, SQLite's way to pass lists to a
// statement (read with json_each), as PostgreSQL's arrays do.
func jsonRows(n int, row func(i int) []any) string {
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = row(i)
	}
	b, _ := json.Marshal(rows) // strings and integers only
	return string(b)
}

// prefixCols qualifies each of a list of columns with a table's alias.
func prefixCols(alias, cols string) string {
	f := strings.Split(cols, ",")
	for i, c := range f {
		f[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(f, ", ")
}

// AttemptJob is the job that dials a leased attempt, as LeaseCampaignAttempts enqueues it.
type AttemptJob struct {
	Kind        string
	Payload     json.RawMessage
	DedupeKey   string
	MaxAttempts int
}

// LeaseCampaignAttempts leases the next attempt of each of ccs, as LeaseCampaignAttempt does,
// and enqueues each leased attempt's job (job makes it), in the caller's transaction. A
// contact no longer queued at its attempt count (another tick took it) is left out. It returns
// the attempts leased. It costs three statements whatever the number of contacts: their
// values travel as arrays on PostgreSQL, as one JSON array (json_each) on SQLite.
func (q *Queries) LeaseCampaignAttempts(ctx context.Context, ccs []CampaignContact, now time.Time, job func(CampaignAttempt) AttemptJob) ([]CampaignAttempt, error) {
	if len(ccs) == 0 {
		return nil, nil
	}
	at := normTime(now)
	byID := make(map[CampaignContactID]CampaignAttempt, len(ccs))
	ids, attempts, convs := make([]string, len(ccs)), make([]int64, len(ccs)), make([]string, len(ccs))
	for i, cc := range ccs {
		a := CampaignAttempt{ConversationID: newID[ConversationID](), CampaignID: cc.CampaignID, CampaignContactID: cc.ID,
			Attempt: cc.Attempts + 1, State: AttemptLeased, CreatedAt: at}
		byID[cc.ID] = a
		ids[i], attempts[i], convs[i] = string(cc.ID), int64(cc.Attempts), string(a.ConversationID)
	}
	scanID := func(r rowScanner) (id CampaignContactID, err error) { err = r.Scan(&id); return id, err }
	var got []CampaignContactID
	var err error
	if q.s.d.name == Postgres {
		got, err = list(ctx, q, "lease campaign contacts", `UPDATE campaign_contacts cc SET state = 'dialing', attempts = cc.attempts + 1,
		conversation_id = v.conv, next_attempt_at = NULL, updated_at = $4
		FROM unnest($1::text[]::uuid[], $2::int[], $3::text[]::uuid[]) AS v(id, attempts, conv)
		WHERE cc.id = v.id AND cc.state = 'queued' AND cc.attempts = v.attempts RETURNING cc.id`,
			[]any{ids, attempts, convs, ts(at)}, scanID)
	} else {
		// SQLite: the same lists as one JSON array of [id, attempts, conversation] rows.
		got, err = list(ctx, q, "lease campaign contacts", `UPDATE campaign_contacts AS cc SET state = 'dialing', attempts = cc.attempts + 1,
		conversation_id = v.conv, next_attempt_at = NULL, updated_at = $2
		FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempts, json_extract(value, '$[2]') AS conv
			FROM json_each($1)) AS v
		WHERE cc.id = v.id AND cc.state = 'queued' AND cc.attempts = v.attempts RETURNING id`,
			[]any{jsonRows(len(ids), func(i int) []any { return []any{ids[i], attempts[i], convs[i]} }), ts(at)}, scanID)
	}
	if err != nil || len(got) == 0 {
		return nil, err
	}
	out := make([]CampaignAttempt, 0, len(got))
	n := len(got)
	aConv, aCamp, aCC, aNum := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	jIDs, jPayloads, jKeys, jKinds, jMax := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, id := range got {
		a := byID[id]
		out = append(out, a)
		aConv[i], aCamp[i], aCC[i], aNum[i] = string(a.ConversationID), string(a.CampaignID), string(a.CampaignContactID), int64(a.Attempt)
		j := job(a)
		if j.Payload == nil {
			j.Payload = json.RawMessage(`{}`)
		}
		if j.Kind == "" || !json.Valid(j.Payload) || j.MaxAttempts < 1 || j.DedupeKey == "" {
			return nil, fmt.Errorf("store: %w: an attempt's job needs a kind, a JSON payload, a dedupe key and attempts", ErrInvalid)
		}
		jIDs[i], jPayloads[i], jKeys[i], jKinds[i], jMax[i] = string(newID[JobID]()), string(j.Payload), j.DedupeKey, j.Kind, int64(j.MaxAttempts)
	}
	jobsAt := ts(q.s.timeNow())
	if q.s.d.name == Postgres {
		if _, err := q.exec(ctx, "record attempts", `INSERT INTO campaign_attempts (`+attemptCols+`)
		SELECT v.conv, v.camp, v.cc, v.attempt, 'leased', NULL, NULL, $5, NULL
		FROM unnest($1::text[]::uuid[], $2::text[]::uuid[], $3::text[]::uuid[], $4::int[]) AS v(conv, camp, cc, attempt)`,
			aConv, aCamp, aCC, aNum, ts(at)); err != nil {
			return nil, err
		}
		// The jobs as EnqueueJob makes them (queued, due now); each key is new with its attempt.
		if _, err := q.exec(ctx, "enqueue attempt jobs", `INSERT INTO jobs (id, kind, payload, state, dedupe_key, next_attempt_at, attempts, max_attempts, created_at, updated_at)
		SELECT v.id, v.kind, v.payload::jsonb, 'queued', v.key, $6, 0, v.max, $6, $6
		FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::int[]) AS v(id, kind, payload, key, max)`,
			jIDs, jKinds, jPayloads, jKeys, jMax, jobsAt); err != nil {
			return nil, err
		}
	} else {
		if _, err := q.exec(ctx, "record attempts", `INSERT INTO campaign_attempts (`+attemptCols+`)
		SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'),
			'leased', NULL, NULL, $2, NULL FROM json_each($1)`,
			jsonRows(n, func(i int) []any { return []any{aConv[i], aCamp[i], aCC[i], aNum[i]} }), ts(at)); err != nil {
			return nil, err
		}
		// The payload travels as a JSON string, so that it is stored as the job gave it.
		if _, err := q.exec(ctx, "enqueue attempt jobs", `INSERT INTO jobs (id, kind, payload, state, dedupe_key, next_attempt_at, attempts, max_attempts, created_at, updated_at)
		SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), 'queued', json_extract(value, '$[3]'),
			$2, 0, json_extract(value, '$[4]'), $2, $2 FROM json_each($1)`,
			jsonRows(n, func(i int) []any { return []any{jIDs[i], jKinds[i], jPayloads[i], jKeys[i], jMax[i]} }), jobsAt); err != nil {
			return nil, err
		}
	}
	noted := map[string]bool{}
	for _, k := range jKinds {
		if !noted[k] {
			noted[k] = true
			q.noteEnqueued(k)
		}
	}
	return out, nil
}

// CampaignAttemptOutcome is one attempt's outcome for FinishAttempts: the contact moves to State
// (final, or queued again with its next attempt at Next).
type CampaignAttemptOutcome struct {
	Attempt CampaignAttempt
	Outcome string
	Detail  string
	State   string
	Next    *time.Time
}

// FinishAttempts is FinishAttempt for several attempts in the caller's transaction. It returns
// whether each was finished (false: settled already). It costs two statements whatever their
// number (the lists as arrays on PostgreSQL, as one JSON array on SQLite).
func (q *Queries) FinishAttempts(ctx context.Context, os []CampaignAttemptOutcome, now time.Time) ([]bool, error) {
	done := make([]bool, len(os))
	if len(os) == 0 {
		return done, nil
	}
	if len(os) == 1 {
		for i, o := range os {
			err := q.FinishAttempt(ctx, o.Attempt, o.Outcome, o.Detail, o.State, o.Next, now)
			if errors.Is(err, ErrConflict) {
				continue
			}
			if err != nil {
				return nil, err
			}
			done[i] = true
		}
		return done, nil
	}
	n := len(os)
	convs, outcomes, details := make([]string, n), make([]string, n), make([]*string, n)
	for i, o := range os {
		convs[i], outcomes[i] = string(o.Attempt.ConversationID), o.Outcome
		if o.Detail != "" {
			details[i] = &os[i].Detail
		}
	}
	at := ts(normTime(now))
	pg := q.s.d.name == Postgres
	scanID := func(r rowScanner) (id ConversationID, err error) { err = r.Scan(&id); return id, err }
	var got []ConversationID
	var err error
	if pg {
		got, err = list(ctx, q, "finish attempts", `UPDATE campaign_attempts a SET state = 'finished', outcome = v.outcome, detail = v.detail, finished_at = $4
		FROM unnest($1::text[]::uuid[], $2::text[], $3::text[]) AS v(conv, outcome, detail)
		WHERE a.conversation_id = v.conv AND a.state IN ('leased', 'placed') RETURNING a.conversation_id`,
			[]any{convs, outcomes, details, at}, scanID)
	} else {
		// SQLite: the same lists as one JSON array of [conversation, outcome, detail] rows.
		got, err = list(ctx, q, "finish attempts", `UPDATE campaign_attempts AS a SET state = 'finished', outcome = v.outcome, detail = v.detail, finished_at = $2
		FROM (SELECT json_extract(value, '$[0]') AS conv, json_extract(value, '$[1]') AS outcome, json_extract(value, '$[2]') AS detail
			FROM json_each($1)) AS v
		WHERE a.conversation_id = v.conv AND a.state IN ('leased', 'placed') RETURNING conversation_id`,
			[]any{jsonRows(n, func(i int) []any { return []any{convs[i], outcomes[i], details[i]} }), at}, scanID)
	}
	if err != nil || len(got) == 0 {
		return done, err
	}
	finished := make(map[ConversationID]bool, len(got))
	for _, id := range got {
		finished[id] = true
	}
	var ccIDs, ccConvs, states, cOutcomes []string
	var cDetails, nexts []*string
	for i, o := range os {
		if !finished[o.Attempt.ConversationID] {
			continue
		}
		done[i] = true
		ccIDs, ccConvs = append(ccIDs, string(o.Attempt.CampaignContactID)), append(ccConvs, string(o.Attempt.ConversationID))
		states, cOutcomes, cDetails = append(states, o.State), append(cOutcomes, o.Outcome), append(cDetails, details[i])
		var next *string
		if o.Next != nil {
			s := ts(normTime(*o.Next))
			next = &s
		}
		nexts = append(nexts, next)
	}
	if pg {
		_, err = q.exec(ctx, "campaign contact outcomes", `UPDATE campaign_contacts cc SET state = v.state, last_outcome = v.outcome, last_detail = v.detail,
		next_attempt_at = v.next::timestamptz, updated_at = $7, finished_at = CASE WHEN v.state = 'queued' THEN NULL ELSE $7::timestamptz END
		FROM unnest($1::text[]::uuid[], $2::text[]::uuid[], $3::text[], $4::text[], $5::text[], $6::text[]) AS v(id, conv, state, outcome, detail, next)
		WHERE cc.id = v.id AND cc.conversation_id = v.conv`, ccIDs, ccConvs, states, cOutcomes, cDetails, nexts, at)
		return done, err
	}
	_, err = q.exec(ctx, "campaign contact outcomes", `UPDATE campaign_contacts AS cc SET state = v.state, last_outcome = v.outcome, last_detail = v.detail,
		next_attempt_at = v.next, updated_at = $2, finished_at = CASE WHEN v.state = 'queued' THEN NULL ELSE $2 END
		FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS conv, json_extract(value, '$[2]') AS state,
			json_extract(value, '$[3]') AS outcome, json_extract(value, '$[4]') AS detail, json_extract(value, '$[5]') AS next FROM json_each($1)) AS v
		WHERE cc.id = v.id AND cc.conversation_id = v.conv`,
		jsonRows(len(ccIDs), func(i int) []any { return []any{ccIDs[i], ccConvs[i], states[i], cOutcomes[i], cDetails[i], nexts[i]} }), at)
	return done, err
}

// InsertEvents records several events, as InsertEvent does each, in the caller's transaction:
// one INSERT for them all, and one read of the receivers per project and mode. It returns them
// with their ids and times.
func (q *Queries) InsertEvents(ctx context.Context, es []Event) ([]Event, error) {
	if len(es) == 0 {
		return nil, nil
	}
	if len(es) == 1 {
		e, err := q.InsertEvent(ctx, es[0])
		return []Event{e}, err
	}
	out := make([]Event, len(es))
	var vals strings.Builder
	var args []any
	now := q.s.timeNow()
	for i, e := range es {
		if !validID(e.OrgID) || e.Type == "" || (e.Mode != ModeLive && e.Mode != ModeTest) {
			return nil, fmt.Errorf("store: %w: an event needs an organization, a type and a mode", ErrInvalid)
		}
		data, err := objectOr("event data", e.Data)
		if err != nil {
			return nil, err
		}
		e.ID, e.Data, e.CreatedAt = newID[EventID](), json.RawMessage(data), now
		out[i] = e
		if i > 0 {
			vals.WriteString(", ")
		}
		k := len(args)
		fmt.Fprintf(&vals, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", k+1, k+2, k+3, k+4, k+5, k+6, k+7, k+8, k+9)
		args = append(args, string(e.ID), string(e.OrgID), nullText(e.ProjectID), string(e.Mode), e.Type, nullText(e.ConversationID),
			nullText(e.AgentID), data, ts(e.CreatedAt))
	}
	err := q.atomic(ctx, func(q *Queries) error {
		if _, err := q.exec(ctx, "insert events", `INSERT INTO events (`+eventCols+`) VALUES `+vals.String(), args...); err != nil {
			return err
		}
		type key struct {
			p ProjectID
			m Mode
		}
		rs := map[key][]Receiver{}
		for _, e := range out {
			if !fansOut(e) {
				continue
			}
			k := key{e.ProjectID, e.Mode}
			got, ok := rs[k]
			if !ok {
				var err error
				if got, err = list(ctx, q, "receivers of an event", receiversOfEvent, []any{string(e.ProjectID), string(e.Mode)}, scanReceiver); err != nil {
					return err
				}
				rs[k] = got
			}
			if err := q.deliverTo(ctx, e, got); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
