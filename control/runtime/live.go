package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// live is a conversation running on this node: its persister from the start, its engine once
// the call is answered (or the chat opened).
type live struct {
	rt     *Runtime
	conv   store.Conversation
	p      *persister
	ctx    context.Context // ends once the end is stored, or when a call that never started is stopped
	cancel context.CancelFunc

	mu   sync.Mutex // held by Send on a text engine, so that End waits for the answer
	emu  sync.Mutex // guards the fields below
	sess *session.Conversation
	text bool
	// simulated: a test-mode call, run in text against a simulated callee.
	simulated  atomic.Bool
	sendCancel context.CancelFunc
	busy       atomic.Bool
	stopped    atomic.Bool

	cmdMu   sync.Mutex
	cmdN    int           // commands being carried out
	cmdIdle chan struct{} // closed when cmdN drops to 0
}

// beginCommand and endCommand bracket a command being carried out: the conversation's end is
// stored after the command's outcome (the persister holds it, bounded by commandWait), so a
// client that sees the end finds the command settled; and the commands still pending when the
// conversation ends are settled only after those.
func (l *live) beginCommand() {
	l.p.holdEnd()
	l.cmdMu.Lock()
	l.cmdN++
	l.cmdMu.Unlock()
}

func (l *live) endCommand() {
	l.cmdMu.Lock()
	l.cmdN--
	if l.cmdN == 0 && l.cmdIdle != nil {
		close(l.cmdIdle)
		l.cmdIdle = nil
	}
	l.cmdMu.Unlock()
	l.p.releaseEnd()
}

// commandsIdle is closed once no command is being carried out.
func (l *live) commandsIdle() <-chan struct{} {
	l.cmdMu.Lock()
	defer l.cmdMu.Unlock()
	if l.cmdN == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if l.cmdIdle == nil {
		l.cmdIdle = make(chan struct{})
	}
	return l.cmdIdle
}

func newLive(rt *Runtime, conv store.Conversation) *live {
	l := &live{rt: rt, conv: conv, p: newPersister(rt, conv)}
	l.ctx, l.cancel = context.WithCancel(rt.ctx)
	return l
}

func (l *live) engine() *session.Conversation {
	l.emu.Lock()
	defer l.emu.Unlock()
	return l.sess
}

func (l *live) setEngine(s *session.Conversation, text bool) {
	l.emu.Lock()
	l.sess, l.text = s, text
	l.emu.Unlock()
}

