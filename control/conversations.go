package control

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/app/agents"
	"github.com/parley-voice/parley/control/app/audit"
	"github.com/parley-voice/parley/control/app/campaigns"
	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/app/whatsapp"
	"github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/cluster"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/providers"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// The worker role's conversation jobs: their kinds on the job queue, how often each runs, and
// for how long one attempt may run.
const (
	kindDialDue          = "scheduled_calls.dial_due"      // scheduled calls that are due
	kindReapLost         = "conversations.reap_lost"       // conversations whose node went away
	kindReapDeadNodes    = "conversations.reap_dead_nodes" // issue 22: calls of nodes unseen for 3 heartbeats
	kindPurgeAttachments = "attachments.purge_unused"      // pictures no message used
	kindPurgeAgents      = "agents.purge_deleted"          // deleted agents past their purge time
	kindPurgeIdempotency = "idempotency_keys.purge"        // Idempotency-Key answers older than a day
	kindPurgeJobs        = "jobs.purge"                    // finished jobs past their keeping time
	kindPurgeAudit       = "audit_events.purge"            // audit events past the 365-day retention
	kindEndIdleChats     = "chats.end_idle"                // issue 13: chats past their idle deadline
	kindReapEvaluations  = "evaluations.reap"              // issue 18: runs whose job is dead or gone are failed

	dialEvery         = time.Second
	reapEvery         = 30 * time.Second
	reapGrace         = 2 * time.Minute
	purgeEvery        = time.Hour
	jobTimeout        = 30 * time.Second
	evaluationTimeout = 30 * time.Minute // issue 18: one run of up to 500 saved conversations
	keepDoneJobs      = jobs.MaxPeriod   // a periodic run's dedupe key must outlive its period
	keepDeadJobs      = 30 * 24 * time.Hour
)

// conversations is the node's conversation runtime and its workers.
type conversations struct {
	rt       *runtime.Runtime
	know     *knowledge.Service // issue 16
	testProv *runtime.TestProviders
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// startConversations builds and starts the node's conversation runtime: every node has one
// (an api node runs chats and reaches calls on the media nodes through the bus; a media node
// runs calls). Test-mode conversations use the vendor fakes, served on a loopback port.
func (n *Node) startConversations(ctx context.Context) error {
	tp, err := runtime.NewTestProviders(n.log)
	if err != nil {
		return err
	}
	n.startTools() // issue 17
	var m *session.Metrics
	if n.metrics != nil {
		m = session.NewMetrics(n.metrics.reg)
	}
	know := n.knowledgeService() // issue 16
	rt, err := runtime.New(runtime.Options{
		Knowledge: know,
		NodeID:    n.cfg.NodeID, Store: n.Store, Bus: n.Bus,
		Providers: providers.New(providers.FromConfig(n.cfg, n.log)), TestProviders: tp,
		Media:      n.cfg.Roles.Has(config.RoleMedia),
		Dialer:     n.dialer(),
		WebCalls:   n.webCalls(),
		MediaNodes: n.mediaPeers,
		DataDir:    n.cfg.DataDir, NoRecording: !n.cfg.Record, Metrics: m, Log: n.log,
		Tools:           n.tools.src,
		ChatIdleTimeout: n.cfg.ChatIdleTimeout,
	})
	if err != nil {
		tp.Close()
		return err
	}
	if err := rt.Start(ctx); err != nil {
		tp.Close()
		return err
	}
	n.conv = &conversations{rt: rt, testProv: tp, know: know}
	return nil
}

// mediaPeers lists the other nodes heard from that run the media role.
func (n *Node) mediaPeers() []string {
	var out []string
	for _, p := range n.registry.Peers() {
		for _, r := range strings.Split(p.Roles, ",") {
			if r == string(config.RoleMedia) {
				out = append(out, p.ID)
			}
		}
	}
	return out
}

// conversationAPI gives the API its runtime and limits.
func (n *Node) conversationAPI(a *api.API) {
	if n.conv == nil {
		return
	}
	a.Runtime, a.DataDir, a.MaxCalls, a.WebCallsPerDay = n.conv.rt, n.cfg.DataDir, n.cfg.MaxCalls, n.cfg.WebCallsPerDay
	a.Knowledge = n.conv.know
	if n.tools != nil { // issue 17
		a.Guard, a.MCP = n.Outbound, n.tools.mcp
	}
	a.TransferCheck = channels.TransferChecker{Store: n.Store, Allow: n.cfg.TransferAllow}.Check // issue 22 item 7
	n.whatsappAPI(a)                                                                             // issue 19
	a.Services()
}

// runConversationWorkers runs, with the worker role, the jobs of conversations on the job
// queue: dialling the scheduled calls that are due, ending the conversations whose node went
// away, and the purges. Each is a periodic kind (jobs.Worker.Every), so any number of worker
// nodes run each period once between them.
func (n *Node) runConversationWorkers(ctx context.Context, a *api.API) {
	if n.conv == nil || !n.cfg.Roles.Has(config.RoleWorker) {
		return
	}
	w := jobs.NewWorker(jobs.Options{Store: n.Store, Bus: n.Bus, Owner: n.cfg.NodeID, Log: n.log})
	registerConversationJobs(w, a, n.conv.rt, n.Store, n.cfg.NodeID, n.cfg.ChatIdleTimeout, n.registry)
	registerKnowledgeJobs(w, n.conv.know, n.Outbound)   // issue 16
	if a.WhatsApp != nil && a.WhatsApp.Ready() == nil { // issue 19
		whatsapp.RegisterJobs(w, a.WhatsApp)
	}
	ctx, cancel := context.WithCancel(ctx)
	n.conv.cancel = cancel
	n.conv.wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			n.log.Error("worker: the job queue cannot run", "err", err)
		}
	})
}

