package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// IdempotencyRecord is the answer a request with an Idempotency-Key got, kept so that the same
// request with the same key is answered the same again, byte for byte. Records are scoped to an
// organization and an operation and expire (the API keeps them 24 hours).
type IdempotencyRecord struct {
	OrgID       OrgID
	Operation   string // what the key is scoped to besides the organization: the key mode and the operation id, e.g. live:createAgent
	Key         string // the client's Idempotency-Key
	Fingerprint string // what identifies the request, to tell a retry from another request
	Status      int
	Header      map[string]string // the answer's headers worth replaying (Content-Type, Location)
	Body        []byte
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

const idemCols = `org_id, operation, key, fingerprint, status, header, body, created_at, expires_at`

func scanIdem(r rowScanner) (IdempotencyRecord, error) {
	var rec IdempotencyRecord
	err := r.Scan(&rec.OrgID, &rec.Operation, &rec.Key, &rec.Fingerprint, &rec.Status, jsonCol{&rec.Header}, &rec.Body,
		timeCol{&rec.CreatedAt}, timeCol{&rec.ExpiresAt})
	return rec, err
}

// GetIdempotency returns the record of a key that has not expired at now, or ErrNotFound.
func (q *Queries) GetIdempotency(ctx context.Context, org OrgID, op, key string, now time.Time) (IdempotencyRecord, error) {
	if !validID(org) {
		return IdempotencyRecord{}, notFound("idempotency key of organization", org)
	}
	var rec IdempotencyRecord
	err := q.get(ctx, "get idempotency key",
		`SELECT `+idemCols+` FROM idempotency_keys WHERE org_id = $1 AND operation = $2 AND key = $3 AND expires_at > $4`,
		[]any{string(org), op, key, ts(now)},
		func(r rowScanner) (err error) { rec, err = scanIdem(r); return err })
	return rec, err
}

// SaveIdempotency stores a record. A key whose record has not expired is ErrConflict; an
// expired record of the same key is replaced. Call it on the Tx that makes the change the
// answer reports, so that the change and its record commit together.
func (q *Queries) SaveIdempotency(ctx context.Context, rec IdempotencyRecord) error {
	switch {
	case !validID(rec.OrgID):
		return fmt.Errorf("store: %w: idempotency record without an organization", ErrInvalid)
	case rec.Operation == "" || rec.Key == "" || len(rec.Key) > 255 || rec.Fingerprint == "":
		return fmt.Errorf("store: %w: idempotency record needs an operation, a key of at most 255 bytes and a fingerprint", ErrInvalid)
	case rec.Status < 100 || rec.Status > 599:
		return fmt.Errorf("store: %w: idempotency record status %d", ErrInvalid, rec.Status)
	case !rec.ExpiresAt.After(rec.CreatedAt):
		return fmt.Errorf("store: %w: idempotency record expires before it is created", ErrInvalid)
	}
	header := rec.Header
	if header == nil {
		header = map[string]string{}
	}
	hj, err := jsonText(header)
	if err != nil {
		return err
	}
	body := rec.Body
	if body == nil {
		body = []byte{}
	}
	res, err := q.exec(ctx, "save idempotency key",
		`INSERT INTO idempotency_keys (`+idemCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (org_id, operation, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
			header = excluded.header, body = excluded.body, created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idempotency_keys.expires_at <= excluded.created_at`,
		string(rec.OrgID), rec.Operation, rec.Key, rec.Fingerprint, rec.Status, hj, slices.Clone(body),
		ts(rec.CreatedAt), ts(rec.ExpiresAt))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return q.s.wrap("save idempotency key", err)
	} else if n == 0 {
		return fmt.Errorf("store: idempotency key %q of %s: %w", rec.Key, rec.Operation, ErrConflict)
	}
	return nil
}

// PurgeIdempotency deletes the records that expired at or before now and returns how many.
func (q *Queries) PurgeIdempotency(ctx context.Context, now time.Time) (int64, error) {
	res, err := q.exec(ctx, "purge idempotency keys", `DELETE FROM idempotency_keys WHERE expires_at <= $1`, ts(now))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, q.s.wrap("purge idempotency keys", err)
	}
	return n, nil
}
