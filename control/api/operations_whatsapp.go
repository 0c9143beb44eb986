package api

// issue 19: the messaging-app channel (WhatsApp Cloud API): the three operations of the
// specification, the sender extensions, the conversation's messages, and the public webhook
// endpoint outside /v1 (/hooks/whatsapp).

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/app/whatsapp"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// whatsappOperations are the operations of the messaging-app channel.
func whatsappOperations() []*operation {
	senderCodes := []string{fault.CodeWhatsAppSenderNotFound}
	return []*operation{
		typed(operation{
			ID: "startWhatsappConversation", Method: http.MethodPost, Path: "/whatsapp/conversations", Tag: "Messaging app",
			Summary: "Start a messaging-app conversation with an approved template",
			Description: "Needs a live key: it writes to a real person. The template must be among the approved templates of the number's business account (checked against the cached list, see listWhatsappTemplates), with the parameters its body takes. " +
				"The template is the conversation's first line; the number's agent answers the user's replies. Until the user writes, and 24 hours after the user last wrote, nothing but a template may be sent (409 whatsapp_window_closed). " +
				"A conversation going with the same user is ended first. The answer carries the transcript's first line.",
			Permission: "whatsapp:write", LiveOnly: true, Changes: true,
			Codes: []string{fault.CodeWhatsAppSenderNotFound, fault.CodeWhatsAppNotConnected, fault.CodeWhatsAppNoAgent, fault.CodeWhatsAppTemplateNotFound,
				fault.CodeWhatsAppUnavailable, fault.CodeWhatsAppUpstream, fault.CodeAgentNotFound, fault.CodeAgentNotPublished, fault.CodeChannelDisabled,
				fault.CodeProjectFrozen, fault.CodeCreditExhausted, fault.CodeProviderUnavailable},
			Status: http.StatusCreated, Location: true, Locate: conversationPath,
		}, (*API).startWhatsappConversation),
		typed(operation{
			ID: "listWhatsappSenders", Method: http.MethodGet, Path: "/whatsapp/senders", Tag: "Messaging app",
			Summary:    "List the messaging-app numbers the key reaches, oldest first, each with the agent that answers it",
			Permission: "whatsapp:write",
			Status:     http.StatusOK,
		}, (*API).listWhatsappSenders),
		typed(operation{
			ID: "createWhatsappSender", Method: http.MethodPost, Path: "/whatsapp/senders", Tag: "Messaging app",
			Summary: "Connect a WhatsApp Cloud API number",
			Description: "An extension of Parley: the specification shows no way to connect a number. Needs a live key. The access token and the app secret are vault secrets of the number's project, named by id (404 vault_secret_not_found otherwise); the vault then refuses to delete them while the number uses them. " +
				"Point the Meta app's webhook at {base_url}/hooks/whatsapp with the verify token, and subscribe it to the messages field.",
			Permission: "whatsapp:write", LiveOnly: true, Changes: true, Extension: true,
			Codes: []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeAgentNotFound, fault.CodeAgentOtherProject,
				fault.CodeWhatsAppSenderTaken, fault.CodeWhatsAppUnavailable, fault.CodeSecretNotFound},
			Status: http.StatusCreated, Location: true,
			Locate: func(v any) string { return "/v1/whatsapp/senders/" + v.(whatsapp.Sender).ID },
		}, (*API).createWhatsappSender),
		typed(operation{
			ID: "getWhatsappSender", Method: http.MethodGet, Path: "/whatsapp/senders/{sender_id}", Tag: "Messaging app",
			Summary:    "Get a messaging-app number",
			Permission: "whatsapp:write", Extension: true,
			Codes:  senderCodes,
			Status: http.StatusOK,
		}, (*API).getWhatsappSender),
		typed(operation{
			ID: "updateWhatsappSender", Method: http.MethodPatch, Path: "/whatsapp/senders/{sender_id}", Tag: "Messaging app",
			Summary:     "Change a messaging-app number's agent, business account, secrets or verify token",
			Description: "An extension of Parley. Needs a live key. Members left out are left as they are; null clears one that may be empty.",
			Permission:  "whatsapp:write", LiveOnly: true, Changes: true, Extension: true,
			Codes: []string{fault.CodeWhatsAppSenderNotFound, fault.CodeProjectFrozen, fault.CodeAgentNotFound, fault.CodeAgentOtherProject,
				fault.CodeWhatsAppUnavailable, fault.CodeSecretNotFound},
			Status: http.StatusOK,
		}, (*API).updateWhatsappSender),
		typed(operation{
			ID: "deleteWhatsappSender", Method: http.MethodDelete, Path: "/whatsapp/senders/{sender_id}", Tag: "Messaging app",
			Summary:     "Disconnect a messaging-app number",
			Description: "An extension of Parley. Needs a live key. Webhooks for the number are refused from then on; its conversations stay, its message records go.",
			Permission:  "whatsapp:write", LiveOnly: true, Changes: true, Extension: true,
			Codes:  []string{fault.CodeWhatsAppSenderNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteWhatsappSender),
		typed(operation{
			ID: "listWhatsappTemplates", Method: http.MethodGet, Path: "/whatsapp/senders/{sender_id}/templates", Tag: "Messaging app",
			Summary: "List the approved message templates of the number's business account",
			Description: "Read from Meta's Graph API (every page of GET /{waba-id}/message_templates) and cached for five minutes; refresh=true reads them again. " +
				"Only approved templates are listed, each with the parameters its body takes. The whole list is one page.",
			Permission: "whatsapp:write",
			Codes:      []string{fault.CodeWhatsAppSenderNotFound, fault.CodeWhatsAppNotConnected, fault.CodeWhatsAppUnavailable, fault.CodeWhatsAppUpstream},
			Status:     http.StatusOK,
		}, (*API).listWhatsappTemplates),
		typed(operation{
			ID: "listWhatsappMessages", Method: http.MethodGet, Path: "/whatsapp/conversations/{conversation_id}/messages", Tag: "Messaging app",
			Summary:     "List a messaging-app conversation's messages with their delivery status, oldest first",
			Description: "An extension of Parley. Each message in or out, with Meta's id (wamid) and the last status Meta reported (sent, delivered, read, or failed with Meta's error code).",
			Permission:  "whatsapp:write", Extension: true,
			Codes:  []string{fault.CodeConversationNotFound, fault.CodeNotWhatsApp},
			Status: http.StatusOK,
		}, (*API).listWhatsappMessages),
		typed(operation{
			ID: "sendWhatsappMessage", Method: http.MethodPost, Path: "/whatsapp/conversations/{conversation_id}/messages", Tag: "Messaging app",
			Summary: "Write a free-form message in a messaging-app conversation",
			Description: "An extension of Parley, for a person of the business writing in the conversation. Needs a live key. Only within the 24-hour window after the user last wrote (409 whatsapp_window_closed, whose closed_at says when it closed). " +
				"The text joins the transcript and the agent's history; it goes out split at sentence ends under 4,096 characters, one message each (answered 202: queued).",
			Permission: "whatsapp:write", LiveOnly: true, Changes: true, Extension: true,
			Codes: []string{fault.CodeConversationNotFound, fault.CodeNotWhatsApp, fault.CodeConversationEnded, fault.CodeWhatsAppWindowClosed,
				fault.CodeWhatsAppUnavailable, fault.CodeConversationNotLive},
			Status: http.StatusAccepted,
		}, (*API).sendWhatsappMessage),
	}
}

type startWhatsappConversationIn struct {
	Body whatsapp.ConversationStart `body:"required"`
}

func (a *API) startWhatsappConversation(ctx context.Context, c *call, in *startWhatsappConversationIn) (*conversations.ConversationWithTranscript, error) {
	conv, err := a.WhatsApp.StartConversation(ctx, c.actor(ctx), in.Body)
	return &conv, err
}

type listWhatsappSendersIn struct {
	listQuery
}

func (a *API) listWhatsappSenders(ctx context.Context, c *call, _ *listWhatsappSendersIn) (*list[whatsapp.Sender], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ss, err := a.WhatsApp.ListSenders(ctx, c.actor(ctx), pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ss, func(s whatsapp.Sender) string { return s.ID }), nil
}

type createWhatsappSenderIn struct {
	Body whatsapp.SenderCreate `body:"required"`
}

func (a *API) createWhatsappSender(ctx context.Context, c *call, in *createWhatsappSenderIn) (*whatsapp.Sender, error) {
	s, err := a.WhatsApp.CreateSender(ctx, c.actor(ctx), in.Body)
	return &s, err
}

type whatsappSenderIn struct {
	ID string `path:"sender_id" format:"uuid" doc:"The messaging-app number."`
}

func (a *API) getWhatsappSender(ctx context.Context, c *call, in *whatsappSenderIn) (*whatsapp.Sender, error) {
	s, err := a.WhatsApp.GetSender(ctx, c.actor(ctx), in.ID)
	return &s, err
}

type updateWhatsappSenderIn struct {
	ID   string                `path:"sender_id" format:"uuid" doc:"The messaging-app number."`
	Body whatsapp.SenderUpdate `body:"required"`
}

func (a *API) updateWhatsappSender(ctx context.Context, c *call, in *updateWhatsappSenderIn) (*whatsapp.Sender, error) {
	s, err := a.WhatsApp.UpdateSender(ctx, c.actor(ctx), in.ID, in.Body)
	return &s, err
}

func (a *API) deleteWhatsappSender(ctx context.Context, c *call, in *whatsappSenderIn) (*whatsapp.SenderDeleted, error) {
	d, err := a.WhatsApp.DeleteSender(ctx, c.actor(ctx), in.ID)
	return &d, err
}

type listWhatsappTemplatesIn struct {
	ID      string `path:"sender_id" format:"uuid" doc:"The messaging-app number."`
	Refresh string `query:"refresh" enum:"true,false" doc:"true reads the list from Meta again instead of the cache."`
}

func (a *API) listWhatsappTemplates(ctx context.Context, c *call, in *listWhatsappTemplatesIn) (*list[whatsapp.Template], error) {
	ts, err := a.WhatsApp.ListTemplates(ctx, c.actor(ctx), in.ID, in.Refresh == "true")
	if err != nil {
		return nil, err
	}
	return &list[whatsapp.Template]{Object: "list", Data: ts}, nil
}

type whatsappConversationIn struct {
	listQuery
	ID string `path:"conversation_id" format:"uuid" doc:"The conversation."`
}

func (a *API) listWhatsappMessages(ctx context.Context, c *call, in *whatsappConversationIn) (*list[whatsapp.Message], error) {
	pg, err := c.page(in.ID)
	if err != nil {
		return nil, err
	}
	ms, err := a.WhatsApp.ListMessages(ctx, c.actor(ctx), in.ID, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ms, func(m whatsapp.Message) string { return m.ID }), nil
}

type sendWhatsappMessageIn struct {
	ID   string               `path:"conversation_id" format:"uuid" doc:"The conversation."`
	Body whatsapp.MessageSend `body:"required"`
}

func (a *API) sendWhatsappMessage(ctx context.Context, c *call, in *sendWhatsappMessageIn) (*list[whatsapp.Message], error) {
	ms, err := a.WhatsApp.SendMessage(ctx, c.actor(ctx), in.ID, in.Body)
	if err != nil {
		return nil, err
	}
	return &list[whatsapp.Message]{Object: "list", Data: ms}, nil
}

// maxWebhookBody bounds a webhook delivery (Meta's are a few kilobytes).
const maxWebhookBody = 1 << 20

// WhatsAppHooks is the public webhook endpoint of the channel, outside /v1 (mounted at
// /hooks/whatsapp): GET answers Meta's subscription challenge (403 when the verify token is no
// connected number's); POST checks X-Hub-Signature-256 (401 before the body is read when the
// header cannot be right, and 401 when it matches no app secret: nothing is stored), puts the
// delivery on the job queue and answers 200 at once.
func (a *API) WhatsAppHooks() http.Handler {
	a.Services()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			q := r.URL.Query()
			ch, err := a.WhatsApp.Verify(r.Context(), q.Get("hub.mode"), q.Get("hub.verify_token"), q.Get("hub.challenge"))
			if err != nil {
				a.Log.WarnContext(r.Context(), "whatsapp: a webhook verification was refused", "err", err)
				http.Error(w, "verify token mismatch", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, ch)
		case http.MethodPost:
			sig := r.Header.Get("X-Hub-Signature-256")
			if _, err := whatsapp.CheckSignatureHeader(sig); err != nil {
				a.Log.WarnContext(r.Context(), "whatsapp: a webhook without a usable signature was refused", "remote", r.RemoteAddr)
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
			if err != nil || len(body) > maxWebhookBody {
				http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
				return
			}
			switch err := a.WhatsApp.Receive(r.Context(), body, sig); {
			case errors.Is(err, whatsapp.ErrBadSignature):
				a.Log.WarnContext(r.Context(), "whatsapp: a webhook whose signature matches no app secret was refused", "remote", r.RemoteAddr)
				http.Error(w, "bad signature", http.StatusUnauthorized)
			case err != nil:
				a.Log.ErrorContext(r.Context(), "whatsapp: a webhook was not queued; Meta will retry", "err", err)
				http.Error(w, "try again", http.StatusServiceUnavailable)
			default:
				w.WriteHeader(http.StatusOK)
			}
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// whatsappEngine adapts the runtime to whatsapp.Engine.
type whatsappEngine struct {
	runtimeAdapter
	st *store.Store
}

var _ whatsapp.Engine = whatsappEngine{}

func (m whatsappEngine) StartText(ctx context.Context, id store.ConversationID, opener string) ([]conversations.TranscriptLine, error) {
	if m.rt == nil {
		return nil, conversations.RuntimeFault(runtime.ErrProvider, false)
	}
	first, err := m.rt.StartText(ctx, id, opener)
	if err != nil {
		return nil, conversations.RuntimeFault(err, false)
	}
	lines := make([]conversations.TranscriptLine, len(first))
	for i, l := range first {
		lines[i] = conversations.SessionLine(l)
	}
	return lines, nil
}

func (m whatsappEngine) Send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, sttSeconds float64) (chats.Turn, error) {
	if m.rt == nil {
		return chats.Turn{}, conversations.RuntimeFault(runtime.ErrProvider, false)
	}
	turn, err := m.rt.SendMetered(ctx, id, text, attachments, sttSeconds, nil)
	if err != nil {
		return chats.Turn{}, conversations.RuntimeFault(err, false)
	}
	return chats.Turn{User: conversations.SessionLine(turn.User), Agent: conversations.SessionLine(turn.Agent), Ended: turn.Ended, EndReason: turn.EndReason}, nil
}

func (m whatsappEngine) Say(ctx context.Context, c store.Conversation, text string) error {
	if m.rt == nil {
		return conversations.RuntimeFault(runtime.ErrProvider, false)
	}
	params, err := encodeJSON(runtime.CommandParams{Text: text})
	if err != nil {
		return err
	}
	cmd, err := m.st.Conversations().AddCommand(ctx, store.OrgScope(c.OrgID), c.ID, store.CommandSay, params)
	if err != nil {
		return err
	}
	return conversations.RuntimeFault(m.rt.Command(ctx, cmd), false)
}

func (m whatsappEngine) End(ctx context.Context, id store.ConversationID) error {
	if m.rt == nil {
		return conversations.RuntimeFault(runtime.ErrProvider, false)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return m.rt.End(ctx, id, session.EndCompleted, false)
}

func (m whatsappEngine) TranscribeVoiceNote(ctx context.Context, id store.ConversationID, ogg []byte) (string, float64, error) {
	if m.rt == nil {
		return "", 0, conversations.RuntimeFault(runtime.ErrProvider, false)
	}
	text, secs, err := m.rt.TranscribeVoiceNote(ctx, id, ogg)
	if errors.Is(err, runtime.ErrVoiceNote) {
		return "", 0, err
	}
	return text, secs, conversations.RuntimeFault(err, false)
}

// vaultSecrets resolves the channel's secrets from the vault (issue 17), in the sender's
// project, and records which secrets a sender uses.
type vaultSecrets struct{ v *vault.Service }

var _ whatsapp.Secrets = vaultSecrets{}

func (s vaultSecrets) Resolve(ctx context.Context, org store.OrgID, project store.ProjectID, id string) (string, error) {
	sid, err := store.ParseID[store.SecretID](id)
	if err != nil {
		return "", whatsapp.ErrSecretNotFound
	}
	c, err := s.v.Resolve(ctx, store.OrgScope(org).Narrow(project), sid)
	if errors.Is(err, store.ErrNotFound) {
		return "", whatsapp.ErrSecretNotFound
	}
	if err != nil {
		return "", err
	}
	return c.Value(), nil
}

func (s vaultSecrets) Link(ctx context.Context, tx *store.Tx, act app.Actor, sn store.WhatsAppSender) error {
	name := sn.DisplayNumber
	if name == "" {
		name = sn.PhoneNumberID
	}
	return vault.Link(ctx, tx, act, sn.ProjectID, store.SecretUse{Type: "whatsapp_sender", ID: string(sn.ID), Name: name},
		sn.AccessTokenSecretID, sn.AppSecretSecretID)
}
