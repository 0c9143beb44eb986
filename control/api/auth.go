// Package api serves the public /v1 HTTP interface and its conventions, which every operation
// inherits: bearer-key authentication (auth.go), permissions, key kinds, project reach and
// frozen organizations and projects (operation.go), RFC 9457 problem documents with stable
// codes (errors.go), strict JSON bodies checked against the served schemas, keyset lists with
// cursors bound to their filters (list.go), Idempotency-Key (idempotency.go), GCRA rate limits
// on the bus (ratelimit.go), an audit event in the transaction of every change, and the
// OpenAPI 3.1 document made from the same operation table (operations.go, openapi.go).
//
// Every answer is JSON or a problem document (package problem). Handlers must never reach the
// media path directly (they go through the store, the bus and the session services), never
// answer an object outside the key's reach other than as missing, and never put an internal
// cause in a problem's detail.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/store"
)

// Principal is who is calling: the API key and its organization.
type Principal struct {
	Key store.Key
	Org store.Org
}

// Live reports whether the key is a live key.
func (p *Principal) Live() bool { return p.Key.Mode == store.ModeLive }

type principalKey struct{}

// PrincipalFrom returns the authenticated caller of the request.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

var keyPattern = regexp.MustCompile(`^sk_(live|test)_[A-Za-z0-9]{20,128}$`)

// Authenticator checks the bearer key of every request it wraps.
type Authenticator struct {
	Store *store.Store
	Log   *slog.Logger
	Now   func() time.Time
}

// Middleware authenticates the request and stores the Principal in its context.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.authenticate(r)
		if err != nil {
			if pe := (*fault.Error)(nil); errors.As(err, &pe) && pe.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
			}
			problem.Write(w, r, a.Log, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func unauthorized(code, detail string) error {
	return fault.New(http.StatusUnauthorized, code, detail)
}

func (a *Authenticator) authenticate(r *http.Request) (*Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, unauthorized(fault.CodeMissingKey, "Send your API key as Authorization: Bearer <key>.")
	}
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !keyPattern.MatchString(strings.TrimSpace(secret)) {
		return nil, unauthorized(fault.CodeMalformedKey, "The Authorization header must be Bearer sk_live_… or Bearer sk_test_….")
	}
	secret = strings.TrimSpace(secret)
	key, err := a.Store.LookupKey(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthorized(fault.CodeUnknownKey, "This API key is not known.")
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	if key.Revoked() {
		return nil, unauthorized(fault.CodeRevokedKey, "This API key has been revoked.")
	}
	if key.Expired(now) {
		return nil, unauthorized(fault.CodeExpiredKey, "This API key has expired.")
	}
	if key.Mode == store.ModeLive && fromBrowser(r) {
		return nil, fault.New(http.StatusForbidden, fault.CodeLiveBrowser,
			"A live key must not be sent from a browser; call the API from your server, or use a test key while developing.")
	}
	org, err := a.Store.GetOrg(r.Context(), key.OrgID)
	if err != nil {
		return nil, err
	}
	return &Principal{Key: key, Org: org}, nil
}

// fromBrowser reports whether a request was sent by a web page of another origin: browsers
// send Origin on every cross-origin fetch (Fetch standard, "serializing a request origin"), and
// nothing else does on its own. Sec-Fetch-Mode alone is no sign: Node's fetch (undici) sends
// "sec-fetch-mode: cors" from servers. A page of the service's own origin is not a foreign page.
func fromBrowser(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return false
	}
	return !strings.EqualFold(origin, ownOrigin(r))
}

// ownOrigin is the origin the request was sent to (scheme and host).
func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
