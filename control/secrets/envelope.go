package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Envelope encryption (vault secrets): each value has its own random AES-256-GCM data key; the
// value is sealed with the data key and the data key is sealed ("wrapped") with the master key,
// both under the same additional data, which binds the value to its place (the organization and
// the secret's id). The wrapped key carries the id of the master key that wrapped it, so a
// rotation re-wraps data keys without touching the values.

// ErrUnknownKey says a data key was wrapped by a master key this box does not hold.
var ErrUnknownKey = errors.New("the data key was wrapped by a master key that is not configured")

// Envelope is a value sealed under its own data key. None of its fields reveals the value.
type Envelope struct {
	// KeyID names the master key that wrapped the data key (see KeyID).
	KeyID string
	// WrappedKey is the data key sealed by the master key ("v1:" + base64(nonce||ciphertext)).
	WrappedKey string
	// Ciphertext is the value sealed by the data key ("v1:" + base64(nonce||ciphertext)).
	Ciphertext string
}

// wrapAAD keeps a wrapped data key from being opened as any other sealed value of the box.
func wrapAAD(aad []byte) []byte { return append([]byte("data-key\x00"), aad...) }

// SealEnvelope seals plaintext under a new data key wrapped by the primary master key.
func (b *Box) SealEnvelope(plaintext, aad []byte) (Envelope, error) {
	dek := make([]byte, KeySize)
	if _, err := rand.Read(dek); err != nil {
		return Envelope{}, err
	}
	defer clear(dek)
	g, err := newGCM(dek)
	if err != nil {
		return Envelope{}, err
	}
	k := b.keys[0]
	return Envelope{
		KeyID:      k.id,
		WrappedKey: "v1:" + base64.RawStdEncoding.EncodeToString(sealRaw(k.aead, dek, wrapAAD(aad))),
		Ciphertext: "v1:" + base64.RawStdEncoding.EncodeToString(sealRaw(g, plaintext, aad)),
	}, nil
}

func decodeSealed(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "v1:")
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: damaged value", ErrOpen)
	}
	return raw, nil
}

// unwrap opens the envelope's data key with the master key its KeyID names.
func (b *Box) unwrap(e Envelope, aad []byte) ([]byte, error) {
	k := b.key(e.KeyID)
	if k == nil {
		return nil, fmt.Errorf("%w (key id %s)", ErrUnknownKey, e.KeyID)
	}
	raw, err := decodeSealed(e.WrappedKey)
	if err != nil {
		return nil, err
	}
	dek, err := openRaw(k.aead, raw, wrapAAD(aad))
	if err != nil {
		return nil, err
	}
	if len(dek) != KeySize {
		clear(dek)
		return nil, fmt.Errorf("%w: damaged data key", ErrOpen)
	}
	return dek, nil
}

// OpenEnvelope decrypts a value made by SealEnvelope with the same aad. The caller clears the
// plaintext when done with it.
func (b *Box) OpenEnvelope(e Envelope, aad []byte) ([]byte, error) {
	dek, err := b.unwrap(e, aad)
	if err != nil {
		return nil, err
	}
	defer clear(dek)
	g, err := newGCM(dek)
	if err != nil {
		return nil, err
	}
	raw, err := decodeSealed(e.Ciphertext)
	if err != nil {
		return nil, err
	}
	return openRaw(g, raw, aad)
}

// Rewrap returns e with its data key wrapped by the primary master key, and whether that
// changed anything. The ciphertext is kept as it is: the value is not re-encrypted.
func (b *Box) Rewrap(e Envelope, aad []byte) (Envelope, bool, error) {
	if e.KeyID == b.keys[0].id {
		return e, false, nil
	}
	dek, err := b.unwrap(e, aad)
	if err != nil {
		return e, false, err
	}
	defer clear(dek)
	k := b.keys[0]
	e.KeyID = k.id
	e.WrappedKey = "v1:" + base64.RawStdEncoding.EncodeToString(sealRaw(k.aead, dek, wrapAAD(aad)))
	return e, true, nil
}
