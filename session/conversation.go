package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/llm"
)

// State is where a conversation is in its turn-taking.
type State string

// Turn-taking states.
const (
	StateListening     State = "listening"
	StateUserSpeaking  State = "user_speaking"
	StateThinking      State = "thinking"
	StateAgentSpeaking State = "agent_speaking"
	StateEnded         State = "ended"
	// StateTakeover: a human speaks instead of the agent.
	StateTakeover State = "human_takeover"
)

// Sink receives what a conversation produces, for persistence and live readers. The engine calls
// it from its own goroutine; implementations must return quickly (buffer if they write to a
// database).
type Sink interface {
	LineAdded(l Line)
	Interim(text string)
	StateChanged(s State)
	TurnCompleted(m TurnMetrics)
	Ended(reason EndReason, cost Cost)
}

// AgentSayingSink is a Sink that also hears the agent's reply as it is spoken (issue 22 item
// 13: a page shows the agent's line live): each chunk of text (a sentence, mostly) when its
// audio starts to go out, with the number of the reply it belongs to. The complete line still
// comes by LineAdded, with only what was heard when the caller cut in. It is called from the
// speaker's goroutine and must return at once.
type AgentSayingSink interface {
	AgentSaying(reply int, text string)
}

// Errors of the text channel and of commands.
var (
	ErrEnded = errors.New("session: the conversation has ended")
	ErrBusy  = errors.New("session: the agent is still answering the last message")
)

// Options build a Conversation.
type Options struct {
	ID        string
	Agent     Agent
	Variables map[string]any
	LLM       llm.Client
	STT       stt.Recognizer  // voice only
	TTS       tts.Synthesizer // voice only
	Tools     ToolRunner      // HTTP and MCP tools; nil: none
	Knowledge Knowledge       // knowledge lookup; nil: none
	Sink      Sink            // nil: nothing recorded outside the engine
	Metrics   *Metrics        // nil: no Prometheus
	Vendors   Vendors         // the providers' names, for the metrics
	Log       *slog.Logger
	// VADAggressiveness 0-3 (default 2).
	VADAggressiveness int
	// PacerQueue bounds the output queue in frames (default 15, 300 ms). The speaker waits
	// for room, so a longer queue only holds memory: the rest of a reply waits in the TTS
	// stream.
	PacerQueue int
	// Clock paces the agent's audio out, shared with the other calls (no goroutine or timer per
	// call). Nil: media.SharedClock().
	Clock *media.Clock
	// Now and NewTimer are the conversation's time: the timestamps of its transcript and turn
	// metrics, and the timers of its turn-taking (endpointing, barge-in, silence timeout,
	// filler, the keypad's inter-digit wait, the maximum duration). Nil: time.Now and
	// time.NewTimer. Tests give a manual clock's (media/mediatest). The audio out is paced by
	// Clock, not by these.
	Now      func() time.Time
	NewTimer func(d time.Duration) media.PacerTimer
}

// Conversation is one live conversation, voice or text. Its state is owned by one goroutine
// (run); the media path only touches PushFrame's own state and non-blocking channels.
type Conversation struct {
	id      string
	agent   Agent
	system  string // rendered system prompt
	first   string // rendered first message
	llm     llm.Client
	stt     stt.Recognizer
	tts     tts.Synthesizer
	tools   ToolRunner
	know    Knowledge
	spec    specialistState // the specialist handed over to (handover.go)
	sink    Sink
	vendors Vendors
	met     *Metrics
	log     *slog.Logger
	opts    Options
	now     func() time.Time // the conversation's clock (Options.Now)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
	// doneCtx is cancelled right after done is closed (AfterDone).
	doneCtx    context.Context
	doneCancel context.CancelFunc
	start      time.Time

	transcript Transcript
	histMu     sync.Mutex
	history    []histEntry

	// Voice.
	port     AudioPort
	sttS     stt.Stream
	vad      *media.VAD
	out      *output
	spk      *speaker
	frameIn  frameTracker // PushFrame's own state (media goroutine)
	vadCh    chan vadEvent
	dtmfCh   chan rune
	endCh    chan EndReason
	respCh   chan respEvent
	spkCh    chan spkEvent
	cmdCh    chan *pendingCommand
	sttEvCh  <-chan stt.Event
	pushOK   atomic.Bool // PushFrame may feed the engine
	started  atomic.Bool // StartVoice has run
	textMode atomic.Bool
	taps     taps
	textCh   chan string
	takeCh   chan takeReq
	humanCh  chan string

	holdCh chan bool   // SetHold's changes, to the loop
	holdIn atomic.Bool // on hold: PushFrame drops the caller's audio (music on hold)

	// startGate says whether StartVoice may still run: 0 not yet, 1 it began, 2 the
	// conversation was abandoned before it (Abandon). Exactly one of the two wins.
	startGate atomic.Int32

	// Loop state (run goroutine only).
	state        State
	gen          int // response generation; stale worker events are dropped
	respCancel   context.CancelFunc
	respActive   bool
	finals       []string
	interim      string
	userSpeaking bool
	speechStart  time.Time
	speechEnd    time.Time
	turnN        int
	cur          TurnMetrics
	utts         []*utterance
	uttSeq       int
	pendingEnd   EndReason
	reprompts    int
	llmFailures  int
	ttsFailures  int
	bargeArmed   bool
	tEndpoint    timer
	tMaxWait     timer
	tSilence     timer
	tMaxDur      timer
	tBarge       timer
	tFiller      timer
	tDTMF        timer // the inter-digit timeout of a turn of keypad digits
	held         bool  // the caller put the call on hold: the agent neither listens nor speaks
	digitsN      int   // digits pressed in the turn of digits not yet answered
	toolsRunning int
	fillerIdx    int
	toolFiller   string // the filler of the tools running now ("": the agent's)
	turns        []TurnMetrics
	turnListed   bool // cur is in turns already
	takeover     *Takeover
	lastTurnEnd  time.Time

	// Shared, guarded.
	mu        sync.Mutex
	endReason EndReason
	pubState  State
	cost      Cost
	chatBusy  bool
	// chatTurn, while a chat message is answered, holds the turn's lines (the user's, then the
	// tools') until the reply is complete: a message either completes as one turn or leaves
	// nothing behind (see Send). Guarded by mu.
	chatTurn *[]Line
}

