package api

import (
	"context"
	"time"
)

// PurgeIdempotencyKeys deletes the stored answers of Idempotency-Keys older than 24 hours and
// returns how many. The worker role calls it periodically.
func (a *API) PurgeIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	return a.Store.PurgeIdempotency(ctx, now)
}
