package api

import (
	"net/http"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// webCallView is the WebCall object.
type webCallView struct {
	Object          string    `json:"object"`
	ID              string    `json:"id"`
	ConversationID  string    `json:"conversation_id"`
	URL             string    `json:"url"`
	Token           string    `json:"token"`
	ExpiresAt       time.Time `json:"expires_at"`
	ParticipantName string    `json:"participant_name"`
}

func (a *API) createWebCall(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var body struct {
		ParticipantName *string `json:"participant_name"`
	}
	if err := c.bind(&body); err != nil {
		return err
	}
	participant := "Caller"
	if body.ParticipantName != nil && *body.ParticipantName != "" {
		participant = *body.ParticipantName
	}
	who := callerOf(c.p)
	cs, err := a.checkStart(ctx, a.Store.Queries, who, c.value, startChecks{channel: agentdef.ChannelVoice})
	if err != nil {
		return err
	}
	if a.Runtime == nil {
		return mapRuntimeError(runtime.ErrNoMedia, false)
	}
	if err := a.Runtime.CanPlace(); err != nil {
		return mapRuntimeError(err, false)
	}
	if ok, err := a.Runtime.CountDaily(ctx, c.p.Org.ID, a.WebCallsPerDay); err != nil {
		return mapRuntimeError(err, false)
	} else if !ok {
		tomorrow := a.now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		e := fault.E(fault.CodeDailyLimit, "The organization has started %d browser calls today (UTC), the most it may; retry after %s.", a.WebCallsPerDay, tomorrow.Format(time.RFC3339))
		e.RetryAfter = tomorrow.Sub(a.now())
		return e
	}
	conv := newConversation(who, cs, store.ChannelVoice, "inbound", store.ConvPending)
	if err := a.Runtime.AcquireCallSlot(ctx, conv.OrgID, conv.ID, a.MaxCalls); err != nil {
		return mapRuntimeError(err, false)
	}
	err = a.Store.Tx(ctx, func(tx *store.Tx) error {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return err
		}
		conv = created
		au := &auditor{api: a, r: r, tx: tx}
		return au.record("web_call.created", "conversation", string(conv.ID), conv.ProjectID, map[string]any{"agent_id": conv.AgentID})
	})
	if err != nil {
		a.Runtime.ReleaseCallSlot(ctx, conv.OrgID, conv.ID)
		return err
	}
	wc, err := a.Runtime.StartWebCall(ctx, conv.ID, participant)
	if err != nil {
		a.abandon(ctx, conv, session.EndFailed)
		return mapRuntimeError(err, false)
	}
	return a.answerCreated(w, r, c, "/v1/conversations/"+string(conv.ID), webCallView{Object: "web_call", ID: wc.ID, ConversationID: string(conv.ID),
		URL: wc.URL, Token: wc.Token, ExpiresAt: wc.ExpiresAt, ParticipantName: participant})
}