// New checks the options and renders the prompts: a missing placeholder value is an error
// (*MissingVariablesError) naming each one.
func New(o Options) (*Conversation, error) {
	if o.LLM == nil {
		return nil, errors.New("session: an LLM client is required")
	}
	a := o.Agent.WithDefaults()
	system, err := Render(a.SystemPrompt, o.Variables)
	if err != nil {
		return nil, err
	}
	first, err := Render(a.FirstMessage, o.Variables)
	if err != nil {
		return nil, err
	}
	for _, sp := range a.Specialists {
		if _, err := Render(sp.SystemPrompt, o.Variables); err != nil {
			return nil, err
		}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.PacerQueue <= 0 {
		o.PacerQueue = 15
	}
	if o.VADAggressiveness == 0 {
		o.VADAggressiveness = 2
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewTimer == nil {
		o.NewTimer = newSysTimer
	}
	doneCtx, doneCancel := context.WithCancel(context.Background())
	c := &Conversation{
		id: o.ID, agent: a, system: system, first: first,
		llm: o.LLM, stt: o.STT, tts: o.TTS, tools: o.Tools, know: o.Knowledge, sink: o.Sink, met: o.Metrics, vendors: o.Vendors,
		log: o.Log.With("conversation", o.ID), opts: o, now: o.Now,
		done:    make(chan struct{}),
		state:   StateListening,
		doneCtx: doneCtx, doneCancel: doneCancel,
		// The channels exist from the start, so a channel may report the end (ChannelEnded)
		// or queue a command even while StartVoice is still running.
		vadCh:   make(chan vadEvent, 32),
		dtmfCh:  make(chan rune, 32),
		endCh:   make(chan EndReason, 4),
		respCh:  make(chan respEvent, 16), // the responder waits for room
		spkCh:   make(chan spkEvent, 64),  // the speaker waits; the pacer's notices must not be dropped
		textCh:  make(chan string, 8),
		takeCh:  make(chan takeReq),
		humanCh: make(chan string, 16),
		cmdCh:   make(chan *pendingCommand, 32),
		holdCh:  make(chan bool, 8),
	}
	for _, t := range c.loopTimers() {
		t.newTimer = o.NewTimer
	}
	return c, nil
}

// ID returns the conversation's id.
func (c *Conversation) ID() string { return c.id }

// AfterDone arranges for f to run on its own goroutine once the conversation has ended (Done
// is closed), like context.AfterFunc; stop cancels it. A watcher so needs no goroutine of its
// own for the call's whole life.
func (c *Conversation) AfterDone(f func()) (stop func() bool) {
	return context.AfterFunc(c.doneCtx, f)
}

// Done is closed when the conversation has ended and every goroutine has stopped.
func (c *Conversation) Done() <-chan struct{} { return c.done }

// EndReason returns why the conversation ended ("" while it is live).
func (c *Conversation) EndReason() EndReason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endReason
}

// Transcript returns the lines so far.
func (c *Conversation) Transcript() []Line { return c.transcript.Lines() }

// Cost returns what the conversation has used so far.
func (c *Conversation) Cost() Cost {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.cost
	if c.sttS != nil {
		k.STTSeconds = c.sttS.Stats().AudioSent.Seconds()
	}
	if !c.start.IsZero() {
		k.CallSeconds = c.now().Sub(c.start).Seconds()
	}
	return k
}

// Turns returns the metrics of the completed turns (voice).
func (c *Conversation) Turns() []TurnMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]TurnMetrics(nil), c.turns...)
}

