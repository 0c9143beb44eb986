package api

import (
	"context"
	"time"

	"github.com/parley-voice/parley/control/app/audit"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/store"
)

// billing and audit are the domain services of credit and the audit log (stateless: made per
// request on the API's store and clock).
func (a *API) billing() *billing.Service { return &billing.Service{Store: a.Store, Now: a.now} }
func (a *API) audit() *audit.Service     { return &audit.Service{Store: a.Store, Now: a.now} }

type getCreditBalanceIn struct{}

func (a *API) getCreditBalance(ctx context.Context, c *call, _ *getCreditBalanceIn) (*billing.CreditBalance, error) {
	b, err := a.billing().Balance(ctx, c.actor(ctx))
	return &b, err
}

type listCreditTransactionsIn struct {
	listQuery
	Kinds         []string  `query:"kind" enum:"top_up,call_minutes,chat_turns,stt_seconds,llm_tokens,tts_characters,testing,adjustment,usage" doc:"Only transactions of these kinds (repeatable: kind=top_up&kind=call_minutes)."`
	CreatedAfter  time.Time `query:"created_after" doc:"Only transactions made after this moment."`
	CreatedBefore time.Time `query:"created_before" doc:"Only transactions made before this moment."`
}

func (a *API) listCreditTransactions(ctx context.Context, c *call, in *listCreditTransactionsIn) (*list[billing.CreditTransaction], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	f := store.CreditTxFilter{Kinds: in.Kinds, CreatedAfter: in.CreatedAfter, CreatedBefore: in.CreatedBefore}
	ts, err := a.billing().Transactions(ctx, c.actor(ctx), f, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ts, func(t billing.CreditTransaction) string { return t.ID }), nil
}

type listAuditEventsIn struct {
	listQuery
	Actions      []string  `query:"action" doc:"Only events of these actions, such as phone_number.updated (repeatable)."`
	CreatedAfter time.Time `query:"created_after" doc:"Only events recorded after this moment."`
}

func (a *API) listAuditEvents(ctx context.Context, c *call, in *listAuditEventsIn) (*list[audit.AuditEvent], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	es, err := a.audit().List(ctx, c.actor(ctx), audit.Filter{Actions: in.Actions, CreatedAfter: in.CreatedAfter}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return feedOf(pg, es, func(e audit.AuditEvent) string { return e.ID }), nil
}

// feedOf is listOf for a log read by polling: the last page too carries a next_cursor (after
// its last item, or the cursor it was asked with when it is empty), which the client keeps and
// sends later for what was added since. It is null only when nothing was ever listed.
func feedOf[T any](p page, items []T, pos func(T) string) *list[T] {
	l := listOf(p, items, pos)
	switch n := len(l.Data); {
	case l.NextCursor != nil:
	case n > 0:
		l.NextCursor = p.cursor(pos(l.Data[n-1]))
	case p.after != "":
		l.NextCursor = p.cursor(p.after)
	}
	return l
}
