package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// Mesh request kinds.
const (
	kindPlace   = "place"
	kindSend    = "send"
	kindCommand = "command"
	kindWebCall = "webcall"
	kindListen  = "listen"
	kindEnd     = "end"
)

// StartChat opens the engine of a chat stored in progress and makes it live on this node. It
// returns the lines the chat opens with (the agent's first message, when it has one). When the
// engine cannot start, the chat is ended (reason provider_error) and the error wraps
// ErrProvider.
func (rt *Runtime) StartChat(ctx context.Context, id store.ConversationID) ([]session.Line, error) {
	c, err := rt.store.GetConversation(ctx, id)
	if err != nil {
		return nil, err
	}
	l, err := rt.register(ctx, c)
	if err != nil {
		return nil, err
	}
	sess, err := rt.build(ctx, c, false, l.p)
	if err != nil {
		l.p.end(session.EndProviderError, session.Cost{})
		<-l.p.done
		return nil, err
	}
	l.setEngine(sess, true)
	if err := sess.StartText(l.ctx); err != nil {
		l.stop(session.EndFailed)
		return nil, err
	}
	return sess.Transcript(), nil
}

// sendRequest is a chat message on the mesh.
type sendRequest struct {
	ConversationID store.ConversationID `json:"conversation_id"`
	Text           string               `json:"text"`
	Attachments    []store.AttachmentID `json:"attachments,omitempty"`
	// STTSeconds is speech-to-text already used for the message (a voice note), metered with
	// the conversation.
	STTSeconds float64 `json:"stt_seconds,omitempty"`
}

type sendDelta struct {
	Delta string `json:"delta"`
}

// Send answers one chat message on whichever node runs the chat; onDelta (may be nil) gets the
// reply's text as the LLM streams it, before Send returns. Errors: ErrBusy while the last
// message is being answered, ErrEnded, ErrLengthReached, ErrNotLive when no node runs it,
// ErrBadRequest for an attachment that does not fit, ErrProvider when the LLM failed.
func (rt *Runtime) Send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, onDelta func(string)) (Turn, error) {
	return rt.SendMetered(ctx, id, text, attachments, 0, onDelta)
}

// SendMetered is Send for a message that already used sttSeconds of speech-to-text (a voice
// note), metered with the conversation wherever it runs.
func (rt *Runtime) SendMetered(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, sttSeconds float64, onDelta func(string)) (Turn, error) {
	owner, err := rt.Owner(ctx, id)
	if err != nil {
		return Turn{}, err
	}
	req := sendRequest{ConversationID: id, Text: text, Attachments: attachments, STTSeconds: sttSeconds}
	if owner == rt.o.NodeID {
		return rt.sendLocal(ctx, req, onDelta)
	}
	raw, err := rt.mesh.call(ctx, owner, kindSend, req, func(b json.RawMessage) {
		var d sendDelta
		if json.Unmarshal(b, &d) == nil && onDelta != nil {
			onDelta(d.Delta)
		}
	})
	if err != nil {
		return Turn{}, err
	}
	var t Turn
	if err := json.Unmarshal(raw, &t); err != nil {
		return Turn{}, fmt.Errorf("runtime: a chat turn from %s: %w", owner, err)
	}
	return t, nil
}

func (rt *Runtime) sendLocal(ctx context.Context, req sendRequest, onDelta func(string)) (Turn, error) {
	l := rt.lookup(req.ConversationID)
	if l == nil {
		return Turn{}, ErrNotLive
	}
	if l.busy.Load() {
		return Turn{}, ErrBusy
	}
	if sess := l.engine(); sess != nil && req.STTSeconds > 0 {
		sess.AddSTTSeconds(req.STTSeconds)
	}
	images, err := rt.images(ctx, l.conv, req.Attachments)
	if err != nil {
		return Turn{}, err
	}
	return l.send(ctx, req.Text, images, onDelta)
}

func (rt *Runtime) handleSend(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
	var req sendRequest
	if err := json.Unmarshal(body, &req); err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	t, err := rt.sendLocal(ctx, req, func(d string) { reply(sendDelta{Delta: d}, false, nil) })
	reply(t, true, err)
}

// images reads the pictures of a message: each must be the organization's and not used by
// another conversation; it is tied to this one.
func (rt *Runtime) images(ctx context.Context, c store.Conversation, ids []store.AttachmentID) ([]llm.Image, error) {
	var out []llm.Image
	for _, id := range ids {
		a, err := rt.store.GetAttachment(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && a.OrgID != c.OrgID {
			return nil, fmt.Errorf("%w: no attachment %s", ErrBadRequest, id)
		}
		if err != nil {
			return nil, err
		}
		if err := rt.store.ClaimAttachment(ctx, id, c.ID); errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: attachment %s was sent in another conversation", ErrBadRequest, id)
		} else if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(filepath.Join(rt.o.DataDir, filepath.FromSlash(a.Path)))
		if err != nil {
			return nil, fmt.Errorf("runtime: read attachment %s: %w", id, err)
		}
		out = append(out, llm.Image{MIME: a.MIME, Data: data})
	}
	return out, nil
}
