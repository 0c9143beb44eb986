package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/parley-voice/parley/control/app/conversations"
)

type listConversationsIn struct {
	listQuery
	ProjectID     string `query:"project_id" format:"uuid" doc:"Only this project's conversations; 404 when the key reaches no such project."`
	AgentID       string `query:"agent_id" format:"uuid"`
	Status        string `query:"status" enum:"pending,ringing,in_progress,ended"`
	Channel       string `query:"channel" enum:"phone,voice,chat,whatsapp"`
	Direction     string `query:"direction" enum:"inbound,outbound"`
	ExternalID    string `query:"external_id"`
	CreatedAfter  string `query:"created_after" format:"date-time" doc:"Only conversations created at or after this moment."`
	CreatedBefore string `query:"created_before" format:"date-time" doc:"Only conversations created before this moment."`
}

func (a *API) listConversations(ctx context.Context, c *call, in *listConversationsIn) (*list[conversations.Conversation], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	f := conversations.Filter{ProjectID: in.ProjectID, AgentID: in.AgentID, Status: in.Status, Channel: in.Channel, Direction: in.Direction,
		ExternalID: in.ExternalID, CreatedAfter: optTime(in.CreatedAfter), CreatedBefore: optTime(in.CreatedBefore)}
	cs, err := a.Conversations.List(ctx, c.actor(ctx), f, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, cs, func(v conversations.Conversation) string { return v.ID }), nil
}

// optTime is a date-time query value (checked by checkQuery), or nil when it was not sent.
func optTime(raw string) *time.Time {
	if raw == "" {
		return nil
	}
	t, _ := time.Parse(time.RFC3339Nano, raw)
	return &t
}

type listDeletedConversationsIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid"`
	AgentID   string `query:"agent_id" format:"uuid"`
}

func (a *API) listDeletedConversations(ctx context.Context, c *call, in *listDeletedConversationsIn) (*list[conversations.DeletedConversation], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	f := conversations.Filter{ProjectID: in.ProjectID, AgentID: in.AgentID}
	cs, err := a.Conversations.ListDeleted(ctx, c.actor(ctx), f, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, cs, func(v conversations.DeletedConversation) string { return v.ID }), nil
}

type conversationIn struct {
	ID string `path:"conversation_id" format:"uuid" doc:"The conversation."`
}

type getConversationIn struct {
	ID      string   `path:"conversation_id" format:"uuid" doc:"The conversation."`
	Include []string `query:"include" enum:"transcript,cost" doc:"Repeatable: transcript, cost."`
}

// includePermissions are the permissions each include of getConversation needs besides the
// operation's own.
var includePermissions = []struct{ include, permission string }{{"transcript", "transcripts:read"}, {"cost", "billing:read"}}

func (a *API) getConversation(ctx context.Context, c *call, in *getConversationIn) (*conversations.ConversationWithTranscript, error) {
	for _, ip := range includePermissions {
		if slices.Contains(in.Include, ip.include) {
			if err := c.needScope(ip.permission, "include="+ip.include); err != nil {
				return nil, err
			}
		}
	}
	inc := conversations.Include{Transcript: slices.Contains(in.Include, "transcript"), Cost: slices.Contains(in.Include, "cost")}
	v, err := a.Conversations.Get(ctx, c.actor(ctx), in.ID, inc)
	return &v, err
}

func (a *API) deleteConversation(ctx context.Context, c *call, in *conversationIn) (*conversations.Deleted, error) {
	v, err := a.Conversations.Delete(ctx, c.actor(ctx), in.ID)
	return &v, err
}

func (a *API) getTranscript(ctx context.Context, c *call, in *conversationIn) (*conversations.Transcript, error) {
	v, err := a.Conversations.Transcript(ctx, c.actor(ctx), in.ID)
	return &v, err
}

type getLiveTranscriptIn struct {
	ID    string `path:"conversation_id" format:"uuid" doc:"The conversation."`
	After int64  `query:"after" min:"0" max:"9007199254740991" default:"0" doc:"The last seq already read (0: none)."`
	Wait  int    `query:"wait" min:"0" max:"30" default:"0" doc:"Seconds to wait for a line, 0 to 30."`
}

// getLiveTranscript writes its answer itself: a long-poll answer must not be cached.
func (a *API) getLiveTranscript(ctx context.Context, c *call, w http.ResponseWriter, _ *http.Request, in *getLiveTranscriptIn) error {
	v, err := a.Conversations.Live(ctx, c.actor(ctx), in.ID, in.After, time.Duration(in.Wait)*time.Second)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	respond(w, http.StatusOK, v)
	return nil
}

// getRecording writes the file itself, with Range (206).
func (a *API) getRecording(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *conversationIn) error {
	rec, err := a.Conversations.Recording(ctx, c.actor(ctx), in.ID)
	if err != nil {
		return err
	}
	defer rec.File.Close()
	return serveRecording(w, r, rec)
}
