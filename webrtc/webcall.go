package webrtc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/session"
)

// WebCallRequest asks for a browser call.
type WebCallRequest struct {
	// ConversationID is the id of the conversation the call will run. Required.
	ConversationID string
	// ParticipantName is how the page names the caller; default "Caller".
	ParticipantName string
	// AgentName is the agent's name: the page's title names it ("" for a generic title).
	AgentName string
	// Sink is the control plane's sink for the conversation (may be nil). The service wraps it
	// to send the live transcript to the page and listeners.
	Sink session.Sink
	// Start builds and starts the conversation once the browser's media is up: build it with
	// session.Options.Sink = sink, then conv.StartVoice(ctx, port). ctx ends with the call.
	// Required.
	Start func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error)
	// Expired, if set, is called when nobody joined before the token expired.
	Expired func()
}

// WebCall is what CreateWebCall returns: the page joins with URL and Token.
type WebCall struct {
	ID        string
	URL       string
	Token     string
	ExpiresAt time.Time
}

// webCall is a created web call, waiting for its page or live.
type webCall struct {
	WebCall
	req    WebCallRequest
	joined bool
}

// CreateWebCall creates a browser call and its single-use token.
func (s *Service) CreateWebCall(ctx context.Context, req WebCallRequest) (WebCall, error) {
	if err := ctx.Err(); err != nil {
		return WebCall{}, err
	}
	if req.Start == nil {
		return WebCall{}, errors.New("webrtc: WebCallRequest.Start is required")
	}
	if !validID(req.ConversationID) {
		return WebCall{}, fmt.Errorf("webrtc: conversation id %q is not valid", req.ConversationID)
	}
	if req.ParticipantName == "" {
		req.ParticipantName = "Caller"
	}
	id := newID()
	token, claims := s.tokens.Sign(KindCall, id, s.opts.TokenTTL)
	wc := &webCall{WebCall: WebCall{ID: id, URL: s.opts.BaseURL + "/call/" + id, Token: token, ExpiresAt: claims.ExpiresAt()}, req: req}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return WebCall{}, ErrClosed
	}
	s.calls[id] = wc
	return wc.WebCall, nil
}
