package bench

import (
	"fmt"
	"time"
)

// Defaults of ScriptOptions.
const (
	DefaultReplyTimeout = 15 * time.Second
	DefaultAgentMaxTalk = 30 * time.Second
)

// ScriptOptions say how a caller behaves.
type ScriptOptions struct {
	// Utterances are said in turn (cycling), one per caller turn, at the transport's rate.
	Utterances []Utterance
	// Turns is how many times the caller speaks and waits for the agent's reply. Zero makes a
	// short call: it hangs up Hold after the answer (after the greeting when one is expected).
	Turns int
	Hold  time.Duration
	// Greeting: the agent speaks first (its first message); the caller waits for it to finish
	// before speaking. Without it the caller speaks Pause after the answer.
	Greeting bool
	// ThresholdDBFS and Hangover tune the ear (EnergyDetector): the agent's turn is over after
	// Hangover of silence. Pause is added after that before the caller speaks.
	ThresholdDBFS float64
	Hangover      time.Duration
	Pause         time.Duration
	// ReplyTimeout bounds the wait for the agent's audio (the greeting, or a reply after the
	// caller's speech ends); AgentMaxTalk bounds how long the agent may talk in one go.
	ReplyTimeout time.Duration
	AgentMaxTalk time.Duration
	// FirstUtterance is the index in Utterances of the first thing said (spreads callers over
	// the lines).
	FirstUtterance int
}

func (o ScriptOptions) withDefaults() ScriptOptions {
	if o.ReplyTimeout <= 0 {
		o.ReplyTimeout = DefaultReplyTimeout
	}
	if o.AgentMaxTalk <= 0 {
		o.AgentMaxTalk = DefaultAgentMaxTalk
	}
	if o.Hangover <= 0 {
		o.Hangover = 700 * time.Millisecond
	}
	if o.Hold <= 0 {
		o.Hold = time.Second
	}
	return o
}

// TurnTiming is one caller turn as the caller measured it.
type TurnTiming struct {
	Index int    `json:"index"` // 1-based
	Text  string `json:"text"`
	// SpeechEnd is the send time of the last frame of the caller's speech; Heard the arrival of
	// the first loud 5 ms of the agent's reply; Latency = Heard - SpeechEnd.
	SpeechEnd time.Time     `json:"speech_end"`
	Heard     time.Time     `json:"heard"`
	Latency   time.Duration `json:"latency_ns"`
	// AgentTalk is how long the agent's reply sounded (to its offset).
	AgentTalk time.Duration `json:"agent_talk_ns"`
}

// ScriptResult is what a caller measured in one call.
type ScriptResult struct {
	// Greeting is the time from the answer to the first loud 5 ms of the agent (0 when none
	// was expected or heard).
	Greeting time.Duration `json:"greeting_ns"`
	Turns    []TurnTiming  `json:"turns"`
	// TalkOver counts the agent's onsets while the caller was speaking.
	TalkOver int `json:"talk_over"`
	// Failure says why the call did not go as scripted; empty when it did.
	Failure string `json:"failure,omitempty"`
}

type scriptState uint8

const (
	stGreeting scriptState = iota
	stAgentTalking
	stPause
	stSpeaking
	stWaitReply
	stHold
	stDone
)

func (s scriptState) String() string {
	return [...]string{"greeting", "agent talking", "pause", "speaking", "waiting for the reply", "holding", "done"}[s]
}

// CallScript is a caller's behaviour and stopwatch: it says what to send in each 20 ms frame,
// listens to what arrives, and times the greeting and every turn. It is transport-neutral (SIP
// and WebRTC callers drive it) and takes every time from its callers, so that tests feed it
// synthetic audio with known delays.
//
// Fill and Hear must not be called concurrently (the callers serialize them); Fill is called
// once per frame tick, Hear with each block of received audio in arrival order.
type CallScript struct {
	o        ScriptOptions
	ear      *EnergyDetector
	answered time.Time
	state    scriptState
	since    time.Time // entry into the current state
	until    time.Time // end of a pause or hold
	utt      int       // index of the utterance being said
	pos      int       // next sample of it
	res      ScriptResult
	cur      TurnTiming
}

// NewCallScript starts a script for a call answered at answered.
func NewCallScript(o ScriptOptions, answered time.Time) *CallScript {
	o = o.withDefaults()
	s := &CallScript{o: o, ear: NewEnergyDetector(o.ThresholdDBFS, o.Hangover), answered: answered, since: answered,
		utt: o.FirstUtterance}
	switch {
	case o.Greeting:
		s.state = stGreeting
	case o.Turns == 0:
		s.state, s.until = stHold, answered.Add(o.Hold)
	default:
		s.state, s.until = stPause, answered.Add(o.Pause)
	}
	if len(o.Utterances) == 0 && o.Turns > 0 {
		s.fail(answered, "no utterances to say")
	}
	return s
}

