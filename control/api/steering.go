package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// commandView is the ConversationCommand object.
type commandView struct {
	Object         string          `json:"object"`
	ID             string          `json:"id"`
	ConversationID string          `json:"conversation_id"`
	Kind           string          `json:"kind"`
	Status         string          `json:"status"`
	Reason         *string         `json:"reason"`
	Params         json.RawMessage `json:"params"`
	CreatedAt      time.Time       `json:"created_at"`
	CompletedAt    *time.Time      `json:"completed_at"`
}

func viewCommand(c store.Command) commandView {
	return commandView{Object: "conversation_command", ID: string(c.ID), ConversationID: string(c.ConversationID), Kind: c.Kind,
		Status: c.Status, Reason: strPtr(c.Reason), Params: orEmpty(c.Params), CreatedAt: c.CreatedAt, CompletedAt: c.CompletedAt}
}

// sipURI is a SIP or SIPS URI a call can be transferred to (RFC 3261 §19.1).
var sipURI = regexp.MustCompile(`^sips?:[^\s@]+@[^\s@]+$|^sips?:[^\s@]+$`)

func (a *API) addConversationNote(w http.ResponseWriter, r *http.Request) error {
	return a.steer(w, r, store.CommandNote)
}

func (a *API) sayInConversation(w http.ResponseWriter, r *http.Request) error {
	return a.steer(w, r, store.CommandSay)
}

func (a *API) transferConversation(w http.ResponseWriter, r *http.Request) error {
	return a.steer(w, r, store.CommandTransfer)
}

func (a *API) endConversation(w http.ResponseWriter, r *http.Request) error {
	return a.steer(w, r, store.CommandEnd)
}

// steer records a command for a live conversation and hands it to the node that runs it; the
// answer (202) is the command, which GET …/commands/{command_id} follows to done or failed.
func (a *API) steer(w http.ResponseWriter, r *http.Request, kind string) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var p runtime.CommandParams
	if err := c.bind(&p); err != nil {
		return err
	}
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	if err := writableProject(r, a.Store.Queries, conv.ProjectID); err != nil {
		return err
	}
	text := conv.Channel == store.ChannelChat || conv.Channel == store.ChannelWhatsApp
	switch {
	case conv.Ended():
		return fault.E(fault.CodeConversationEnded, "The conversation has ended (%s).", conv.EndReason)
	case kind == store.CommandTransfer && text:
		return fault.E(fault.CodeNotTransferable, "A %s conversation cannot be transferred: there is no call to hand over.", conv.Channel)
	case kind != store.CommandEnd && conv.Status != store.ConvInProgress:
		return fault.E(fault.CodeConversationNotLive, "The call is %s; it can be steered once it is answered.", conv.Status)
	}
	if kind == store.CommandTransfer {
		if !store.ValidE164(p.Destination) && !sipURI.MatchString(p.Destination) {
			return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/destination", Code: "invalid_format",
				Detail: "destination must be a phone number in E.164 form (+14155550100) or a SIP URI (sip:desk@pbx.example.com)."}})
		}
		if p.Mode == "" {
			p.Mode = string(session.TransferCold)
		}
	}
	if a.Runtime == nil {
		return fault.E(fault.CodeConversationNotLive, "This node cannot reach the conversation.")
	}
	params, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var cmd store.Command
	err = a.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if cmd, err = tx.CreateCommand(ctx, store.Command{OrgID: conv.OrgID, ConversationID: conv.ID, Kind: kind, Params: params}); err != nil {
			return err
		}
		au := &auditor{api: a, r: r, tx: tx}
		return au.record("conversation."+kind, "conversation", string(conv.ID), conv.ProjectID, map[string]any{"command_id": cmd.ID})
	})
	if err != nil {
		return err
	}
	sctx := context.WithoutCancel(ctx)
	err = a.Runtime.Command(ctx, cmd)
	switch {
	case err == nil:
	case errors.Is(err, runtime.ErrNotLive) && kind == store.CommandEnd:
		// No node runs it any more: end it in the store.
		if err := a.Runtime.End(sctx, conv.ID, session.EndAPI, false); err != nil {
			return err
		}
		if _, err := a.Store.FinishCommand(sctx, cmd.ID, store.CommandDone, "", a.now()); err != nil {
			return err
		}
	default:
		_, _ = a.Store.FinishCommand(sctx, cmd.ID, store.CommandFailed, "the node running the conversation did not take the command", a.now())
		if cur, gerr := a.Store.GetConversation(sctx, conv.ID); gerr == nil && cur.Ended() {
			return fault.E(fault.CodeConversationEnded, "The conversation has ended (%s).", cur.EndReason)
		}
		return mapRuntimeError(err, conv.Channel == store.ChannelPhone)
	}
	if cur, err := a.Store.GetCommand(ctx, cmd.ID); err == nil {
		cmd = cur
	}
	respond(w, http.StatusAccepted, viewCommand(cmd))
	return nil
}

func (a *API) getConversationCommand(w http.ResponseWriter, r *http.Request) error {
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	raw := pathParam(r, "command_id")
	notFound := fault.E(fault.CodeCommandNotFound, "Conversation %s has no command %s.", conv.ID, quoteID(raw))
	id, err := store.ParseID[store.CommandID](raw)
	if err != nil {
		return notFound
	}
	cmd, err := a.Store.GetCommand(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && cmd.ConversationID != conv.ID {
		return notFound
	}
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, viewCommand(cmd))
	return nil
}

// listenerView is the Listener object.
type listenerView struct {
	Object         string    `json:"object"`
	ConversationID string    `json:"conversation_id"`
	Mode           string    `json:"mode"`
	URL            string    `json:"url"`
	Token          string    `json:"token"`
	ExpiresAt      time.Time `json:"expires_at"`
}

func (a *API) listenConversation(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var body struct {
		Mode string `json:"mode"`
	}
	if err := c.bind(&body); err != nil {
		return err
	}
	if body.Mode == "" {
		body.Mode = "listen"
	}
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	switch {
	case conv.Channel == store.ChannelChat || conv.Channel == store.ChannelWhatsApp || conv.Mode == store.ModeTest:
		return fault.E(fault.CodeNoAudio, "This conversation has no audio to listen to (a %s %s conversation).", conv.Mode, conv.Channel)
	case conv.Ended():
		return fault.E(fault.CodeConversationEnded, "The conversation has ended (%s).", conv.EndReason)
	case conv.Status != store.ConvInProgress:
		return fault.E(fault.CodeConversationNotLive, "The call is %s; listen once it is answered.", conv.Status)
	case a.Runtime == nil:
		return mapRuntimeError(runtime.ErrNoMedia, false)
	}
	li, err := a.Runtime.Listen(ctx, conv.ID, body.Mode)
	if err != nil {
		return mapRuntimeError(err, false)
	}
	respond(w, http.StatusCreated, listenerView{Object: "listener", ConversationID: string(conv.ID), Mode: li.Mode, URL: li.URL, Token: li.Token, ExpiresAt: li.ExpiresAt})
	return nil
}
