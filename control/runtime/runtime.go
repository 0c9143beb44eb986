// Package runtime runs conversations on a node: it builds the engine (package session) of a
// conversation from its stored agent definition, feeds what the engine produces to the store
// (transcript lines in seq order, turn metrics, the end with its cost and event), and lets any
// node reach the one that runs a conversation, over the bus: steering commands, chat messages
// with their streamed replies, placing calls on a media node, and the wake-ups of live
// transcript readers.
//
// A call is owned by exactly one node while it is live; the bus holds that ownership as a key
// with a time to live that the owner keeps fresh. A chat is owned by no node: it is kept in the
// store between its messages, and the node that answers one holds its lease in the store for
// that time only (see chat.go), so restarts and dead nodes end no chat. The store is the
// record: a reader on any node reads lines from it, so none is skipped or repeated, whichever
// node wrote them.
//
// The runtime must never sit on the media path (the engine and the SIP and WebRTC services do),
// never block the engine's goroutines (its sink only queues), and never answer HTTP: the API
// package maps its errors to problems.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// Providers hands out the provider adapters by name (package providers implements it).
type Providers interface {
	LLM(provider string) (llm.Client, error)
	STT(provider string) (stt.Recognizer, error)
	TTS(provider string) (tts.Synthesizer, error)
}

// Options configure a Runtime.
type Options struct {
	// NodeID names this node on the bus. Required.
	NodeID string
	Store  *store.Store
	Bus    bus.Bus
	// Providers serve live conversations; TestProviders serve test-mode ones (made with a test
	// key), normally the fakes (NewTestProviders). Either may be nil: conversations of that
	// mode then fail to start with ErrProvider.
	Providers     Providers
	TestProviders Providers
	// DefaultLLM, DefaultSTT and DefaultTTS are the providers of a definition that says
	// "default" (defaults: openai, deepgram, elevenlabs); LLMModels the model of each LLM
	// provider for a definition whose model is "default".
	DefaultLLM, DefaultSTT, DefaultTTS string
	LLMModels                          map[string]string
	// Media says this node runs the media role: it takes calls (phone through Dialer, browser
	// through WebCalls, and test-mode calls, which need neither).
	Media    bool
	Dialer   Dialer
	WebCalls WebCalls
	// MediaNodes lists the other nodes that run the media role (from the cluster registry);
	// nil means none.
	MediaNodes func() []string
	// DataDir holds recordings and attachments (shared by every node of a deployment).
	DataDir string
	// NoRecording turns call recording off (PARLEY_RECORD=false).
	NoRecording bool
	Pricing     *Pricing
	// ChatMaxTurns is a chat's length in messages (default 200).
	ChatMaxTurns int
	// CalleePace is how long the simulated callee of a test call waits before each of its lines
	// (default 1 s); RingFor how long a test call rings (default 300 ms).
	CalleePace, RingFor time.Duration
	// OwnerTTL is how long ownership of a conversation lasts without refresh (default 30 s).
	OwnerTTL time.Duration
	// ChatLeaseTTL is how long a node's hold on a chat whose message it answers lasts without
	// renewal (default 20 s): a node that dies mid-message blocks its chat that long.
	ChatLeaseTTL time.Duration
	// ChatIdleTimeout ends a chat that has had no message for that long (0: never).
	ChatIdleTimeout time.Duration
	Metrics         *session.Metrics
	Log             *slog.Logger
	Now             func() time.Time
	// Tools makes the HTTP and MCP tools of a conversation from its definition's
	// references.tools (issue 17); nil: conversations have none.
	Tools ToolSource
	// Knowledge retrieves from agents' knowledge bases (issue 16); nil: agents have none.
	// KnowledgeTokens is the budget of retrieved text in one LLM request (default 1,500).
	Knowledge       Knowledge
	KnowledgeTokens int
}

// ToolSource makes the tools of a conversation: their declarations for the LLM and the runner
// that calls them. It reads what was stored when the tools were saved; it reaches no server.
type ToolSource interface {
	Tools(ctx context.Context, c store.Conversation, names []string) ([]session.ToolSpec, session.ToolRunner, error)
}

// Runtime runs the conversations of one node.
type Runtime struct {
	o       Options
	store   *store.Store
	bus     bus.Bus
	log     *slog.Logger
	pricing Pricing
	mesh    *mesh
	hub     *hub

	mu     sync.Mutex
	lives  map[store.ConversationID]*live
	closed bool

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started atomic.Bool
	once    sync.Once
}

