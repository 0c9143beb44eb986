package calls

import (
	"context"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// WebCallCreate is the body of a browser voice call.
type WebCallCreate struct {
	AgentID string `json:"agent_id" jsonschema:"format=uuid"`
	StartOptions
	ParticipantName *string `json:"participant_name,omitempty" doc:"How the page names the person; Caller when omitted." jsonschema:"maxLength=120,nullable"`
}

// SchemaDoc describes the body in the document.
func (WebCallCreate) SchemaDoc() string { return "A browser voice call to start." }

// WebCall is the WebCall object: how a page joins a browser call.
type WebCall struct {
	Object          string   `json:"object" jsonschema:"enum=web_call"`
	ID              string   `json:"id"`
	ConversationID  string   `json:"conversation_id" jsonschema:"format=uuid"`
	URL             string   `json:"url" doc:"The page that joins the call." jsonschema:"format=uri"`
	Token           string   `json:"token" doc:"Joins this one call, once, within 15 minutes."`
	ExpiresAt       app.Time `json:"expires_at"`
	ParticipantName string   `json:"participant_name"`
}

// SchemaDoc describes the object in the document.
func (WebCall) SchemaDoc() string { return "A browser call a page joins with url and token." }

// WebCall starts a browser voice call: the conversation is pending until the page joins.
func (s *Service) WebCall(ctx context.Context, act app.Actor, body WebCallCreate) (WebCall, error) {
	participant := "Caller"
	if body.ParticipantName != nil && *body.ParticipantName != "" {
		participant = *body.ParticipantName
	}
	mode := act.Mode()
	st, err := s.Rules.Check(ctx, s.Store.Queries, act, mode, body.AgentID, body.StartOptions, Need{Channel: agentdef.ChannelVoice})
	if err != nil {
		return WebCall{}, err
	}
	if err := s.Media.CanPlace(store.ChannelVoice); err != nil {
		return WebCall{}, err
	}
	if ok, err := s.Media.CountDaily(ctx, act.Org.ID, s.WebCallsPerDay); err != nil {
		return WebCall{}, err
	} else if !ok {
		now := s.now()
		tomorrow := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		e := fault.E(fault.CodeDailyLimit, "The organization has started %d browser calls today (UTC), the most it may; retry after %s.", s.WebCallsPerDay, tomorrow.Format(time.RFC3339))
		e.RetryAfter = tomorrow.Sub(now)
		return WebCall{}, e
	}
	conv := NewConversation(act, mode, st, store.ChannelVoice, "inbound", store.ConvPending)
	if err := s.Media.AcquireCallSlot(ctx, conv.OrgID, conv.ID, s.MaxCalls); err != nil {
		return WebCall{}, err
	}
	if _, err := StoreConversation(ctx, s.Store, act, conv, "web_call.created", map[string]any{"agent_id": conv.AgentID}); err != nil {
		s.Media.ReleaseCallSlot(ctx, conv.OrgID, conv.ID)
		return WebCall{}, err
	}
	wc, err := s.Media.StartWebCall(ctx, conv.ID, participant)
	if err != nil {
		s.Media.Abandon(ctx, conv.OrgID, conv.ID)
		return WebCall{}, err
	}
	return WebCall{Object: "web_call", ID: wc.ID, ConversationID: string(conv.ID), URL: wc.URL, Token: wc.Token,
		ExpiresAt: app.T(wc.ExpiresAt), ParticipantName: participant}, nil
}
