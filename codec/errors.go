package codec

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Compare with errors.Is; the returned errors wrap these with
// details.
var (
	// ErrShortBuffer means the destination slice cannot hold the result.
	ErrShortBuffer = errors.New("codec: destination buffer too small")
	// ErrFrameSize means the input is not a frame length the codec accepts.
	ErrFrameSize = errors.New("codec: invalid frame size")
	// ErrInvalidPacket means a payload is empty, truncated or corrupt.
	ErrInvalidPacket = errors.New("codec: invalid packet")
	// ErrUnsupported means a codec, rate or option this package does not offer.
	ErrUnsupported = errors.New("codec: unsupported")
	// ErrClosed means the encoder or decoder was closed.
	ErrClosed = errors.New("codec: closed")
)

func unsupported(info Info) error {
	return fmt.Errorf("%w: codec %q", ErrUnsupported, info.Name)
}

func shortBuffer(have, need int) error {
	return fmt.Errorf("%w: have %d, need %d", ErrShortBuffer, have, need)
}
