package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpenRoundTrip(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	b, err := NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Seal([]byte("hunter2"), []byte("trunk:1:password"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "hunter2") || !strings.HasPrefix(s, "v1:") {
		t.Fatalf("sealed value leaks or lacks version: %q", s)
	}
	pt, err := b.Open(s, []byte("trunk:1:password"))
	if err != nil || string(pt) != "hunter2" {
		t.Fatalf("open = %q, %v", pt, err)
	}
	if _, err := b.Open(s, []byte("trunk:2:password")); !errors.Is(err, ErrOpen) {
		t.Fatalf("open with other aad: %v, want ErrOpen", err)
	}
	other, _ := NewBox(bytes.Repeat([]byte{8}, KeySize))
	if _, err := other.Open(s, []byte("trunk:1:password")); !errors.Is(err, ErrOpen) {
		t.Fatalf("open with other key: %v, want ErrOpen", err)
	}
	for _, bad := range []string{"", "v1:", "v1:!!!", "v2:abc", s[:len(s)-4]} {
		if _, err := b.Open(bad, nil); !errors.Is(err, ErrOpen) {
			t.Errorf("Open(%q) = %v, want ErrOpen", bad, err)
		}
	}
}

func TestDecodeKey(t *testing.T) {
	hexKey := strings.Repeat("ab", 32)
	for _, s := range []string{hexKey, "  " + hexKey + "\n", "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="} {
		if k, err := DecodeKey(s); err != nil || len(k) != KeySize {
			t.Errorf("DecodeKey(%q) = %d bytes, %v", s, len(k), err)
		}
	}
	for _, s := range []string{"", "abc", strings.Repeat("ab", 31), strings.Repeat("zz", 32)} {
		if _, err := DecodeKey(s); !errors.Is(err, ErrBadKey) {
			t.Errorf("DecodeKey(%q) = %v, want ErrBadKey", s, err)
		}
	}
}

func TestLoadKeyCreatesOnceAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, created, err := LoadKey("", dir)
	if err != nil || !created || len(k1) != KeySize {
		t.Fatalf("first LoadKey: %v created=%v", err, created)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v mode %v", err, st.Mode())
	}
	k2, created, err := LoadKey("", dir)
	if err != nil || created || !bytes.Equal(k1, k2) {
		t.Fatalf("second LoadKey differs: %v created=%v", err, created)
	}
	k3, _, err := LoadKey(strings.Repeat("01", 32), dir)
	if err != nil || k3[0] != 1 {
		t.Fatalf("configured key not used: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadKey("", dir); err == nil || !strings.Contains(err.Error(), KeyFile) {
		t.Fatalf("damaged key file: %v, want error naming the file", err)
	}
}
