package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/store"
)

// Idempotency (draft-ietf-httpapi-idempotency-key-header): a request with an Idempotency-Key is
// done once. Its successful answer is stored, in the same transaction as the change it reports,
// and the same request with the same key is answered with it again, byte for byte, with
// Idempotent-Replayed: true, for 24 hours. Keys are scoped to the organization, the key
// mode and the operation. While the first request runs, a lock on the bus (shared by every node) turns a
// second one away with 409; the store's unique key is the last guard if a lock ever expires.
// Answers that are not 2xx are not stored: the client may fix the request and retry with the
// same key. Keys are scoped, as Stripe scopes them, by organization and key mode too: a test
// request never makes a live request with the same key fail, nor replays into it.
const (
	idemHeader     = "Idempotency-Key"
	replayedHeader = "Idempotent-Replayed"
	maxIdemKey     = 120
	idemKeep       = 24 * time.Hour
	idemLockTTL    = time.Minute
)

// idemState is an Idempotency-Key being served.
type idemState struct {
	key         string
	fingerprint string
}

// errIdemRace marks a failure to save the record because another request saved it first.
var errIdemRace = errors.New("idempotency record saved by another request")

// idemScope is what an Idempotency-Key is scoped to besides the organization: the key mode and
// the operation ("live:createCall"). It is kept in the record's operation column.
func (c *call) idemScope() string { return string(c.p.Key.Mode) + ":" + c.op.ID }

// idemLockKey is the bus key of the lock on one key.
func idemLockKey(org store.OrgID, op, key string) string {
	h := sha256.Sum256([]byte(key))
	return "idem:" + string(org) + ":" + op + ":" + hex.EncodeToString(h[:16])
}

// fingerprint identifies a request: which key sent it, where, and what. The body counts by its
// meaning: the same JSON with other spacing or member order is the same request.
func fingerprint(r *http.Request, c *call) string {
	body := c.raw
	if v, err := jsoncheck.Decode(c.raw); err == nil && len(c.raw) > 0 {
		if canon, err := json.Marshal(v); err == nil { // maps marshal with sorted keys
			body = canon
		}
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(r.Method), []byte(r.URL.Path), []byte(r.URL.RawQuery), []byte(c.p.Key.ID), body} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkIdemKey reports what is wrong with a header value; present says whether one was sent.
func checkIdemKey(r *http.Request, mode idemMode) (key string, present bool, err error) {
	vs := r.Header.Values(idemHeader)
	if len(vs) == 0 {
		if mode == idemRequired {
			return "", false, fault.E(fault.CodeIdempotencyMissing, "This operation needs an Idempotency-Key header: a unique value per request, such as a UUID, of at most %d characters.", maxIdemKey)
		}
		return "", false, nil
	}
	key = vs[0]
	switch {
	case len(vs) > 1:
		return "", true, fault.E(fault.CodeIdempotencyInvalid, "Send one Idempotency-Key header, not %d.", len(vs))
	case len(key) > maxIdemKey:
		return "", true, fault.E(fault.CodeIdempotencyTooLong, "The Idempotency-Key is %d characters long; at most %d are allowed.", len(key), maxIdemKey)
	case key == "":
		return "", true, fault.E(fault.CodeIdempotencyInvalid, "The Idempotency-Key is empty.")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", true, fault.E(fault.CodeIdempotencyInvalid, "The Idempotency-Key must be printable ASCII.")
		}
	}
	return key, true, nil
}

// idempotency serves the Idempotency-Key of a request. It answers a replay itself (replayed),
// refuses a key that does not fit, or takes the lock and returns its release.
func (a *API) idempotency(w http.ResponseWriter, r *http.Request, c *call) (release func(), replayed bool, err error) {
	key, present, err := checkIdemKey(r, c.op.Idempotency)
	if err != nil || !present {
		return func() {}, false, err
	}
	ctx := r.Context()
	st := &idemState{key: key, fingerprint: fingerprint(r, c)}
	if done, err := a.replay(w, r, c, st); done || err != nil {
		return nil, done, err
	}
	lock := idemLockKey(c.p.Org.ID, c.idemScope(), key)
	token := make([]byte, 16)
	rand.Read(token)
	ok, err := a.Bus.SetNX(ctx, lock, token, idemLockTTL)
	if err != nil {
		e := fault.E(fault.CodeServiceUnavailable, "The idempotency lock cannot be taken right now; retry shortly.")
		e.Cause, e.RetryAfter = err, time.Second
		return nil, false, e
	}
	if !ok {
		e := fault.E(fault.CodeIdempotencyInUse, "A request with this Idempotency-Key is still being processed; retry when it has finished.")
		e.RetryAfter = time.Second
		return nil, false, e
	}
	release = func() {
		// Released with a context of its own: the request's may be cancelled already.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if _, err := a.Bus.CompareAndDelete(rctx, lock, token); err != nil {
			a.Log.WarnContext(ctx, "idempotency: release lock", "err", err, "request_id", problem.RequestID(ctx))
		}
	}
	// Another request may have finished between the first look and the lock.
	if done, err := a.replay(w, r, c, st); done || err != nil {
		release()
		return nil, done, err
	}
	c.idem = st
	return release, false, nil
}

// replay answers from a stored record of the key, if there is one: the same answer for the
// same request, 422 for another request.
func (a *API) replay(w http.ResponseWriter, r *http.Request, c *call, st *idemState) (bool, error) {
	rec, err := a.Store.GetIdempotency(r.Context(), c.p.Org.ID, c.idemScope(), st.key, a.now())
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rec.Fingerprint != st.fingerprint {
		return false, fault.E(fault.CodeIdempotencyReused, "This Idempotency-Key was already used for a different request to %s in the last 24 hours; use a new key for a new request.", c.op.ID)
	}
	w.Header().Set(replayedHeader, "true")
	if c.op.Replay != nil {
		c.op.Replay(w, r, rec.Status, rec.Body)
		return true, nil
	}
	for k, v := range rec.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
	return true, nil
}

// answer is a successful answer, kept for the idempotency record.
type answer struct {
	status int
	header map[string]string
	body   []byte
}

// saveIdempotency stores the answer of c in tx, when c carries a key.
func (a *API) saveIdempotency(ctx context.Context, tx *store.Tx, c *call, ans *answer) error {
	if c == nil || c.idem == nil {
		return nil
	}
	now := a.now()
	err := tx.SaveIdempotency(ctx, store.IdempotencyRecord{
		OrgID: c.p.Org.ID, Operation: c.idemScope(), Key: c.idem.key, Fingerprint: c.idem.fingerprint,
		Status: ans.status, Header: ans.header, Body: bytes.Clone(ans.body), CreatedAt: now, ExpiresAt: now.Add(idemKeep),
	})
	if errors.Is(err, store.ErrConflict) {
		return errors.Join(errIdemRace, err)
	}
	return err
}
