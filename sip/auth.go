package sip

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
)

// digestRealm is the realm of Parley's challenges.
const digestRealm = "parley"

// nonceLifetime bounds how long a challenge can be answered; older answers get stale=true.
const nonceLifetime = 5 * time.Minute

// digestAuth challenges and checks inbound requests with HTTP digest authentication as SIP
// uses it (RFC 3261 §22.4, RFC 8760 for SHA-256). Nonces are stateless: a timestamp and an
// HMAC of it under a key made at start, so any request can be checked without a table.
type digestAuth struct {
	key []byte
	now func() time.Time
}

func newDigestAuth() (*digestAuth, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return &digestAuth{key: k, now: time.Now}, nil
}

// nonce makes a nonce for now.
func (a *digestAuth) nonce() string {
	var b [8 + 16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(a.now().UnixNano()))
	m := hmac.New(sha256.New, a.key)
	m.Write(b[:8])
	copy(b[8:], m.Sum(nil)[:16])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// checkNonce reports whether n is ours (valid) and still fresh.
func (a *digestAuth) checkNonce(n string) (valid, fresh bool) {
	raw, err := base64.RawURLEncoding.DecodeString(n)
	if err != nil || len(raw) != 24 {
		return false, false
	}
	m := hmac.New(sha256.New, a.key)
	m.Write(raw[:8])
	if !hmac.Equal(raw[8:], m.Sum(nil)[:16]) {
		return false, false
	}
	at := time.Unix(0, int64(binary.BigEndian.Uint64(raw[:8])))
	age := a.now().Sub(at)
	return true, age >= 0 && age < nonceLifetime
}

// challenge returns the WWW-Authenticate header of a 401.
func (a *digestAuth) challenge(stale bool) sip.Header {
	v := fmt.Sprintf(`Digest realm="%s", nonce="%s", algorithm=MD5, qop="auth"`, digestRealm, a.nonce())
	if stale {
		v += ", stale=true"
	}
	return sip.NewHeader("WWW-Authenticate", v)
}

var (
	errNoCredentials = errors.New("no credentials")
	errStaleNonce    = errors.New("stale nonce")
	errBadDigest     = errors.New("wrong credentials")
)

// verify checks req's Authorization against username and password.
func (a *digestAuth) verify(req *sip.Request, username, password string) error {
	h := req.GetHeader("Authorization")
	if h == nil {
		return errNoCredentials
	}
	cred, err := digest.ParseCredentials(h.Value())
	if err != nil {
		return fmt.Errorf("%w: %v", errBadDigest, err)
	}
	if cred.Username != username || cred.Realm != digestRealm {
		return errBadDigest
	}
	valid, fresh := a.checkNonce(cred.Nonce)
	if !valid {
		return errBadDigest
	}
	chal := &digest.Challenge{Realm: cred.Realm, Nonce: cred.Nonce, Algorithm: cred.Algorithm, Opaque: cred.Opaque}
	if cred.QOP != "" {
		chal.QOP = []string{cred.QOP}
	}
	want, err := digest.Digest(chal, digest.Options{
		Method: string(req.Method), URI: cred.URI, Username: username, Password: password,
		Cnonce: cred.Cnonce, Count: cred.Nc,
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errBadDigest, err)
	}
	if subtle.ConstantTimeCompare([]byte(want.Response), []byte(cred.Response)) != 1 {
		return errBadDigest
	}
	if !fresh {
		return errStaleNonce
	}
	return nil
}

// applyDigest answers a 401/407 challenge on req (RFC 3261 §22.2): it adds Authorization or
// Proxy-Authorization computed from the trunk's credentials.
func applyDigest(req *sip.Request, res *sip.Response, username, password string) error {
	hdrName, credName := "WWW-Authenticate", "Authorization"
	if res.StatusCode == 407 {
		hdrName, credName = "Proxy-Authenticate", "Proxy-Authorization"
	}
	h := res.GetHeader(hdrName)
	if h == nil {
		return fmt.Errorf("sip: %d without %s", res.StatusCode, hdrName)
	}
	chal, err := digest.ParseChallenge(h.Value())
	if err != nil {
		return fmt.Errorf("sip: bad %s: %w", hdrName, err)
	}
	cred, err := digest.Digest(chal, digest.Options{
		Method: string(req.Method), URI: req.Recipient.Addr(), Username: username, Password: password,
	})
	if err != nil {
		return fmt.Errorf("sip: digest: %w", err)
	}
	req.RemoveHeader(credName)
	req.AppendHeader(sip.NewHeader(credName, cred.String()))
	return nil
}
