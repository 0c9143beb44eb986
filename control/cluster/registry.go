// Package cluster keeps track of the parley nodes that share one bus.
//
// Each node announces itself on a bus channel at a fixed interval (the heartbeat, 1 s by
// default) and answers newcomers, and keeps a key with a time to live that names it. Peers()
// lists the nodes heard from within three heartbeats; Dead(id) says a node was not (issue 22:
// its calls are ended and dialling skips it). With the
// in-process bus a node only ever sees itself; with Redis it sees every node. It must never block
// the caller: announcements run in the registry's own goroutine.
package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/bus"
)

// Channel is the bus channel nodes announce themselves on.
const Channel = "cluster.nodes"

// Node describes one node of the cluster.
type Node struct {
	ID        string    `json:"id"`
	Roles     string    `json:"roles"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
	// Hello is set on a node's first announcement so that others answer at once.
	Hello bool `json:"hello,omitempty"`
}

// DefaultInterval is the heartbeat: a node unseen for three of them is taken for dead, so
// dialling skips it within 5 s.
const DefaultInterval = time.Second

// Registry announces this node and collects its peers.
type Registry struct {
	bus      bus.Bus
	self     Node
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu        sync.Mutex
	peers     map[string]Node
	listening time.Time // when Start subscribed; zero before

	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started bool
}

// Options configure a Registry.
type Options struct {
	NodeID   string
	Roles    string
	Interval time.Duration // the heartbeat; default DefaultInterval
	Logger   *slog.Logger
	Now      func() time.Time
}

// New returns a registry for this node; Start begins announcing.
func New(b bus.Bus, o Options) *Registry {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Registry{
		bus: b, interval: o.Interval, log: o.Logger, now: o.Now,
		self:  Node{ID: o.NodeID, Roles: o.Roles, StartedAt: o.Now().UTC()},
		peers: map[string]Node{},
		stop:  make(chan struct{}), done: make(chan struct{}),
	}
}

// Self returns this node.
func (r *Registry) Self() Node {
	n := r.self
	n.LastSeen = r.now().UTC() // this node sees itself now
	return n
}

// Start subscribes to the cluster channel and announces this node. It returns once the
// subscription is live; the registry runs until Close.
func (r *Registry) Start(ctx context.Context) error {
	sub, err := r.bus.Subscribe(ctx, Channel)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.started, r.listening = true, r.now()
	r.mu.Unlock()
	go r.run(sub)
	return nil
}

func (r *Registry) run(sub bus.Subscription) {
	defer close(r.done)
	defer sub.Close()
	r.announce(true)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.announce(false)
		case m, ok := <-sub.Messages():
			if !ok {
				return
			}
			var n Node
			if err := json.Unmarshal(m.Payload, &n); err != nil || n.ID == "" {
				r.log.Warn("cluster: ignoring bad announcement", "err", err)
				continue
			}
			if n.ID == r.self.ID {
				continue
			}
			n.LastSeen = r.now().UTC()
			r.mu.Lock()
			_, known := r.peers[n.ID]
			r.peers[n.ID] = n
			r.mu.Unlock()
			if !known {
				r.log.Info("cluster: node joined", "node", n.ID, "roles", n.Roles)
			}
			if n.Hello {
				r.announce(false) // answer a newcomer at once so it need not wait an interval
			}
		}
	}
}

func (r *Registry) announce(hello bool) {
	n := r.self
	n.Hello = hello
	n.LastSeen = r.now().UTC()
	b, _ := json.Marshal(n)
	ctx, cancel := context.WithTimeout(context.Background(), r.interval)
	defer cancel()
	if err := r.bus.Set(ctx, "node:"+n.ID, b, 3*r.interval); err != nil {
		r.log.Warn("cluster: cannot refresh node key", "err", err)
	}
	if err := r.bus.Publish(ctx, Channel, b); err != nil {
		r.log.Warn("cluster: cannot announce", "err", err)
	}
}

// Peers returns the other nodes heard from within three intervals, sorted by id.
func (r *Registry) Peers() []Node {
	cutoff := r.now().Add(-3 * r.interval)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []Node{}
	for id, n := range r.peers {
		if n.LastSeen.Before(cutoff) {
			delete(r.peers, id)
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Interval returns the heartbeat.
func (r *Registry) Interval() time.Duration { return r.interval }

// Dead reports whether node id is taken for dead: it is not this node, and this registry has
// listened for three heartbeats without hearing it in the last three. A node not heard from
// since this one started counts as dead too (it died before). Before three heartbeats of
// listening, no node is dead: this one may just not have heard the others yet.
func (r *Registry) Dead(id string) bool {
	if id == "" || id == r.self.ID {
		return false
	}
	cutoff := r.now().Add(-3 * r.interval)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.listening.After(cutoff) {
		return false
	}
	n, ok := r.peers[id]
	return !ok || n.LastSeen.Before(cutoff)
}

// Close stops announcing and waits for the registry's goroutine. It is safe to call twice.
func (r *Registry) Close() error {
	r.once.Do(func() {
		close(r.stop)
		r.mu.Lock()
		started := r.started
		r.mu.Unlock()
		if !started {
			close(r.done)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.bus.Delete(ctx, "node:"+r.self.ID)
	})
	<-r.done
	return nil
}
