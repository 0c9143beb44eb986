package api

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/problem"
)

// Rate limits: GCRA buckets on the bus (shared by every node through Redis), one per API key
// and one per organization, each allowing its rate a minute with a minute's worth in a burst.
// Requests that fail authentication count against a bucket of the client's address at the key
// rate. Every answer carries RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
// (draft-ietf-httpapi-ratelimit-headers) of the bucket nearest to empty, and RateLimit-Policy;
// a refused request gets 429 with Retry-After (RFC 9110 §10.2.3). When the bus cannot be
// reached the request passes (limits fail open) and the failure is logged.

// limit returns the bucket of perMin requests a minute.
func perMinute(perMin int) bus.Limit {
	return bus.Limit{Rate: perMin, Period: time.Minute, Burst: perMin - 1}
}

// gate authenticates the request and applies the rate limits; it wraps every /v1 route.
func (a *API) gate(next http.Handler) http.Handler {
	auth := &Authenticator{Store: a.Store, Log: a.Log, Now: a.Now}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := auth.authenticate(r)
		if err != nil {
			if a.KeyRatePerMin > 0 {
				if perr := a.limit(w, r, []bucket{{"ip:" + clientIP(r), a.KeyRatePerMin}}); perr != nil {
					a.fail(w, r, perr)
					return
				}
			}
			if pe := (*fault.Error)(nil); errors.As(err, &pe) && pe.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
			}
			a.fail(w, r, err)
			return
		}
		var bs []bucket
		if a.KeyRatePerMin > 0 {
			bs = append(bs, bucket{"key:" + string(p.Key.ID), a.KeyRatePerMin})
		}
		if a.OrgRatePerMin > 0 {
			bs = append(bs, bucket{"org:" + string(p.Org.ID), a.OrgRatePerMin})
		}
		if err := a.limit(w, r, bs); err != nil {
			a.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// bucket is one rate limit a request counts against.
type bucket struct {
	key    string
	perMin int
}

// limit takes a cell from each bucket in turn, sets the headers of the one nearest to empty,
// and returns a 429 problem when one refuses (later buckets are then not charged).
func (a *API) limit(w http.ResponseWriter, r *http.Request, bs []bucket) error {
	var shown *bus.Decision
	var shownPer int
	var shownKey string
	for _, b := range bs {
		d, err := a.Bus.Allow(r.Context(), "ratelimit:"+b.key, perMinute(b.perMin))
		if err != nil {
			a.Log.WarnContext(r.Context(), "rate limit unavailable; letting the request pass", "bucket", b.key, "err", err,
				"request_id", problem.RequestID(r.Context()))
			continue
		}
		if shown == nil || !d.Allowed || d.Remaining < shown.Remaining {
			dd := d
			shown, shownPer, shownKey = &dd, b.perMin, b.key
		}
		if !d.Allowed {
			break
		}
	}
	if shown == nil {
		return nil
	}
	h := w.Header()
	h.Set("RateLimit-Limit", strconv.Itoa(shown.Limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(shown.Remaining))
	h.Set("RateLimit-Policy", strconv.Itoa(shownPer)+";w=60")
	if shown.Allowed {
		// Seconds until the quota is whole again.
		h.Set("RateLimit-Reset", strconv.Itoa(ceilSeconds(shown.ResetAfter)))
		return nil
	}
	// Refused: the quota resets, for the next request, when Retry-After says; both headers give
	// the same number of seconds.
	wait := max(ceilSeconds(shown.RetryAfter), 1)
	h.Set("RateLimit-Reset", strconv.Itoa(wait))
	e := fault.E(fault.CodeRateLimited, "Too many requests: at most %d a minute are allowed for this %s. Retry after %d seconds.",
		shownPer, bucketKind(shownKey), wait)
	e.RetryAfter = time.Duration(wait) * time.Second
	return e
}

func bucketKind(key string) string {
	switch {
	case len(key) > 4 && key[:4] == "key:":
		return "API key"
	case len(key) > 4 && key[:4] == "org:":
		return "organization"
	}
	return "client address"
}

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// clientIP is the address the request came from (the peer; proxies are not trusted here).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
