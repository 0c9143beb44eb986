// Package webhooks holds the rules of webhook receivers and deliveries (issue 14): a receiver
// hears a project's events at a public https address; each delivery is signed by the Standard
// Webhooks specification v1 (https://www.standardwebhooks.com), retried on a fixed schedule
// with jitter, and recorded attempt by attempt.
//
// The package sends nothing itself (the domain speaks no HTTP): control/webhooks POSTs and
// hands each attempt's outcome to Record, which decides what follows and writes it, with the
// job's completion or rescheduling, in one transaction.
//
// It must never return or log a signing secret, except in the answers of creation and
// rotation.
package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// secretBytes is how many random bytes a secret holds (the specification asks for 24 to 64).
const secretBytes = 32

// RotationOverlap is how long the previous secret keeps signing after a rotation.
const RotationOverlap = 24 * time.Hour

// DefaultSchedule is the wait before each retry: attempt 1 is immediate; after it fail, the
// next ones follow these waits (with jitter). Eight attempts in all, over about a day and a
// half; then the delivery is failed.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// MaxRetryAfter caps a receiver's Retry-After.
const MaxRetryAfter = 24 * time.Hour

// URLChecker checks a receiver's address when it is saved (netguard.Guard).
type URLChecker interface {
	CheckURL(ctx context.Context, raw string, schemes netguard.Schemes) error
}

// Service holds the rules of receivers and deliveries.
type Service struct {
	Store *store.Store
	Box   *secrets.Box // seals and opens signing secrets
	Guard URLChecker
	// Schedule replaces DefaultSchedule (PARLEY_WEBHOOK_RETRY_SCHEDULE, shortened for tests).
	Schedule []time.Duration
	Now      func() time.Time
	Log      *slog.Logger

	group groupCommit
	reads groupRead
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) schedule() []time.Duration {
	if s.Schedule != nil {
		return s.Schedule
	}
	return DefaultSchedule
}

