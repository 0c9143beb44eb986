// Package control is the control plane of a parley node: it assembles the store, the bus, the
// cluster registry and the HTTP server (health, metrics and the /v1 API), runs them, and drains
// them on stop.
//
// It must never sit on the media path: calls are carried by the media packages, and control only
// steers them through the store and the bus.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/internal/netguard"
	"github.com/parley-voice/parley/internal/private"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/cluster"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/sip"
)

// Node is one running parley process.
type Node struct {
	cfg   *config.Config
	log   *slog.Logger
	out   io.Writer
	Store *store.Store
	Bus   bus.Bus
	Box   *secrets.Box
	// Outbound is the SSRF guard every request to a customer-chosen URL goes through (webhook
	// receivers, HTTP tools, MCP servers, crawls).
	Outbound *netguard.Guard
	registry *cluster.Registry
	metrics  *metrics
	handler  http.Handler
	draining atomic.Bool
	api      *api.API
	conv     *conversations // the conversation runtime and its workers
	hooks    *hooks         // issue 14: webhook deliveries and post-call analyses
	tools    *toolsRole     // issue 17: HTTP and MCP tools of conversations
	media    *mediaServices // SIP and WebRTC, with the media role

	mu       sync.Mutex
	ln       net.Listener
	ready    chan struct{}
	closeErr error
	closed   sync.Once
}

// NewNode opens the store (applying migrations), the bus and the master key. On a store with no
// organization it bootstraps one and prints its keys once to out.
func NewNode(ctx context.Context, cfg *config.Config, log *slog.Logger, out io.Writer) (*Node, error) {
	if err := private.MkdirAll(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	// Installs from before data files were made private: narrow what others could read.
	if fixed, err := private.FixTree(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	} else if len(fixed) > 0 {
		log.Warn("data files were readable by other users; made them private (directories 0700, files 0600)", "dir", cfg.DataDir, "changed", len(fixed))
	}
	key, previous, created, err := secrets.LoadKeys(cfg.MasterKey, cfg.MasterKeyPrevious, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	if created {
		log.Warn("generated a new master key; back it up or set PARLEY_MASTER_KEY", "file", cfg.DataDir+"/"+secrets.KeyFile)
	}
	box, err := secrets.NewKeyring(key, previous...)
	if err != nil {
		return nil, err
	}
	st, err := OpenStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	applied, err := st.Migrate(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate store: %w", err)
	}
	if len(applied) > 0 {
		log.Info("store migrated", "applied", applied, "engine", st.Dialect())
	}
	if err := checkMasterKey(ctx, st, box); err != nil {
		st.Close()
		if created {
			// The key just made opens nothing of this store: leave no wrong key file behind
			// for the next start; the operator restores the right one.
			os.Remove(filepath.Join(cfg.DataDir, secrets.KeyFile))
		}
		return nil, err
	}
	b, err := bus.Open(ctx, cfg.RedisURL, log)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("bus: %w", err)
	}
	if cfg.NodeID == "" {
		host, _ := os.Hostname()
		cfg.NodeID = host + "-" + uuid.NewString()[:8]
	}
	outbound, err := netguard.New(netguard.Options{AllowPrivate: cfg.OutboundAllowPrivate, ExtraCAFile: cfg.OutboundCAFile})
	if err != nil {
		st.Close()
		b.Close()
		return nil, fmt.Errorf("outbound requests (PARLEY_OUTBOUND_CA_FILE): %w", err)
	}
	if cfg.OutboundAllowPrivate {
		log.Warn("PARLEY_OUTBOUND_ALLOW_PRIVATE is on: webhooks, tools, MCP servers and crawls may reach this network's private addresses; never use it in production")
	}
	n := &Node{cfg: cfg, log: log, out: out, Store: st, Bus: b, Box: box, Outbound: outbound, metrics: newMetrics(), ready: make(chan struct{})}
	n.registry = cluster.New(b, cluster.Options{NodeID: cfg.NodeID, Roles: cfg.Roles.String(), Logger: log})
	if err := n.firstStart(ctx); err != nil {
		n.Close()
		return nil, err
	}
	// Own the HTTP listener from the start, so links (web-call URLs) name the real port even
	// with --http-addr :0.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("listen on %s (PARLEY_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	n.ln = ln
	if strings.HasSuffix(cfg.BaseURL, ":0") {
		cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "0") + fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	}
	if err := n.startMedia(key); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.startConversations(ctx); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.startSIP(n.conv.rt); err != nil {
		n.Close()
		return nil, err
	}
	n.handler = n.routes()
	return n, nil
}

// OpenStore opens the store named by the configuration (without migrating).
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, store.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}

