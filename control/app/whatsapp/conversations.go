package whatsapp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// TemplateUse names the approved template a conversation starts with, and its parameters.
type TemplateUse struct {
	Name            string            `json:"name" jsonschema:"minLength=1,maxLength=512"`
	Language        string            `json:"language" doc:"Meta's language code of the template (en_US, …)." jsonschema:"minLength=2,maxLength=16"`
	Parameters      []string          `json:"parameters,omitempty" doc:"The body's positional parameters ({{1}}, {{2}}, …), in order." jsonschema:"maxItems=100"`
	NamedParameters map[string]string `json:"named_parameters,omitempty" doc:"The body's named parameters ({{first_name}}), by name."`
}

// ConversationStart is the body of a conversation the business starts.
type ConversationStart struct {
	SenderID string      `json:"sender_id" doc:"The messaging-app number it is started from." jsonschema:"format=uuid"`
	To       string      `json:"to" doc:"The user: a phone number in international format (the + may be left out) or a business-scoped user id (CC.digits)." jsonschema:"pattern=^(\\+?[1-9][0-9]{6\\,14}|[A-Z]{2}\\.[A-Za-z0-9.]{1\\,140})$"`
	Template TemplateUse `json:"template"`
	calls.StartOptions
}

// SchemaDoc describes the body in the document.
func (ConversationStart) SchemaDoc() string {
	return "A conversation the business starts with an approved template; the agent answers the user's replies."
}

// MessageSend is the body of a free-form message the business writes in a conversation.
type MessageSend struct {
	Text string `json:"text" jsonschema:"minLength=1,maxLength=20000"`
}