// StartVoice opens the recognizer, starts the pacer toward port and the engine's loop, and
// speaks the first message when the agent has one. ctx bounds the whole conversation.
func (c *Conversation) StartVoice(ctx context.Context, port AudioPort) error {
	if c.stt == nil || c.tts == nil {
		return errors.New("session: a voice conversation needs STT and TTS")
	}
	if !c.startGate.CompareAndSwap(0, 1) {
		return ErrEnded
	}
	vad, err := media.NewVAD(media.VADOptions{Rate: media.PipelineRate, Aggressiveness: c.opts.VADAggressiveness})
	if err != nil {
		c.startGate.Store(0) // not started: Abandon may still end it
		return err
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.start = c.now()
	c.port, c.vad = port, vad
	c.frameIn.init(c.agent.Turn)
	s, err := c.stt.Open(c.ctx, c.sttOptions())
	if err != nil {
		c.cancel()
		c.startGate.Store(0) // not started: Abandon may still end it
		return fmt.Errorf("session: open speech-to-text: %w", err)
	}
	c.sttS = s
	c.sttEvCh = s.Events()
	c.out = newOutput(c, port, c.opts.PacerQueue, c.opts.Clock)
	c.spk = newSpeaker(c)
	c.wg.Add(1)
	go c.spk.run()
	go c.run()
	c.pushOK.Store(true)
	c.started.Store(true)
	return nil
}

func (c *Conversation) sttOptions() stt.StreamOptions {
	return stt.StreamOptions{
		Language: c.agent.Language, Model: c.agent.STT.Model, SampleRate: media.PipelineRate,
		Endpointing: c.agent.STT.Endpointing, UtteranceEnd: c.agent.STT.UtteranceEnd,
		Interim: true, Keywords: c.agent.STT.Keywords,
	}
}

// PushFrame hands the engine one 20 ms frame of caller audio at media.PipelineRate. It is
// called from the media path: it runs the VAD, feeds the recognizer without blocking, and tells
// the loop only about speech starting and stopping. It allocates nothing.
func (c *Conversation) PushFrame(f *media.Frame) {
	if !c.pushOK.Load() || c.holdIn.Load() {
		return
	}
	c.taps.caller(f)
	pcm := f.PCM()
	voiced, err := c.vad.Process(pcm)
	if err != nil {
		return
	}
	_ = c.sttS.Write(pcm, voiced)
	if ev, ok := c.frameIn.step(voiced, c.now()); ok {
		select {
		case c.vadCh <- ev:
		default:
		}
	}
}

// PushDTMF reports a digit the caller pressed.
func (c *Conversation) PushDTMF(d rune) {
	if !c.pushOK.Load() {
		return
	}
	select {
	case c.dtmfCh <- d:
	default:
	}
}

// ChannelEnded reports that the channel ended the conversation (the caller hung up, media timed
// out, the network was lost). The engine does not hang up the port again.
func (c *Conversation) ChannelEnded(reason EndReason) {
	select {
	case c.endCh <- reason:
	default:
	}
}

// End ends the conversation from outside and waits for it to stop. A voice conversation that
// was never started is abandoned (see Abandon).
func (c *Conversation) End(reason EndReason) {
	if c.textMode.Load() {
		c.endText(reason)
		return
	}
	if c.Abandon(reason) || !c.started.Load() {
		return
	}
	select {
	case c.endCh <- reason:
	case <-c.done:
	}
	<-c.done
}

// Abandon ends a voice conversation whose StartVoice never ran: its channel went away before
// the call was answered (a 200 never acknowledged, a BYE or CANCEL before the ACK, a failed
// dial). The sink hears the end with reason and no cost, Done closes and the AfterDone hooks
// run, so whatever waits on the conversation (its recording, its persister) lets go; a later
// StartVoice fails with ErrEnded. It reports false and does nothing once StartVoice has begun
// (or for a text conversation): that conversation ends through ChannelEnded or End.
func (c *Conversation) Abandon(reason EndReason) bool {
	if c.textMode.Load() || !c.startGate.CompareAndSwap(0, 2) {
		return false
	}
	c.mu.Lock()
	c.state, c.pubState, c.endReason = StateEnded, StateEnded, reason
	c.mu.Unlock()
	c.drainCommands()
	c.log.Info("conversation abandoned before it started", "reason", reason)
	if c.sink != nil {
		c.sink.StateChanged(StateEnded)
		c.sink.Ended(reason, Cost{})
	}
	close(c.done)
	c.doneCancel()
	return true
}

// run is the conversation's loop: it owns the turn-taking state.
func (c *Conversation) run() {
	// The loop is the last to go: once it returns, it waits for the speaker and the workers it
	// started (no goroutine of its own waits for them) and closes done.
	defer func() {
		c.wg.Wait()
		close(c.done)
		c.doneCancel()
	}()
	if c.agent.MaxDuration > 0 {
		c.tMaxDur.set(c.agent.MaxDuration)
	}
	if c.first != "" {
		c.speakUtterance(c.first, uttGreeting, nil)
	} else {
		c.enterListening()
	}
	for {
		select {
		case <-c.ctx.Done():
			c.finish(EndFailed, false)
			return
		case r := <-c.endCh:
			c.finish(r, false)
			return
		case ev := <-c.vadCh:
			c.onVAD(ev)
		case ev, ok := <-c.sttEvCh:
			if !ok {
				c.sttEvCh = nil
				c.reopenSTT()
				continue
			}
			c.onSTT(ev)
		case ev := <-c.respCh:
			c.onResponse(ev)
		case ev := <-c.spkCh:
			c.onSpeaker(ev)
		case pc := <-c.cmdCh:
			c.onCommand(pc)
		case d := <-c.dtmfCh:
			c.onDTMF(d)
		case text := <-c.textCh:
			c.onText(text)
		case r := <-c.takeCh:
			c.onTakeover(r)
		case text := <-c.humanCh:
			if c.takeover != nil {
				c.takeoverLine(RoleAgent, text, map[string]any{"human": true})
			}
		case <-c.tEndpoint.C():
			c.tEndpoint.fired()
			c.endTurn("vad")
		case <-c.tMaxWait.C():
			c.tMaxWait.fired()
			c.endTurn("max_wait")
		case <-c.tSilence.C():
			c.tSilence.fired()
			c.onSilenceTimeout()
		case <-c.tMaxDur.C():
			c.tMaxDur.fired()
			c.finish(EndMaxDuration, true)
			return
		case <-c.tBarge.C():
			c.tBarge.fired()
			c.onBargeTimer()
		case <-c.tFiller.C():
			c.tFiller.fired()
			c.onFiller()
		case <-c.tDTMF.C():
			c.tDTMF.fired()
			c.dtmfTurn("dtmf_timeout")
		case on := <-c.holdCh:
			c.onHold(on)
		}
		if c.state == StateEnded {
			return
		}
	}
}

// sinkState returns the state as last published (safe from any goroutine).
func (c *Conversation) sinkState() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pubState
}