// New checks the options and returns a runtime; Start makes it serve.
func New(o Options) (*Runtime, error) {
	if o.NodeID == "" || o.Store == nil || o.Bus == nil {
		return nil, errors.New("runtime: NodeID, Store and Bus are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DefaultLLM == "" {
		o.DefaultLLM = "openai"
	}
	if o.DefaultSTT == "" {
		o.DefaultSTT = "deepgram"
	}
	if o.DefaultTTS == "" {
		o.DefaultTTS = "elevenlabs"
	}
	if o.LLMModels == nil {
		o.LLMModels = map[string]string{"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}
	}
	if o.ChatMaxTurns <= 0 {
		o.ChatMaxTurns = 200
	}
	if o.CalleePace <= 0 {
		o.CalleePace = time.Second
	}
	if o.RingFor <= 0 {
		o.RingFor = 300 * time.Millisecond
	}
	if o.OwnerTTL <= 0 {
		o.OwnerTTL = 30 * time.Second
	}
	if o.ChatLeaseTTL <= 0 {
		o.ChatLeaseTTL = 20 * time.Second
	}
	rt := &Runtime{o: o, store: o.Store, bus: o.Bus, log: o.Log.With("node", o.NodeID), pricing: DefaultPricing,
		lives: map[store.ConversationID]*live{}}
	if o.Pricing != nil {
		rt.pricing = *o.Pricing
	}
	rt.mesh = newMesh(o.Bus, o.NodeID, rt.log)
	rt.hub = newHub(o.Bus, rt.log)
	rt.mesh.handle(kindPlace, rt.handlePlace)
	rt.mesh.handle(kindCommand, rt.handleCommand)
	rt.mesh.handle(kindWebCall, rt.handleWebCall)
	rt.mesh.handle(kindListen, rt.handleListen)
	rt.mesh.handle(kindEnd, rt.handleEnd)
	return rt, nil
}

// Start subscribes to the node's bus channels and starts refreshing ownership.
func (rt *Runtime) Start(ctx context.Context) error {
	rt.ctx, rt.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := rt.hub.start(rt.ctx); err != nil {
		rt.cancel()
		return err
	}
	if err := rt.mesh.start(rt.ctx); err != nil {
		rt.hub.close()
		rt.cancel()
		return err
	}
	rt.started.Store(true)
	rt.wg.Add(2)
	go rt.refreshOwnership()
	go func() {
		defer rt.wg.Done()
		if n, err := rt.RemoveOrphanRecordings(rt.ctx); err != nil {
			rt.log.Warn("recording: cannot look for orphaned recordings", "err", err)
		} else if n > 0 {
			rt.log.Info("recording: removed recordings of conversations that do not exist", "files", n)
		}
	}()
	return nil
}

// NodeID returns the node's name.
func (rt *Runtime) NodeID() string { return rt.o.NodeID }

func (rt *Runtime) now() time.Time { return rt.o.Now() }

// closeBudget bounds Close: a node's shutdown must end within its drain timeout plus 5 s
// whatever state its conversations are in.
const closeBudget = 4 * time.Second

// Close ends the calls still live here (reason shutdown), waits for their ends to be stored,
// and stops. Chats are not ended: no node keeps one between its messages. It returns within closeBudget even if a conversation or the store does
// not let go (it logs what it left). It is idempotent.
func (rt *Runtime) Close() error {
	rt.once.Do(func() {
		start := time.Now()
		rt.mu.Lock()
		rt.closed = true
		lives := make([]*live, 0, len(rt.lives))
		for _, l := range rt.lives {
			lives = append(lives, l)
		}
		rt.mu.Unlock()
		budget := time.NewTimer(closeBudget - closeBudget/4)
		defer budget.Stop()
		for _, l := range lives {
			// In parallel and not waited for past the budget: a voice engine's End waits
			// for the engine to stop.
			go l.stop(session.EndShutdown)
		}
	wait:
		for _, l := range lives {
			select {
			case <-l.p.done:
			case <-budget.C:
				break wait
			}
		}
		if rt.cancel != nil {
			rt.cancel() // the persisters left store their end (shutdown) on a short deadline
		}
		if rt.started.Load() {
			rt.mesh.close()
			rt.hub.close()
		}
		done := make(chan struct{})
		go func() { rt.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeBudget - time.Since(start)):
			rt.log.Warn("runtime: closing took too long; leaving the rest", "live", rt.Live())
		}
	})
	return nil
}

// ownerKey is the bus key naming the node that runs a conversation.
func ownerKey(id store.ConversationID) string { return "conv.owner." + string(id) }

// Owner returns the node that runs a conversation, or ErrNotLive.
func (rt *Runtime) Owner(ctx context.Context, id store.ConversationID) (string, error) {
	rt.mu.Lock()
	_, here := rt.lives[id]
	rt.mu.Unlock()
	if here {
		return rt.o.NodeID, nil
	}
	b, err := rt.bus.Get(ctx, ownerKey(id))
	if errors.Is(err, bus.ErrNotFound) {
		return "", ErrNotLive
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return string(b), nil
}

// refreshOwnership keeps the ownership keys of the live conversations fresh, and their rows'
// updated_at, so that no other node takes them for lost.
func (rt *Runtime) refreshOwnership() {
	defer rt.wg.Done()
	t := time.NewTicker(rt.o.OwnerTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-t.C:
		}
		rt.mu.Lock()
		lives := make([]*live, 0, len(rt.lives))
		for _, l := range rt.lives {
			lives = append(lives, l)
		}
		rt.mu.Unlock()
		for _, l := range lives {
			ctx, cancel := context.WithTimeout(rt.ctx, 5*time.Second)
			if _, err := rt.bus.Refresh(ctx, ownerKey(l.conv.ID), []byte(rt.o.NodeID), rt.o.OwnerTTL); err != nil {
				rt.log.Warn("conversation: cannot refresh ownership", "conversation", l.conv.ID, "err", err)
			}
			if err := rt.store.TouchConversation(ctx, l.conv.ID, rt.now()); err != nil {
				rt.log.Warn("conversation: cannot touch", "conversation", l.conv.ID, "err", err)
			}
			cancel()
		}
	}
}

// register makes conv live on this node: it takes ownership and starts its persister. The
// returned live is removed when its end is stored.
func (rt *Runtime) register(ctx context.Context, conv store.Conversation) (*live, error) {
	rt.mu.Lock()
	if rt.closed || !rt.started.Load() {
		rt.mu.Unlock()
		return nil, fmt.Errorf("%w: node %s is stopping", ErrUnreachable, rt.o.NodeID)
	}
	if _, dup := rt.lives[conv.ID]; dup {
		rt.mu.Unlock()
		return nil, fmt.Errorf("runtime: conversation %s is live here already", conv.ID)
	}
	l := newLive(rt, conv)
	rt.lives[conv.ID] = l
	rt.mu.Unlock()
	ok, err := rt.bus.SetNX(ctx, ownerKey(conv.ID), []byte(rt.o.NodeID), rt.o.OwnerTTL)
	if err == nil && !ok {
		err = fmt.Errorf("runtime: conversation %s is live on another node", conv.ID)
	}
	if err == nil && conv.OwnerNode != rt.o.NodeID { // issue 20: an inbound call is created owned
		err = rt.store.SetConversationOwner(ctx, conv.ID, rt.o.NodeID)
	}
	if err != nil {
		rt.mu.Lock()
		delete(rt.lives, conv.ID)
		rt.mu.Unlock()
		return nil, err
	}
	rt.wg.Add(1)
	l.p.start(rt.ctx, func() {
		rt.unregister(l)
		rt.wg.Done()
	})
	return l, nil
}

// unregister forgets a live whose end is stored.
func (rt *Runtime) unregister(l *live) {
	l.cancel()
	rt.mu.Lock()
	if rt.lives[l.conv.ID] == l {
		delete(rt.lives, l.conv.ID)
	}
	rt.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rt.ctx), 5*time.Second)
	defer cancel()
	if _, err := rt.bus.CompareAndDelete(ctx, ownerKey(l.conv.ID), []byte(rt.o.NodeID)); err != nil {
		rt.log.Warn("conversation: cannot release ownership", "conversation", l.conv.ID, "err", err)
	}
	if l.conv.Channel == store.ChannelPhone || l.conv.Channel == store.ChannelVoice {
		rt.ReleaseCallSlot(ctx, l.conv.OrgID, l.conv.ID)
	}
	select {
	case <-l.commandsIdle(): // a command that ended the conversation reports first
	case <-ctx.Done():
	}
	rt.settleCommands(ctx, l.conv.ID)
	l.waitEngine()
}

