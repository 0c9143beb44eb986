package whatsapp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Webhooks: Meta POSTs every inbound message and status update of the numbers subscribed to
// the app to one endpoint per deployment, signed with the app secret (X-Hub-Signature-256:
// sha256=<hex HMAC-SHA256 of the raw body>), and retries what it is not sure was received.

// ErrBadSignature says a webhook's signature matches no connected number's app secret.
var ErrBadSignature = errors.New("whatsapp: the X-Hub-Signature-256 matches no connected number's app secret")

// ErrVerifyToken says a verification challenge's token matches no connected number's.
var ErrVerifyToken = errors.New("whatsapp: the verify token matches no connected number's")

// maxSenders bounds the numbers a webhook's signature is checked against.
const maxSenders = 1000

// Inbound messages Parley does not answer with its agent get this reply.
const politeReply = "I can only read text, pictures and voice notes here."

const (
	appSecretTTL  = time.Minute
	maxMedia      = 16 << 20
	inboundTries  = 5
	sendAttempts  = 5
	userIDPattern = 128
)

// Verify answers Meta's subscription challenge (GET with hub.mode=subscribe, hub.verify_token
// and hub.challenge): the challenge when the token is a connected number's, ErrVerifyToken
// otherwise.
func (s *Service) Verify(ctx context.Context, mode, token, challenge string) (string, error) {
	if mode != "subscribe" || token == "" || challenge == "" || len(challenge) > 256 {
		return "", ErrVerifyToken
	}
	ss, err := s.Store.AllWhatsAppSenders(ctx, maxSenders)
	if err != nil {
		return "", err
	}
	ok := 0
	for _, sn := range ss {
		if sn.VerifyToken != "" {
			ok |= subtle.ConstantTimeCompare([]byte(sn.VerifyToken), []byte(token))
		}
	}
	if ok == 0 {
		return "", ErrVerifyToken
	}
	return challenge, nil
}

// appSecret resolves an app secret, cached for a minute (every webhook needs them all).
func (s *Service) appSecret(ctx context.Context, sn store.WhatsAppSender) (string, error) {
	key := string(sn.ProjectID) + "/" + sn.AppSecretSecretID
	s.mu.Lock()
	c, ok := s.appSecrets[key]
	s.mu.Unlock()
	if ok && s.now().Sub(c.at) < appSecretTTL {
		return c.value, nil
	}
	v, err := s.Secrets.Resolve(ctx, sn.OrgID, sn.ProjectID, sn.AppSecretSecretID)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if s.appSecrets == nil {
		s.appSecrets = map[string]cachedSecret{}
	}
	s.appSecrets[key] = cachedSecret{at: s.now(), value: v}
	s.mu.Unlock()
	return v, nil
}

