// Package channels adapts the voice channels (the SIP server, the WebRTC service) to the
// runtime's own interfaces, so that the runtime depends on session and on small interfaces of
// its own, never on sip or webrtc. Only the composition root (package control) and tests that
// run real channels use it. It holds no logic of its own beyond translating types and errors.
package channels

import (
	"context"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/webrtc"
)

// WebCalls adapts a WebRTC service to the runtime's browser-call interface.
func WebCalls(s *webrtc.Service) runtime.WebCalls { return webCalls{s} }

type webCalls struct{ s *webrtc.Service }

func (w webCalls) CreateWebCall(ctx context.Context, r runtime.BrowserCall) (runtime.WebCall, error) {
	wc, err := w.s.CreateWebCall(ctx, webrtc.WebCallRequest{ConversationID: r.ConversationID, ParticipantName: r.ParticipantName, AgentName: r.AgentName,
		Sink: r.Sink, Start: r.Start, Expired: r.Expired})
	if err != nil {
		return runtime.WebCall{}, err
	}
	return runtime.WebCall{ID: wc.ID, URL: wc.URL, Token: wc.Token, ExpiresAt: wc.ExpiresAt}, nil
}

func (w webCalls) CreateListenToken(ctx context.Context, conversationID, mode string) (runtime.ListenToken, error) {
	t, err := w.s.CreateListenToken(ctx, conversationID, webrtc.ListenMode(mode))
	if err != nil {
		return runtime.ListenToken{}, err
	}
	return runtime.ListenToken{Mode: string(t.Mode), URL: t.URL, Token: t.Token, ExpiresAt: t.ExpiresAt}, nil
}

func (w webCalls) Register(conv *session.Conversation) func() { return w.s.Register(conv) }

func (w webCalls) Sink(conversationID string, next session.Sink) session.Sink {
	return w.s.Sink(conversationID, next)
}