// registerConversationJobs gives w the handlers of the conversation jobs and their periods.
// The handlers call what the API's workers call; none of them goes through HTTP.
func registerConversationJobs(w *jobs.Worker, a *api.API, rt *runtime.Runtime, st *store.Store, nodeID string, idle time.Duration, reg *cluster.Registry) {
	periodic := func(kind string, every time.Duration, attempts int, fn func(ctx context.Context) error) {
		w.Register(kind, func(ctx context.Context, _ *jobs.Job) error { return fn(ctx) },
			jobs.WithTimeout(jobTimeout), jobs.WithMaxAttempts(attempts))
		w.Every(kind, every)
	}
	// The next second's run supersedes a failed dial or reap; a failed purge is retried.
	periodic(kindDialDue, dialEvery, 1, func(ctx context.Context) error {
		for {
			placed, err := a.Calls.DialDue(ctx, nodeID)
			if err != nil || placed == 0 {
				return err
			}
		}
	})
	registerCampaignJobs(w, a)
	periodic(kindReapLost, reapEvery, 1, func(ctx context.Context) error {
		_, err := rt.ReapLost(ctx, reapGrace)
		return err
	})
	// issue 13: chats are ended by their idle deadline in the store, whichever node runs this.
	periodic(kindEndIdleChats, chatIdleEvery(idle), 1, func(ctx context.Context) error {
		_, err := rt.EndIdleChats(ctx)
		return err
	})
	if reg != nil {
		periodic(kindReapDeadNodes, reg.Interval(), 1, func(ctx context.Context) error {
			_, err := rt.ReapDeadNodes(ctx, reg.Dead)
			return err
		})
	}
	periodic(kindPurgeAttachments, purgeEvery, 0, func(ctx context.Context) error {
		_, err := a.Chats.PurgeAttachments(ctx)
		return err
	})
	periodic(kindPurgeAgents, purgeEvery, 0, func(ctx context.Context) error {
		_, err := (&agents.Service{Store: st}).Purge(ctx, time.Now())
		return err
	})
	periodic(kindPurgeIdempotency, purgeEvery, 0, func(ctx context.Context) error {
		_, err := st.PurgeIdempotency(ctx, time.Now())
		return err
	})
	periodic(kindPurgeAudit, purgeEvery, 0, func(ctx context.Context) error {
		_, err := (&audit.Service{Store: st}).Purge(ctx, time.Now())
		return err
	})
	// issue 18: evaluation runs, at most 3 attempts (a crash mid-run starts it over); a run
	// whose job is dead or gone is stored failed by the reaper, so none stays running.
	if a.Evaluations != nil && a.Evaluations.Engine != nil {
		w.Register(store.EvaluationRunKind, func(ctx context.Context, j *jobs.Job) error {
			return a.Evaluations.Execute(ctx, j, j.Payload, j.Attempt, j.MaxAttempts)
		}, jobs.WithTimeout(evaluationTimeout))
	}
	periodic(kindReapEvaluations, reapEvery, 1, func(ctx context.Context) error {
		if a.Evaluations != nil { // each failed run with its evaluation_run.failed event
			_, err := a.Evaluations.ReapOrphaned(ctx)
			return err
		}
		_, err := st.EvaluationRuns().FailOrphaned(ctx, time.Now())
		return err
	})
	periodic(kindPurgeJobs, purgeEvery, 0, func(ctx context.Context) error {
		now := time.Now()
		_, err := st.PurgeJobs(ctx, now.Add(-keepDoneJobs), now.Add(-keepDeadJobs))
		return err
	})
}

