package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// WebCalls is the browser-call service of a media node, in the runtime's own terms: the
// composition root adapts the WebRTC service to it, so the runtime knows nothing of WebRTC.
type WebCalls interface {
	// CreateWebCall makes a call a page joins with the answer's URL and token.
	CreateWebCall(ctx context.Context, req BrowserCall) (WebCall, error)
	// CreateListenToken lets a page listen to (or take over) a live conversation registered
	// with the service.
	CreateListenToken(ctx context.Context, conversationID string, mode string) (ListenToken, error)
	// Register makes a phone call's conversation reachable for listening in.
	Register(conv *session.Conversation) (unregister func())
	// Sink wraps a conversation's sink so that the pages of the call see its transcript.
	Sink(conversationID string, next session.Sink) session.Sink
}

// BrowserCall is a browser call to make for a conversation.
type BrowserCall struct {
	ConversationID  string
	ParticipantName string       // how the page names the caller ("" for the default)
	AgentName       string       // the agent's name, which the page shows (issue 22 item 13)
	Sink            session.Sink // the conversation's sink, which the service wraps for the page
	// Start builds and starts the conversation once the page's media is up.
	Start func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error)
	// Expired is called when nobody joined before the token expired.
	Expired func()
}

// ListenToken is what a page listens in with.
type ListenToken struct {
	Mode      string
	URL       string
	Token     string
	ExpiresAt time.Time
}

// WebCall is a browser call a page joins with URL and Token.
type WebCall struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

type webCallRequest struct {
	ConversationID  store.ConversationID `json:"conversation_id"`
	ParticipantName string               `json:"participant_name,omitempty"`
}

// StartWebCall makes a browser call for a voice conversation stored pending, on a media node:
// the conversation is in progress once the page joins and its media is up, and ends with
// no_answer when nobody joins before the token expires. Errors: ErrNoMedia, ErrUnreachable.
func (rt *Runtime) StartWebCall(ctx context.Context, id store.ConversationID, participant string) (WebCall, error) {
	node, err := rt.mediaNode()
	if err != nil {
		return WebCall{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := rt.mesh.call(ctx, node, kindWebCall, webCallRequest{ConversationID: id, ParticipantName: participant}, nil)
	if err != nil {
		return WebCall{}, err
	}
	var wc WebCall
	if err := json.Unmarshal(raw, &wc); err != nil {
		return WebCall{}, fmt.Errorf("runtime: a web call from %s: %w", node, err)
	}
	return wc, nil
}

func (rt *Runtime) handleWebCall(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
	var req webCallRequest
	if err := json.Unmarshal(body, &req); err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	if rt.o.WebCalls == nil || !rt.o.Media {
		reply(nil, true, ErrNoMedia)
		return
	}
	c, err := rt.store.GetConversation(ctx, req.ConversationID)
	if err != nil {
		reply(nil, true, err)
		return
	}
	l, err := rt.register(ctx, c)
	if err != nil {
		reply(nil, true, err)
		return
	}
	agentName := ""
	if ag, err := rt.store.SystemAgents().Get(ctx, c.AgentID); err == nil {
		agentName = ag.Name
	}
	wc, err := rt.o.WebCalls.CreateWebCall(ctx, BrowserCall{
		ConversationID: string(c.ID), ParticipantName: req.ParticipantName, AgentName: agentName, Sink: l.p,
		Start: func(callCtx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error) {
			sess, err := rt.build(callCtx, c, true, sink)
			if err != nil {
				l.p.end(session.EndProviderError, session.Cost{})
				return nil, err
			}
			l.setEngine(sess, false)
			rec := rt.startRecording(l, sess)
			if rec != nil {
				sess.AddTap(session.RecorderTap{Rec: rec})
			}
			if err := sess.StartVoice(callCtx, port); err != nil {
				l.p.end(session.EndProviderError, session.Cost{})
				return nil, err
			}
			l.p.status(store.ConvInProgress)
			return sess, nil
		},
		Expired: func() { l.stop(session.EndNoAnswer) },
	})
	if err != nil {
		l.p.end(session.EndFailed, session.Cost{})
		reply(nil, true, fmt.Errorf("%w: %v", ErrUnreachable, err))
		return
	}
	reply(wc, true, nil)
}

// Listener is a token that lets a page listen to (or take over) a live voice conversation.
type Listener struct {
	URL       string    `json:"url"`
	Token     string    `json:"token"`
	Mode      string    `json:"mode"`
	ExpiresAt time.Time `json:"expires_at"`
}

type listenRequest struct {
	ConversationID store.ConversationID `json:"conversation_id"`
	Mode           string               `json:"mode"`
}

// Listen issues a listen (or takeover) token on the node that runs the conversation. Errors:
// ErrNotLive, ErrUnsupported (a conversation without audio: a chat, a test call).
func (rt *Runtime) Listen(ctx context.Context, id store.ConversationID, mode string) (Listener, error) {
	owner, err := rt.Owner(ctx, id)
	if err != nil {
		return Listener{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := rt.mesh.call(ctx, owner, kindListen, listenRequest{ConversationID: id, Mode: mode}, nil)
	if err != nil {
		return Listener{}, err
	}
	var li Listener
	if err := json.Unmarshal(raw, &li); err != nil {
		return Listener{}, fmt.Errorf("runtime: a listen token from %s: %w", owner, err)
	}
	return li, nil
}

func (rt *Runtime) handleListen(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
	var req listenRequest
	if err := json.Unmarshal(body, &req); err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	l := rt.lookup(req.ConversationID)
	if l == nil {
		reply(nil, true, ErrNotLive)
		return
	}
	if rt.o.WebCalls == nil || l.simulated.Load() || l.conv.Channel == store.ChannelChat || l.conv.Channel == store.ChannelWhatsApp {
		reply(nil, true, fmt.Errorf("%w: this conversation has no audio to listen to", ErrUnsupported))
		return
	}
	if l.engine() == nil {
		reply(nil, true, ErrNotAnswered)
		return
	}
	tok, err := rt.o.WebCalls.CreateListenToken(ctx, string(req.ConversationID), req.Mode)
	if err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrNotAnswered, err))
		return
	}
	reply(Listener{URL: tok.URL, Token: tok.Token, Mode: string(tok.Mode), ExpiresAt: tok.ExpiresAt}, true, nil)
}