// CheckSignatureHeader refuses a signature header that cannot be right (read before the body).
func CheckSignatureHeader(h string) ([]byte, error) {
	hexSig, ok := strings.CutPrefix(h, "sha256=")
	if !ok || len(hexSig) != 64 {
		return nil, ErrBadSignature
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil {
		return nil, ErrBadSignature
	}
	return sig, nil
}

// webhookJob is the payload of a KindWebhook job: the raw body and the numbers whose app
// secret signed it.
type webhookJob struct {
	Body    json.RawMessage          `json:"body"`
	Senders []store.WhatsAppSenderID `json:"senders"`
}

// Receive takes a webhook delivery: the signature is checked against the app secret of every
// connected number before anything of the body is read, then the delivery goes on the job
// queue (the caller answers 200 at once). A bad signature stores nothing (ErrBadSignature).
func (s *Service) Receive(ctx context.Context, body []byte, signature string) error {
	sig, err := CheckSignatureHeader(signature)
	if err != nil {
		return err
	}
	if err := s.Ready(); err != nil {
		return err
	}
	ss, err := s.Store.AllWhatsAppSenders(ctx, maxSenders)
	if err != nil {
		return err
	}
	var signed []store.WhatsAppSenderID
	macs := map[string]bool{} // by secret value: each computed once
	for _, sn := range ss {
		if sn.AppSecretSecretID == "" {
			continue
		}
		secret, err := s.appSecret(ctx, sn)
		if err != nil {
			s.log().WarnContext(ctx, "whatsapp: a number's app secret cannot be resolved", "sender", sn.ID, "err", err)
			continue
		}
		match, seen := macs[secret]
		if !seen {
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(body)
			match = hmac.Equal(m.Sum(nil), sig)
			macs[secret] = match
		}
		if match {
			signed = append(signed, sn.ID)
		}
	}
	if len(signed) == 0 {
		return ErrBadSignature
	}
	if !json.Valid(body) {
		// Signed, but not JSON: noted on the job queue as a dead job, with the reason.
		body, _ = json.Marshal(string(body))
	}
	raw, err := json.Marshal(webhookJob{Body: body, Senders: signed})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	if _, _, err := s.Store.EnqueueJob(ctx, store.NewJob{Kind: KindWebhook, Payload: raw, DedupeKey: "whatsapp.webhook:" + hex.EncodeToString(sum[:]), MaxAttempts: inboundTries}); err != nil {
		return err
	}
	if s.Wake != nil {
		s.Wake.Wake(ctx, KindWebhook)
	}
	return nil
}

// The webhook payload (field "messages"), as Meta documents it.
type webhookPayload struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string       `json:"field"`
			Value webhookValue `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type webhookValue struct {
	MessagingProduct string `json:"messaging_product"`
	Metadata         struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []struct {
		Profile struct {
			Name string `json:"name"`
		} `json:"profile"`
		WaID   string `json:"wa_id"`
		UserID string `json:"user_id"`
	} `json:"contacts"`
	Messages []json.RawMessage `json:"messages"`
	Statuses []struct {
		ID              string `json:"id"`
		Status          string `json:"status"`
		Timestamp       string `json:"timestamp"`
		RecipientID     string `json:"recipient_id"`
		RecipientUserID string `json:"recipient_user_id"`
		Errors          []struct {
			Code    int    `json:"code"`
			Title   string `json:"title"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"statuses"`
}

// inboundMessage is what Parley reads of an inbound message.
type inboundMessage struct {
	From       string `json:"from"`
	FromUserID string `json:"from_user_id"`
	ID         string `json:"id"`
	Timestamp  string `json:"timestamp"`
	Type       string `json:"type"`
	Text       struct {
		Body string `json:"body"`
	} `json:"text"`
	Image struct {
		ID       string `json:"id"`
		MimeType string `json:"mime_type"`
		Caption  string `json:"caption"`
	} `json:"image"`
	Audio struct {
		ID       string `json:"id"`
		MimeType string `json:"mime_type"`
		Voice    bool   `json:"voice"`
	} `json:"audio"`
}

// HandleWebhook routes a signed delivery (a KindWebhook job): each message to its number by
// metadata.phone_number_id, stored once by its wamid (a replay is ignored) and queued for the
// agent's reply; each status update onto the message it names. What cannot be routed (an
// unknown number, a number whose app secret did not sign the delivery, malformed JSON) is
// logged and noted: the job ends dead with the reasons.
func (s *Service) HandleWebhook(ctx context.Context, j *jobs.Job) error {
	var wj webhookJob
	if err := j.Decode(&wj); err != nil {
		return err
	}
	var p webhookPayload
	if err := json.Unmarshal(wj.Body, &p); err != nil {
		s.log().WarnContext(ctx, "whatsapp: a signed webhook is not the JSON Meta sends", "job", j.ID, "err", err)
		return jobs.Permanent(fmt.Errorf("whatsapp webhook: malformed JSON: %w", err))
	}
	var notes []error
	note := func(format string, args ...any) {
		err := fmt.Errorf(format, args...)
		s.log().WarnContext(ctx, "whatsapp: "+err.Error(), "job", j.ID)
		notes = append(notes, err)
	}
	if p.Object != "whatsapp_business_account" {
		note("webhook object %q is not whatsapp_business_account", p.Object)
	}
	for _, e := range p.Entry {
		for _, ch := range e.Changes {
			if ch.Field != "messages" {
				note("webhook field %q is not handled", ch.Field)
				continue
			}
			v := ch.Value
			sn, err := s.Store.WhatsAppSenderByPhoneNumberID(ctx, v.Metadata.PhoneNumberID)
			if errors.Is(err, store.ErrNotFound) {
				note("no connected number has phone-number id %q (%d messages, %d statuses dropped)", v.Metadata.PhoneNumberID, len(v.Messages), len(v.Statuses))
				continue
			}
			if err != nil {
				return err
			}
			if !slices.Contains(wj.Senders, sn.ID) {
				note("the delivery for phone-number id %q was not signed with that number's app secret", v.Metadata.PhoneNumberID)
				continue
			}
			for _, raw := range v.Messages {
				if err := s.storeInbound(ctx, sn, v, raw, note); err != nil {
					return err
				}
			}
			for _, st := range v.Statuses {
				var code *int
				title := ""
				if len(st.Errors) > 0 {
					c := st.Errors[0].Code
					code, title = &c, st.Errors[0].Title
					if title == "" {
						title = st.Errors[0].Message
					}
				}
				if err := s.applyStatus(ctx, sn, st.ID, st.Status, code, title); errors.Is(err, store.ErrNotFound) {
					// A message Parley did not send (another system on the number, or one sent
					// before it was connected): nothing to note it on.
					s.log().InfoContext(ctx, "whatsapp: a status for a message Parley did not send", "status", st.Status, "wamid", st.ID, "sender", sn.ID)
				} else if errors.Is(err, store.ErrInvalid) {
					note("status %q of message %q is not one Parley knows", st.Status, st.ID)
				} else if err != nil {
					return err
				}
			}
		}
	}
	if len(notes) > 0 {
		return jobs.Permanent(errors.Join(notes...))
	}
	return nil
}

// storeInbound stores one inbound message (once per wamid) and queues its answer.
func (s *Service) storeInbound(ctx context.Context, sn store.WhatsAppSender, v webhookValue, raw json.RawMessage, note func(string, ...any)) error {
	var m inboundMessage
	if err := json.Unmarshal(raw, &m); err != nil || m.ID == "" || m.Type == "" {
		note("an inbound message of number %s cannot be read", sn.PhoneNumberID)
		return nil
	}
	// The user: a phone number's wa_id when Meta gives one, else the business-scoped user id.
	user := m.From
	if user == "" {
		user = m.FromUserID
	}
	if user == "" && len(v.Contacts) > 0 {
		user = v.Contacts[0].WaID
		if user == "" {
			user = v.Contacts[0].UserID
		}
	}
	if user == "" || len(user) > userIDPattern {
		note("inbound message %q of number %s names no user", m.ID, sn.PhoneNumberID)
		return nil
	}
	err := s.Store.Tx(ctx, func(tx *store.Tx) error {
		msg, err := tx.InsertWhatsAppMessage(ctx, store.WhatsAppMessage{OrgID: sn.OrgID, SenderID: sn.ID, Direction: store.WAInbound,
			WAMID: m.ID, UserID: user, Type: m.Type, Body: raw, Status: store.WAReceived})
		if err != nil {
			return err
		}
		payload, _ := json.Marshal(inboundJob{Message: msg.ID})
		_, _, err = tx.EnqueueJob(ctx, store.NewJob{Kind: KindInbound, Payload: payload, DedupeKey: "whatsapp.inbound:" + string(msg.ID), MaxAttempts: inboundTries})
		return err
	})
	if errors.Is(err, store.ErrConflict) {
		s.log().InfoContext(ctx, "whatsapp: a delivery Meta repeated was ignored", "wamid", m.ID, "sender", sn.ID)
		return nil
	}
	if err == nil && s.Wake != nil {
		s.Wake.Wake(ctx, KindInbound)
	}
	return err
}

// applyStatus stores a status update; a failure is an event (whatsapp.message.failed) of the
// conversation.
func (s *Service) applyStatus(ctx context.Context, sn store.WhatsAppSender, wamid, status string, code *int, title string) error {
	return s.Store.Tx(ctx, func(tx *store.Tx) error {
		m, changed, err := tx.ApplyWhatsAppStatus(ctx, sn.ID, wamid, status, code, title)
		if err != nil || !changed || status != store.WAFailed {
			return err
		}
		return s.failedEvent(ctx, tx, m)
	})
}

// failedEvent records whatsapp.message.failed on the message's conversation.
func (s *Service) failedEvent(ctx context.Context, tx *store.Tx, m store.WhatsAppMessage) error {
	if m.ConversationID == "" {
		return nil
	}
	c, err := tx.GetConversation(ctx, m.ConversationID)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(map[string]any{"conversation_id": c.ID, "message_id": m.ID, "wamid": m.WAMID, "error_code": m.ErrorCode, "error_title": m.ErrorTitle, "channel": store.ChannelWhatsApp})
	_, err = tx.InsertEvent(ctx, store.Event{OrgID: c.OrgID, ProjectID: c.ProjectID, Mode: c.Mode, Type: "whatsapp.message.failed",
		ConversationID: c.ID, AgentID: c.AgentID, Data: data})
	return err
}

type inboundJob struct {
	Message store.WhatsAppMessageID `json:"message"`
}

// HandleInbound answers one inbound message (a KindInbound job): it finds or starts the
// user's conversation, moves its window, marks the message read, turns it into text (a
// picture is an attachment of the message; a voice note is transcribed), gets the agent's
// reply and queues it. A type Parley does not handle gets a polite answer and a note.
func (s *Service) HandleInbound(ctx context.Context, j *jobs.Job) error {
	var ij inboundJob
	if err := j.Decode(&ij); err != nil {
		return err
	}
	m, err := s.Store.GetWhatsAppMessage(ctx, ij.Message)
	if errors.Is(err, store.ErrNotFound) {
		return nil // its number was disconnected meanwhile
	}
	if err != nil || m.Status != store.WAReceived {
		return err
	}
	last := j.Attempt >= j.MaxAttempts
	fail := func(note string, cause error) error {
		s.log().WarnContext(ctx, "whatsapp: an inbound message was not answered", "message", m.ID, "wamid", m.WAMID, "note", note, "err", cause)
		if cause != nil && Temporary(cause) && !last && !isFault(cause) {
			return cause
		}
		if err := s.Store.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{Status: store.WAFailed, Note: note}); err != nil {
			return err
		}
		return nil
	}
	sn, err := s.Store.WhatsAppSenderByID(ctx, m.SenderID)
	if err != nil {
		return err
	}
	if sn.AgentID == "" {
		return s.noted(ctx, m, "no agent answers this number")
	}
	token, err := s.token(ctx, sn)
	if err != nil {
		return fail("the number has no usable access token", err)
	}
	var in inboundMessage
	_ = json.Unmarshal(m.Body, &in)
	at := unixTime(in.Timestamp, m.CreatedAt)
	c, wc, err := s.openConversation(ctx, sn, m.UserID)
	if err != nil {
		return fail("the conversation could not start: "+faultDetail(err), err)
	}
	if err := s.Store.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{ConversationID: c.ID}); err != nil {
		return err
	}
	m.ConversationID = c.ID
	if err := s.Store.TouchWhatsAppInbound(ctx, c.ID, at); err != nil {
		return err
	}
	if err := s.Graph.MarkRead(ctx, token, sn.PhoneNumberID, m.WAMID); err != nil {
		s.log().WarnContext(ctx, "whatsapp: the message was not marked read", "wamid", m.WAMID, "err", err)
	}
	var text string
	var attachments []store.AttachmentID
	var sttSeconds float64
	switch in.Type {
	case "text":
		text = in.Text.Body
	case "image":
		data, mime, err := s.Graph.Media(ctx, token, in.Image.ID, maxMedia)
		if err != nil {
			return fail("the picture could not be downloaded", err)
		}
		id, err := s.saveAttachment(ctx, c, data, mime)
		if err != nil {
			return s.politely(ctx, c, wc, m, "the picture was not kept: "+err.Error())
		}
		attachments = []store.AttachmentID{id}
		text = in.Image.Caption
		if text == "" {
			text = "(picture)"
		}
	case "audio":
		data, _, err := s.Graph.Media(ctx, token, in.Audio.ID, maxMedia)
		if err != nil {
			return fail("the voice note could not be downloaded", err)
		}
		heard, secs, err := s.Engine.TranscribeVoiceNote(ctx, c.ID, data)
		if err != nil {
			if Temporary(err) && !last && !isFault(err) {
				return err
			}
			return s.politely(ctx, c, wc, m, "the voice note could not be transcribed: "+err.Error())
		}
		if strings.TrimSpace(heard) == "" {
			heard = "(nothing could be heard)"
		}
		text, sttSeconds = "(voice note, transcribed) "+heard, secs
		_ = s.Store.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{Note: "transcribed: " + heard})
	default:
		return s.politely(ctx, c, wc, m, fmt.Sprintf("a %s message is not handled", in.Type))
	}
	// The conversation is a durable chat: whichever node takes the job answers it from the
	// stored state, after a restart or a dead node too, one message at a time (Send waits for
	// the conversation's lease while another message of it is answered).
	turn, err := s.Engine.Send(ctx, c.ID, text, attachments, sttSeconds)
	if err != nil {
		switch faultCode(err) {
		case fault.CodeAgentBusy, fault.CodeConversationEnded, fault.CodeProviderUnavailable:
			if !last {
				return err // the last message is still being answered, the conversation just ended, or the LLM failed: try again
			}
		}
		return fail("the agent did not answer: "+faultDetail(err), err)
	}
	if _, err := s.queueText(ctx, c, wc, turn.Agent.Text); err != nil {
		return err
	}
	return s.Store.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{Status: store.WAAnswered})
}

// noted marks an inbound message noted (Parley did not answer it) with the reason.
func (s *Service) noted(ctx context.Context, m store.WhatsAppMessage, note string) error {
	s.log().InfoContext(ctx, "whatsapp: an inbound message was noted", "message", m.ID, "wamid", m.WAMID, "note", note)
	return s.Store.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{Status: store.WANoted, Note: note})
}

// politely answers a message Parley cannot hand to the agent, and notes why.
func (s *Service) politely(ctx context.Context, c store.Conversation, wc store.WhatsAppConversation, m store.WhatsAppMessage, note string) error {
	if err := s.Engine.Say(ctx, c, politeReply); err != nil {
		s.log().WarnContext(ctx, "whatsapp: the polite answer is not in the transcript", "conversation", c.ID, "err", err)
	}
	if _, err := s.queueText(ctx, c, wc, politeReply); err != nil {
		return err
	}
	return s.noted(ctx, m, note)
}

func isFault(err error) bool {
	var f *fault.Error
	return errors.As(err, &f)
}

func faultCode(err error) string {
	var f *fault.Error
	if errors.As(err, &f) {
		return f.Code
	}
	return ""
}

func faultDetail(err error) string {
	var f *fault.Error
	if errors.As(err, &f) {
		return f.Detail
	}
	return err.Error()
}

// openConversation returns the user's conversation going with the number, or starts one with
// the number's agent (inbound, live). A conversation starts only by moving the thread from the
// one it replaces (store.CreateWhatsAppConversation): when two messages of a new user arrive
// together, on any nodes, one starts it and the other finds it.
func (s *Service) openConversation(ctx context.Context, sn store.WhatsAppSender, user string) (store.Conversation, store.WhatsAppConversation, error) {
	for attempt := 0; ; attempt++ {
		c, wc, err := s.tryOpenConversation(ctx, sn, user)
		if errors.Is(err, store.ErrConflict) && attempt < 3 {
			continue // started meanwhile: find it
		}
		return c, wc, err
	}
}

func (s *Service) tryOpenConversation(ctx context.Context, sn store.WhatsAppSender, user string) (store.Conversation, store.WhatsAppConversation, error) {
	prev, err := s.Store.WhatsAppThread(ctx, sn.ID, user)
	if err != nil {
		return store.Conversation{}, store.WhatsAppConversation{}, err
	}
	if prev != "" {
		c, err := s.Store.GetConversation(ctx, prev)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return c, store.WhatsAppConversation{}, err
		}
		if err == nil && !c.Ended() && c.DeletedAt == nil {
			wc, err := s.Store.GetWhatsAppConversation(ctx, prev)
			return c, wc, err
		}
	}
	org, err := s.Store.GetOrg(ctx, sn.OrgID)
	if err != nil {
		return store.Conversation{}, store.WhatsAppConversation{}, err
	}
	act := app.SystemActor(org, KindInbound)
	st, err := s.Rules.Check(ctx, s.Store.Queries, act, store.ModeLive, string(sn.AgentID), calls.StartOptions{}, calls.Need{Channel: agentdef.ChannelWhatsApp})
	if err != nil {
		return store.Conversation{}, store.WhatsAppConversation{}, err
	}
	conv := calls.NewConversation(act, store.ModeLive, st, store.ChannelWhatsApp, "inbound", store.ConvInProgress)
	if strings.IndexFunc(user, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		conv.FromNumber = "+" + user
	}
	conv.ToNumber = sn.DisplayNumber
	var wc store.WhatsAppConversation
	conv, err = app.Change(app.WithCommitHook(ctx, nil), s.Store, act, func(tx *store.Tx, au *app.Audit) (store.Conversation, error) {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return created, err
		}
		if wc, err = tx.CreateWhatsAppConversation(ctx, store.WhatsAppConversation{ConversationID: created.ID, OrgID: created.OrgID, SenderID: sn.ID, UserID: user}, prev); err != nil {
			return created, err
		}
		return created, au.Record("whatsapp.conversation.started", "conversation", string(created.ID), created.ProjectID,
			map[string]any{"agent_id": created.AgentID, "sender_id": sn.ID, "direction": "inbound"})
	})
	if err != nil {
		return conv, wc, err
	}
	if _, err := s.Engine.StartText(ctx, conv.ID, ""); err != nil {
		return conv, wc, err
	}
	return conv, wc, nil
}

// imageTypes are the pictures kept as attachments, with their files' extension.
var imageTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}

// saveAttachment keeps a received picture as an attachment of the conversation (the chat
// engine hands it to the LLM; it is deleted with the conversation).
func (s *Service) saveAttachment(ctx context.Context, c store.Conversation, data []byte, mime string) (store.AttachmentID, error) {
	mime = strings.TrimSpace(strings.SplitN(mime, ";", 2)[0])
	ext, ok := imageTypes[mime]
	if !ok {
		return "", fmt.Errorf("%s is not a picture the agent reads", mime)
	}
	id := store.NewAttachmentID()
	rel := filepath.ToSlash(filepath.Join("attachments", string(id)+ext))
	path := filepath.Join(s.DataDir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	at, err := s.Store.CreateAttachment(ctx, store.Attachment{ID: id, OrgID: c.OrgID, MIME: mime, Size: int64(len(data)), Path: rel})
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return at.ID, nil
}

type sendJob struct {
	Messages []store.WhatsAppMessageID `json:"messages"`
}

// HandleSend sends outbound messages in order (a KindSend job). A message already accepted is
// skipped, so a retry sends nothing twice. A free-form message outside the window is not sent
// (failed, whatsapp_window_closed). Meta's 429, 5xx and throttling codes are retried with
// backoff; the final failure, and any other error Meta answers, is stored on the message with
// its code, and recorded as whatsapp.message.failed.
func (s *Service) HandleSend(ctx context.Context, j *jobs.Job) error {
	var sj sendJob
	if err := j.Decode(&sj); err != nil {
		return err
	}
	last := j.Attempt >= j.MaxAttempts
	for _, id := range sj.Messages {
		m, err := s.Store.GetWhatsAppMessage(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if m.Status != store.WAPending {
			continue
		}
		if err := s.sendOne(ctx, m, last); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) sendOne(ctx context.Context, m store.WhatsAppMessage, last bool) error {
	failed := func(code *int, title, note string) error {
		return s.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{Status: store.WAFailed, ErrorCode: code, ErrorTitle: title, Note: note}); err != nil {
				return err
			}
			m.Status, m.ErrorCode, m.ErrorTitle = store.WAFailed, code, title
			return s.failedEvent(ctx, tx, m)
		})
	}
	sn, err := s.Store.WhatsAppSenderByID(ctx, m.SenderID)
	if err != nil {
		return err
	}
	token, err := s.token(ctx, sn)
	if err != nil {
		return failed(nil, fault.CodeWhatsAppNotConnected, faultDetail(err))
	}
	var body struct {
		Text     string       `json:"text"`
		Template TemplateSend `json:"template"`
	}
	if err := json.Unmarshal(m.Body, &body); err != nil {
		return failed(nil, "", "the stored message cannot be read")
	}
	var wamid string
	switch m.Type {
	case "template":
		wamid, err = s.Graph.SendTemplate(ctx, token, sn.PhoneNumberID, m.UserID, body.Template)
	default:
		if m.ConversationID != "" {
			wc, werr := s.Store.GetWhatsAppConversation(ctx, m.ConversationID)
			if werr == nil && !windowOpen(wc, s.now()) {
				return failed(nil, fault.CodeWhatsAppWindowClosed, faultDetail(windowClosed(wc.LastInboundAt)))
			}
		}
		wamid, err = s.Graph.SendText(ctx, token, sn.PhoneNumberID, m.UserID, body.Text)
	}
	if err != nil {
		if Temporary(err) && !last {
			s.log().InfoContext(ctx, "whatsapp: sending will be retried", "message", m.ID, "err", err)
			return err
		}
		s.log().WarnContext(ctx, "whatsapp: a message was not sent", "message", m.ID, "err", err)
		var ge *GraphError
		if errors.As(err, &ge) {
			var code *int
			if ge.Code != 0 {
				c := ge.Code
				code = &c
			}
			return failed(code, ge.Message, ge.Error())
		}
		return failed(nil, "", err.Error())
	}
	now := s.now()
	return s.Store.UpdateWhatsAppMessage(ctx, m.ID, store.WhatsAppMessageUpdate{WAMID: wamid, Status: store.WAAccepted, SentAt: &now})
}

// EndIdle ends the conversations whose 24-hour window closed (the periodic KindEndIdle job):
// the business can only reach the user again with a template, which starts another.
func (s *Service) EndIdle(ctx context.Context) (int, error) {
	idle, err := s.Store.IdleWhatsAppConversations(ctx, s.now().Add(-Window), 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, wc := range idle {
		if err := s.Engine.End(ctx, wc.ConversationID); err != nil {
			s.log().WarnContext(ctx, "whatsapp: an idle conversation was not ended", "conversation", wc.ConversationID, "err", err)
			continue
		}
		n++
	}
	return n, nil
}

// RegisterJobs gives a worker the channel's job kinds (the composition root and tests call it).
func RegisterJobs(w *jobs.Worker, s *Service) {
	w.Register(KindWebhook, s.HandleWebhook, jobs.WithTimeout(30*time.Second))
	w.Register(KindInbound, s.HandleInbound, jobs.WithTimeout(3*time.Minute))
	w.Register(KindSend, s.HandleSend, jobs.WithTimeout(time.Minute))
	w.Register(KindEndIdle, func(ctx context.Context, _ *jobs.Job) error { _, err := s.EndIdle(ctx); return err },
		jobs.WithTimeout(time.Minute), jobs.WithMaxAttempts(1))
	w.Every(KindEndIdle, 5*time.Minute)
}