// firstStart bootstraps an empty store and prints, once, what a newcomer needs to call the API.
func (n *Node) firstStart(ctx context.Context) error {
	orgs, err := n.Store.ListOrgs(ctx)
	if err != nil {
		return fmt.Errorf("read organizations: %w", err)
	}
	if len(orgs) > 0 {
		return nil
	}
	b, err := Bootstrap(ctx, n.Store)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	credit := "none (add it with: parley admin credit add --org " + b.OrganizationID + " --amount 10)"
	if n.cfg.UsesSQLite() && n.cfg.StartingCreditMicros > 0 {
		// The embedded default is for trying Parley: the first call must not answer 402.
		if _, err := n.Store.AddCredit(ctx, store.OrgID(b.OrganizationID), n.cfg.StartingCreditMicros, "starting credit (PARLEY_STARTING_CREDIT)"); err != nil {
			return fmt.Errorf("bootstrap: starting credit: %w", err)
		}
		credit = fmt.Sprintf("%d.%02d USD (PARLEY_STARTING_CREDIT)", n.cfg.StartingCreditMicros/1_000_000, n.cfg.StartingCreditMicros%1_000_000/10_000)
	}
	fmt.Fprintf(n.out, `
Parley is set up. This is printed once, on the first start of an empty store:

  organization  %s
  project       %s  (Default)
  live key      %s
  test key      %s
  credit        %s

Try it:
  curl -H "Authorization: Bearer %s" %s/v1/me

`, b.OrganizationID, b.ProjectID, b.LiveKey, b.TestKey, credit, b.LiveKey, n.cfg.BaseURL)
	return nil
}

// BootstrapResult is what `parley admin bootstrap --json` prints.
type BootstrapResult struct {
	OrganizationID string `json:"organization_id"`
	ProjectID      string `json:"project_id"`
	LiveKey        string `json:"live_key"`
	TestKey        string `json:"test_key"`
}

// Bootstrap ensures the Default organization and project and mints a fresh live and test key,
// each with every permission and reaching all projects.
func Bootstrap(ctx context.Context, st *store.Store) (BootstrapResult, error) {
	org, proj, created, err := st.Bootstrap(ctx)
	if err != nil {
		return BootstrapResult{}, err
	}
	// Bootstrap is the operator's act: it is in the audit log like every other change.
	audit := func(project store.ProjectID, action, objectType, objectID string, data map[string]any) error {
		raw, _ := json.Marshal(data)
		return st.InsertAudit(ctx, store.AuditEvent{OrgID: org.ID, ProjectID: project, ActorType: store.ActorOperator,
			ActorID: "parley bootstrap", Action: action, ObjectType: objectType, ObjectID: objectID, Data: raw})
	}
	if created {
		if err := audit("", "organization.created", "organization", string(org.ID), map[string]any{"name": org.Name}); err != nil {
			return BootstrapResult{}, err
		}
		if err := audit(proj.ID, "project.created", "project", string(proj.ID), map[string]any{"name": proj.Name}); err != nil {
			return BootstrapResult{}, err
		}
	}
	res := BootstrapResult{OrganizationID: string(org.ID), ProjectID: string(proj.ID)}
	for _, test := range []bool{false, true} {
		name := "bootstrap live key"
		if test {
			name = "bootstrap test key"
		}
		k, secret, err := st.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: name, Test: test, Scopes: api.Scopes, AllProjects: true})
		if err != nil {
			return BootstrapResult{}, err
		}
		if err := audit("", "api_key.created", "api_key", string(k.ID), map[string]any{"name": k.Name, "prefix": k.Prefix, "mode": k.Mode, "all_projects": true}); err != nil {
			return BootstrapResult{}, err
		}
		if test {
			res.TestKey = secret
		} else {
			res.LiveKey = secret
		}
	}
	return res, nil
}

func (n *Node) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(requestID, accessLog(n.log, n.metrics), recoverer(n.log), headerLimit, bodyLimits(n.cfg.MaxBodyBytes))
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	r.Get("/readyz", n.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	if n.cfg.Pprof {
		r.HandleFunc("/debug/pprof/*", pprof.Index)
		r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a := &api.API{Store: n.Store, Bus: n.Bus, Log: n.log, Box: n.Box,
		KeyRatePerMin: n.cfg.KeyRatePerMin, OrgRatePerMin: n.cfg.OrgRatePerMin, BaseURL: n.cfg.BaseURL}
	n.conversationAPI(a)
	n.webhookAPI(a) // issue 14
	n.api = a       // the worker role uses it too
	if n.media != nil {
		h := n.media.webrtc.Handler() // the browser client, join and listen pages, signalling
		r.Handle("/client/*", h)
		r.Handle("/call/*", h)
		r.Handle("/listen/*", h)
	}
	if n.cfg.Roles.Has(config.RoleAPI) {
		r.Mount("/v1", a.Routes())
		r.Handle("/hooks/whatsapp", a.WhatsAppHooks()) // issue 19: Meta's webhooks, outside /v1
		r.Method(http.MethodGet, "/openapi.v1.json", a.OpenAPIHandler())
	}
	return r
}

// readyz answers 200 when the store and the bus answer and the node is not draining.
func (n *Node) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"store": "ok", "bus": "ok"}
	status := http.StatusOK
	if err := n.Store.Ping(ctx); err != nil {
		checks["store"] = err.Error()
		status = http.StatusServiceUnavailable
	}
	if err := n.Bus.Ping(ctx); err != nil {
		checks["bus"] = err.Error()
		status = http.StatusServiceUnavailable
	}
	state := "ready"
	if n.draining.Load() {
		state = "draining"
		status = http.StatusServiceUnavailable
	} else if status != http.StatusOK {
		state = "unavailable"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": state, "checks": checks,
		"node": n.registry.Self(), "peers": n.registry.Peers(),
	})
}

