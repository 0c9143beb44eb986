package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// purgeBatch is how many agents one transaction purges.
const purgeBatch = 100

// PurgeAgents removes for good the deleted agents whose purge time has come by now, recording
// agent.purged in the audit log in the same transaction as each batch. It returns how many it
// purged. The worker role calls it periodically; any number of workers may run it at once.
func (a *API) PurgeAgents(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := a.Store.Tx(ctx, func(tx *store.Tx) error {
			gone, err := tx.PurgeAgents(ctx, now, purgeBatch)
			if err != nil {
				return err
			}
			n = len(gone)
			for _, ag := range gone {
				data, _ := json.Marshal(map[string]any{"name": ag.Name, "deleted_at": ag.DeletedAt})
				if err := tx.InsertAudit(ctx, store.AuditEvent{OrgID: ag.OrgID, ProjectID: ag.ProjectID, ActorType: store.ActorSystem,
					ActorID: "purge", Action: "agent.purged", ObjectType: "agent", ObjectID: string(ag.ID), Data: data}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < purgeBatch {
			return total, nil
		}
	}
}

// PurgeIdempotencyKeys deletes the stored answers of Idempotency-Keys older than 24 hours and
// returns how many. The worker role calls it periodically.
func (a *API) PurgeIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	return a.Store.PurgeIdempotency(ctx, now)
}
