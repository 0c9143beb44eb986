package webrtc

import (
	"context"
	"errors"
	"testing"

	"github.com/parley-voice/parley/session"
)

// Listen tokens exist only for live conversations registered here; their kind follows the mode
// and their URL is the listen page.
func TestCreateListenToken(t *testing.T) {
	s := newTestService(t, Options{})
	e := newEngine(t, engineOptions{})
	ctx := context.Background()
	conv := e.Conversation("conv-live", session.Agent{SystemPrompt: "x"}, nil)
	if _, err := s.CreateListenToken(ctx, "conv-live", ModeListen); !errors.Is(err, ErrNotLive) {
		t.Fatalf("before Register: %v", err)
	}
	unregister := s.Register(conv)
	for _, tc := range []struct {
		mode ListenMode
		kind TokenKind
	}{{ModeListen, KindListen}, {"", KindListen}, {ModeTakeover, KindTakeover}} {
		lt, err := s.CreateListenToken(ctx, "conv-live", tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if lt.URL != s.srv.URL+"/listen/conv-live" {
			t.Fatalf("url %s", lt.URL)
		}
		if _, err := s.tokens.Verify(lt.Token, "conv-live", tc.kind); err != nil {
			t.Fatalf("mode %q: %v", tc.mode, err)
		}
	}
	unregister()
	if _, err := s.CreateListenToken(ctx, "conv-live", ModeListen); !errors.Is(err, ErrNotLive) {
		t.Fatalf("after unregister: %v", err)
	}
}