// Done reports whether the call is over for the caller (scripted turns done, or failed).
func (s *CallScript) Done() bool { return s.state == stDone }

// Result returns what was measured so far.
func (s *CallScript) Result() ScriptResult {
	r := s.res
	r.Turns = append([]TurnTiming(nil), s.res.Turns...)
	return r
}

// Fail ends the script with reason unless it is already over (the transport failed).
func (s *CallScript) Fail(at time.Time, reason string) {
	if s.state != stDone {
		s.fail(at, reason)
	}
}

func (s *CallScript) fail(at time.Time, reason string) {
	s.res.Failure = reason
	s.enter(stDone, at)
}

func (s *CallScript) enter(st scriptState, at time.Time) { s.state, s.since = st, at }

// Hear takes received audio (mono PCM at rate Hz) whose first sample arrived at at.
func (s *CallScript) Hear(at time.Time, pcm []int16, rate int) {
	ev, when := s.ear.Push(at, pcm, rate)
	s.onEar(ev, when, at)
}

func (s *CallScript) onEar(ev EnergyEvent, when, now time.Time) {
	switch ev {
	case EnergyOnset:
		switch s.state {
		case stGreeting:
			s.res.Greeting = when.Sub(s.answered)
			s.enter(stAgentTalking, when)
		case stWaitReply:
			s.cur.Heard = when
			s.cur.Latency = when.Sub(s.cur.SpeechEnd)
			s.enter(stAgentTalking, when)
		case stSpeaking:
			s.res.TalkOver++
		case stHold:
			if s.res.Greeting == 0 {
				s.res.Greeting = when.Sub(s.answered)
			}
		}
	case EnergyOffset:
		if s.state != stAgentTalking {
			return
		}
		if s.cur.Index > 0 {
			s.cur.AgentTalk = when.Sub(s.cur.Heard)
			s.res.Turns = append(s.res.Turns, s.cur)
			s.cur = TurnTiming{}
		}
		switch {
		case len(s.res.Turns) >= s.o.Turns && s.o.Turns > 0:
			s.enter(stDone, now)
		case s.o.Turns == 0:
			s.enter(stHold, now)
			s.until = now.Add(s.o.Hold)
		default:
			s.enter(stPause, now)
			s.until = now.Add(s.o.Pause)
		}
	}
}

// Fill writes the caller's next frame (len(dst) samples at the utterances' rate), sent at at,
// and advances the script's clocks. Outside speech it writes faint line noise (about -70 dB): a
// phone line is never digitally silent.
func (s *CallScript) Fill(at time.Time, dst []int16) {
	if ev, when := s.ear.Check(at); ev != EnergyNone {
		s.onEar(ev, when, at)
	}
	switch s.state {
	case stGreeting:
		if at.Sub(s.since) > s.o.ReplyTimeout {
			s.fail(at, fmt.Sprintf("no greeting within %v", s.o.ReplyTimeout))
		}
	case stWaitReply:
		if at.Sub(s.since) > s.o.ReplyTimeout {
			s.fail(at, fmt.Sprintf("no reply to turn %d within %v", s.cur.Index, s.o.ReplyTimeout))
		}
	case stAgentTalking:
		if at.Sub(s.since) > s.o.AgentMaxTalk {
			s.fail(at, fmt.Sprintf("the agent talked for more than %v", s.o.AgentMaxTalk))
		}
	case stPause:
		if !at.Before(s.until) {
			s.utt %= len(s.o.Utterances)
			s.pos = 0
			s.cur = TurnTiming{Index: len(s.res.Turns) + 1, Text: s.o.Utterances[s.utt].Text}
			s.enter(stSpeaking, at)
		}
	case stHold:
		if !at.Before(s.until) {
			s.enter(stDone, at)
		}
	}
	if s.state != stSpeaking {
		lineNoise(dst, at)
		return
	}
	u := s.o.Utterances[s.utt].PCM
	n := copy(dst, u[s.pos:])
	clear(dst[n:])
	s.pos += n
	if s.pos >= len(u) {
		// This frame carries the end of the speech: it ends as the frame leaves.
		s.cur.SpeechEnd = at
		s.utt++
		s.ear.Reset() // a new listening period: the reply's first sound is an onset
		s.enter(stWaitReply, at)
	}
}

// lineNoise fills dst with deterministic noise of a few units (about -70 dB).
func lineNoise(dst []int16, at time.Time) {
	seed := uint32(at.UnixNano() >> 10)
	for i := range dst {
		seed = seed*1664525 + 1013904223
		dst[i] = int16(int32(seed>>16)%7 - 3)
	}
}

// State returns the script's state, for progress reports and failures.
func (s *CallScript) State() string { return s.state.String() }