// stop ends the conversation with reason: the engine's End when it runs (a text engine's after
// the answer in progress, which is cancelled), else the end is recorded at once and whatever
// was starting it (a dial, a simulation) is cancelled.
func (l *live) stop(reason session.EndReason) {
	l.stopped.Store(true)
	l.emu.Lock()
	sess, text, cancelSend := l.sess, l.text, l.sendCancel
	l.emu.Unlock()
	if sess == nil {
		l.p.end(reason, session.Cost{})
		l.cancel()
		return
	}
	if text {
		if cancelSend != nil && reason != session.EndAPI {
			cancelSend()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	sess.End(reason)
	if text {
		// A text engine ends at once; the sink heard it. (A voice engine reports through the sink too.)
		return
	}
}

// waitEngine waits (briefly) for the engine's goroutines once the end is stored.
func (l *live) waitEngine() {
	if s := l.engine(); s != nil {
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			l.rt.log.Warn("conversation: the engine did not stop", "conversation", l.conv.ID)
		}
	}
}

// build makes the engine of the conversation from its stored agent definition: voice with
// speech-to-text and text-to-speech, or text. sink receives what it produces (the persister, or
// a wrapper of it).
func (rt *Runtime) build(ctx context.Context, c store.Conversation, voice bool, sink session.Sink, tweaks ...func(*session.Agent)) (*session.Conversation, error) {
	ag, err := rt.store.SystemAgents().GetIncludingDeleted(ctx, c.AgentID)
	if err != nil {
		return nil, fmt.Errorf("runtime: the conversation's agent: %w", err)
	}
	def, err := LoadDefinition(ctx, rt.store.Queries, ag, c.AgentVersion)
	if err != nil {
		return nil, err
	}
	return rt.buildFrom(ctx, c, def, voice, sink, tweaks...)
}

// buildFrom is build with the conversation's agent definition loaded already.
func (rt *Runtime) buildFrom(ctx context.Context, c store.Conversation, def *agentdef.Definition, voice bool, sink session.Sink, tweaks ...func(*session.Agent)) (*session.Conversation, error) {
	vars := map[string]any{}
	if len(c.Variables) > 0 {
		if err := json.Unmarshal(c.Variables, &vars); err != nil {
			return nil, fmt.Errorf("runtime: stored variables: %w", err)
		}
	}
	a, err := AgentFor(def, c.Language, vars)
	if err != nil {
		return nil, err
	}
	provs := rt.o.Providers
	if c.Mode == store.ModeTest {
		provs = rt.o.TestProviders
	}
	if provs == nil {
		return nil, fmt.Errorf("%w: no providers for %s conversations on this node", ErrProvider, c.Mode)
	}
	llmName := provider(def.Agent.LLM.Provider, rt.o.DefaultLLM)
	client, err := provs.LLM(llmName)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	if a.LLMModel == "" {
		a.LLMModel = rt.o.LLMModels[strings.ToLower(llmName)]
	}
	if c.Channel == store.ChannelChat || c.Channel == store.ChannelWhatsApp {
		a.MaxTurns = rt.o.ChatMaxTurns
	}
	for _, tw := range tweaks { // issue 19: a messaging-app conversation's opener
		tw(&a)
	}
	know, err := rt.knowledgeFor(ctx, c, def, &a) // issue 16
	if err != nil {
		return nil, err
	}
	o := session.Options{ID: string(c.ID), Agent: a, LLM: client, Sink: sink, Metrics: rt.o.Metrics, Log: rt.log,
		Vendors: session.Vendors{LLM: strings.ToLower(llmName)}}
	if know != nil { // a nil *turnKnowledge would make a non-nil interface
		o.Knowledge = know
	}
	if rt.o.Tools != nil && len(def.References.Tools) > 0 { // issue 17
		specs, runner, err := rt.o.Tools.Tools(ctx, c, def.References.Tools)
		if err != nil {
			rt.log.Warn("conversation: its tools cannot be loaded; it goes on without them", "conversation", c.ID, "err", err)
		} else if runner != nil {
			o.Agent.Tools = append(o.Agent.Tools, specs...)
			o.Tools = runner
		}
	}
	if r := doNotCallFor(rt.store, rt.log, c, def, &o.Agent, o.Tools); r != nil { // issue 15
		o.Tools = r
	}
	if voice {
		sttName, ttsName := provider(def.Agent.STT.Provider, rt.o.DefaultSTT), provider(def.Agent.TTS.Provider, rt.o.DefaultTTS)
		o.Vendors.STT, o.Vendors.TTS = strings.ToLower(sttName), strings.ToLower(ttsName)
		if o.STT, err = provs.STT(sttName); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrProvider, err)
		}
		if o.TTS, err = provs.TTS(ttsName); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrProvider, err)
		}
	}
	return session.New(o)
}

// Turn is one chat exchange: the person's line and the agent's reply.
type Turn struct {
	User      session.Line `json:"user"`
	Agent     session.Line `json:"agent"`
	Ended     bool         `json:"ended"`
	EndReason string       `json:"end_reason,omitempty"`
	Usage     llm.Usage    `json:"usage"`
}

// send answers one message on a text engine of this node.
func (l *live) send(ctx context.Context, text string, images []llm.Image, onDelta func(string)) (Turn, error) {
	if !l.busy.CompareAndSwap(false, true) {
		return Turn{}, ErrBusy
	}
	defer l.busy.Store(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	sess := l.engine()
	if sess == nil {
		return Turn{}, ErrNotAnswered
	}
	if sess.EndReason() != "" || l.stopped.Load() {
		return Turn{}, ErrEnded
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.emu.Lock()
	l.sendCancel = cancel
	l.emu.Unlock()
	defer func() {
		l.emu.Lock()
		l.sendCancel = nil
		l.emu.Unlock()
	}()
	t, err := sess.Send(sctx, text, images, onDelta)
	switch {
	case errors.Is(err, session.ErrBusy):
		return Turn{}, ErrBusy
	case errors.Is(err, session.ErrEnded):
		return Turn{}, ErrEnded
	case errors.Is(err, session.ErrLengthReached):
		return Turn{}, ErrLengthReached
	case err != nil && ctx.Err() != nil:
		return Turn{}, ctx.Err()
	case err != nil:
		return Turn{}, fmt.Errorf("%w: the agent could not answer: %v", ErrProvider, err)
	}
	return Turn{User: t.User, Agent: t.Agent, Ended: t.Ended, EndReason: string(t.EndReason), Usage: t.Usage}, nil
}