// Message is the WhatsappMessage object: one message in or out, with its delivery status.
type Message struct {
	Object         string    `json:"object" jsonschema:"enum=whatsapp_message"`
	ID             string    `json:"id" jsonschema:"format=uuid"`
	ConversationID *string   `json:"conversation_id" jsonschema:"format=uuid,nullable"`
	Direction      string    `json:"direction" jsonschema:"enum=inbound,enum=outbound"`
	Type           string    `json:"type" doc:"Meta's message type: text, image, audio, template, … (an open set)."`
	Text           *string   `json:"text" doc:"The text, a picture's caption, or the template's name; null when none." jsonschema:"nullable"`
	Status         string    `json:"status" doc:"Inbound: received, answered, noted (Parley does not handle the type; note says so) or failed. Outbound: pending, accepted (Meta took it), sent, delivered, read or failed (error_code says why). An open set." jsonschema:"enum=received,enum=answered,enum=noted,enum=pending,enum=accepted,enum=sent,enum=delivered,enum=read,enum=failed"`
	WAMID          *string   `json:"wamid" doc:"Meta's message id; null until Meta took an outbound message." jsonschema:"nullable"`
	ErrorCode      *int      `json:"error_code" doc:"Meta's error code of a failed message (131047: the 24-hour window had closed, …)." jsonschema:"nullable"`
	ErrorTitle     *string   `json:"error_title" jsonschema:"nullable"`
	Note           *string   `json:"note" doc:"What Parley noted about the message." jsonschema:"nullable"`
	SentAt         *app.Time `json:"sent_at" jsonschema:"nullable"`
	CreatedAt      app.Time  `json:"created_at"`
	UpdatedAt      app.Time  `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (Message) SchemaDoc() string {
	return "A messaging-app message in or out, with its delivery status."
}

// ViewMessage is the interface's form of a stored message.
func ViewMessage(m store.WhatsAppMessage) Message {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	v := Message{Object: "whatsapp_message", ID: string(m.ID), ConversationID: opt(string(m.ConversationID)), Direction: m.Direction,
		Type: m.Type, Status: m.Status, WAMID: opt(m.WAMID), ErrorCode: m.ErrorCode, ErrorTitle: opt(m.ErrorTitle), Note: opt(m.Note),
		SentAt: app.TP(m.SentAt), CreatedAt: app.T(m.CreatedAt), UpdatedAt: app.T(m.UpdatedAt)}
	v.Text = opt(messageText(m))
	return v
}

// messageText is what a stored message says.
func messageText(m store.WhatsAppMessage) string {
	var b struct {
		Text     json.RawMessage          `json:"text"`
		Image    struct{ Caption string } `json:"image"`
		Template struct{ Name string }    `json:"template"`
	}
	_ = json.Unmarshal(m.Body, &b)
	var s string
	if json.Unmarshal(b.Text, &s) == nil && s != "" {
		return s
	}
	var t struct{ Body string }
	if json.Unmarshal(b.Text, &t) == nil && t.Body != "" {
		return t.Body
	}
	if b.Image.Caption != "" {
		return b.Image.Caption
	}
	return b.Template.Name
}

// Split cuts text into messages of at most max characters, at sentence ends where it can,
// else at a line break or a space, and only as a last resort inside a word.
func Split(text string, max int) []string {
	text = strings.TrimSpace(text)
	var out []string
	for utf8.RuneCountInString(text) > max {
		runes := []rune(text)
		head := string(runes[:max])
		cut := -1
		for i := len(head) - 1; i > len(head)/3 && cut < 0; i-- { // a sentence end followed by a space (text is longer than head)
			if (head[i] == '.' || head[i] == '!' || head[i] == '?' || head[i] == '\n') && (text[i+1] == ' ' || text[i+1] == '\n') {
				cut = i + 1
			}
		}
		if cut < 0 {
			if i := strings.LastIndexAny(head, "\n "); i > 0 {
				cut = i
			} else {
				cut = len(head)
			}
		}
		out = append(out, strings.TrimSpace(text[:cut]))
		text = strings.TrimSpace(text[cut:])
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// windowClosed is the 409 of a free-form message outside the 24-hour window.
func windowClosed(last *time.Time) error {
	e := fault.E(fault.CodeWhatsAppWindowClosed, "The user has not written yet: start the conversation with an approved template, then write once the user answers.")
	e.Extra = map[string]any{"closed_at": nil}
	if last != nil {
		closed := last.Add(Window).UTC()
		e = fault.E(fault.CodeWhatsAppWindowClosed, "The 24-hour window closed at %s (24 hours after the user last wrote); a free-form message would be refused by WhatsApp (131047). Start again with an approved template.", closed.Format(time.RFC3339))
		e.Extra = map[string]any{"closed_at": app.T(closed)}
	}
	return e
}

// windowOpen reports whether the business may write freely at now.
func windowOpen(wc store.WhatsAppConversation, now time.Time) bool {
	return wc.LastInboundAt != nil && now.Before(wc.LastInboundAt.Add(Window))
}

// canonicalUser is a user id as Meta names it: a phone number's digits, or a BSUID as it is.
func canonicalUser(to string) string { return strings.TrimPrefix(to, "+") }

// StartConversation starts a conversation with a user from the actor's sender, with an approved
// template (checked against the cached list) as its first message. The agent answers the
// user's replies; until the user writes, the business may send nothing but templates.
func (s *Service) StartConversation(ctx context.Context, act app.Actor, body ConversationStart) (conversations.ConversationWithTranscript, error) {
	var out conversations.ConversationWithTranscript
	sn, err := s.sender(ctx, act, body.SenderID)
	if err != nil {
		return out, err
	}
	if err := s.Ready(); err != nil {
		return out, err
	}
	if sn.AgentID == "" {
		return out, fault.E(fault.CodeWhatsAppNoAgent, "No agent answers the number %s: assign one (agent_id).", sn.PhoneNumberID)
	}
	tpls, err := s.approved(ctx, sn, false)
	if err != nil {
		return out, err
	}
	var tpl *Template
	for i, t := range tpls {
		if t.Name == body.Template.Name && strings.EqualFold(t.Language, body.Template.Language) {
			tpl = &tpls[i]
		}
	}
	if tpl == nil {
		return out, fault.E(fault.CodeWhatsAppTemplateNotFound, "The business account has no approved template %q in %s (GET /v1/whatsapp/senders/%s/templates lists them).", body.Template.Name, body.Template.Language, sn.ID)
	}
	opener, err := render(*tpl, body.Template)
	if err != nil {
		return out, err
	}
	mode := act.Mode()
	st, err := s.Rules.Check(ctx, s.Store.Queries, act, mode, string(sn.AgentID), body.StartOptions, calls.Need{Channel: agentdef.ChannelWhatsApp})
	if err != nil {
		return out, err
	}
	if err := s.Engine.Ready(); err != nil {
		return out, err
	}
	user := canonicalUser(body.To)
	conv := calls.NewConversation(act, mode, st, store.ChannelWhatsApp, "outbound", store.ConvInProgress)
	conv.ViaAPI = true
	if strings.IndexFunc(user, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		conv.ToNumber = "+" + user
	}
	if sn.DisplayNumber != "" {
		conv.FromNumber = sn.DisplayNumber
	}
	send := TemplateSend{Name: tpl.Name, Language: tpl.Language, Positional: body.Template.Parameters, Named: body.Template.NamedParameters}
	raw, err := json.Marshal(map[string]any{"template": send})
	if err != nil {
		return out, err
	}
	var msg store.WhatsAppMessage
	var prev store.ConversationID
	start := func(tx *store.Tx, au *app.Audit) (store.Conversation, error) {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return created, err
		}
		if _, err := tx.CreateWhatsAppConversation(ctx, store.WhatsAppConversation{ConversationID: created.ID, OrgID: created.OrgID, SenderID: sn.ID, UserID: user}, prev); err != nil {
			return created, err
		}
		if msg, err = tx.InsertWhatsAppMessage(ctx, store.WhatsAppMessage{OrgID: created.OrgID, SenderID: sn.ID, ConversationID: created.ID,
			Direction: store.WAOutbound, UserID: user, Type: "template", Body: raw, Status: store.WAPending}); err != nil {
			return created, err
		}
		return created, au.Record("whatsapp.conversation.started", "conversation", string(created.ID), created.ProjectID,
			map[string]any{"agent_id": created.AgentID, "sender_id": sn.ID, "template": tpl.Name, "language": tpl.Language})
	}
	// One conversation with a user at a time: a new start ends the one going, and takes its
	// place in the thread unless another was started meanwhile (then that one is ended too).
	var started store.Conversation
	for attempt := 0; ; attempt++ {
		if prev, err = s.Store.WhatsAppThread(ctx, sn.ID, user); err != nil {
			return out, err
		}
		if old, err := s.Store.OpenWhatsAppConversation(ctx, sn.ID, user); err == nil {
			if err := s.Engine.End(ctx, old.ConversationID); err != nil {
				s.log().WarnContext(ctx, "whatsapp: the conversation going was not ended", "conversation", old.ConversationID, "err", err)
			}
		}
		started, err = app.Change(app.WithCommitHook(ctx, nil), s.Store, act, start)
		if errors.Is(err, store.ErrConflict) && attempt < 3 {
			continue
		}
		if err != nil {
			return out, err
		}
		break
	}
	conv = started
	first, err := s.Engine.StartText(ctx, conv.ID, opener)
	if err != nil {
		_ = s.Store.UpdateWhatsAppMessage(context.WithoutCancel(ctx), msg.ID, store.WhatsAppMessageUpdate{Status: store.WAFailed, Note: "the conversation could not start"})
		return out, err
	}
	if err := s.enqueueSend(ctx, []store.WhatsAppMessageID{msg.ID}); err != nil {
		return out, err
	}
	if first == nil {
		first = []conversations.TranscriptLine{}
	}
	out.Conversation, out.Transcript = conversations.View(conv), &first
	return out, nil
}

// enqueueSend queues the sending of outbound messages, in order, as one job.
func (s *Service) enqueueSend(ctx context.Context, ids []store.WhatsAppMessageID) error {
	if len(ids) == 0 {
		return nil
	}
	raw, err := json.Marshal(sendJob{Messages: ids})
	if err != nil {
		return err
	}
	if _, _, err := s.Store.EnqueueJob(ctx, store.NewJob{Kind: KindSend, Payload: raw, DedupeKey: "whatsapp.send:" + string(ids[0]), MaxAttempts: sendAttempts}); err != nil {
		return err
	}
	if s.Wake != nil {
		s.Wake.Wake(ctx, KindSend)
	}
	return nil
}

// conversation loads the actor's messaging-app conversation with id.
func (s *Service) conversation(ctx context.Context, act app.Actor, id string) (store.Conversation, store.WhatsAppConversation, error) {
	c, err := s.Store.Queries.ConversationInScope(ctx, act.Scope, store.ConversationID(strings.ToLower(id)))
	if err != nil {
		return c, store.WhatsAppConversation{}, app.NotFound(err, fault.CodeConversationNotFound, "conversation", id)
	}
	if c.Channel != store.ChannelWhatsApp {
		return c, store.WhatsAppConversation{}, fault.E(fault.CodeNotWhatsApp, "Conversation %s is a %s conversation, not a messaging-app one.", c.ID, c.Channel)
	}
	wc, err := s.Store.GetWhatsAppConversation(ctx, c.ID)
	if errors.Is(err, store.ErrNotFound) {
		return c, wc, fault.E(fault.CodeNotWhatsApp, "Conversation %s has no messaging-app number any more (it was disconnected).", c.ID)
	}
	return c, wc, err
}

// SendMessage writes a free-form message from the business in a conversation going, within the
// 24-hour window (409 whatsapp_window_closed otherwise, before WhatsApp's own 131047). The
// message joins the transcript and the agent's history, and goes out split under 4,096
// characters at sentence ends.
func (s *Service) SendMessage(ctx context.Context, act app.Actor, id string, body MessageSend) ([]Message, error) {
	c, wc, err := s.conversation(ctx, act, id)
	if err != nil {
		return nil, err
	}
	if err := s.Ready(); err != nil {
		return nil, err
	}
	if c.Ended() {
		return nil, fault.E(fault.CodeConversationEnded, "The conversation has ended (%s); start another with a template.", c.EndReason)
	}
	if !windowOpen(wc, s.now()) {
		return nil, windowClosed(wc.LastInboundAt)
	}
	if err := s.Engine.Say(ctx, c, body.Text); err != nil {
		return nil, err
	}
	ms, err := s.queueText(ctx, c, wc, body.Text)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = ViewMessage(m)
	}
	return out, nil
}

// QueueSay takes the text a say command (POST /v1/conversations/{id}/say) makes the agent write
// in a messaging-app conversation: refused outside the 24-hour window, else queued to be sent
// (the command adds it to the transcript and the history).
func (s *Service) QueueSay(ctx context.Context, c store.Conversation, text string) error {
	wc, err := s.Store.GetWhatsAppConversation(ctx, c.ID)
	if errors.Is(err, store.ErrNotFound) {
		return fault.E(fault.CodeNotWhatsApp, "Conversation %s has no messaging-app number any more (it was disconnected).", c.ID)
	}
	if err != nil {
		return err
	}
	if !windowOpen(wc, s.now()) {
		return windowClosed(wc.LastInboundAt)
	}
	_, err = s.queueText(ctx, c, wc, text)
	return err
}

// queueText stores the parts of a text to send in a conversation and queues their sending.
func (s *Service) queueText(ctx context.Context, c store.Conversation, wc store.WhatsAppConversation, text string) ([]store.WhatsAppMessage, error) {
	var ms []store.WhatsAppMessage
	err := s.Store.Tx(ctx, func(tx *store.Tx) error {
		ms = ms[:0]
		for _, part := range Split(text, MaxText) {
			raw, err := json.Marshal(map[string]any{"text": part})
			if err != nil {
				return err
			}
			m, err := tx.InsertWhatsAppMessage(ctx, store.WhatsAppMessage{OrgID: c.OrgID, SenderID: wc.SenderID, ConversationID: c.ID,
				Direction: store.WAOutbound, UserID: wc.UserID, Type: "text", Body: raw, Status: store.WAPending})
			if err != nil {
				return err
			}
			ms = append(ms, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids := make([]store.WhatsAppMessageID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ms, s.enqueueSend(ctx, ids)
}

// ListMessages returns a page of the messages of the actor's messaging-app conversation,
// oldest first, with one more when another page follows.
func (s *Service) ListMessages(ctx context.Context, act app.Actor, id string, pg store.Page) ([]Message, error) {
	c, _, err := s.conversation(ctx, act, id)
	if err != nil {
		return nil, err
	}
	ms, err := s.Store.ListWhatsAppMessages(ctx, c.ID, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = ViewMessage(m)
	}
	return out, nil
}