// chatIdleEvery is how often idle chats are looked for: a quarter of the idle limit, between
// a second and 30 s.
func chatIdleEvery(idle time.Duration) time.Duration {
	return min(max(idle/4, time.Second), reapEvery)
}

// close stops the workers, ends the conversations still live here and stops the runtime.
func (c *conversations) close() {
	if c == nil {
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	c.rt.Close()
	c.testProv.Close()
}

// bodyLimits is bodyLimit with the larger limit of uploads on their path.
func bodyLimits(limit int64) func(http.Handler) http.Handler {
	normal, upload, document := bodyLimit(limit), bodyLimit(max(limit, api.MaxUploadBytes)), bodyLimit(max(limit, api.MaxDocumentUpload))
	return func(next http.Handler) http.Handler {
		a, b, docs := normal(next), upload(next), document(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/attachments" {
				b.ServeHTTP(w, r)
				return
			}
			if isDocumentUpload(r) { // issue 16: documents of up to 25 MB
				docs.ServeHTTP(w, r)
				return
			}
			a.ServeHTTP(w, r)
		})
	}
}

// dialer places phone calls through this node's SIP server (nil without the media role).
func (n *Node) dialer() runtime.Dialer {
	if n.media == nil {
		return nil
	}
	return n.media.dialer
}

// webCalls starts browser calls through this node's WebRTC service (nil without the media role).
func (n *Node) webCalls() runtime.WebCalls {
	if n.media == nil {
		return nil
	}
	wc := channels.WebCalls(n.media.webrtc)
	if n.metrics != nil {
		wc = webCallCounter{WebCalls: wc, v: n.metrics.voice} // issue 22 item 11
	}
	return wc
}

// issue 15: the campaign dialler. A tick each second (one between all worker nodes) settles
// attempts and leases the contacts due; each leased attempt is a job of its own, dialled once.
const (
	kindCampaignTick = "campaigns.tick"
	campaignTick     = time.Second
)

func registerCampaignJobs(w *jobs.Worker, a *api.API) {
	w.Register(kindCampaignTick, func(ctx context.Context, _ *jobs.Job) error {
		_, err := a.Campaigns.Tick(ctx)
		return err
	}, jobs.WithTimeout(jobTimeout), jobs.WithMaxAttempts(1))
	w.Every(kindCampaignTick, campaignTick)
	w.Register(campaigns.KindAttempt, a.Campaigns.RunAttempt, jobs.WithTimeout(jobTimeout))
	if a.Campaigns.Wake == nil {
		q := w.Queue()
		a.Campaigns.Wake = func(ctx context.Context) { q.Wake(ctx, campaigns.KindAttempt) }
	}
}
