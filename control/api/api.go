package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app/agents"
	"github.com/parley-voice/parley/control/app/analysis"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/campaigns"
	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/app/evaluations"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/app/numbers"
	"github.com/parley-voice/parley/control/app/projects"
	"github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/app/whatsapp"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/internal/netguard"

	"github.com/go-chi/chi/v5"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// API is the /v1 interface over the store and the bus.
type API struct {
	Store *store.Store
	Bus   bus.Bus
	Log   *slog.Logger
	// KeyRatePerMin and OrgRatePerMin are the requests a minute allowed per API key and per
	// organization (GCRA on the bus, a minute's worth in a burst); 0 disables the limit.
	KeyRatePerMin int
	OrgRatePerMin int
	// BaseURL is the public address, named in the OpenAPI document's servers.
	BaseURL string
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	// Runtime runs and reaches conversations (chats, calls, live steering). Without it the
	// operations that start or steer a conversation answer 501.
	Runtime *runtime.Runtime
	// DataDir holds recordings and attachments (shared by every node of a deployment).
	DataDir string
	// MaxCalls is how many voice calls (phone and browser) an organization may have going at
	// once (0: no limit); WebCallsPerDay how many browser calls it may start a day (0: no limit).
	MaxCalls       int
	WebCallsPerDay int
	// TransferCheck refuses transfer destinations a call may not reach (issue 22 item 7; see
	// channels.TransferChecker); nil checks nothing.
	TransferCheck func(ctx context.Context, c store.Conversation, dest string) error

	// The domain services the operations call.
	Agents        *agents.Service
	Numbers       *numbers.Service
	Projects      *projects.Service
	Conversations *conversations.Service
	Calls         *calls.Service
	Chats         *chats.Service
	Campaigns     *campaigns.Service // issue 15: contacts, do-not-call, campaigns and their dialler
	Knowledge     *knowledge.Service // issue 16
	// issue 17: the vault, over the master key (Box; without it the vault cannot seal).
	Box   *secrets.Box
	Vault *vault.Service

	// issue 14: events, webhook receivers and post-call analysis. Box also seals the
	// receivers' signing secrets (nil: a key made for this process, for tests); Outbound checks
	// their addresses (nil: the strict guard).
	Outbound *netguard.Guard
	Events   *events.Service
	Webhooks *webhooks.Service
	Analysis *analysis.Service

	// Tools serves tools and MCP servers; Guard checks customer URLs (nil: none) and MCP lists
	// a server's tools (nil: servers are saved with a last_error).
	Tools *tools.Service
	// issue 18: saved conversations and their runs (nil: made by Services, without an engine).
	Evaluations *evaluations.Service
	Guard       tools.URLGuard
	MCP         tools.Discoverer

	// issue 19: the messaging-app channel. WhatsAppGraph reaches Meta's Graph API and
	// WhatsAppSecrets the vault; without either the channel answers 501.
	WhatsApp        *whatsapp.Service
	WhatsAppGraph   whatsapp.Graph
	WhatsAppSecrets whatsapp.Secrets
	// JobWaker wakes the workers after an enqueue (nil: they poll).
	JobWaker whatsapp.Waker
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Routes returns the /v1 router (mounted at /v1 by the node): every operation of operations(),
// behind authentication and rate limits, with problem documents for unknown paths and methods.
func (a *API) Routes() chi.Router {
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	if a.Agents == nil {
		a.Agents = &agents.Service{Store: a.Store, Now: a.now}
	}
	if a.Numbers == nil {
		a.Numbers = &numbers.Service{Store: a.Store}
	}
	if a.Projects == nil {
		a.Projects = &projects.Service{Store: a.Store}
	}
	if a.Knowledge == nil { // issue 16
		a.Knowledge = &knowledge.Service{Store: a.Store, Log: a.Log, Now: a.Now}
	}
	if a.Vault == nil {
		a.Vault = &vault.Service{Store: a.Store, Box: a.Box}
	}
	if a.Tools == nil {
		a.Tools = &tools.Service{Store: a.Store, Vault: a.Vault, Guard: a.Guard, MCP: a.MCP, Now: a.Now}
	}
	a.Services()
	a.webhookServices()
	r := chi.NewRouter()
	r.Use(cors)
	r.Use(a.gate)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, fault.E(fault.CodeRouteNotFound, "There is no operation at %s %s.", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		allow := allowedMethods(r.URL.Path)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		a.fail(w, r, fault.E(fault.CodeMethodNotAllowed, "%s does not take %s; it takes %s.", r.URL.Path, r.Method, strings.Join(allow, ", ")))
	})
	for _, op := range operations() {
		r.Method(op.Method, op.Path, a.handler(op))
	}
	return r
}