// NewSecret makes a signing secret.
func NewSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Sign returns the webhook-signature header of one attempt: a "v1,<base64 HMAC-SHA256>" entry
// per secret (the key is the base64-decoded part after whsec_; the signed content is
// "<webhook-id>.<webhook-timestamp>.<body>"), separated by spaces.
func Sign(secrets []string, id string, ts int64, body []byte) (string, error) {
	parts := make([]string, 0, len(secrets))
	for _, sec := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec, SecretPrefix))
		if err != nil {
			return "", fmt.Errorf("webhooks: a stored secret is not base64: %w", err)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write(strconv.AppendInt(nil, ts, 10))
		m.Write([]byte{'.'})
		m.Write(body)
		parts = append(parts, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(parts, " "), nil
}

// checkURL refuses what is not a public https address (422 invalid_webhook_url).
func (s *Service) checkURL(ctx context.Context, raw string) error {
	if s.Guard == nil {
		return errors.New("webhooks: no URL guard configured")
	}
	err := s.Guard.CheckURL(ctx, raw, netguard.HTTPSOnly)
	if err == nil {
		return nil
	}
	var why string
	switch {
	case errors.Is(err, netguard.ErrScheme):
		why = "is not an https address"
	case errors.Is(err, netguard.ErrUnresolvable):
		why = "names a host that does not resolve"
	case errors.Is(err, netguard.ErrBlocked):
		why = "resolves to an address that is not public (loopback, private, link-local, CGNAT, multicast or unspecified)"
	case errors.Is(err, netguard.ErrBadURL):
		why = "is not an absolute URL"
	default:
		return err
	}
	return fault.Invalid(fault.CodeInvalidWebhookURL, []fault.FieldError{{Pointer: "/url", Code: fault.CodeInvalidWebhookURL,
		Detail: fmt.Sprintf("The url %s %s.", app.QuoteID(raw), why)}})
}

// checkAgents refuses agent ids that are not agents of the project the actor reaches.
func checkAgents(ctx context.Context, tx *store.Tx, act app.Actor, project store.ProjectID, ids []string) ([]store.AgentID, error) {
	out := make([]store.AgentID, 0, len(ids))
	var fes []fault.FieldError
	for i, id := range ids {
		a, err := tx.Agents().Get(ctx, act.Scope, store.AgentID(id))
		if errors.Is(err, store.ErrNotFound) || (err == nil && a.ProjectID != project) {
			fes = append(fes, fault.FieldError{Pointer: fmt.Sprintf("/agent_ids/%d", i), Code: fault.CodeReceiverAgent,
				Detail: fmt.Sprintf("%s is not an agent of the receiver's project.", app.QuoteID(id))})
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a.ID)
	}
	if len(fes) > 0 {
		return nil, fault.Invalid(fault.CodeReceiverAgent, fes)
	}
	return out, nil
}

// Create makes a receiver in a project of the actor's, live or test as the actor's key, and
// answers it with its secret (the only time the secret is shown).
func (s *Service) Create(ctx context.Context, act app.Actor, c WebhookReceiverCreate) (WebhookReceiverWithSecret, error) {
	// The project first (an outsider's 404 before any other answer), the address outside the
	// transaction (resolving it takes a round trip).
	if _, err := app.Project(ctx, s.Store.Queries, act, c.ProjectID); err != nil {
		return WebhookReceiverWithSecret{}, err
	}
	var evs []string
	if c.Events != nil {
		evs = slices.Clone(*c.Events)
		if err := events.CheckTypes("/events", "", evs, false); err != nil {
			return WebhookReceiverWithSecret{}, err
		}
	}
	if err := s.checkURL(ctx, c.URL); err != nil {
		return WebhookReceiverWithSecret{}, err
	}
	mode := act.Mode()
	if mode == "" {
		mode = store.ModeLive
	}
	include := c.IncludeValues == nil || *c.IncludeValues
	secret := NewSecret()
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (WebhookReceiverWithSecret, error) {
		p, err := app.Project(ctx, tx.Queries, act, c.ProjectID)
		if err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		if err := app.Writable(p); err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		agents, err := checkAgents(ctx, tx, act, p.ID, c.AgentIDs)
		if err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		r, err := tx.Receivers().Create(ctx, s.Box, act.Scope, store.NewReceiver{ProjectID: p.ID, Mode: mode, URL: c.URL,
			Events: evs, AgentIDs: agents, IncludeValues: include, Secret: secret})
		if errors.Is(err, store.ErrFull) {
			return WebhookReceiverWithSecret{}, fault.E(fault.CodeReceiverLimit, "The project %s has %d webhook receivers, the most it may have; delete one first.", p.Name, store.MaxReceiversPerProject)
		}
		if err != nil {
			return WebhookReceiverWithSecret{}, app.NotFound(err, fault.CodeProjectNotFound, "project", c.ProjectID)
		}
		if err := au.Record("webhook_receiver.created", "webhook_receiver", string(r.ID), r.ProjectID,
			map[string]any{"url": r.URL, "events": r.Events, "agent_ids": r.AgentIDs, "include_values": r.IncludeValues}); err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		return WebhookReceiverWithSecret{WebhookReceiver: ViewReceiver(r, s.now()), Secret: secret}, nil
	})
}

// Get returns the actor's receiver.
func (s *Service) Get(ctx context.Context, act app.Actor, id string) (WebhookReceiver, error) {
	r, err := s.Store.Receivers().Get(ctx, act.Scope, store.ReceiverID(id))
	if err != nil {
		return WebhookReceiver{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
	}
	return ViewReceiver(r, s.now()), nil
}

// List returns the actor's receivers (of project, when set), oldest first.
func (s *Service) List(ctx context.Context, act app.Actor, project string, pg store.Page) ([]WebhookReceiver, error) {
	if project != "" {
		if _, err := app.Project(ctx, s.Store.Queries, act, project); err != nil {
			return nil, err
		}
	}
	rs, err := s.Store.Receivers().List(ctx, act.Scope, store.ProjectID(project), pg)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]WebhookReceiver, len(rs))
	for i, r := range rs {
		out[i] = ViewReceiver(r, now)
	}
	return out, nil
}

