package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvelope: a value sealed under its own data key opens only with the same additional
// data and a master key that wrapped it; Rewrap changes only the wrapped key.
func TestEnvelope(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	old, _ := NewBox(k1)
	aad := []byte("vault:org:id")
	e, err := old.SealEnvelope([]byte("top-secret"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if e.KeyID != KeyID(k1) || strings.Contains(e.Ciphertext+e.WrappedKey, "top-secret") {
		t.Fatalf("envelope %+v", e)
	}
	e2, _ := old.SealEnvelope([]byte("top-secret"), aad)
	if e2.WrappedKey == e.WrappedKey || e2.Ciphertext == e.Ciphertext {
		t.Fatal("two envelopes share a data key or a nonce")
	}
	if pt, err := old.OpenEnvelope(e, aad); err != nil || string(pt) != "top-secret" {
		t.Fatalf("open %q %v", pt, err)
	}
	if _, err := old.OpenEnvelope(e, []byte("vault:org:other")); !errors.Is(err, ErrOpen) {
		t.Fatalf("other aad: %v", err)
	}
	// The wrapped key is not a value of the box: it does not open as one.
	if _, err := old.Open(e.WrappedKey, aad); !errors.Is(err, ErrOpen) {
		t.Fatalf("wrapped key opened as a value: %v", err)
	}
	ring, _ := NewKeyring(k2, k1)
	if ring.KeyID() != KeyID(k2) || len(ring.KeyIDs()) != 2 {
		t.Fatalf("ring ids %v", ring.KeyIDs())
	}
	if pt, err := ring.OpenEnvelope(e, aad); err != nil || string(pt) != "top-secret" {
		t.Fatalf("ring opens the old envelope: %q %v", pt, err)
	}
	r, changed, err := ring.Rewrap(e, aad)
	if err != nil || !changed || r.Ciphertext != e.Ciphertext || r.KeyID != KeyID(k2) {
		t.Fatalf("rewrap %+v %v %v", r, changed, err)
	}
	if _, again, _ := ring.Rewrap(r, aad); again {
		t.Fatal("rewrapped twice")
	}
	newOnly, _ := NewBox(k2)
	if pt, err := newOnly.OpenEnvelope(r, aad); err != nil || string(pt) != "top-secret" {
		t.Fatalf("new key alone: %q %v", pt, err)
	}
	if _, err := old.OpenEnvelope(r, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old key alone: %v", err)
	}
	// Legacy values (trunk passwords) open under any key of the ring and are re-sealed.
	s, _ := old.Seal([]byte("pw"), []byte("trunk"))
	if pt, err := ring.Open(s, []byte("trunk")); err != nil || string(pt) != "pw" {
		t.Fatalf("ring opens a legacy value: %v", err)
	}
	rs, changed, err := ring.Resealed(s, []byte("trunk"))
	if err != nil || !changed {
		t.Fatal(err)
	}
	if pt, err := newOnly.Open(rs, []byte("trunk")); err != nil || string(pt) != "pw" {
		t.Fatalf("resealed: %v", err)
	}
	if _, changed, _ := ring.Resealed(rs, []byte("trunk")); changed {
		t.Fatal("resealed twice")
	}
}

// TestKeyFileRing: the key file holds one key a line, the primary first; previous keys come
// from the setting too.
func TestKeyFileRing(t *testing.T) {
	dir := t.TempDir()
	k1, k2, k3 := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize), bytes.Repeat([]byte{3}, KeySize)
	if err := WriteKeyFile(dir, k2, k1); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	p, prev, created, err := LoadKeys("", "", dir)
	if err != nil || created || !bytes.Equal(p, k2) || len(prev) != 1 || !bytes.Equal(prev[0], k1) {
		t.Fatalf("load: %v %v", prev, err)
	}
	if k, _, _ := LoadKey("", dir); !bytes.Equal(k, k2) {
		t.Fatal("LoadKey does not return the primary")
	}
	p, prev, _, err = LoadKeys(strings.Repeat("03", 32), strings.Repeat("01", 32)+", "+strings.Repeat("02", 32), dir)
	if err != nil || !bytes.Equal(p, k3) || len(prev) != 2 {
		t.Fatalf("configured: %v", err)
	}
	if _, _, _, err := LoadKeys("", "nope", dir); !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad previous: %v", err)
	}
}
