package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/app/conversations"
)

type createChatIn struct {
	Body chats.ChatCreate `body:"required"`
}

func (a *API) createChat(ctx context.Context, c *call, in *createChatIn) (*conversations.ConversationWithTranscript, error) {
	conv, err := a.Chats.Start(ctx, c.actor(ctx), in.Body)
	return &conv, err
}

type sendMessageIn struct {
	ID   string              `path:"conversation_id" format:"uuid" doc:"The conversation."`
	Body chats.MessageCreate `body:"required"`
}

// sendMessage answers the reply as JSON, or as server-sent events when the client asks for a
// stream (see sse.go).
func (a *API) sendMessage(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *sendMessageIn) error {
	out := newSSE(w, wantsStream(r, in.Body.Stream))
	turn, err := a.Chats.Send(ctx, c.actor(ctx), in.ID, in.Body, out.onDelta())
	switch {
	case err != nil && !out.started:
		return err
	case err != nil:
		return out.fail(ctx, a.Log, err)
	case !out.stream:
		return a.writeAnswer(ctx, w, c, &turn)
	}
	a.keepStreamed(ctx, c, &turn)
	out.event("done", turn)
	return nil
}

// replayMessage answers a replayed sendMessage: as JSON, or as a stream of one done event when
// the retry asks for a stream.
func replayMessage(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	c := callFrom(r.Context())
	var mb chats.MessageCreate
	if c != nil {
		_ = json.Unmarshal(c.raw, &mb)
	}
	if wantsStream(r, mb.Stream) {
		var v any
		_ = json.Unmarshal(body, &v)
		newSSE(w, true).event("done", v)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

type uploadAttachmentIn struct {
	Body chats.AttachmentUpload `body:"required"` // multipart/form-data, read by readUpload
}

func (a *API) uploadAttachment(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *uploadAttachmentIn) error {
	data, err := readUpload(w, r)
	if err != nil {
		return err
	}
	at, err := a.Chats.Upload(ctx, c.actor(ctx), data, http.DetectContentType(data))
	if err != nil {
		return err
	}
	return a.writeAnswer(ctx, w, c, &at)
}