// Update changes the actor's receiver.
func (s *Service) Update(ctx context.Context, act app.Actor, id string, u WebhookReceiverUpdate) (WebhookReceiver, error) {
	// The receiver first (an outsider's 404 before any other answer), the address outside the
	// transaction (resolving it takes a round trip).
	if _, err := s.Store.Receivers().Get(ctx, act.Scope, store.ReceiverID(id)); err != nil {
		return WebhookReceiver{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
	}
	var ch store.ReceiverChange
	if u.Events.Set {
		var evs []string
		if !u.Events.Null {
			evs = slices.Clone(u.Events.Value)
			if evs == nil {
				evs = []string{}
			}
			if err := events.CheckTypes("/events", "", evs, false); err != nil {
				return WebhookReceiver{}, err
			}
		}
		ch.Events = &evs
	}
	if u.URL != nil {
		if err := s.checkURL(ctx, *u.URL); err != nil {
			return WebhookReceiver{}, err
		}
		ch.URL = u.URL
	}
	ch.IncludeValues = u.IncludeValues
	if u.Enabled != nil {
		if !*u.Enabled {
			return WebhookReceiver{}, fault.Invalid(fault.CodeValidationFailed, []fault.FieldError{{Pointer: "/enabled", Code: fault.CodeValidationFailed,
				Detail: "enabled takes only true (to enable a receiver that answered 410 Gone); delete a receiver you no longer want."}})
		}
		ch.Enable = true
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (WebhookReceiver, error) {
		r, err := tx.Receivers().Get(ctx, act.Scope, store.ReceiverID(id))
		if err != nil {
			return WebhookReceiver{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, r.ProjectID); err != nil {
			return WebhookReceiver{}, err
		}
		if u.AgentIDs != nil {
			agents, err := checkAgents(ctx, tx, act, r.ProjectID, *u.AgentIDs)
			if err != nil {
				return WebhookReceiver{}, err
			}
			ch.AgentIDs = &agents
		}
		r, err = tx.Receivers().Update(ctx, act.Scope, r.ID, ch)
		if err != nil {
			return WebhookReceiver{}, err
		}
		if err := au.Record("webhook_receiver.updated", "webhook_receiver", string(r.ID), r.ProjectID,
			map[string]any{"url": r.URL, "events": r.Events, "agent_ids": r.AgentIDs, "include_values": r.IncludeValues, "enabled": r.DisabledAt == nil}); err != nil {
			return WebhookReceiver{}, err
		}
		return ViewReceiver(r, s.now()), nil
	})
}

// WebhookReceiverDeleted is the answer of a deletion.
type WebhookReceiverDeleted struct {
	Object                 string `json:"object" jsonschema:"enum=webhook_receiver"`
	ID                     string `json:"id" jsonschema:"format=uuid"`
	WebhookReceiverDeleted bool   `json:"deleted" const:"true"`
}

// SchemaDoc describes the object in the document.
func (WebhookReceiverDeleted) SchemaDoc() string {
	return "A deleted webhook receiver. Its pending deliveries are dropped, and its history with it."
}

// Delete removes the actor's receiver with its deliveries.
func (s *Service) Delete(ctx context.Context, act app.Actor, id string) (WebhookReceiverDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (WebhookReceiverDeleted, error) {
		r, err := tx.Receivers().Get(ctx, act.Scope, store.ReceiverID(id))
		if err != nil {
			return WebhookReceiverDeleted{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, r.ProjectID); err != nil {
			return WebhookReceiverDeleted{}, err
		}
		if _, err := tx.Receivers().Delete(ctx, act.Scope, r.ID); err != nil {
			return WebhookReceiverDeleted{}, err
		}
		if err := au.Record("webhook_receiver.deleted", "webhook_receiver", string(r.ID), r.ProjectID, map[string]any{"url": r.URL}); err != nil {
			return WebhookReceiverDeleted{}, err
		}
		return WebhookReceiverDeleted{Object: "webhook_receiver", ID: string(r.ID), WebhookReceiverDeleted: true}, nil
	})
}

// Rotate gives the actor's receiver a new secret, answered once; the previous one keeps
// signing too for RotationOverlap.
func (s *Service) Rotate(ctx context.Context, act app.Actor, id string) (WebhookReceiverWithSecret, error) {
	secret := NewSecret()
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (WebhookReceiverWithSecret, error) {
		r, err := tx.Receivers().Get(ctx, act.Scope, store.ReceiverID(id))
		if err != nil {
			return WebhookReceiverWithSecret{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, r.ProjectID); err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		until := s.now().Add(RotationOverlap)
		r, err = tx.Receivers().Rotate(ctx, s.Box, act.Scope, r.ID, secret, until)
		if err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		if err := au.Record("webhook_receiver.secret_rotated", "webhook_receiver", string(r.ID), r.ProjectID,
			map[string]any{"previous_secret_expires_at": until}); err != nil {
			return WebhookReceiverWithSecret{}, err
		}
		return WebhookReceiverWithSecret{WebhookReceiver: ViewReceiver(r, s.now()), Secret: secret}, nil
	})
}

// Test sends a webhook.test event to the actor's receiver (and to it only), even a disabled
// one, and answers the pending delivery.
func (s *Service) Test(ctx context.Context, act app.Actor, id string) (WebhookDelivery, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (WebhookDelivery, error) {
		r, err := tx.Receivers().Get(ctx, act.Scope, store.ReceiverID(id))
		if err != nil {
			return WebhookDelivery{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
		}
		e, err := events.Emit(ctx, tx, store.Event{OrgID: r.OrgID, ProjectID: r.ProjectID, Mode: r.Mode, Type: events.WebhookTest},
			events.WebhookTestData{Object: "webhook_test", ReceiverID: string(r.ID), Message: "A test event from Parley: the receiver is reached and verifies the signature."})
		if err != nil {
			return WebhookDelivery{}, err
		}
		d, err := tx.CreateDelivery(ctx, r.ID, e)
		if err != nil {
			return WebhookDelivery{}, err
		}
		d.AttemptList = []store.DeliveryAttempt{}
		return ViewDelivery(d), nil
	})
}

// Resend makes a new attempt of a delivery of the actor's receiver with the same webhook-id,
// and answers the delivery, pending again. A delivery of another receiver is 404.
func (s *Service) Resend(ctx context.Context, act app.Actor, id, deliveryID string) (WebhookDelivery, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (WebhookDelivery, error) {
		if _, err := tx.Receivers().Get(ctx, act.Scope, store.ReceiverID(id)); err != nil {
			return WebhookDelivery{}, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
		}
		d, err := tx.Receivers().Resend(ctx, act.Scope, store.ReceiverID(id), store.DeliveryID(deliveryID))
		if err != nil {
			return WebhookDelivery{}, app.NotFound(err, fault.CodeDeliveryNotFound, "delivery", deliveryID)
		}
		d.AttemptList = []store.DeliveryAttempt{}
		return ViewDelivery(d), nil
	})
}

// Deliveries lists what was sent to the actor's receiver, newest first.
func (s *Service) Deliveries(ctx context.Context, act app.Actor, id, status string, pg store.Page) ([]WebhookDelivery, error) {
	ds, err := s.Store.Receivers().ListDeliveries(ctx, act.Scope, store.ReceiverID(id), store.DeliveryFilter{Status: status}, pg)
	if err != nil {
		return nil, app.NotFound(err, fault.CodeReceiverNotFound, "webhook receiver", id)
	}
	out := make([]WebhookDelivery, len(ds))
	for i, d := range ds {
		out[i] = ViewDelivery(d)
	}
	return out, nil
}

// Message is one attempt to send: where, what and how it is signed.
type Message struct {
	URL     string
	ID      string // webhook-id
	Body    []byte
	secrets []string
}

// Headers returns the Standard Webhooks headers of an attempt made at now (webhook-timestamp
// is new on every attempt; webhook-id stays).
func (m Message) Headers(now time.Time) (map[string]string, error) {
	ts := now.Unix()
	sig, err := Sign(m.secrets, m.ID, ts, m.Body)
	if err != nil {
		return nil, err
	}
	return map[string]string{"webhook-id": m.ID, "webhook-timestamp": strconv.FormatInt(ts, 10), "webhook-signature": sig,
		"Content-Type": "application/json", "User-Agent": "Parley-Webhooks/1"}, nil
}

// Prepare reads what a delivery job sends. ok is false when there is nothing to send: the
// receiver or the delivery is gone, or the delivery is no longer pending (a resend, once, is
// sent whatever the status: an attempt in flight when it was asked may have settled it since).
func (s *Service) Prepare(ctx context.Context, id store.DeliveryID, once bool) (snd store.Sending, m Message, ok bool, err error) {
	snd, err = s.reads.get(ctx, s, id)
	if errors.Is(err, store.ErrNotFound) {
		return snd, m, false, nil
	}
	if err != nil {
		return snd, m, false, err
	}
	if snd.Delivery.Status != store.DeliveryPending && !once {
		return snd, m, false, nil
	}
	data := snd.Event.Data
	if !snd.Receiver.IncludeValues {
		if data, err = events.StripValues(data); err != nil {
			return snd, m, false, fmt.Errorf("webhooks: event %s data: %w", snd.Event.ID, err)
		}
	}
	ev := events.View(snd.Event)
	ev.Data = data
	body, err := json.Marshal(ev)
	if err != nil {
		return snd, m, false, err
	}
	secs, err := snd.Receiver.Secrets(s.Box, s.now())
	if err != nil {
		return snd, m, false, err
	}
	return snd, Message{URL: snd.Receiver.URL, ID: string(snd.Delivery.ID), Body: body, secrets: secs}, true, nil
}

// groupRead reads the deliveries that workers start together in one query (GetSendings), as
// groupCommit stores their attempts: the first caller reads what is queued, batch after batch,
// while the others wait for theirs. Idle, a batch is one delivery and one GetSending.
type groupRead struct {
	mu      sync.Mutex
	pending []*readReq
	leading bool
}

type readReq struct {
	id   store.DeliveryID
	snd  store.Sending
	err  error
	done chan struct{}
}

func (g *groupRead) get(ctx context.Context, s *Service, id store.DeliveryID) (store.Sending, error) {
	r := &readReq{id: id, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, r)
	if g.leading {
		g.mu.Unlock()
		<-r.done
		return r.snd, r.err
	}
	g.leading = true
	for len(g.pending) > 0 {
		n := min(len(g.pending), maxBatch)
		batch := g.pending[:n:n]
		g.pending = g.pending[n:]
		g.mu.Unlock()
		ids := make([]store.DeliveryID, len(batch))
		for i, b := range batch {
			ids[i] = b.id
		}
		got, err := s.Store.GetSendings(context.WithoutCancel(ctx), ids)
		for _, b := range batch {
			snd, ok := got[b.id]
			switch {
			case err != nil:
				b.err = err
			case !ok:
				b.err = fmt.Errorf("webhooks: delivery %s: %w", b.id, store.ErrNotFound)
			default:
				b.snd = snd
			}
			close(b.done)
		}
		g.mu.Lock()
	}
	g.leading = false
	g.mu.Unlock()
	<-r.done
	return r.snd, r.err
}

// Result is how one attempt went.
type Result struct {
	At         time.Time
	Duration   time.Duration
	StatusCode int    // 0: no answer
	Body       string // the first 2 KB of the answer
	Err        error  // no answer: refused, timed out, blocked by the guard
	RetryAfter time.Duration
	HasRetry   bool // the answer carried a usable Retry-After
}

// Settler completes or reschedules the job of a delivery inside the transaction that records
// the attempt (*jobs.Job).
type Settler interface {
	CompleteIn(ctx context.Context, tx *store.Tx) error
	RetryIn(ctx context.Context, tx *store.Tx, errText string, at time.Time) error
}

// Disabled is the Result of a delivery whose receiver answered 410 Gone before: it is failed
// without a POST.
var errDisabled = errors.New("the receiver is disabled (it answered 410 Gone); enable it with PATCH")

// Record stores the attempt r of snd and what follows, with the job's settlement, in one
// transaction: delivered on a 2xx; failed on a 410 (which disables the receiver), after the
// last attempt of the schedule, or after a single resend attempt (once); else pending, retried
// after the schedule's next wait with jitter, or after the receiver's Retry-After on 429 and
// 503.
func (s *Service) Record(ctx context.Context, j Settler, snd store.Sending, r Result, once bool) error {
	a := store.DeliveryAttempt{At: r.At, StatusCode: r.StatusCode, DurationMS: r.Duration.Milliseconds(), Body: r.Body}
	if r.Err != nil {
		a.Error = r.Err.Error()
	}
	out := store.AttemptOutcome{Attempt: a}
	made := snd.Delivery.Attempts + 1
	sched := s.schedule()
	gone := r.StatusCode == 410
	switch {
	case r.Err == nil && r.StatusCode >= 200 && r.StatusCode < 300:
		out.Status = store.DeliveryDelivered
	case gone, once, made > len(sched):
		out.Status = store.DeliveryFailed
		if r.Err == nil && out.Attempt.Error == "" {
			out.Attempt.Error = fmt.Sprintf("answered %d", r.StatusCode)
		}
	default:
		out.Status = store.DeliveryPending
		wait := jitter(sched[made-1])
		if r.HasRetry && (r.StatusCode == 429 || r.StatusCode == 503) {
			wait = min(r.RetryAfter, MaxRetryAfter)
		}
		next := r.At.Add(r.Duration).Add(wait) // counted from the answer (RFC 9110 §10.2.3)
		out.NextAt = &next
		if r.Err == nil {
			out.Attempt.Error = fmt.Sprintf("answered %d", r.StatusCode)
		}
	}
	rec := &record{j: j, snd: snd, out: out, gone: gone, at: r.At, done: make(chan error, 1)}
	return s.group.commit(ctx, s, rec)
}

// record is one attempt to store, with its job's settlement.
type record struct {
	j    Settler
	snd  store.Sending
	out  store.AttemptOutcome
	gone bool
	at   time.Time
	err  error // this record's own failure (its lease was lost); set by the leader
	done chan error
}

// groupCommit stores the attempts of many deliveries in one transaction (group commit): the
// first caller becomes the leader and commits what is queued, batch after batch, while the
// others wait for theirs. Under load a transaction carries tens of attempts, which is what
// lets one SQLite writer keep up with a thousand deliveries a second; idle, a batch is one.
type groupCommit struct {
	mu      sync.Mutex
	pending []*record
	leading bool
}

// maxBatch bounds the attempts of one transaction.
const maxBatch = 256

func (g *groupCommit) commit(ctx context.Context, s *Service, r *record) error {
	g.mu.Lock()
	g.pending = append(g.pending, r)
	if g.leading {
		g.mu.Unlock()
		return <-r.done
	}
	g.leading = true
	for len(g.pending) > 0 {
		n := min(len(g.pending), maxBatch)
		batch := g.pending[:n:n]
		g.pending = g.pending[n:]
		g.mu.Unlock()
		err := s.commitBatch(context.WithoutCancel(ctx), batch)
		for _, b := range batch {
			if err != nil {
				b.done <- err
			} else {
				b.done <- b.err
			}
		}
		g.mu.Lock()
	}
	g.leading = false
	g.mu.Unlock()
	return <-r.done
}

// commitBatch stores a batch in one transaction. A record whose job lease was lost (another
// worker took the job) is left out, with the lease error as its own; any other failure fails
// the batch. The settled deliveries (the usual case: delivered at the first attempt) cost two
// statements for the whole batch on PostgreSQL: one completes their jobs, one records their
// attempts; a retry is rescheduled and recorded on its own.
func (s *Service) commitBatch(ctx context.Context, batch []*record) error {
	return s.Store.Tx(ctx, func(tx *store.Tx) error {
		var settled []*record
		var settledJobs []*jobs.Job
		for _, r := range batch {
			r.err = nil
			if r.out.Status == store.DeliveryPending {
				err := r.j.RetryIn(ctx, tx, r.out.Attempt.Error, *r.out.NextAt)
				if errors.Is(err, store.ErrConflict) {
					r.err = err // settled by nobody here: the worker that holds the job records it
					continue
				}
				if err != nil {
					return err
				}
				if _, err := tx.RecordAttempt(ctx, r.snd.Delivery.ID, r.out); err != nil {
					return err
				}
				continue
			}
			if j, ok := r.j.(*jobs.Job); ok {
				settled, settledJobs = append(settled, r), append(settledJobs, j)
				continue
			}
			err := r.j.CompleteIn(ctx, tx)
			if errors.Is(err, store.ErrConflict) {
				r.err = err
				continue
			}
			if err != nil {
				return err
			}
			settled = append(settled, r)
		}
		errs, err := jobs.CompleteAllIn(ctx, tx, settledJobs)
		if err != nil {
			return err
		}
		atts := make([]store.SettledAttempt, 0, len(settled))
		k := 0
		for _, r := range settled {
			if _, ok := r.j.(*jobs.Job); ok {
				r.err = errs[k]
				k++
				if r.err != nil {
					continue // its lease was lost: the worker that holds the job records it
				}
			}
			atts = append(atts, store.SettledAttempt{DeliveryID: r.snd.Delivery.ID, Outcome: r.out})
		}
		if err := tx.RecordSettled(ctx, atts); err != nil {
			return err
		}
		for _, r := range settled {
			if r.gone && r.err == nil {
				if err := tx.DisableReceiver(ctx, r.snd.Receiver.ID, "answered 410 Gone", r.at); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Defer puts a delivery's job back until at without an attempt: its receiver already has as
// many deliveries in flight as it may (a slow receiver holds its own share of the workers,
// not all of them).
func (s *Service) Defer(ctx context.Context, j Settler, at time.Time) error {
	return s.Store.Tx(ctx, func(tx *store.Tx) error {
		return j.RetryIn(ctx, tx, "the receiver has the most deliveries in flight it may", at)
	})
}

// Skip records that a delivery's receiver is disabled: the delivery fails without a POST.
func (s *Service) Skip(ctx context.Context, j Settler, snd store.Sending) error {
	return s.Record(ctx, j, snd, Result{At: s.now(), Err: errDisabled}, true)
}

// jitter spreads a wait by up to +20%, so that deliveries failing together do not retry
// together.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration(mrand.Int64N(int64(d)/5+1))
}

// ParseSchedule reads a retry schedule: waits separated by commas ("5s,5m,30m").
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, p := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("retry schedule %q: %q is not a duration", s, p)
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 20 {
		return nil, fmt.Errorf("retry schedule %q: between 1 and 20 waits", s)
	}
	return out, nil
}
