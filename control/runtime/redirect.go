package runtime

// issue 21: an outbound call's 3xx redirects are recorded on its conversation, as events of
// type conversation.redirected (one per step: followed or refused, with the SIP status and the
// targets).

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/store"
)

// Redirect is one step of a redirected dial.
type Redirect struct {
	Status int    `json:"sip_status"`
	From   string `json:"from_uri"`
	To     string `json:"to_uri"`
	State  string `json:"state"` // followed, refused
	Reason string `json:"reason,omitempty"`
}

// ConversationRedirected is the data of conversation.redirected (issue 14's catalogue): the
// conversation and the redirect step.
type ConversationRedirected struct {
	events.ConversationData
	Redirect Redirect `json:"redirect"`
}

// SchemaDoc describes the object in the document.
func (ConversationRedirected) SchemaDoc() string {
	return "An outbound call's conversation, with one step of its SIP redirects."
}

func init() {
	events.Register("conversation.redirected", "An outbound call was redirected (SIP 3xx): one event per step, followed or refused, with the SIP status and the targets.", ConversationRedirected{})
}

// redirected records a redirect step on the conversation of l.
func (rt *Runtime) redirected(l *live, r Redirect) {
	c := l.conv
	data, _ := json.Marshal(ConversationRedirected{ConversationData: EventData(c), Redirect: r})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rt.store.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.InsertEvent(ctx, store.Event{OrgID: c.OrgID, ProjectID: c.ProjectID, Mode: c.Mode, Type: "conversation.redirected",
			ConversationID: c.ID, AgentID: c.AgentID, Data: data})
		return err
	})
	if err != nil {
		rt.log.Warn("call: redirect not recorded", "conversation", c.ID, "err", err)
	}
}
