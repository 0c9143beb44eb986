package webrtc

import (
	"context"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
)

// callPort is the session.AudioPort of a web call: the engine's voice goes out on the page's
// agent track, and the engine's decision to end the call reaches the page.
type callPort struct {
	p       *peer
	started bool // the conversation was started; guarded by p.goMu
}

// SendFrame encodes and sends one 20 ms frame (from the engine's pacer, on the shared media
// clock's goroutine). It never waits on anything but a UDP write.
func (c *callPort) SendFrame(f *media.Frame) {
	if s := c.p.sender.Load(); s != nil {
		_ = s.Write(f)
	}
}

// SendDTMF is not possible toward a browser: pages have no keypad tones to receive.
func (c *callPort) SendDTMF(ctx context.Context, digits string) error { return session.ErrNotSupported }

// Transfer is not possible for a browser call.
func (c *callPort) Transfer(ctx context.Context, t session.TransferRequest) error {
	return session.ErrNotSupported
}

// Hangup ends the call because the engine decided to (the agent ended it, max duration...). It
// does not wait: the peer's own goroutine tears the call down.
func (c *callPort) Hangup(ctx context.Context, reason session.EndReason) error {
	c.p.end(reason, true)
	return nil
}

var _ session.AudioPort = (*callPort)(nil)
