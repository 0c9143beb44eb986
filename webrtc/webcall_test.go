package webrtc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
)

// A web call's URL is BaseURL/call/{id}, its token is a call token for that id lasting 15
// minutes, and ids are unique.
func TestCreateWebCall(t *testing.T) {
	s := newTestService(t, Options{BaseURL: "https://voice.example.com/"})
	start := func(context.Context, session.AudioPort, session.Sink) (*session.Conversation, error) { return nil, nil }
	a, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-1", Start: start})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-2", Start: start})
	if a.ID == b.ID || a.URL != "https://voice.example.com/call/"+a.ID || !validID(a.ID) {
		t.Fatalf("calls %+v %+v", a, b)
	}
	c, err := s.tokens.Verify(a.Token, a.ID, KindCall)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(c.ExpiresAt()); d < 14*time.Minute || d > 15*time.Minute {
		t.Fatalf("token lasts %v", d)
	}
	if !a.ExpiresAt.Equal(c.ExpiresAt()) || strings.Contains(a.URL, a.Token) {
		t.Fatalf("expiry %v vs %v, or the token is in the URL", a.ExpiresAt, c.ExpiresAt())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "conv-3", Start: start}); err == nil {
		t.Fatal("a cancelled context was accepted")
	}
}
