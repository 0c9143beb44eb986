package stt

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"time"
)

// WebSocket framing for the client's own data messages (RFC 6455 §5.2), written straight to the
// connection that gorilla/websocket dialled.
//
// gorilla's client connections send every message through NextWriter, which allocates its
// message writer (48 B) per message; only its server connections have a zero-allocation path.
// The caller's audio is one message per 20 ms frame in the tail after speech, so the adapter
// frames its messages itself: the payload is encoded into a buffer that keeps room for the
// largest header in front of it (wsMaxHeader), the header is written into that room, the
// payload is masked in place (§5.3) and the frame goes out in one Write. Nothing allocates.
//
// gorilla still dials, reads, answers pings and closes. Only the stream's run goroutine sends
// data or text messages; gorilla's own writes (pong and close control frames, from the reader)
// are each one Write of a whole frame, and a net.Conn (TCP or TLS) never interleaves two
// Writes, so frames never mix on the wire (control frames may come between data frames, §5.4).
//
// The mask comes from math/rand/v2 (the runtime's ChaCha8, seeded from the OS), like gorilla's
// own: §10.3 asks that it be unpredictable to the page's script, which has none here.

// wsMaxHeader is the longest client frame header: 2 bytes, a 64-bit length and the mask key.
const wsMaxHeader = 2 + 8 + 4

// WebSocket opcodes (RFC 6455 §5.2).
const (
	wsOpText   = 0x1
	wsOpBinary = 0x2
)

// wsFrame is a reusable buffer for one outgoing client message: buf[:wsMaxHeader] is room for
// the header and the payload follows it. Encode a message by appending its payload to
// buf[:wsMaxHeader] and storing the result back in buf.
type wsFrame struct {
	buf []byte
}

// newWSFrame returns a frame buffer with room for payloads of up to size bytes without growing.
func newWSFrame(size int) wsFrame {
	return wsFrame{buf: make([]byte, wsMaxHeader, wsMaxHeader+size)}
}

// body returns the payload (unmasked until frame is called).
func (f *wsFrame) body() []byte { return f.buf[wsMaxHeader:] }

// frame writes the header for opcode before the payload, masks the payload with key and
// returns the whole frame: a single final frame (FIN set, no extensions).
func (f *wsFrame) frame(opcode byte, key uint32) []byte {
	n := len(f.buf) - wsMaxHeader
	var hdr [wsMaxHeader]byte
	hdr[0] = 0x80 | opcode
	h := 2
	switch {
	case n <= 125:
		hdr[1] = 0x80 | byte(n)
	case n <= 0xFFFF:
		hdr[1] = 0x80 | 126
		binary.BigEndian.PutUint16(hdr[2:], uint16(n))
		h = 4
	default:
		hdr[1] = 0x80 | 127
		binary.BigEndian.PutUint64(hdr[2:], uint64(n))
		h = 10
	}
	binary.LittleEndian.PutUint32(hdr[h:], key)
	h += 4
	start := wsMaxHeader - h
	copy(f.buf[start:], hdr[:h])
	maskBytes(f.buf[wsMaxHeader:], key)
	return f.buf[start:]
}

// maskBytes XORs p with the 4-byte key (RFC 6455 §5.3; the key's first octet is the low byte
// of key), eight bytes at a time.
func maskBytes(p []byte, key uint32) {
	k8 := uint64(key) | uint64(key)<<32
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], binary.LittleEndian.Uint64(p[i:])^k8)
	}
	for j := 0; i < len(p); i, j = i+1, j+1 {
		p[i] ^= byte(key >> (8 * (j & 3)))
	}
}

// writeTo sends the frame's message on c as one frame, with a write deadline.
func (f *wsFrame) writeTo(c net.Conn, opcode byte, deadline time.Time) error {
	b := f.frame(opcode, rand.Uint32())
	if err := c.SetWriteDeadline(deadline); err != nil {
		return err
	}
	_, err := c.Write(b)
	return err
}
