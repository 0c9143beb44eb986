package control

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/app/analysis"
	"github.com/parley-voice/parley/control/app/events"
	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/webhooks"
)

// issue 14: the composition of events, webhook deliveries and post-call analysis.

// The worker role's jobs of events and webhooks.
const (
	kindPurgeEvents = "events.purge" // events and deliveries past their 30 days
	analyzeTimeout  = 2 * time.Minute
)

// hooks runs the webhook and analysis workers of a node, and the goroutine that wakes workers
// when jobs are enqueued.
type hooks struct {
	cancel   context.CancelFunc // stops the workers; nil without the worker role
	wg       sync.WaitGroup
	stopWake chan struct{}
	wakeDone chan struct{}
}

// webhookAPI gives the API the master key, the SSRF guard and the retry schedule, and makes
// every enqueue wake the workers at once (the store tells of jobs once their transaction has
// committed; the bus carries the word to the workers of every node).
func (n *Node) webhookAPI(a *api.API) {
	a.Box, a.Outbound = n.Box, n.Outbound
	a.Webhooks = &appwebhooks.Service{Store: n.Store, Box: n.Box, Guard: n.Outbound, Schedule: n.cfg.WebhookRetrySchedule, Log: n.log}
	a.Events = &events.Service{Store: n.Store}
	a.Analysis = &analysis.Service{Store: n.Store, Log: n.log}
	if n.conv != nil {
		a.Analysis.Engine = n.conv.rt
	}
	n.hooks = &hooks{stopWake: make(chan struct{}), wakeDone: make(chan struct{})}
	n.Store.OnEnqueue(n.hooks.wakeOnEnqueue(n.Bus, n.log))
}

// wakeOnEnqueue returns the store's enqueue hook: it never blocks the transaction that
// enqueued (a Redis publish is a round trip): one goroutine, stopped by close, publishes the
// wake-ups, and a burst of enqueues makes as many as the goroutine keeps up with.
func (h *hooks) wakeOnEnqueue(b bus.PubSub, log *slog.Logger) func(kind string) {
	q := jobs.NewQueue(nil, b, log)
	pending := make(chan string, 256)
	go func() {
		defer close(h.wakeDone)
		for {
			select {
			case <-h.stopWake:
				return
			case kind := <-pending:
				q.Wake(context.Background(), kind)
			}
		}
	}()
	return func(kind string) {
		select {
		case pending <- kind:
		default: // a wake-up of this burst is on its way; the poll is the net under it
		}
	}
}

// runWebhookWorkers runs, with the worker role, the webhook deliveries (a worker of their own,
// with many at once: each mostly waits for a receiver), the post-call analyses and the purge
// of events.
func (n *Node) runWebhookWorkers(ctx context.Context, a *api.API) {
	if a == nil || !n.cfg.Roles.Has(config.RoleWorker) {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	if n.hooks == nil {
		n.hooks = &hooks{}
	}
	n.hooks.cancel = cancel
	sender := &webhooks.Sender{Service: a.Webhooks, Client: n.Outbound.Client(webhooks.Timeout), PerReceiver: max(1, n.cfg.WebhookConcurrency/8), Log: n.log}
	dw := jobs.NewWorker(jobs.Options{Store: n.Store, Bus: n.Bus, Owner: n.cfg.NodeID, Log: n.log, Concurrency: n.cfg.WebhookConcurrency,
		ClaimBatch: n.cfg.WebhookConcurrency / 4})
	dw.Register(store.WebhookDeliverKind, sender.Handle, jobs.WithTimeout(webhooks.Timeout+10*time.Second))
	aw := jobs.NewWorker(jobs.Options{Store: n.Store, Bus: n.Bus, Owner: n.cfg.NodeID, Log: n.log, Concurrency: 2})
	if a.Analysis != nil && a.Analysis.Engine != nil {
		aw.Register(runtime.AnalyzeJobKind, func(ctx context.Context, j *jobs.Job) error {
			return a.Analysis.Run(ctx, j, j.Payload)
		}, jobs.WithTimeout(analyzeTimeout))
	}
	st := n.Store
	aw.Register(kindPurgeEvents, func(ctx context.Context, _ *jobs.Job) error {
		_, err := st.PurgeEvents(ctx, time.Now().Add(-events.Retention))
		return err
	}, jobs.WithTimeout(jobTimeout))
	aw.Every(kindPurgeEvents, purgeEvery)
	for _, w := range []*jobs.Worker{dw, aw} {
		n.hooks.wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				n.log.Error("worker: the job queue cannot run", "err", err)
			}
		})
	}
}

// close stops the workers and the waking goroutine, and waits for them. Enqueues after it
// wake nobody (the poll finds their jobs).
func (h *hooks) close() {
	if h == nil {
		return
	}
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	if h.stopWake != nil {
		close(h.stopWake)
		<-h.wakeDone
		h.stopWake = nil
	}
}
