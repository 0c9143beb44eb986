package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
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

// agentSaying passes a chunk that starts playing to the sink, when it listens.
func (c *Conversation) agentSaying(reply int, text string) {
	if as, ok := c.sink.(AgentSayingSink); ok {
		as.AgentSaying(reply, text)
	}
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

// histEntry is one LLM message with the response generation that produced it.
type histEntry struct {
	msg llm.Message
	gen int
}

type vadEvent struct {
	speech bool
	at     time.Time
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
	doneCtx, doneCancel := context.WithCancel(context.Background())
	c := &Conversation{
		id: o.ID, agent: a, system: system, first: first,
		llm: o.LLM, stt: o.STT, tts: o.TTS, tools: o.Tools, know: o.Knowledge, sink: o.Sink, met: o.Metrics, vendors: o.Vendors,
		log: o.Log.With("conversation", o.ID), opts: o,
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
		k.CallSeconds = time.Since(c.start).Seconds()
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
	c.start = time.Now()
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
	if ev, ok := c.frameIn.step(voiced, time.Now()); ok {
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

// frameTracker turns per-frame VAD decisions into debounced speech start/stop events.
type frameTracker struct {
	startN, stopN int
	voicedRun     int
	silentRun     int
	speaking      bool
	firstVoiced   time.Time
	firstSilent   time.Time
}

func (t *frameTracker) init(ts TurnSettings) {
	t.startN = int(ts.SpeechStart / media.FrameDuration)
	if t.startN < 1 {
		t.startN = 1
	}
	t.stopN = int(ts.SpeechStop / media.FrameDuration)
	if t.stopN < 1 {
		t.stopN = 1
	}
}

func (t *frameTracker) step(voiced bool, now time.Time) (vadEvent, bool) {
	if voiced {
		if t.voicedRun == 0 {
			t.firstVoiced = now.Add(-media.FrameDuration)
		}
		t.voicedRun++
		t.silentRun = 0
		if !t.speaking && t.voicedRun >= t.startN {
			t.speaking = true
			return vadEvent{speech: true, at: t.firstVoiced}, true
		}
		return vadEvent{}, false
	}
	if t.silentRun == 0 {
		t.firstSilent = now.Add(-media.FrameDuration)
	}
	t.silentRun++
	t.voicedRun = 0
	if t.speaking && t.silentRun >= t.stopN {
		t.speaking = false
		return vadEvent{speech: false, at: t.firstSilent}, true
	}
	return vadEvent{}, false
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

func (c *Conversation) enterListening() {
	if c.userSpeaking {
		c.setState(StateUserSpeaking)
		return
	}
	c.setState(StateListening)
	if c.agent.SilenceTimeout > 0 && !c.userSpeaking {
		c.tSilence.set(c.agent.SilenceTimeout)
	}
}

// onVAD handles the caller starting or stopping speech.
func (c *Conversation) onVAD(ev vadEvent) {
	if ev.speech {
		c.userSpeaking = true
		c.speechStart = ev.at
		c.tSilence.stop()
		c.tEndpoint.stop()
		c.tMaxWait.stop()
		switch c.state {
		case StateAgentSpeaking:
			// Barge-in candidate: the caller must keep speaking for BargeInMin (VAD already
			// heard SpeechStart of it).
			c.bargeArmed = true
			rest := c.agent.Turn.BargeInMin - c.agent.Turn.SpeechStart
			if rest <= 0 {
				c.onBargeTimer()
			} else {
				c.tBarge.set(rest)
			}
		case StateThinking:
			// The caller goes on talking before the agent answered: drop the pending answer and
			// keep listening; the new words join this turn.
			c.cancelResponse()
			c.reopenTurn()
			c.setState(StateUserSpeaking)
		default:
			c.setState(StateUserSpeaking)
		}
		return
	}
	c.userSpeaking = false
	c.speechEnd = ev.at
	c.tBarge.stop()
	c.bargeArmed = false
	if c.state != StateUserSpeaking {
		return
	}
	// Endpointing fallback: silence after a final transcript ends the turn.
	if len(c.finals) > 0 {
		c.armEndpoint()
	}
	c.tMaxWait.set(c.agent.Turn.MaxWait)
}

// armEndpoint ends the turn once the caller has been silent for EndpointSilence.
func (c *Conversation) armEndpoint() {
	if c.userSpeaking || c.speechEnd.IsZero() {
		return
	}
	wait := c.agent.Turn.EndpointSilence - time.Since(c.speechEnd)
	if wait <= 0 {
		c.endTurn("vad")
		return
	}
	c.tEndpoint.set(wait)
}

func (c *Conversation) onSTT(ev stt.Event) {
	switch ev.Kind {
	case stt.Interim:
		c.interim = ev.Text
		if c.sink != nil && ev.Text != "" {
			c.sink.Interim(ev.Text)
		}
		if c.state == StateAgentSpeaking && c.bargeArmed && c.agent.Turn.BargeInConfirmWords && !c.tBarge.active() {
			c.onBargeTimer()
		}
	case stt.Final:
		if strings.TrimSpace(ev.Text) == "" || c.state == StateAgentSpeaking {
			// Words heard over the agent that did not interrupt it (a backchannel, a cough)
			// are not a turn.
			return
		}
		c.finals = append(c.finals, strings.TrimSpace(ev.Text))
		c.cur.STTFinal = ev.At
		if c.state == StateListening || c.state == StateThinking {
			if c.state == StateThinking {
				c.cancelResponse()
				c.reopenTurn()
				c.cur.STTFinal = ev.At
			}
			c.setState(StateUserSpeaking)
		}
		if ev.SpeechFinal {
			c.endTurn("provider")
			return
		}
		if !c.userSpeaking {
			c.tSilence.stop()
			c.armEndpoint()
			if !c.tMaxWait.active() {
				c.tMaxWait.set(c.agent.Turn.MaxWait)
			}
		}
	case stt.EndOfSpeech:
		if c.state != StateUserSpeaking && c.state != StateListening {
			return // the turn already ended on the final (speech_final), or the agent speaks
		}
		if len(c.finals) == 0 && strings.TrimSpace(ev.Text) != "" {
			c.finals = append(c.finals, strings.TrimSpace(ev.Text))
		}
		if c.cur.STTFinal.IsZero() {
			c.cur.STTFinal = ev.At
		}
		if len(c.finals) > 0 {
			c.endTurn("provider")
		}
	case stt.Reconnected:
		c.log.Warn("speech-to-text reconnected; audio of the gap may be lost", "err", ev.Err)
	case stt.Error:
		c.log.Warn("speech-to-text error", "err", ev.Err)
		c.met.ProviderError("stt", c.vendors.STT)
	}
}

// reopenSTT replaces a recognizer stream that ended on its own (the adapter gave up
// reconnecting): the call goes on, losing the audio of the gap.
func (c *Conversation) reopenSTT() {
	if c.ctx.Err() != nil {
		return
	}
	c.log.Warn("speech-to-text stream ended; reopening")
	s, err := c.stt.Open(c.ctx, c.sttOptions())
	if err != nil {
		c.log.Error("speech-to-text cannot be reopened", "err", err)
		c.met.ProviderError("stt", c.vendors.STT)
		c.finish(EndProviderError, true)
		return
	}
	c.pushOK.Store(false)
	old := c.sttS
	c.mu.Lock()
	c.sttS = s
	c.mu.Unlock()
	c.sttEvCh = s.Events()
	c.pushOK.Store(true)
	go old.Close()
}

func (c *Conversation) words(text string) int { return len(strings.Fields(text)) }

// onlyBackchannel reports whether text holds nothing but backchannel words.
func (c *Conversation) onlyBackchannel(text string) bool {
	ws := strings.Fields(strings.ToLower(text))
	if len(ws) == 0 {
		return true
	}
	for _, w := range ws {
		w = strings.Trim(w, ".,!?;:\"'")
		found := false
		for _, b := range c.agent.Turn.Backchannels {
			if w == b {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// onBargeTimer decides a barge-in once the caller has spoken over the agent long enough.
func (c *Conversation) onBargeTimer() {
	if c.state != StateAgentSpeaking || !c.userSpeaking {
		return
	}
	if c.agent.Turn.BargeInConfirmWords && (c.interim == "" || c.onlyBackchannel(c.interim)) {
		return // wait for an interim with a real word (onSTT calls back)
	}
	if c.interim != "" && c.onlyBackchannel(c.interim) {
		return
	}
	c.bargeIn()
}

// bargeIn stops the agent at once: the LLM and TTS streams are cancelled and the pacer is
// flushed within one frame; the transcript keeps what was actually played.
func (c *Conversation) bargeIn() {
	c.bargeArmed = false
	c.cancelResponse()
	c.stopSpeaking(true)
	c.reopenTurn()
	c.setState(StateUserSpeaking)
}

// reopenTurn starts a fresh caller turn; the one whose reply was dropped stays listed.
func (c *Conversation) reopenTurn() {
	c.listTurn(true)
	c.interim = ""
	c.cur = TurnMetrics{}
}

func (c *Conversation) cancelResponse() {
	if c.respCancel != nil {
		c.respCancel()
		c.respCancel = nil
	}
	// A reply that had nothing to say yet (the LLM still thinking, or its tools running) leaves
	// no utterance behind to hold up the next one.
	for i := len(c.utts) - 1; i >= 0; i-- {
		if u := c.utts[i]; u.kind == uttResponse && u.gen == c.gen && u.chunks == 0 && !u.complete {
			c.utteranceFinished(u, false)
		}
	}
	c.respActive = false
	c.gen++
	c.tFiller.stop()
}

// endTurn ends the caller's turn and asks the LLM for the answer.
func (c *Conversation) endTurn(how string) {
	c.tEndpoint.stop()
	c.tMaxWait.stop()
	if c.held {
		c.finals, c.interim = nil, ""
		return
	}
	if c.state != StateUserSpeaking && c.state != StateListening && c.state != StateTakeover {
		return
	}
	text := strings.TrimSpace(strings.Join(c.finals, " "))
	if text == "" && how == "max_wait" {
		text = strings.TrimSpace(c.interim)
	}
	if text == "" {
		return
	}
	if how != "max_wait" && c.agent.Turn.MinWords > 0 && c.words(text) < c.agent.Turn.MinWords {
		return // too short; MaxWait still runs
	}
	now := time.Now()
	c.finals, c.interim = nil, ""
	c.listTurn(c.respActive) // a reply still being prepared gives way to this turn
	c.turnN++
	c.turnListed = false
	// A fresh record for this turn; only the recognizer's final (heard during this turn) is kept.
	c.cur = TurnMetrics{STTFinal: c.cur.STTFinal, SpeechEnd: c.cur.SpeechEnd}
	if c.cur.STTFinal.Before(c.lastTurnEnd) {
		c.cur.STTFinal = time.Time{}
	}
	if c.cur.SpeechEnd.Before(c.lastTurnEnd) {
		c.cur.SpeechEnd = time.Time{}
	}
	c.lastTurnEnd = now
	c.cur.Turn = c.turnN
	c.cur.SpeechEnd = c.speechEnd
	c.cur.EndOfTurn = now
	c.cur.Endpointing = how
	end := c.speechEnd
	if end.IsZero() || end.Before(c.speechStart) {
		end = now // the recognizer ended the turn before the VAD heard the speech stop
	}
	if c.cur.SpeechEnd.IsZero() || c.cur.SpeechEnd.Before(c.speechStart) {
		c.cur.SpeechEnd = end
	}
	start := c.speechStart
	if start.IsZero() || start.After(end) {
		start = end
	}
	c.addLine(Line{Role: RoleUser, Text: text, Start: start, End: end})
	c.appendHistory(llm.Message{Role: llm.RoleUser, Content: text}, c.gen)
	c.reprompts = 0
	if c.takeover != nil {
		c.setState(StateTakeover)
		return
	}
	c.startResponse()
}

// startResponse launches the LLM worker for the next reply.
func (c *Conversation) startResponse() {
	c.cancelResponse()
	c.setState(StateThinking)
	ctx, cancel := context.WithCancel(c.ctx)
	c.respCancel = cancel
	c.respActive = true
	gen := c.gen
	c.uttSeq++
	u := &utterance{id: c.uttSeq, kind: uttResponse, gen: gen, turn: c.turnN, chunker: newChunker()}
	c.utts = append(c.utts, u)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.respond(ctx, gen, func(ev respEvent) {
			ev.gen = gen
			select {
			case c.respCh <- ev:
			case <-ctx.Done():
			}
		})
	}()
}

func (c *Conversation) addLine(l Line) Line {
	c.mu.Lock()
	if c.chatTurn != nil && (l.Role == RoleUser || l.Role == RoleTool) {
		*c.chatTurn = append(*c.chatTurn, l)
		c.mu.Unlock()
		return l
	}
	c.mu.Unlock()
	l = c.transcript.Append(l)
	if c.sink != nil {
		c.sink.LineAdded(l)
	}
	return l
}

// historyLen is the number of messages in the LLM history.
func (c *Conversation) historyLen() int {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	return len(c.history)
}

// truncateHistory drops the messages after the first n (a chat message that was not answered).
func (c *Conversation) truncateHistory(n int) {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	if n < len(c.history) {
		c.history = c.history[:n]
	}
}

func (c *Conversation) appendHistory(m llm.Message, gen int) {
	c.histMu.Lock()
	c.history = append(c.history, histEntry{msg: m, gen: gen})
	c.histMu.Unlock()
}

// onResponse handles the LLM worker's events.
func (c *Conversation) onResponse(ev respEvent) {
	if ev.gen != c.gen {
		return // a cancelled response
	}
	u := c.responseUtterance(ev.gen)
	switch ev.kind {
	case respKnowledge:
		c.cur.KnowledgeStart, c.cur.KnowledgeDone = ev.at, ev.done
	case respSent:
		c.cur.LLMRequestSent = ev.at
	case respFirstToken:
		if c.cur.LLMFirstToken.IsZero() {
			c.cur.LLMFirstToken = ev.at
		}
	case respDelta:
		if u == nil {
			return
		}
		u.text.WriteString(ev.text)
		for _, chunk := range u.chunker.Push(ev.text) {
			if u.chunks == 0 && u.turn == c.turnN && c.cur.LLMFirstChunk.IsZero() {
				c.cur.LLMFirstChunk = time.Now()
			}
			c.queueChunk(u, chunk, false)
		}
	case respToolsStarted:
		c.toolsRunning++
		c.toolFiller = ev.text // the called tool's own filler, if it has one
		if len(c.agent.Fillers) > 0 || c.toolFiller != "" {
			c.tFiller.set(c.agent.FillerAfter)
		}
	case respToolsDone:
		c.toolsRunning--
		c.tFiller.stop()
	case respEndCall:
		c.pendingEnd = EndAgentEnded
	case respTransferred:
		c.finish(EndTransferred, false)
	case respDone:
		c.respActive = false
		c.respCancel = nil
		c.llmFailures = 0
		c.addUsage(ev.usage)
		if u == nil {
			return
		}
		if rest := u.chunker.Flush(); rest != "" {
			if u.chunks == 0 && u.turn == c.turnN && c.cur.LLMFirstChunk.IsZero() {
				c.cur.LLMFirstChunk = time.Now()
			}
			c.queueChunk(u, rest, false)
		}
		u.complete = true
		c.spk.endUtterance(u)
		if c.agent.EndPhrase != "" && strings.Contains(strings.ToLower(u.text.String()), strings.ToLower(c.agent.EndPhrase)) {
			c.pendingEnd = EndAgentEnded
		}
		if u.chunks == 0 {
			// Nothing to say (for example only a tool call that ended the call).
			c.utteranceFinished(u, false)
		}
	case respError:
		c.respActive = false
		c.respCancel = nil
		c.addUsage(ev.usage)
		c.llmFailures++
		c.met.ProviderError("llm", c.vendors.LLM)
		c.log.Warn("LLM failed", "err", ev.err, "failures", c.llmFailures, "mid_stream", ev.midStream)
		if u != nil {
			u.complete = true
			if rest := u.chunker.Flush(); rest != "" {
				c.queueChunk(u, rest, false)
			}
			c.spk.endUtterance(u)
			if u.chunks == 0 {
				c.utteranceFinished(u, false)
			}
		}
		if c.llmFailures >= c.agent.MaxLLMFailures {
			c.finish(EndProviderError, true)
			return
		}
		c.speakUtterance(c.agent.ApologyText, uttApology, nil)
	}
}

func (c *Conversation) addUsage(u llm.Usage) {
	c.mu.Lock()
	c.cost.LLMInputTokens += u.InputTokens
	c.cost.LLMOutputTokens += u.OutputTokens
	c.mu.Unlock()
}

func (c *Conversation) responseUtterance(gen int) *utterance {
	for i := len(c.utts) - 1; i >= 0; i-- {
		if u := c.utts[i]; u.kind == uttResponse && u.gen == gen {
			return u
		}
	}
	return nil
}

// queueChunk sends one chunk of an utterance to the speaker.
func (c *Conversation) queueChunk(u *utterance, text string, last bool) {
	u.chunks++
	c.mu.Lock()
	c.cost.TTSCharacters += len([]rune(text))
	c.mu.Unlock()
	if c.state == StateThinking || c.state == StateListening {
		c.setState(StateAgentSpeaking)
	}
	c.spk.say(u, text)
}

// speakUtterance speaks a fixed text (greeting, reprompt, apology, say command, filler).
func (c *Conversation) speakUtterance(text string, kind uttKind, cmd *pendingCommand) *utterance {
	c.uttSeq++
	u := &utterance{id: c.uttSeq, kind: kind, gen: -1, turn: c.turnN, cmd: cmd, complete: true}
	u.text.WriteString(text)
	c.utts = append(c.utts, u)
	c.tSilence.stop()
	// Sentence by sentence, so the first sentence plays while the next is synthesized.
	ch := newChunker()
	parts := ch.Push(text)
	if rest := ch.Flush(); rest != "" {
		parts = append(parts, rest)
	}
	for _, p := range parts {
		c.queueChunk(u, p, false)
	}
	c.spk.endUtterance(u)
	if len(parts) == 0 {
		c.utteranceFinished(u, false)
	}
	return u
}

// onSpeaker handles the speaker's and the pacer's reports.
func (c *Conversation) onSpeaker(ev spkEvent) {
	u := c.findUtt(ev.utt)
	switch ev.kind {
	case spkTTSRequest:
		if u != nil && u.kind == uttResponse && u.turn == c.turnN && c.cur.TTSFirstRequest.IsZero() {
			c.cur.TTSFirstRequest = ev.at
		}
	case spkTTSFirstByte:
		if u != nil && u.kind == uttResponse && u.turn == c.turnN && c.cur.TTSFirstByte.IsZero() {
			c.cur.TTSFirstByte = ev.at
		}
	case spkFirstFrameOut:
		if u != nil {
			u.firstOut = ev.at
			if u.kind == uttResponse && u.turn == c.turnN && c.cur.FirstAudioOut.IsZero() && c.cur.Turn == c.turnN {
				c.cur.FirstAudioOut = ev.at
				c.completeTurnMetrics()
			}
		}
	case spkTTSError:
		c.ttsFailures++
		c.met.ProviderError("tts", c.vendors.TTS)
		c.log.Warn("text-to-speech failed", "err", ev.err, "failures", c.ttsFailures)
		if c.ttsFailures >= c.agent.MaxTTSFailures {
			c.finish(EndProviderError, true)
		}
	case spkTTSOK:
		c.ttsFailures = 0
	case spkUttQueued:
		if u != nil {
			u.allQueued = true
			u.endFrame = ev.end
		}
		c.checkPlayed()
	case spkPlayed:
		c.checkPlayed()
	}
}

func (c *Conversation) completeTurnMetrics() {
	m := c.cur
	c.turnListed = true
	c.mu.Lock()
	c.turns = append(c.turns, m)
	c.mu.Unlock()
	c.met.Observe(m)
	if c.sink != nil {
		c.sink.TurnCompleted(m)
	}
}

// listTurn lists the current turn's metrics if it ends before its first audio out (the caller
// barged in or spoke again while the reply was being prepared, or the call ended): every turn is
// listed, the stages it never reached left empty, as the API documents. interrupted marks a
// reply the caller cut off.
func (c *Conversation) listTurn(interrupted bool) {
	if c.cur.Turn == 0 || c.cur.Turn != c.turnN || c.turnListed {
		return
	}
	c.cur.Interrupted = interrupted
	c.completeTurnMetrics()
}

func (c *Conversation) findUtt(id int) *utterance {
	for _, u := range c.utts {
		if u.id == id {
			return u
		}
	}
	return nil
}

// checkPlayed finishes every utterance whose audio has all been played.
func (c *Conversation) checkPlayed() {
	sent := c.out.sentFrames()
	for len(c.utts) > 0 {
		u := c.utts[0]
		if !u.complete || !u.allQueued {
			return
		}
		if sent < u.endFrame {
			c.out.watchPlayed(u.endFrame)
			return
		}
		c.utteranceFinished(u, false)
	}
}

// utteranceFinished records an utterance that ended (played out, or cut when interrupted) and
// moves the state on.
func (c *Conversation) utteranceFinished(u *utterance, interrupted bool) {
	for i, x := range c.utts {
		if x == u {
			c.utts = append(c.utts[:i], c.utts[i+1:]...)
			break
		}
	}
	heard := int64(math.MaxInt64)
	if interrupted {
		heard = c.out.sentFrames()
	}
	text := u.playedText(heard)
	if strings.TrimSpace(text) != "" && u.kind != uttFiller {
		meta := map[string]any(nil)
		if u.kind != uttResponse {
			meta = map[string]any{"source": string(u.kind)}
		}
		end := time.Now()
		start := u.firstOut
		if start.IsZero() {
			start = end
		}
		c.addLine(Line{Role: RoleAgent, Text: text, Start: start, End: end, Interrupted: interrupted, Meta: meta})
	}
	if u.kind == uttResponse {
		c.fixHistory(u.gen, text, interrupted)
	} else if u.kind == uttSay || u.kind == uttGreeting || u.kind == uttReprompt {
		if strings.TrimSpace(text) != "" {
			c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: text}, -1)
		}
	}
	if u.cmd != nil {
		if interrupted {
			u.cmd.reply(CommandResult{Status: CommandFailed, Reason: "interrupted by the caller"})
		} else {
			u.cmd.reply(CommandResult{Status: CommandDone})
		}
	}
	if len(c.utts) == 0 && !interrupted {
		if c.pendingEnd != "" {
			c.finish(c.pendingEnd, true)
			return
		}
		if c.respActive {
			c.setState(StateThinking)
		} else if c.state == StateAgentSpeaking || c.state == StateThinking {
			c.enterListening()
		}
	}
}

// fixHistory makes the assistant message of a response hold what the caller actually heard.
func (c *Conversation) fixHistory(gen int, played string, interrupted bool) {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	for i := len(c.history) - 1; i >= 0; i-- {
		h := &c.history[i]
		if h.gen == gen && h.msg.Role == llm.RoleAssistant && len(h.msg.ToolCalls) == 0 {
			if interrupted {
				if strings.TrimSpace(played) == "" {
					h.msg.Content = "[interrupted by the caller before saying anything]"
				} else {
					h.msg.Content = played + " [interrupted by the caller]"
				}
			}
			return
		}
	}
	if interrupted && strings.TrimSpace(played) != "" {
		c.history = append(c.history, histEntry{msg: llm.Message{Role: llm.RoleAssistant, Content: played + " [interrupted by the caller]"}, gen: gen})
	}
}

// stopSpeaking flushes the output and cuts every queued utterance, recording what was played.
func (c *Conversation) stopSpeaking(interrupted bool) {
	c.spk.cancelAll()
	c.out.flush()
	utts := append([]*utterance(nil), c.utts...)
	for _, u := range utts {
		c.utteranceFinished(u, interrupted)
	}
	c.utts = c.utts[:0]
}

// SetHold tells a voice conversation that the caller put the call on hold (a sendonly or
// inactive re-INVITE: no audio reaches the caller) or took it off. While on hold the agent
// neither listens nor speaks: a reply in progress is stopped and the transcript keeps only
// what was played before the hold (marked interrupted), and nothing is generated until the
// call resumes.
func (c *Conversation) SetHold(on bool) {
	if !c.started.Load() {
		return
	}
	c.holdIn.Store(on)
	select {
	case c.holdCh <- on:
	default:
	}
}

// onHold applies SetHold in the loop.
func (c *Conversation) onHold(on bool) {
	if on == c.held {
		return
	}
	c.held = on
	c.taps.hold(on) // a recording pauses while on hold
	if c.takeover != nil {
		return // a human has the call: the takeover carries on as it is
	}
	if on {
		c.log.Info("call on hold: the agent stops talking and listening")
		c.cancelResponse()
		c.stopSpeaking(true)
		for _, t := range []*timer{&c.tEndpoint, &c.tMaxWait, &c.tSilence, &c.tBarge, &c.tFiller, &c.tDTMF} {
			t.stop()
		}
		c.finals, c.interim, c.digitsN, c.userSpeaking, c.bargeArmed = nil, "", 0, false, false
		c.setState(StateListening)
		return
	}
	c.log.Info("call resumed")
	c.enterListening()
}

func (c *Conversation) onSilenceTimeout() {
	if c.held || c.state != StateListening || c.userSpeaking {
		return
	}
	if c.reprompts >= c.agent.Reprompts {
		c.finish(EndSilenceTimeout, true)
		return
	}
	c.reprompts++
	c.speakUtterance(c.agent.RepromptText, uttReprompt, nil)
}

func (c *Conversation) onFiller() {
	if c.held || c.toolsRunning == 0 || (len(c.agent.Fillers) == 0 && c.toolFiller == "") {
		return
	}
	f := c.toolFiller
	if f == "" {
		f = c.agent.Fillers[c.fillerIdx%len(c.agent.Fillers)]
		c.fillerIdx++
	}
	c.speakUtterance(f, uttFiller, nil)
}

// onDTMF takes a digit: it goes to the transcript and the history at once, and the digits end
// the caller's turn after the terminator key or the inter-digit timeout (TurnSettings), so a
// "press 1" menu gets its answer without the caller speaking. A digit pressed while the agent
// talks interrupts it, as speech would.
func (c *Conversation) onDTMF(d rune) {
	if c.held {
		return
	}
	if c.state == StateAgentSpeaking || c.state == StateThinking {
		c.bargeIn()
	}
	c.addLine(Line{Role: RoleUser, Text: "DTMF " + string(d), Start: time.Now(), End: time.Now(), Meta: map[string]any{"dtmf": string(d)}})
	c.appendHistory(llm.Message{Role: llm.RoleUser, Content: "[The caller pressed " + string(d) + " on the keypad]"}, c.gen)
	c.digitsN++
	if t := c.agent.Turn.DTMFTerminator; t != "" && string(d) == t {
		c.tDTMF.stop()
		c.dtmfTurn("dtmf_terminator")
		return
	}
	if c.agent.Turn.DTMFTimeout > 0 {
		c.tDTMF.set(c.agent.Turn.DTMFTimeout)
	}
}

// dtmfTurn ends a turn of keypad digits and asks the LLM for the answer.
func (c *Conversation) dtmfTurn(how string) {
	if c.digitsN == 0 || c.state != StateUserSpeaking && c.state != StateListening && c.state != StateTakeover {
		return
	}
	c.digitsN = 0
	c.tEndpoint.stop()
	c.tMaxWait.stop()
	now := time.Now()
	c.turnN++
	c.cur = TurnMetrics{Turn: c.turnN, EndOfTurn: now, SpeechEnd: now, Endpointing: how}
	c.lastTurnEnd = now
	c.reprompts = 0
	if c.takeover != nil {
		c.setState(StateTakeover)
		return
	}
	c.startResponse()
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
	for _, t := range []*timer{&c.tEndpoint, &c.tMaxWait, &c.tSilence, &c.tMaxDur, &c.tBarge, &c.tFiller, &c.tDTMF} {
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

func (c *Conversation) drainCommands() {
	for {
		select {
		case pc := <-c.cmdCh:
			pc.reply(CommandResult{Status: CommandFailed, Reason: "the conversation ended"})
		default:
			return
		}
	}
}

// timer is a stoppable one-shot timer whose channel is nil while it is not armed, so a select
// on an unarmed timer never fires.
type timer struct {
	t  *time.Timer
	on bool
}

func (t *timer) set(d time.Duration) {
	if t.t == nil {
		t.t = time.NewTimer(d)
	} else {
		t.t.Reset(d)
	}
	t.on = true
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
	t.on = false
}

func (t *timer) fired()       { t.on = false }
func (t *timer) active() bool { return t.on }

func (t *timer) C() <-chan time.Time {
	if !t.on {
		return nil
	}
	return t.t.C
}
