package webrtc

import (
	"sync"
	"time"
)

// replayGuard remembers the nonces of used tokens until they expire, so each token joins once.
// It is in memory: a token is only good on the node that holds its call, so that suffices.
type replayGuard struct {
	mu   sync.Mutex
	used map[string]time.Time
	now  func() time.Time
}

func newReplayGuard(now func() time.Time) *replayGuard {
	return &replayGuard{used: map[string]time.Time{}, now: now}
}

// Use marks c's nonce used; it returns ErrTokenUsed when it already was.
func (g *replayGuard) Use(c Claims) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.used[c.Nonce]; ok {
		return ErrTokenUsed
	}
	g.used[c.Nonce] = c.ExpiresAt()
	return nil
}

// Seen reports whether c's nonce was used.
func (g *replayGuard) Seen(c Claims) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.used[c.Nonce]
	return ok
}

// Prune forgets nonces whose tokens have expired (they are refused as expired anyway).
func (g *replayGuard) Prune() {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for n, exp := range g.used {
		if !now.Before(exp) {
			delete(g.used, n)
		}
	}
}

// Len returns how many nonces are remembered.
func (g *replayGuard) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.used)
}
