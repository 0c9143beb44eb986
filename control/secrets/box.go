// Package secrets encrypts values at rest (trunk passwords, vault secrets) with AES-256-GCM under
// the master key, and loads or creates that key.
//
// Sealed values are versioned ("v1:" + base64(nonce||ciphertext)) so the scheme can change later.
// It must never log or return a plaintext it was not asked to open.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the master key length in bytes (AES-256).
const KeySize = 32

// ErrBadKey says a master key could not be decoded.
var ErrBadKey = errors.New("master key must be 32 bytes, given as 64 hex digits or base64")

// ErrOpen says a sealed value could not be decrypted (wrong key or damaged value).
var ErrOpen = errors.New("secret cannot be decrypted with this master key")

// DecodeKey decodes a 32-byte key given as hex or (standard or URL) base64.
func DecodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, ErrBadKey
}

// Box seals and opens values under one master key.
type Box struct{ aead cipher.AEAD }

// NewBox returns a Box for a 32-byte key.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, ErrBadKey
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	return &Box{aead: g}, nil
}

// Seal encrypts plaintext; aad binds the value to its place (for example "trunk:<id>:password").
func (b *Box) Seal(plaintext, aad []byte) (string, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := b.aead.Seal(nonce, nonce, plaintext, aad)
	return "v1:" + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a value made by Seal with the same aad.
func (b *Box) Open(sealed string, aad []byte) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, "v1:")
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(raw) < b.aead.NonceSize()+b.aead.Overhead() {
		return nil, fmt.Errorf("%w: damaged value", ErrOpen)
	}
	n := b.aead.NonceSize()
	pt, err := b.aead.Open(nil, raw[:n], raw[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// KeyFile is the name of the generated master key inside the data directory.
const KeyFile = "master.key"

// LoadKey returns the master key: the configured one when given, else the key file in dataDir,
// created (mode 0600) on first use. created reports whether a new key file was written.
func LoadKey(configured, dataDir string) (key []byte, created bool, err error) {
	if configured != "" {
		k, err := DecodeKey(configured)
		return k, false, err
	}
	p := filepath.Join(dataDir, KeyFile)
	if raw, err := os.ReadFile(p); err == nil {
		k, err := DecodeKey(string(raw))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", p, err)
		}
		return k, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("read master key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("create data directory: %w", err)
	}
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race: use its key
		return LoadKey("", dataDir)
	}
	if err != nil {
		return nil, false, fmt.Errorf("write master key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		f.Close()
		os.Remove(p)
		return nil, false, fmt.Errorf("write master key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(p)
		return nil, false, fmt.Errorf("write master key: %w", err)
	}
	return k, true, nil
}

// checkText and checkAAD make the key check value: a value sealed under the master key that
// the store keeps, so that a start with another key is refused before it writes anything
// sealed under the wrong key.
var (
	checkText = []byte("parley master key check")
	checkAAD  = []byte("master-key-check")
)

// CheckValue returns a fresh key check value for this box's key.
func (b *Box) CheckValue() (string, error) { return b.Seal(checkText, checkAAD) }

// Verify reports whether check was made by CheckValue under this box's key.
func (b *Box) Verify(check string) bool {
	pt, err := b.Open(check, checkAAD)
	return err == nil && string(pt) == string(checkText)
}
