package control

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/providers"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/session"
)

// Periods of the worker role's conversation jobs.
const (
	dialEvery    = time.Second      // scheduled calls that are due
	reapEvery    = 30 * time.Second // conversations whose node went away
	reapGrace    = 2 * time.Minute
	purgeEvery   = time.Hour // pictures no message used
	workerTimout = 30 * time.Second
)

// conversations is the node's conversation runtime and its workers.
type conversations struct {
	rt       *runtime.Runtime
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
	var m *session.Metrics
	if n.metrics != nil {
		m = session.NewMetrics(n.metrics.reg)
	}
	rt, err := runtime.New(runtime.Options{
		NodeID: n.cfg.NodeID, Store: n.Store, Bus: n.Bus,
		Providers: providers.New(providers.FromConfig(n.cfg, n.log)), TestProviders: tp,
		Media:      n.cfg.Roles.Has(config.RoleMedia),
		Dialer:     n.dialer(),
		WebCalls:   n.webCalls(),
		MediaNodes: n.mediaPeers,
		DataDir:    n.cfg.DataDir, NoRecording: !n.cfg.Record, Metrics: m, Log: n.log,
	})
	if err != nil {
		tp.Close()
		return err
	}
	if err := rt.Start(ctx); err != nil {
		tp.Close()
		return err
	}
	n.conv = &conversations{rt: rt, testProv: tp}
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
	a.Services()
}

// runConversationWorkers runs, with the worker role, the jobs of conversations: dialling the
// scheduled calls that are due, ending the conversations whose node went away, and removing
// the pictures no message used. Any number of worker nodes may run them at once.
func (n *Node) runConversationWorkers(ctx context.Context, a *api.API) {
	if n.conv == nil || !n.cfg.Roles.Has(config.RoleWorker) {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	n.conv.cancel = cancel
	job := func(every time.Duration, name string, fn func(ctx context.Context) error) {
		n.conv.wg.Add(1)
		go func() {
			defer n.conv.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				jctx, cancel := context.WithTimeout(ctx, workerTimout)
				if err := fn(jctx); err != nil && ctx.Err() == nil {
					n.log.Warn("worker: job failed", "job", name, "err", err)
				}
				cancel()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	job(dialEvery, "scheduled calls", func(ctx context.Context) error {
		for {
			placed, err := a.Calls.DialDue(ctx, n.cfg.NodeID)
			if err != nil || placed == 0 {
				return err
			}
		}
	})
	job(reapEvery, "lost conversations", func(ctx context.Context) error {
		_, err := n.conv.rt.ReapLost(ctx, reapGrace)
		return err
	})
	job(purgeEvery, "unused attachments", func(ctx context.Context) error {
		_, err := a.Chats.PurgeAttachments(ctx)
		return err
	})
	job(purgeEvery, "deleted agents past their purge time", func(ctx context.Context) error {
		_, err := a.PurgeAgents(ctx, time.Now())
		return err
	})
	job(purgeEvery, "idempotency keys older than a day", func(ctx context.Context) error {
		_, err := a.PurgeIdempotencyKeys(ctx, time.Now())
		return err
	})
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
	normal, upload := bodyLimit(limit), bodyLimit(max(limit, api.MaxUploadBytes))
	return func(next http.Handler) http.Handler {
		a, b := normal(next), upload(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/attachments" {
				b.ServeHTTP(w, r)
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
	return &runtime.SIPDialer{Server: n.media.sip, Trunks: n.media.trunks.Lookup}
}

// webCalls starts browser calls through this node's WebRTC service (nil without the media role).
func (n *Node) webCalls() runtime.WebCalls {
	if n.media == nil {
		return nil
	}
	return n.media.webrtc
}