// lookup returns the live conversation id of this node, or nil.
func (rt *Runtime) lookup(id store.ConversationID) *live {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.lives[id]
}

// Live reports how many conversations this node runs.
func (rt *Runtime) Live() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.lives)
}

// Watch returns a channel closed when conversation id has new stored lines or has ended, and
// its release. Take it before reading the lines (see hub.watch).
func (rt *Runtime) Watch(id store.ConversationID) (<-chan struct{}, func()) { return rt.hub.watch(id) }

// Call slots: the concurrent voice calls of an organization, counted on the bus. A slot is
// taken before a call is placed and given back once, when it ends (a per-call key makes the
// give-back happen once whichever node does it).
const slotTTL = 6 * time.Hour

func slotsKey(org store.OrgID) string { return "calls.active." + string(org) }

// CallSlots returns how many call slots an organization holds now (its voice calls going).
func (rt *Runtime) CallSlots(ctx context.Context, org store.OrgID) (int64, error) {
	b, err := rt.bus.Get(ctx, slotsKey(org))
	if errors.Is(err, bus.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(b), 10, 64)
}
func slotKey(id store.ConversationID) string      { return "calls.slot." + string(id) }
func dailyKey(org store.OrgID, day string) string { return "webcalls.day." + string(org) + "." + day }

