package webrtc

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func testSigner(t testing.TB, now *time.Time) *tokenSigner {
	t.Helper()
	s, err := newTokenSigner(DeriveSecret([]byte("master key")), func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := testSigner(t, &now)
	good, claims := s.Sign(KindCall, "call-1", 15*time.Minute)
	if claims.Expires != now.Add(15*time.Minute).Unix() || claims.Nonce == "" {
		t.Fatalf("claims %+v", claims)
	}
	listen, _ := s.Sign(KindListen, "conv-1", 15*time.Minute)
	other, _ := newTokenSigner([]byte("another secret, 16+ bytes"), func() time.Time { return now })
	foreign, _ := other.Sign(KindCall, "call-1", 15*time.Minute)
	parts := strings.Split(good, ".")
	forgedBody := base64.RawURLEncoding.EncodeToString([]byte(`{"k":"call","t":"call-2","n":"x","e":9999999999}`))

	for _, tc := range []struct {
		name   string
		token  string
		target string
		kinds  []TokenKind
		after  time.Duration
		want   error
	}{
		{"valid", good, "call-1", []TokenKind{KindCall}, 0, nil},
		{"valid just before expiry", good, "call-1", []TokenKind{KindCall}, 15*time.Minute - time.Second, nil},
		{"expired", good, "call-1", []TokenKind{KindCall}, 15 * time.Minute, ErrTokenExpired},
		{"another call", good, "call-2", []TokenKind{KindCall}, 0, ErrTokenOtherCall},
		{"listen token on a call", listen, "conv-1", []TokenKind{KindCall}, 0, ErrTokenOtherCall},
		{"listen token for listening", listen, "conv-1", []TokenKind{KindListen, KindTakeover}, 0, nil},
		{"signed by another key", foreign, "call-1", []TokenKind{KindCall}, 0, ErrTokenInvalid},
		{"forged claims", parts[0] + "." + forgedBody + "." + parts[2], "call-2", []TokenKind{KindCall}, 0, ErrTokenInvalid},
		{"cut signature", parts[0] + "." + parts[1] + "." + parts[2][:10], "call-1", []TokenKind{KindCall}, 0, ErrTokenInvalid},
		{"wrong prefix", "pwt0." + parts[1] + "." + parts[2], "call-1", []TokenKind{KindCall}, 0, ErrTokenInvalid},
		{"empty", "", "call-1", []TokenKind{KindCall}, 0, ErrTokenInvalid},
		{"garbage", "hello", "call-1", []TokenKind{KindCall}, 0, ErrTokenInvalid},
		{"too long", strings.Repeat("a", 5000), "call-1", []TokenKind{KindCall}, 0, ErrTokenInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := now.Add(tc.after)
			s.now = func() time.Time { return at }
			_, err := s.Verify(tc.token, tc.target, tc.kinds...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTokenSecretTooShort(t *testing.T) {
	if _, err := newTokenSigner([]byte("short"), nil); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
	if a, b := DeriveSecret([]byte("k1")), DeriveSecret([]byte("k2")); string(a) == string(b) || len(a) != 32 {
		t.Fatal("DeriveSecret does not depend on the key")
	}
}

// FuzzTokenVerify: no input makes Verify panic or accept a token it did not sign.
func FuzzTokenVerify(f *testing.F) {
	now := time.Unix(1_700_000_000, 0)
	s := testSigner(f, &now)
	// Deterministic, so every fuzzing worker knows the one valid token.
	good := s.encode(Claims{Kind: KindCall, Target: "call-1", Nonce: "n0", Expires: now.Add(time.Minute).Unix()})
	f.Add(good)
	f.Add("pwt1..")
	f.Add("pwt1.e30.")
	f.Add(strings.Replace(good, "pwt1.", "pwt1.x", 1))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Verify(tok, "call-1", KindCall)
		if err == nil && tok != good {
			t.Fatalf("accepted a token it did not issue: %q (%+v)", tok, c)
		}
	})
}

// sign is Sign with the default lifetime.
func (s *tokenSigner) sign(kind TokenKind, target string) string {
	tok, _ := s.Sign(kind, target, DefaultTokenTTL)
	return tok
}
