package webrtc

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/google/uuid"
)

// newID returns a UUIDv7 string: ids sort by creation time.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// validID reports whether s is a UUID (the form of call and conversation ids in URLs).
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// randUint32 returns a random initial RTP sequence number or timestamp (RFC 3550 §5.1).
func randUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}
