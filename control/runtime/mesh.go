package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/bus"
)

// The mesh carries requests between nodes over the bus: each node listens on one channel of its
// own ("node.<id>"), where it gets both the requests other nodes send it and the replies to its
// own. A request names the node to answer to and a correlation id; the handler replies any
// number of times (a chat reply streams its deltas) and marks its last reply final. A request
// to this node itself skips the bus and runs the same handler.
//
// Pub/sub is fire-and-forget: a caller bounds every request with its context, and what the
// request changed is read back from the store, never from the reply alone.

// publishTimeout bounds one reply on the bus.
const publishTimeout = 5 * time.Second

// nodeChannel is the bus channel of a node.
func nodeChannel(node string) string { return "node." + node }

// envelope is one message on a node's channel.
type envelope struct {
	ID    string          `json:"id"`             // correlation id
	Kind  string          `json:"kind"`           // the request's kind, or "reply"
	From  string          `json:"from,omitempty"` // the node to reply to
	Body  json.RawMessage `json:"body,omitempty"`
	Final bool            `json:"final,omitempty"`
	Err   *RemoteError    `json:"error,omitempty"`
}

// RemoteError is an error that crossed the mesh: a stable code and a detail for people.
type RemoteError struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (e *RemoteError) Error() string { return "runtime: " + e.Code + ": " + e.Detail }

// Is makes a RemoteError match the sentinel of its code (errors.Is(err, ErrBusy)).
func (e *RemoteError) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// handler serves one kind of request: it calls reply for each answer, the last with final set
// (or with an error, which is final). It runs in a goroutine of its own.
type handler func(ctx context.Context, body json.RawMessage, reply func(body any, final bool, err error))

// mesh is the node's request channel.
type mesh struct {
	bus      bus.Bus
	self     string
	log      *slog.Logger
	handlers map[string]handler

	mu      sync.Mutex
	pending map[string]chan envelope
	sub     bus.Subscription
	ctx     context.Context
	wg      sync.WaitGroup
}

func newMesh(b bus.Bus, self string, log *slog.Logger) *mesh {
	return &mesh{bus: b, self: self, log: log, handlers: map[string]handler{}, pending: map[string]chan envelope{}}
}

// handle registers the handler of a kind; call it before start.
func (m *mesh) handle(kind string, h handler) { m.handlers[kind] = h }

// start subscribes to the node's channel; the mesh serves until ctx ends.
func (m *mesh) start(ctx context.Context) error {
	sub, err := m.bus.Subscribe(ctx, nodeChannel(m.self))
	if err != nil {
		return fmt.Errorf("runtime: subscribe to %s: %w", nodeChannel(m.self), err)
	}
	m.sub, m.ctx = sub, ctx
	m.wg.Add(1)
	go m.run()
	return nil
}

// close stops listening and waits for the handlers (whose context has ended).
func (m *mesh) close() {
	if m.sub != nil {
		m.sub.Close()
	}
	m.wg.Wait()
}

func (m *mesh) run() {
	defer m.wg.Done()
	for msg := range m.sub.Messages() {
		var e envelope
		if err := json.Unmarshal(msg.Payload, &e); err != nil || e.ID == "" {
			m.log.Warn("mesh: ignoring a malformed message", "err", err)
			continue
		}
		if e.Kind == "reply" {
			m.deliver(e)
			continue
		}
		m.serve(e, func(r envelope) {
			b, _ := json.Marshal(r)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), publishTimeout)
			defer cancel()
			if err := m.bus.Publish(ctx, nodeChannel(e.From), b); err != nil {
				m.log.Warn("mesh: cannot reply", "to", e.From, "kind", e.Kind, "err", err)
			}
		})
	}
}

// serve runs the handler of a request, sending its replies through send.
func (m *mesh) serve(e envelope, send func(envelope)) {
	h, ok := m.handlers[e.Kind]
	if !ok {
		send(envelope{ID: e.ID, Kind: "reply", Final: true, Err: &RemoteError{Code: "unknown_request", Detail: "no handler for " + e.Kind}})
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		var mu sync.Mutex // replies go out one at a time, in order
		finished := false
		reply := func(body any, final bool, err error) {
			mu.Lock()
			defer mu.Unlock()
			if finished {
				return
			}
			r := envelope{ID: e.ID, Kind: "reply", Final: final || err != nil}
			if err != nil {
				r.Err = toRemote(err)
			} else if body != nil {
				b, merr := json.Marshal(body)
				if merr != nil {
					r.Err, r.Final = &RemoteError{Code: "internal", Detail: merr.Error()}, true
				}
				r.Body = b
			}
			finished = r.Final
			send(r)
		}
		h(m.ctx, e.Body, reply)
		reply(nil, true, nil) // a handler that returned without a final reply

	}()
}

func (m *mesh) deliver(e envelope) {
	m.mu.Lock()
	ch := m.pending[e.ID]
	m.mu.Unlock()
	if ch == nil {
		return // the caller gave up
	}
	select {
	case ch <- e:
	default:
		m.log.Warn("mesh: a caller is not reading its replies; dropping one", "id", e.ID)
	}
}

// call sends a request of kind to node and passes each reply body to onReply until the final
// one, whose body it returns. ctx bounds the whole exchange.
func (m *mesh) call(ctx context.Context, node, kind string, body any, onReply func(json.RawMessage)) (json.RawMessage, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	id := newCorrelation()
	ch := make(chan envelope, 256)
	m.mu.Lock()
	m.pending[id] = ch
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.pending, id)
		m.mu.Unlock()
	}()
	e := envelope{ID: id, Kind: kind, From: m.self, Body: raw}
	if node == m.self {
		m.serve(e, m.deliver)
	} else {
		b, _ := json.Marshal(e)
		if err := m.bus.Publish(ctx, nodeChannel(node), b); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			if node != m.self {
				return nil, fmt.Errorf("%w: node %s did not answer %s: %v", ErrUnreachable, node, kind, ctx.Err())
			}
			return nil, ctx.Err()
		case r := <-ch:
			if r.Err != nil {
				return nil, r.Err
			}
			if r.Final {
				return r.Body, nil
			}
			if onReply != nil {
				onReply(r.Body)
			}
		}
	}
}

// toRemote turns an error into its wire form, keeping the code of a known sentinel.
func toRemote(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	for code, s := range sentinels {
		if errors.Is(err, s) {
			return &RemoteError{Code: code, Detail: err.Error()}
		}
	}
	return &RemoteError{Code: "internal", Detail: err.Error()}
}

func newCorrelation() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