// ErrTooMany says an organization has as many calls going as it may.
var ErrTooMany = errors.New("runtime: too many calls in progress")

// AcquireCallSlot takes a call slot for conversation id of org, or fails with ErrTooMany when
// limit (> 0) calls are going.
func (rt *Runtime) AcquireCallSlot(ctx context.Context, org store.OrgID, id store.ConversationID, limit int) error {
	n, err := rt.bus.IncrBy(ctx, slotsKey(org), 1, slotTTL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if limit > 0 && n > int64(limit) {
		_, _ = rt.bus.IncrBy(ctx, slotsKey(org), -1, 0)
		return ErrTooMany
	}
	if err := rt.bus.Set(ctx, slotKey(id), []byte("1"), slotTTL); err != nil {
		_, _ = rt.bus.IncrBy(ctx, slotsKey(org), -1, 0)
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return nil
}

// ReleaseCallSlot gives back the slot of conversation id, once.
func (rt *Runtime) ReleaseCallSlot(ctx context.Context, org store.OrgID, id store.ConversationID) {
	ok, err := rt.bus.CompareAndDelete(ctx, slotKey(id), []byte("1"))
	if err != nil || !ok {
		return
	}
	if n, err := rt.bus.IncrBy(ctx, slotsKey(org), -1, 0); err == nil && n < 0 {
		_, _ = rt.bus.IncrBy(ctx, slotsKey(org), -n, 0) // the counter expired and came back negative
	}
}

// CountDaily adds one to org's browser calls of the day of now and reports whether it stays
// within limit (0: no limit).
func (rt *Runtime) CountDaily(ctx context.Context, org store.OrgID, limit int) (bool, error) {
	n, err := rt.bus.IncrBy(ctx, dailyKey(org, rt.now().UTC().Format("20060102")), 1, 48*time.Hour)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return limit <= 0 || n <= int64(limit), nil
}

// ReapDeadNodes ends the conversations owned by nodes the cluster takes for dead (issue 22
// item 9: unseen for three heartbeats), without waiting for their ownership to expire: reason
// network_lost for a call that was live, failed for one that never started. Their slots are
// released and their ownership keys removed, so steering no longer goes to the dead node. It
// returns how many it ended. The worker role runs it every heartbeat.
func (rt *Runtime) ReapDeadNodes(ctx context.Context, dead func(node string) bool) (int, error) {
	owners, err := rt.store.ActiveOwners(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range owners {
		if node == rt.o.NodeID || !dead(node) {
			continue
		}
		cs, err := rt.store.ActiveConversationsOf(ctx, node, 100)
		if err != nil {
			return n, err
		}
		if len(cs) > 0 {
			rt.log.Warn("cluster: a node is lost; ending its calls", "node", node, "calls", len(cs))
		}
		for _, c := range cs {
			if err := rt.endLost(ctx, c); err != nil {
				return n, err
			}
			_, _ = rt.bus.CompareAndDelete(ctx, ownerKey(c.ID), []byte(node))
			n++
		}
	}
	return n, nil
}

// endLost ends a conversation whose node went away.
func (rt *Runtime) endLost(ctx context.Context, c store.Conversation) error {
	reason := session.EndFailed
	if c.Status == store.ConvInProgress {
		reason = session.EndNetworkLost
	}
	rec, err := rt.recoverRecording(c)
	if err != nil {
		rt.log.Warn("recording: cannot recover the recording of a lost conversation", "conversation", c.ID, "err", err)
	}
	if err := rt.storeEnd(ctx, c, reason, session.Cost{}, nil, rec, store.CallOutcome{}); err != nil {
		return err
	}
	rt.settleCommands(ctx, c.ID)
	rt.ReleaseCallSlot(ctx, c.OrgID, c.ID)
	rt.hub.notify(ctx, linesNote{ID: c.ID, Seq: c.LastSeq, Ended: true})
	return nil
}

// ReapLost ends the conversations that are not ended, were not touched for grace, and that no
// node owns any more (their node went away): reason network_lost for a call that was live,
// failed for one that never started. It returns how many it ended. The worker role runs it.
func (rt *Runtime) ReapLost(ctx context.Context, grace time.Duration) (int, error) {
	cs, err := rt.store.ActiveConversations(ctx, rt.now().Add(-grace), 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		if _, err := rt.Owner(ctx, c.ID); !errors.Is(err, ErrNotLive) {
			continue
		}
		if err := rt.endLost(ctx, c); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
