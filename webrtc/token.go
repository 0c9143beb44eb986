package webrtc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TokenKind says what a token lets its holder join.
type TokenKind string

// Token kinds.
const (
	// KindCall joins one web call as its caller.
	KindCall TokenKind = "call"
	// KindListen joins a live conversation as a silent listener.
	KindListen TokenKind = "listen"
	// KindTakeover joins a live conversation as a listener who may take over from the agent.
	KindTakeover TokenKind = "takeover"
)

func (k TokenKind) valid() bool { return k == KindCall || k == KindListen || k == KindTakeover }

// tokenPrefix names the format and its version, so a later format can be told apart.
const tokenPrefix = "pwt1"

// b64 decodes strictly: one encoding per value, so a token cannot be altered into another
// string that still verifies.
var b64 = base64.RawURLEncoding.Strict()

// maxTokenLen bounds what Verify will look at (a real token is about 200 characters).
const maxTokenLen = 1024

// Claims is what a token says. Target is the web call's id for KindCall and the conversation's
// id for the listen kinds. Nonce makes the token single use.
type Claims struct {
	Kind    TokenKind `json:"k"`
	Target  string    `json:"t"`
	Nonce   string    `json:"n"`
	Expires int64     `json:"e"` // Unix seconds
}

// ExpiresAt returns the expiry as a time.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0) }

// DeriveSecret derives the token-signing key from the deployment's master key, so the master
// key itself never signs anything: HMAC-SHA256(master, label), which is HKDF-Expand (RFC 5869
// §2.3) for one block with the master key as the pseudorandom key.
func DeriveSecret(master []byte) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("parley webrtc token signing v1\x01"))
	return m.Sum(nil)
}

// tokenSigner signs and checks tokens: pwt1.<base64url(JSON claims)>.<base64url(HMAC-SHA256)>.
// The MAC covers the prefix and the claims (RFC 2104 HMAC, compared in constant time).
type tokenSigner struct {
	secret []byte
	now    func() time.Time
}

func newTokenSigner(secret []byte, now func() time.Time) (*tokenSigner, error) {
	if len(secret) < 16 {
		return nil, errors.New("webrtc: the token secret must be at least 16 bytes (use DeriveSecret on the master key)")
	}
	if now == nil {
		now = time.Now
	}
	return &tokenSigner{secret: append([]byte(nil), secret...), now: now}, nil
}

// newNonce returns 128 random bits, base64url.
func newNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("webrtc: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Sign issues a token for kind and target that lasts ttl.
func (s *tokenSigner) Sign(kind TokenKind, target string, ttl time.Duration) (string, Claims) {
	c := Claims{Kind: kind, Target: target, Nonce: newNonce(), Expires: s.now().Add(ttl).Unix()}
	return s.encode(c), c
}

// encode signs c.
func (s *tokenSigner) encode(c Claims) string {
	body, _ := json.Marshal(c)
	head := tokenPrefix + "." + base64.RawURLEncoding.EncodeToString(body)
	return head + "." + base64.RawURLEncoding.EncodeToString(s.mac(head))
}

func (s *tokenSigner) mac(head string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(head))
	return m.Sum(nil)
}

// Verify checks the token's format, signature and expiry, and that it is of one of kinds and
// for target. It does not consume the token (replayGuard does).
func (s *tokenSigner) Verify(token, target string, kinds ...TokenKind) (Claims, error) {
	c, err := s.parse(token)
	if err != nil {
		return Claims{}, err
	}
	ok := false
	for _, k := range kinds {
		ok = ok || c.Kind == k
	}
	if !ok || c.Target != target {
		return c, fmt.Errorf("%w (a %s token for %q)", ErrTokenOtherCall, c.Kind, c.Target)
	}
	if !s.now().Before(c.ExpiresAt()) {
		return c, ErrTokenExpired
	}
	return c, nil
}

// parse checks format and signature and decodes the claims.
func (s *tokenSigner) parse(token string) (Claims, error) {
	if len(token) == 0 || len(token) > maxTokenLen {
		return Claims{}, ErrTokenInvalid
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != tokenPrefix {
		return Claims{}, ErrTokenInvalid
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, s.mac(parts[0]+"."+parts[1])) {
		return Claims{}, ErrTokenInvalid
	}
	body, err := b64.DecodeString(parts[1])
	if err != nil {
		return Claims{}, ErrTokenInvalid
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil || !c.Kind.valid() || c.Target == "" || c.Nonce == "" || c.Expires <= 0 {
		return Claims{}, ErrTokenInvalid
	}
	return c, nil
}
