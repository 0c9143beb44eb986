package store

// issue 19: the messaging-app channel (WhatsApp Cloud API): senders, the conversations they
// hold with their 24-hour window, and every message in and out with Meta's id and status.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// WhatsAppSenderID names a sender.
type WhatsAppSenderID string

// WhatsAppMessageID names a stored message.
type WhatsAppMessageID string

// WhatsAppSender is a WhatsApp Cloud API phone number of a project and the agent that answers
// it. The access token and the app secret are vault secrets, referenced by id; the store never
// holds their values.
type WhatsAppSender struct {
	ID                  WhatsAppSenderID
	OrgID               OrgID
	ProjectID           ProjectID
	AgentID             AgentID // "" when none answers (its agent was purged)
	PhoneNumberID       string  // Meta's phone-number id: inbound payloads name it in metadata
	BusinessAccountID   string  // the WhatsApp Business Account (WABA) id; "" when not given
	DisplayNumber       string
	AccessTokenSecretID string // vault secret id; "" when not given
	AppSecretSecretID   string // vault secret id; "" when not given
	VerifyToken         string // the webhook verify token Meta echoes in its challenge
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// NewWhatsAppSender describes a sender to create.
type NewWhatsAppSender struct {
	OrgID               OrgID
	ProjectID           ProjectID
	AgentID             AgentID
	PhoneNumberID       string
	BusinessAccountID   string
	DisplayNumber       string
	AccessTokenSecretID string
	AppSecretSecretID   string
	VerifyToken         string
}

// WhatsAppSenderChange changes a sender; nil members are left as they are.
type WhatsAppSenderChange struct {
	AgentID             *AgentID
	BusinessAccountID   *string
	DisplayNumber       *string
	AccessTokenSecretID *string
	AppSecretSecretID   *string
	VerifyToken         *string
}

const senderCols = `id, org_id, project_id, agent_id, phone_number_id, business_account_id, display_number,
	access_token_secret_id, app_secret_secret_id, verify_token, created_at, updated_at`

func scanSender(r rowScanner) (WhatsAppSender, error) {
	var s WhatsAppSender
	err := r.Scan(&s.ID, &s.OrgID, &s.ProjectID, nullTextCol[AgentID]{&s.AgentID}, &s.PhoneNumberID, &s.BusinessAccountID,
		&s.DisplayNumber, nullTextCol[string]{&s.AccessTokenSecretID}, nullTextCol[string]{&s.AppSecretSecretID}, &s.VerifyToken,
		timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt})
	return s, err
}

// checkToken refuses text that is empty (when required), too long or holds control characters
// or spaces: ids and tokens of Meta's.
func checkToken(what, s string, required bool, max int) error {
	if s == "" && !required {
		return nil
	}
	if s == "" || len(s) > max || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("store: %w: %s must be 1 to %d characters without spaces or control characters", ErrInvalid, what, max)
	}
	return nil
}

func checkSenderFields(phoneID, waba, display, token, app, verify string) error {
	for _, c := range []struct {
		what, v  string
		required bool
		max      int
	}{
		{"the phone-number id", phoneID, true, 64}, {"the business-account id", waba, false, 64},
		{"the access token secret id", token, false, 64}, {"the app secret id", app, false, 64}, {"the verify token", verify, false, 256},
	} {
		if err := checkToken(c.what, c.v, c.required, c.max); err != nil {
			return err
		}
	}
	return checkLabel(display)
}

// WhatsAppSenders is the repository of senders.
type WhatsAppSenders struct{ q *Queries }

// WhatsAppSenders returns the sender repository.
func (q *Queries) WhatsAppSenders() WhatsAppSenders { return WhatsAppSenders{q} }