// Handler returns the node's HTTP handler (for tests).
func (n *Node) Handler() http.Handler { return n.handler }

// Addr returns the HTTP listener's address once Run has started listening.
func (n *Node) Addr() net.Addr {
	<-n.ready
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ln == nil {
		return nil
	}
	return n.ln.Addr()
}

// Draining reports whether the node is draining.
func (n *Node) Draining() bool { return n.draining.Load() }

// Run serves until ctx is cancelled, then drains: it stops taking new work, reports not ready,
// lets requests in progress finish until the drain deadline, and closes everything.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	ln := n.ln
	n.mu.Unlock()
	close(n.ready)
	if n.media != nil {
		n.media.run()
	}
	if err := n.registry.Start(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("cluster registry: %w", err)
	}
	n.runConversationWorkers(ctx, n.api)
	n.runWebhookWorkers(ctx, n.api) // issue 14
	srv := &http.Server{
		Handler:           n.handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	attrs := []any{"http", ln.Addr().String(), "roles", n.cfg.Roles.String(),
		"store", n.Store.Dialect(), "bus", busKind(n.cfg.RedisURL), "node", n.cfg.NodeID, "base_url", n.cfg.BaseURL}
	if n.media != nil {
		attrs = append(attrs, "sip", n.media.sip.Addr(sip.UDP).String(), "webrtc_udp", n.media.webrtc.UDPAddr().String())
	}
	n.log.Info("parley serving", attrs...)

	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
		n.Close()
		return err
	case <-ctx.Done():
	}
	n.draining.Store(true)
	n.metrics.draining.Set(1)
	n.log.Info("draining", "deadline", n.cfg.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), n.cfg.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); n.media.drain(dctx) }() // new INVITEs 503; calls finish until the deadline
	err := srv.Shutdown(dctx)
	wg.Wait()
	if errors.Is(err, context.DeadlineExceeded) {
		n.log.Warn("drain deadline passed; closing the remaining connections")
		srv.Close()
		err = nil
	}
	// Whatever state the calls are in, the process stops within the drain timeout plus 5 s:
	// closing (the calls hung up as shutdown, their ends stored) gets closeGrace, then Run
	// returns all the same.
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case cerr := <-closed:
		if err == nil {
			err = cerr
		}
	case <-time.After(closeGrace):
		n.log.Warn("closing took too long; stopping anyway", "after", closeGrace)
	}
	n.log.Info("stopped")
	return err
}

// closeGrace bounds Close at the end of Run (the drain timeout plus 5 s in all).
const closeGrace = 4500 * time.Millisecond

// Close releases the registry, the bus and the store. It is safe to call twice.
func (n *Node) Close() error {
	n.closed.Do(func() {
		// The calls first: hung up as shutdown, their conversations end and store it; then
		// the runtime has little left to end.
		n.media.close()
		n.hooks.close() // issue 14
		n.conv.close()
		n.tools.close()
		n.mu.Lock()
		if n.ln != nil {
			n.ln.Close()
		}
		n.mu.Unlock()
		if n.registry != nil {
			n.registry.Close()
		}
		var errs []error
		if n.Bus != nil {
			errs = append(errs, n.Bus.Close())
		}
		if n.Store != nil {
			errs = append(errs, n.Store.Close())
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func busKind(url string) string {
	if url == "" {
		return "in-process"
	}
	return "redis"
}

// errWrongMasterKey is the refusal to start with a master key that does not open the store's
// secrets: starting anyway would make every stored secret unreadable and seal new ones under the
// wrong key.
var errWrongMasterKey = errors.New("the master key (PARLEY_MASTER_KEY, or master.key in the data directory) does not open this store's secrets: start with the key the store was written with")

// checkMasterKey refuses a master key that does not open the store's secrets. The store keeps a
// check value sealed under the key; a store from before the check is judged by a sealed secret
// it holds, and then given the check value.
func checkMasterKey(ctx context.Context, st *store.Store, box *secrets.Box) error {
	check, err := st.GetSetting(ctx, store.SettingMasterKeyCheck)
	switch {
	case err == nil:
		if !box.Verify(check) {
			return errWrongMasterKey
		}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("read the master key check: %w", err)
	}
	trunks, err := st.ListTrunks(ctx)
	if err != nil {
		return fmt.Errorf("read sealed secrets: %w", err)
	}
	for _, t := range trunks {
		if !t.HasPassword() {
			continue
		}
		if _, err := t.Password(box); err != nil {
			return errWrongMasterKey
		}
		break
	}
	v, err := box.CheckValue()
	if err != nil {
		return err
	}
	if check, err = st.PutSettingOnce(ctx, store.SettingMasterKeyCheck, v); err != nil {
		return fmt.Errorf("keep the master key check: %w", err)
	}
	if !box.Verify(check) { // another node stored its check first, under another key
		return errWrongMasterKey
	}
	return nil
}
