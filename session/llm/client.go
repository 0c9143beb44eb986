package llm

import "context"

// Client starts model calls. Implementations are safe for concurrent use.
type Client interface {
	// Stream sends r and returns once the server has accepted it (its HTTP answer headers have
	// arrived). The request leaves on the caller's goroutine. Failures are [*Error] values, or
	// ctx's error when ctx ended first.
	Stream(ctx context.Context, r Request) (Stream, error)
}

// Stream is one reply being received. Recv and Close may be called from different goroutines;
// Recv itself must not be called concurrently.
type Stream interface {
	// Recv returns the next event. After the Done event it returns io.EOF. Cancelling the
	// context given to Stream or calling Close makes a blocked Recv return promptly (with the
	// context's error or ErrStreamClosed). Other failures are [*Error] values. Errors are sticky.
	Recv() (Event, error)
	// Close ends the stream and releases its connection. It is idempotent and safe to call at any
	// time.
	Close() error
}