// Create adds a sender to a project the scope reaches, answered by an agent of that project.
// A phone-number id already connected (by anyone) is ErrConflict; an unknown project or agent
// is ErrNotFound; an agent of another project wraps ErrOtherProject.
func (r WhatsAppSenders) Create(ctx context.Context, sc Scope, ns NewWhatsAppSender) (WhatsAppSender, error) {
	if err := checkSenderFields(ns.PhoneNumberID, ns.BusinessAccountID, ns.DisplayNumber, ns.AccessTokenSecretID, ns.AppSecretSecretID, ns.VerifyToken); err != nil {
		return WhatsAppSender{}, err
	}
	if ns.OrgID != sc.Org || !validID(ns.ProjectID) || !sc.Reaches(ns.ProjectID) {
		return WhatsAppSender{}, notFound("project", ns.ProjectID)
	}
	var s WhatsAppSender
	err := r.q.atomic(ctx, func(q *Queries) error {
		p, err := q.GetProject(ctx, ns.ProjectID)
		if err != nil {
			return err
		}
		if p.OrgID != sc.Org {
			return notFound("project", ns.ProjectID)
		}
		if ns.AgentID != "" {
			if err := q.checkAssignable(ctx, sc, ns.AgentID, ns.ProjectID); err != nil {
				return err
			}
		}
		now := q.s.timeNow()
		s = WhatsAppSender{ID: newID[WhatsAppSenderID](), OrgID: ns.OrgID, ProjectID: ns.ProjectID, AgentID: ns.AgentID,
			PhoneNumberID: ns.PhoneNumberID, BusinessAccountID: ns.BusinessAccountID, DisplayNumber: ns.DisplayNumber,
			AccessTokenSecretID: ns.AccessTokenSecretID, AppSecretSecretID: ns.AppSecretSecretID, VerifyToken: ns.VerifyToken,
			CreatedAt: now, UpdatedAt: now}
		_, err = q.exec(ctx, "create whatsapp sender",
			`INSERT INTO whatsapp_senders (`+senderCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			string(s.ID), string(s.OrgID), string(s.ProjectID), nullText(s.AgentID), s.PhoneNumberID, s.BusinessAccountID,
			s.DisplayNumber, nullText(s.AccessTokenSecretID), nullText(s.AppSecretSecretID), s.VerifyToken, ts(now), ts(now))
		return err
	})
	return s, err
}

// Get returns the scope's sender with id, or ErrNotFound.
func (r WhatsAppSenders) Get(ctx context.Context, sc Scope, id WhatsAppSenderID) (WhatsAppSender, error) {
	b := newSel(`SELECT `+senderCols+` FROM whatsapp_senders`).scope(sc, "org_id", "project_id", "").id("id", string(id))
	return one(ctx, r.q, "get whatsapp sender", b, scanSender)
}

// List returns a page of the scope's senders, oldest first, with one more when another page
// follows.
func (r WhatsAppSenders) List(ctx context.Context, sc Scope, pg Page) ([]WhatsAppSender, error) {
	b := newSel(`SELECT `+senderCols+` FROM whatsapp_senders`).scope(sc, "org_id", "project_id", "")
	return many(ctx, r.q, "list whatsapp senders", b, b.page("id", pg, false), scanSender)
}

// Change applies c to the scope's sender and returns it as changed. An agent that is unknown
// is ErrNotFound; one of another project wraps ErrOtherProject.
func (r WhatsAppSenders) Change(ctx context.Context, sc Scope, id WhatsAppSenderID, c WhatsAppSenderChange) (WhatsAppSender, error) {
	var s WhatsAppSender
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if s, err = q.WhatsAppSenders().Get(ctx, sc, id); err != nil {
			return err
		}
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = *v
			}
		}
		set(&s.BusinessAccountID, c.BusinessAccountID)
		set(&s.DisplayNumber, c.DisplayNumber)
		set(&s.AccessTokenSecretID, c.AccessTokenSecretID)
		set(&s.AppSecretSecretID, c.AppSecretSecretID)
		set(&s.VerifyToken, c.VerifyToken)
		if err := checkSenderFields(s.PhoneNumberID, s.BusinessAccountID, s.DisplayNumber, s.AccessTokenSecretID, s.AppSecretSecretID, s.VerifyToken); err != nil {
			return err
		}
		if c.AgentID != nil {
			if *c.AgentID != "" {
				if err := q.checkAssignable(ctx, sc, *c.AgentID, s.ProjectID); err != nil {
					return err
				}
			}
			s.AgentID = *c.AgentID
		}
		s.UpdatedAt = q.s.timeNow()
		_, err = q.exec(ctx, "change whatsapp sender",
			`UPDATE whatsapp_senders SET agent_id = $1, business_account_id = $2, display_number = $3, access_token_secret_id = $4,
			app_secret_secret_id = $5, verify_token = $6, updated_at = $7 WHERE id = $8`,
			nullText(s.AgentID), s.BusinessAccountID, s.DisplayNumber, nullText(s.AccessTokenSecretID), nullText(s.AppSecretSecretID),
			s.VerifyToken, ts(s.UpdatedAt), string(s.ID))
		return err
	})
	return s, err
}

