package webrtc

import (
	"context"
	"fmt"
	"time"
)

// ListenMode says what a listen token allows.
type ListenMode string

// Listen modes.
const (
	ModeListen   ListenMode = "listen"
	ModeTakeover ListenMode = "takeover"
)

// ListenToken is what CreateListenToken returns: a page joins with URL and Token.
type ListenToken struct {
	ConversationID string
	Mode           ListenMode
	URL            string
	Token          string
	ExpiresAt      time.Time
}

// CreateListenToken issues a single-use token to listen to (or take over) a live conversation
// registered here: a web call, or a phone call given to Register.
func (s *Service) CreateListenToken(ctx context.Context, conversationID string, mode ListenMode) (ListenToken, error) {
	if err := ctx.Err(); err != nil {
		return ListenToken{}, err
	}
	kind := KindListen
	switch mode {
	case ModeListen, "":
		mode = ModeListen
	case ModeTakeover:
		kind = KindTakeover
	default:
		return ListenToken{}, fmt.Errorf("webrtc: listen mode %q (want listen or takeover)", mode)
	}
	s.mu.Lock()
	_, ok := s.convs[conversationID]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ListenToken{}, ErrClosed
	}
	if !ok {
		return ListenToken{}, ErrNotLive
	}
	token, claims := s.tokens.Sign(kind, conversationID, s.opts.TokenTTL)
	return ListenToken{ConversationID: conversationID, Mode: mode, URL: s.opts.BaseURL + "/listen/" + conversationID,
		Token: token, ExpiresAt: claims.ExpiresAt()}, nil
}