// Services makes the domain services of conversations' starts that were not given, over the
// runtime (adapted to the domain's interfaces by runtimeAdapter) and the API's limits and clock. Routes
// calls it; a node whose workers call the services calls it once its runtime is set.
func (a *API) Services() {
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	if a.Conversations == nil {
		a.Conversations = &conversations.Service{Store: a.Store, DataDir: a.DataDir, Log: a.Log, Now: a.Now, TransferCheck: a.TransferCheck}
		if a.Runtime != nil { // a nil *runtime.Runtime would make a non-nil interface
			a.Conversations.Runtime = a.Runtime
		}
	}
	m := runtimeAdapter{rt: a.Runtime, log: a.Log}
	rules := calls.Rules{Store: a.Store, Definitions: m}
	if a.Calls == nil {
		a.Calls = &calls.Service{Store: a.Store, Rules: rules, Media: m,
			MaxCalls: a.MaxCalls, WebCallsPerDay: a.WebCallsPerDay, Now: a.now, Log: a.Log}
	}
	if a.Campaigns == nil {
		a.Campaigns = &campaigns.Service{Store: a.Store, Calls: a.Calls, Now: a.now, Log: a.Log}
	}
	if a.Chats == nil {
		a.Chats = &chats.Service{Store: a.Store, Rules: rules, Engine: m, DataDir: a.DataDir, Now: a.now, Log: a.Log}
	}
	if a.WhatsAppSecrets == nil && a.Box != nil { // issue 19: the vault holds the channel's secrets
		if a.Vault == nil {
			a.Vault = &vault.Service{Store: a.Store, Box: a.Box}
		}
		a.WhatsAppSecrets = vaultSecrets{a.Vault}
	}
	if a.WhatsApp == nil { // issue 19
		a.WhatsApp = &whatsapp.Service{Store: a.Store, Rules: rules, Graph: a.WhatsAppGraph, Secrets: a.WhatsAppSecrets, Wake: a.JobWaker,
			DataDir: a.DataDir, Now: a.now, Log: a.Log}
		if a.Runtime != nil {
			a.WhatsApp.Engine = whatsappEngine{runtimeAdapter: m, st: a.Store}
		}
	}
	if a.Conversations.MessagingSay == nil {
		a.Conversations.MessagingSay = func(ctx context.Context, c store.Conversation, text string) error {
			return a.WhatsApp.QueueSay(ctx, c, text)
		}
	}
	if a.Evaluations == nil { // issue 18
		a.Evaluations = &evaluations.Service{Store: a.Store, Now: a.now, Log: a.Log}
	}
	if a.Evaluations.Engine == nil && a.Runtime != nil {
		a.Evaluations.Engine = a.Runtime
	}
}

// allowedMethods lists the methods the operations take at a /v1 path.
func allowedMethods(path string) []string {
	rel := strings.TrimPrefix(path, "/v1")
	var out []string
	for _, op := range operations() {
		if matchPattern(op.Path, rel) {
			out = append(out, op.Method)
		}
	}
	return out
}

// matchPattern reports whether a path matches a chi pattern made of literal and {param}
// segments.
func matchPattern(pattern, path string) bool {
	ps, xs := strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/")
	if len(ps) != len(xs) {
		return false
	}
	for i, p := range ps {
		if !strings.HasPrefix(p, "{") && p != xs[i] {
			return false
		}
	}
	return true
}

// fail writes err as a problem document.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	var pe *fault.Error
	if !errors.As(err, &pe) && errors.Is(err, store.ErrInvalid) {
		// The schemas catch what the store refuses; this is the net under them.
		err = &fault.Error{Status: 422, Code: fault.CodeValidationFailed, Detail: "The request does not fit: " + strings.TrimPrefix(err.Error(), "store: "), Cause: err}
	}
	problem.Write(w, r, a.Log, err)
}

// respond writes v as the JSON answer.
func respond(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		http.Error(w, "encode answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// encodeJSON renders v as compact JSON with a final newline, without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// change runs fn in a store transaction and answers what it returns. The audit events fn
// records, the change itself and, for a request with an Idempotency-Key, the stored answer all
// commit together or not at all.
func (a *API) change(w http.ResponseWriter, r *http.Request, fn func(tx *store.Tx, au *auditor) (int, any, error)) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var ans *answer
	err := a.Store.Tx(ctx, func(tx *store.Tx) error {
		au := &auditor{api: a, r: r, tx: tx}
		status, v, err := fn(tx, au)
		if err != nil {
			return err
		}
		body, err := encodeJSON(v)
		if err != nil {
			return err
		}
		ans = &answer{status: status, header: map[string]string{"Content-Type": "application/json"}, body: body}
		if au.location != "" {
			ans.header["Location"] = au.location
		}
		return a.saveIdempotency(ctx, tx, c, ans)
	})
	if errors.Is(err, errIdemRace) {
		// Another node finished the same request first (its lock had expired): answer as it did.
		if done, rerr := a.replay(w, r, c, c.idem); done || rerr != nil {
			return rerr
		}
		return fault.E(fault.CodeIdempotencyInUse, "A request with this Idempotency-Key is still being processed; retry when it has finished.")
	}
	if err != nil {
		return err
	}
	for k, v := range ans.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
	return nil
}

// auditor records the audit events of one change, in its transaction.
type auditor struct {
	api      *API
	r        *http.Request
	tx       *store.Tx
	location string // the Location of a created object
}

// record writes one audit event: the key that acted (id and live/test), the action, the object
// and the request id.
func (au *auditor) record(action, objectType, objectID string, project store.ProjectID, data any) error {
	ctx := au.r.Context()
	p := PrincipalFrom(ctx)
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("audit data: %w", err)
	}
	if data == nil {
		raw = nil
	}
	return au.tx.InsertAudit(ctx, store.AuditEvent{
		OrgID: p.Org.ID, ProjectID: project, ActorType: store.ActorAPIKey, ActorID: string(p.Key.ID), ActorMode: p.Key.Mode,
		Action: action, ObjectType: objectType, ObjectID: objectID, RequestID: problem.RequestID(ctx), Data: raw,
	})
}

// cors lets web pages of other origins call the API (CORS, Fetch standard): with a test key
// while developing, never with a live key, which the gate refuses from a foreign page.
// Preflights are answered here, before authentication: a browser sends them without the key.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, Location, Idempotent-Replayed, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, Content-Range")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Accept, Range")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
