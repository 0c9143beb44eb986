package webrtc

import (
	"errors"
	"testing"
	"time"
)

func TestReplayGuard(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newReplayGuard(func() time.Time { return now })
	a := Claims{Nonce: "a", Expires: 1060}
	b := Claims{Nonce: "b", Expires: 2000}
	if err := g.Use(a); err != nil {
		t.Fatal(err)
	}
	if err := g.Use(a); !errors.Is(err, ErrTokenUsed) {
		t.Fatalf("second use: %v", err)
	}
	if err := g.Use(b); err != nil {
		t.Fatal(err)
	}
	now = time.Unix(1060, 0)
	g.Prune()
	if g.Len() != 1 {
		t.Fatalf("%d nonces kept after a expired, want 1", g.Len())
	}
	if err := g.Use(b); !errors.Is(err, ErrTokenUsed) {
		t.Fatalf("b reused after prune: %v", err)
	}
}