// Delete removes the scope's sender with its thread records and messages (its conversations
// stay), or answers ErrNotFound.
func (r WhatsAppSenders) Delete(ctx context.Context, sc Scope, id WhatsAppSenderID) (WhatsAppSender, error) {
	var s WhatsAppSender
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if s, err = q.WhatsAppSenders().Get(ctx, sc, id); err != nil {
			return err
		}
		for _, stmt := range []string{`DELETE FROM whatsapp_messages WHERE sender_id = $1`, `DELETE FROM whatsapp_conversations WHERE sender_id = $1`,
			`DELETE FROM whatsapp_senders WHERE id = $1`} {
			if _, err := q.exec(ctx, "delete whatsapp sender", stmt, string(s.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	return s, err
}

// WhatsAppSenderByPhoneNumberID returns the sender of Meta's phone-number id (any
// organization: inbound webhooks route by it), or ErrNotFound.
func (q *Queries) WhatsAppSenderByPhoneNumberID(ctx context.Context, phoneNumberID string) (WhatsAppSender, error) {
	var s WhatsAppSender
	err := q.get(ctx, "find whatsapp sender", `SELECT `+senderCols+` FROM whatsapp_senders WHERE phone_number_id = $1`,
		[]any{phoneNumberID}, func(r rowScanner) (err error) { s, err = scanSender(r); return err })
	return s, err
}

// WhatsAppSenderByID returns the sender with id (any organization: the workers' lookup), or
// ErrNotFound.
func (q *Queries) WhatsAppSenderByID(ctx context.Context, id WhatsAppSenderID) (WhatsAppSender, error) {
	if !validID(id) {
		return WhatsAppSender{}, notFound("whatsapp sender", id)
	}
	var s WhatsAppSender
	err := q.get(ctx, "get whatsapp sender", `SELECT `+senderCols+` FROM whatsapp_senders WHERE id = $1`,
		[]any{string(id)}, func(r rowScanner) (err error) { s, err = scanSender(r); return err })
	return s, err
}

// AllWhatsAppSenders returns every sender of the deployment (the webhook endpoint checks
// signatures and verify tokens against them), at most limit.
func (q *Queries) AllWhatsAppSenders(ctx context.Context, limit int) ([]WhatsAppSender, error) {
	return list(ctx, q, "list all whatsapp senders", `SELECT `+senderCols+` FROM whatsapp_senders ORDER BY id LIMIT $1`,
		[]any{max(limit, 1)}, scanSender)
}

// WhatsAppConversation is the messaging-app side of a conversation: its sender, the user it is
// with (a phone number's wa_id or a business-scoped user id) and the last time the user wrote,
// which opens the 24-hour window.
type WhatsAppConversation struct {
	ConversationID ConversationID
	OrgID          OrgID
	SenderID       WhatsAppSenderID
	UserID         string
	LastInboundAt  *time.Time
	CreatedAt      time.Time
}

const waConvCols = `conversation_id, org_id, sender_id, user_id, last_inbound_at, created_at`

func scanWAConv(r rowScanner) (WhatsAppConversation, error) {
	var c WhatsAppConversation
	err := r.Scan(&c.ConversationID, &c.OrgID, &c.SenderID, &c.UserID, nullTimeCol{&c.LastInboundAt}, timeCol{&c.CreatedAt})
	return c, err
}

// CreateWhatsAppConversation records the messaging-app side of a stored conversation and makes
// it the current conversation of its thread (sender and user) in place of prev, the current one
// the caller read with WhatsAppThread ("" when the thread had none). It is ErrConflict, and
// stores nothing, when the thread moved meanwhile: another conversation was started with the
// user (on any node), and the caller's transaction must be given up.
func (q *Queries) CreateWhatsAppConversation(ctx context.Context, c WhatsAppConversation, prev ConversationID) (WhatsAppConversation, error) {
	if !validID(c.ConversationID) || !validID(c.SenderID) || !validID(c.OrgID) {
		return WhatsAppConversation{}, fmt.Errorf("store: %w: a whatsapp conversation needs a conversation, a sender and an organization", ErrInvalid)
	}
	if err := checkToken("the user id", c.UserID, true, 128); err != nil {
		return WhatsAppConversation{}, err
	}
	c.CreatedAt = q.s.timeNow()
	if c.LastInboundAt != nil {
		t := normTime(*c.LastInboundAt)
		c.LastInboundAt = &t
	}
	err := q.atomic(ctx, func(q *Queries) error {
		var res sql.Result
		var err error
		if prev == "" {
			res, err = q.exec(ctx, "start whatsapp thread", `INSERT INTO whatsapp_threads (sender_id, user_id, conversation_id) VALUES ($1, $2, $3)
				ON CONFLICT (sender_id, user_id) DO NOTHING`, string(c.SenderID), c.UserID, string(c.ConversationID))
		} else {
			res, err = q.exec(ctx, "move whatsapp thread", `UPDATE whatsapp_threads SET conversation_id = $3
				WHERE sender_id = $1 AND user_id = $2 AND conversation_id = $4`, string(c.SenderID), c.UserID, string(c.ConversationID), string(prev))
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("store: %w: another conversation with the user was started meanwhile", ErrConflict)
		}
		_, err = q.exec(ctx, "create whatsapp conversation", `INSERT INTO whatsapp_conversations (`+waConvCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			string(c.ConversationID), string(c.OrgID), string(c.SenderID), c.UserID, nullTS(c.LastInboundAt), ts(c.CreatedAt))
		return err
	})
	return c, err
}

// WhatsAppThread returns the current conversation of the sender's thread with user, ended or
// not ("" when none was started), to pass to CreateWhatsAppConversation as prev.
func (q *Queries) WhatsAppThread(ctx context.Context, sender WhatsAppSenderID, user string) (ConversationID, error) {
	var id ConversationID
	err := q.get(ctx, "get whatsapp thread", `SELECT conversation_id FROM whatsapp_threads WHERE sender_id = $1 AND user_id = $2`,
		[]any{string(sender), user}, func(r rowScanner) error { return r.Scan(&id) })
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return id, err
}

// GetWhatsAppConversation returns the messaging-app side of conversation id, or ErrNotFound.
func (q *Queries) GetWhatsAppConversation(ctx context.Context, id ConversationID) (WhatsAppConversation, error) {
	if !validID(id) {
		return WhatsAppConversation{}, notFound("whatsapp conversation", id)
	}
	var c WhatsAppConversation
	err := q.get(ctx, "get whatsapp conversation", `SELECT `+waConvCols+` FROM whatsapp_conversations WHERE conversation_id = $1`,
		[]any{string(id)}, func(r rowScanner) (err error) { c, err = scanWAConv(r); return err })
	return c, err
}

// OpenWhatsAppConversation returns the current conversation of the sender's thread with user
// when it has not ended, or ErrNotFound.
func (q *Queries) OpenWhatsAppConversation(ctx context.Context, sender WhatsAppSenderID, user string) (WhatsAppConversation, error) {
	var c WhatsAppConversation
	err := q.get(ctx, "find open whatsapp conversation",
		`SELECT w.conversation_id, w.org_id, w.sender_id, w.user_id, w.last_inbound_at, w.created_at
		FROM whatsapp_threads t JOIN whatsapp_conversations w ON w.conversation_id = t.conversation_id
		JOIN conversations c ON c.id = w.conversation_id
		WHERE t.sender_id = $1 AND t.user_id = $2 AND c.status <> 'ended' AND c.deleted_at IS NULL`,
		[]any{string(sender), user}, func(r rowScanner) (err error) { c, err = scanWAConv(r); return err })
	return c, err
}

// TouchWhatsAppInbound moves the conversation's last inbound time to at, never backwards.
func (q *Queries) TouchWhatsAppInbound(ctx context.Context, id ConversationID, at time.Time) error {
	_, err := q.exec(ctx, "touch whatsapp conversation",
		`UPDATE whatsapp_conversations SET last_inbound_at = $1 WHERE conversation_id = $2 AND (last_inbound_at IS NULL OR last_inbound_at < $1)`,
		ts(at), string(id))
	return err
}

// IdleWhatsAppConversations returns the conversations still going whose window closed before
// (their last inbound time, or their start when the user never wrote, is older): at most limit.
func (q *Queries) IdleWhatsAppConversations(ctx context.Context, before time.Time, limit int) ([]WhatsAppConversation, error) {
	return list(ctx, q, "list idle whatsapp conversations",
		`SELECT w.conversation_id, w.org_id, w.sender_id, w.user_id, w.last_inbound_at, w.created_at
		FROM whatsapp_conversations w JOIN conversations c ON c.id = w.conversation_id
		WHERE c.status <> 'ended' AND COALESCE(w.last_inbound_at, w.created_at) < $1 ORDER BY w.conversation_id LIMIT $2`,
		[]any{ts(before), clampLimit(limit)}, scanWAConv)
}

// WhatsApp message directions and statuses. Inbound: received, then answered, noted (a type
// Parley does not handle, with a note) or failed. Outbound: pending (queued), accepted (Meta
// took it), then sent, delivered, read, or failed with Meta's error code.
const (
	WAInbound  = "inbound"
	WAOutbound = "outbound"

	WAReceived  = "received"
	WAAnswered  = "answered"
	WANoted     = "noted"
	WAPending   = "pending"
	WAAccepted  = "accepted"
	WASent      = "sent"
	WADelivered = "delivered"
	WARead      = "read"
	WAFailed    = "failed"
)

// waStatusRank orders the outbound statuses: a status webhook never moves a message back
// (Meta may deliver "delivered" after "read").
var waStatusRank = map[string]int{WAPending: 0, WAAccepted: 1, WASent: 2, WADelivered: 3, WARead: 4, WAFailed: 5}

// WhatsAppMessage is one message in or out.
type WhatsAppMessage struct {
	ID             WhatsAppMessageID
	OrgID          OrgID
	SenderID       WhatsAppSenderID
	ConversationID ConversationID // "" until routed to one
	Direction      string
	WAMID          string // Meta's message id; "" for an outbound message not yet accepted
	UserID         string
	Type           string          // text, image, audio, template, read, … (Meta's types)
	Body           json.RawMessage // the message as Meta sent it, or what Parley sends
	Status         string
	ErrorCode      *int
	ErrorTitle     string
	Note           string
	SentAt         *time.Time // when Meta accepted an outbound message
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

const waMsgCols = `id, org_id, sender_id, conversation_id, direction, wamid, user_id, type, body, status, error_code, error_title, note, sent_at, created_at, updated_at`

func scanWAMsg(r rowScanner) (WhatsAppMessage, error) {
	var m WhatsAppMessage
	var code sql.NullInt64
	err := r.Scan(&m.ID, &m.OrgID, &m.SenderID, nullTextCol[ConversationID]{&m.ConversationID}, &m.Direction, nullTextCol[string]{&m.WAMID},
		&m.UserID, &m.Type, jsonCol{&m.Body}, &m.Status, &code, &m.ErrorTitle, &m.Note, nullTimeCol{&m.SentAt}, timeCol{&m.CreatedAt}, timeCol{&m.UpdatedAt})
	if code.Valid {
		c := int(code.Int64)
		m.ErrorCode = &c
	}
	return m, err
}

// InsertWhatsAppMessage stores a message. An inbound wamid stored already is ErrConflict: Meta
// delivers again what it is not sure was received.
func (q *Queries) InsertWhatsAppMessage(ctx context.Context, m WhatsAppMessage) (WhatsAppMessage, error) {
	if !validID(m.OrgID) || !validID(m.SenderID) || (m.Direction != WAInbound && m.Direction != WAOutbound) || m.Type == "" || m.Status == "" {
		return WhatsAppMessage{}, fmt.Errorf("store: %w: a whatsapp message needs an organization, a sender, a direction, a type and a status", ErrInvalid)
	}
	if len(m.WAMID) > 256 || len(m.UserID) > 128 || len(m.Type) > 32 {
		return WhatsAppMessage{}, fmt.Errorf("store: %w: whatsapp message id, user or type too long", ErrInvalid)
	}
	body, err := objectOr("whatsapp message body", m.Body)
	if err != nil {
		return WhatsAppMessage{}, err
	}
	now := q.s.timeNow()
	m.ID, m.Body, m.CreatedAt, m.UpdatedAt = newID[WhatsAppMessageID](), json.RawMessage(body), now, now
	_, err = q.exec(ctx, "insert whatsapp message", `INSERT INTO whatsapp_messages (`+waMsgCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		string(m.ID), string(m.OrgID), string(m.SenderID), nullText(m.ConversationID), m.Direction, nullText(m.WAMID), m.UserID, m.Type,
		body, m.Status, m.ErrorCode, m.ErrorTitle, m.Note, nullTS(m.SentAt), ts(now), ts(now))
	if err != nil {
		return WhatsAppMessage{}, err
	}
	return m, nil
}

// GetWhatsAppMessage returns the message with id, or ErrNotFound.
func (q *Queries) GetWhatsAppMessage(ctx context.Context, id WhatsAppMessageID) (WhatsAppMessage, error) {
	if !validID(id) {
		return WhatsAppMessage{}, notFound("whatsapp message", id)
	}
	var m WhatsAppMessage
	err := q.get(ctx, "get whatsapp message", `SELECT `+waMsgCols+` FROM whatsapp_messages WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { m, err = scanWAMsg(r); return err })
	return m, err
}

// WhatsAppMessageUpdate is what a worker learnt about a message; nil or empty members are left.
type WhatsAppMessageUpdate struct {
	ConversationID ConversationID
	WAMID          string
	Status         string
	ErrorCode      *int
	ErrorTitle     string
	Note           string
	SentAt         *time.Time
}

// UpdateWhatsAppMessage applies u to the message with id.
func (q *Queries) UpdateWhatsAppMessage(ctx context.Context, id WhatsAppMessageID, u WhatsAppMessageUpdate) error {
	res, err := q.exec(ctx, "update whatsapp message",
		`UPDATE whatsapp_messages SET conversation_id = COALESCE($1, conversation_id), wamid = COALESCE($2, wamid),
		status = COALESCE($3, status), error_code = COALESCE($4, error_code), error_title = COALESCE($5, error_title),
		note = COALESCE($6, note), sent_at = COALESCE($7, sent_at), updated_at = $8 WHERE id = $9`,
		nullText(u.ConversationID), nullText(u.WAMID), nullText(u.Status), u.ErrorCode, nullText(u.ErrorTitle), nullText(u.Note),
		nullTS(u.SentAt), ts(q.s.timeNow()), string(id))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("whatsapp message", id)
	}
	return nil
}

// ApplyWhatsAppStatus records a status webhook on the outbound message with wamid of sender:
// a status never moves a message back (failed is last). It returns the message as it is now,
// and whether the status changed it; ErrNotFound when no such message was sent.
//
// Two status webhooks of one message may be applied at once (the job queue runs several on
// PostgreSQL), so the rank is checked in the UPDATE itself: under READ COMMITTED, a check made
// on an earlier SELECT would let "delivered" overwrite a "failed" committed in between.
func (q *Queries) ApplyWhatsAppStatus(ctx context.Context, sender WhatsAppSenderID, wamid, status string, code *int, title string) (WhatsAppMessage, bool, error) {
	rank, ok := waStatusRank[status]
	if !ok || status == WAPending || status == WAAccepted {
		return WhatsAppMessage{}, false, fmt.Errorf("store: %w: whatsapp status %q", ErrInvalid, status)
	}
	var lower []any
	marks := ""
	for st, r := range waStatusRank {
		if r < rank {
			lower = append(lower, st)
			marks += fmt.Sprintf(", $%d", 7+len(lower))
		}
	}
	var m WhatsAppMessage
	changed := false
	err := q.atomic(ctx, func(q *Queries) error {
		args := append([]any{status, code, nullText(title), ts(q.s.timeNow()), wamid, string(sender), "outbound"}, lower...)
		res, err := q.exec(ctx, "apply whatsapp status",
			`UPDATE whatsapp_messages SET status = $1, error_code = COALESCE($2, error_code), error_title = COALESCE($3, error_title),
			updated_at = $4 WHERE wamid = $5 AND sender_id = $6 AND direction = $7 AND status IN (`+marks[2:]+`)`, args...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		changed = n > 0
		return q.get(ctx, "find whatsapp message", `SELECT `+waMsgCols+` FROM whatsapp_messages WHERE wamid = $1 AND sender_id = $2 AND direction = 'outbound'`,
			[]any{wamid, string(sender)}, func(r rowScanner) (err error) { m, err = scanWAMsg(r); return err })
	})
	return m, changed, err
}

// ListWhatsAppMessages returns a page of a conversation's messages, oldest first, with one
// more when another page follows. Load the conversation through the caller's scope first.
func (q *Queries) ListWhatsAppMessages(ctx context.Context, id ConversationID, pg Page) ([]WhatsAppMessage, error) {
	b := newSel(`SELECT `+waMsgCols+` FROM whatsapp_messages`).id("conversation_id", string(id))
	return many(ctx, q, "list whatsapp messages", b, b.page("id", pg, false), scanWAMsg)
}
