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
	"crypto/sha256"
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

// Box seals and opens values under the master key. It may hold previous master keys too (a
// keyring, during a rotation): it seals under the first (the primary) and opens with any.
type Box struct{ keys []boxKey }

type boxKey struct {
	id   string
	aead cipher.AEAD
}

// NewBox returns a Box for a 32-byte key.
func NewBox(key []byte) (*Box, error) { return NewKeyring(key) }

// NewKeyring returns a Box that seals under primary and opens with primary or any of previous:
// the master keys of a deployment during a rotation (parley admin master-key rotate).
func NewKeyring(primary []byte, previous ...[]byte) (*Box, error) {
	b := &Box{}
	for _, k := range append([][]byte{primary}, previous...) {
		if len(k) != KeySize {
			return nil, ErrBadKey
		}
		g, err := newGCM(k)
		if err != nil {
			return nil, err
		}
		id := KeyID(k)
		if b.key(id) != nil {
			continue
		}
		b.keys = append(b.keys, boxKey{id: id, aead: g})
	}
	return b, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// KeyID names a master key without revealing it: the first 8 bytes, in hex, of the SHA-256 of
// a fixed label and the key. Wrapped data keys carry the id of the key that wrapped them.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("parley master key id\x00"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// KeyID is the id of the primary key, the one Seal and Wrap use.
func (b *Box) KeyID() string { return b.keys[0].id }

// KeyIDs lists the ids of every key the box opens with, the primary first.
func (b *Box) KeyIDs() []string {
	out := make([]string, len(b.keys))
	for i, k := range b.keys {
		out[i] = k.id
	}
	return out
}

func (b *Box) key(id string) *boxKey {
	for i := range b.keys {
		if b.keys[i].id == id {
			return &b.keys[i]
		}
	}
	return nil
}

// Seal encrypts plaintext under the primary key; aad binds the value to its place (for example
// "trunk:<id>:password").
func (b *Box) Seal(plaintext, aad []byte) (string, error) {
	return "v1:" + base64.RawStdEncoding.EncodeToString(sealRaw(b.keys[0].aead, plaintext, aad)), nil
}

func sealRaw(g cipher.AEAD, plaintext, aad []byte) []byte {
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plaintext)+g.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("secrets: no randomness: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return g.Seal(nonce, nonce, plaintext, aad)
}

func openRaw(g cipher.AEAD, raw, aad []byte) ([]byte, error) {
	n := g.NonceSize()
	if len(raw) < n+g.Overhead() {
		return nil, fmt.Errorf("%w: damaged value", ErrOpen)
	}
	pt, err := g.Open(nil, raw[:n], raw[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// Open decrypts a value made by Seal with the same aad, under any key of the box.
func (b *Box) Open(sealed string, aad []byte) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, "v1:")
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: damaged value", ErrOpen)
	}
	err = ErrOpen
	for _, k := range b.keys {
		var pt []byte
		if pt, err = openRaw(k.aead, raw, aad); err == nil {
			return pt, nil
		}
	}
	return nil, err
}

// Resealed reports whether sealed opens only under a previous key, and then returns it sealed
// anew under the primary key (for a rotation).
func (b *Box) Resealed(sealed string, aad []byte) (string, bool, error) {
	pt, err := b.Open(sealed, aad)
	if err != nil {
		return "", false, err
	}
	defer clear(pt)
	if primary, _ := (&Box{keys: b.keys[:1]}).Open(sealed, aad); primary != nil {
		clear(primary)
		return sealed, false, nil
	}
	s, err := b.Seal(pt, aad)
	return s, err == nil, err
}

// KeyFile is the name of the generated master key inside the data directory.
const KeyFile = "master.key"

// LoadKey returns the master key: the configured one when given, else the key file in dataDir,
// created (mode 0600) on first use. created reports whether a new key file was written.
func LoadKey(configured, dataDir string) (key []byte, created bool, err error) {
	key, _, created, err = LoadKeys(configured, "", dataDir)
	return key, created, err
}

// LoadKeys returns the primary master key and the previous ones still accepted (during a
// rotation). Configured keys come from the settings (previous: comma-separated); otherwise the
// key file in dataDir holds one key a line, the primary first, and is created (mode 0600,
// holding one new key) on first use.
func LoadKeys(configured, previous, dataDir string) (primary []byte, prev [][]byte, created bool, err error) {
	for _, p := range strings.Split(previous, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		k, err := DecodeKey(p)
		if err != nil {
			return nil, nil, false, fmt.Errorf("previous master key: %w", err)
		}
		prev = append(prev, k)
	}
	if configured != "" {
		k, err := DecodeKey(configured)
		return k, prev, false, err
	}
	p := filepath.Join(dataDir, KeyFile)
	if raw, err := os.ReadFile(p); err == nil {
		var keys [][]byte
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			k, err := DecodeKey(line)
			if err != nil {
				return nil, nil, false, fmt.Errorf("%s: %w", p, err)
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			return nil, nil, false, fmt.Errorf("%s: %w", p, ErrBadKey)
		}
		return keys[0], append(keys[1:], prev...), false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("read master key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, false, fmt.Errorf("create data directory: %w", err)
	}
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, nil, false, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race: use its key
		return LoadKeys("", previous, dataDir)
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("write master key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		f.Close()
		os.Remove(p)
		return nil, nil, false, fmt.Errorf("write master key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(p)
		return nil, nil, false, fmt.Errorf("write master key: %w", err)
	}
	return k, prev, true, nil
}

// NewKey returns a new random master key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	_, err := rand.Read(k)
	return k, err
}

// WriteKeyFile replaces the key file in dataDir (mode 0600, written to a temporary file and
// renamed) with primary on the first line and the previous keys still accepted after it.
func WriteKeyFile(dataDir string, primary []byte, previous ...[]byte) error {
	var sb strings.Builder
	for _, k := range append([][]byte{primary}, previous...) {
		if len(k) != KeySize {
			return ErrBadKey
		}
		sb.WriteString(hex.EncodeToString(k) + "\n")
	}
	f, err := os.CreateTemp(dataDir, ".master.key-*")
	if err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write master key: %w", err)
	}
	if _, err := f.WriteString(sb.String()); err != nil {
		f.Close()
		return fmt.Errorf("write master key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write master key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write master key: %w", err)
	}
	return os.Rename(f.Name(), filepath.Join(dataDir, KeyFile))
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