// State returns the conversation's turn-taking state.
func (c *Conversation) State() State { return c.sinkState() }

// setState moves the state machine. In a voice conversation only the loop calls it; in a text
// one the message being answered and an end from outside may race, so the state is written
// under the lock (and an ended conversation stays ended).
func (c *Conversation) setState(s State) {
	c.mu.Lock()
	if c.state == s || c.state == StateEnded {
		c.mu.Unlock()
		return
	}
	c.state, c.pubState = s, s
	c.mu.Unlock()
	if c.sink != nil {
		c.sink.StateChanged(s)
	}
}

// finish ends the conversation once. hangup says the engine decided it, so the port is hung up.
func (c *Conversation) finish(reason EndReason, hangup bool) {
	if c.state == StateEnded {
		return
	}
	c.pushOK.Store(false)
	c.listTurn(c.respActive || len(c.utts) > 0)
	c.cancelResponse()
	for _, u := range c.utts {
		if u.cmd != nil {
			u.cmd.reply(CommandResult{Status: CommandFailed, Reason: "the conversation ended"})
			u.cmd = nil
		}
	}
	c.spk.close()
	c.out.close()
	c.setState(StateEnded)
	// A reply cut off by the end (the caller hung up mid-sentence) is recorded with the part the
	// caller heard, as barge-in records it. The state is already ended, so finishing the
	// utterances moves it nowhere.
	sent := c.out.sentFrames()
	for _, u := range append([]*utterance(nil), c.utts...) {
		c.utteranceFinished(u, !u.complete || !u.allQueued || sent < u.endFrame)
	}
	c.mu.Lock()
	c.endReason = reason
	c.mu.Unlock()
	for _, t := range c.loopTimers() {
		t.stop()
	}
	if hangup && c.port != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.port.Hangup(ctx, reason); err != nil && !errors.Is(err, ErrNotSupported) {
			c.log.Warn("hang up failed", "err", err)
		}
		cancel()
	}
	if c.sttS != nil {
		c.sttS.Close()
	}
	c.drainCommands()
	cost := c.Cost()
	c.log.Info("conversation ended", "reason", reason, "turns", c.turnN)
	if c.sink != nil {
		c.sink.Ended(reason, cost)
	}
	c.cancel()
}
