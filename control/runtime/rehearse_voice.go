package runtime

// issue 18: voice rehearsals. The saved conversation's user turns go through the real audio
// path: each is spoken by espeak-ng (the local program), pushed into the engine as a caller's
// 20 ms frames in real time over a faint noise floor, and heard by the agent's STT (in test
// mode, the fakes' recognizer, which detects the speech and transcribes it); the agent's
// replies are synthesized by its TTS and played out by the engine's pacer. Turn-taking, the
// VAD, endpointing and barge-in are the engine's, as in a call. The simulated caller speaks
// once the agent has finished its reply (its state back to listening and no audio going out
// for a moment), so that every turn is rehearsed whole; a turn marked barge-in is spoken
// instead while the agent's reply to the turn before is playing, cutting it off.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
)

// Bounds of a voice rehearsal: every wait ends.
const (
	voiceSettle      = 600 * time.Millisecond // the agent is done: listening, no audio out, this long
	voiceAnswerWait  = 60 * time.Second       // a turn's reply must come within this
	voiceHearWait    = 15 * time.Second       // the STT must hear a turn within this after it was spoken
	voiceMaxUtter    = 60 * time.Second       // the longest turn spoken
	voiceEndWait     = 10 * time.Second       // the engine stops within this once ended
	voiceNoiseLevel  = 10                     // the caller's noise floor, about -70 dBFS
	voiceDTMFSpacing = 120 * time.Millisecond // between keys pressed
	voiceBargeAfter  = 400 * time.Millisecond // a barge-in turn starts once the reply has played this long
)

// ErrNotHeard is a voice rehearsal whose turn the agent's STT never transcribed.
var ErrNotHeard = errors.New("runtime: the agent's speech-to-text did not hear the turn")

// voiceSink follows what the engine reports: lines by role and its state.
type voiceSink struct {
	mu         sync.Mutex
	user       int
	agent      int
	state      session.State
	stateSince time.Time
}

func (s *voiceSink) LineAdded(l session.Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch l.Role {
	case session.RoleUser:
		s.user++
	case session.RoleAgent:
		s.agent++
	}
}
func (s *voiceSink) Interim(string) {}
func (s *voiceSink) StateChanged(st session.State) {
	s.mu.Lock()
	s.state, s.stateSince = st, time.Now()
	s.mu.Unlock()
}
func (s *voiceSink) TurnCompleted(session.TurnMetrics)     {}
func (s *voiceSink) Ended(session.EndReason, session.Cost) {}

func (s *voiceSink) counts() (user, agent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user, s.agent
}

// voicePort is the rehearsal's channel: it takes the agent's audio (noting when the last frame
// went out), and grants transfers and hang-ups, which end the rehearsal as they end a call.
type voicePort struct {
	mu   sync.Mutex
	last time.Time
}

func (p *voicePort) SendFrame(*media.Frame) {
	p.mu.Lock()
	p.last = time.Now()
	p.mu.Unlock()
}
func (p *voicePort) SendDTMF(context.Context, string) error                  { return nil }
func (p *voicePort) Transfer(context.Context, session.TransferRequest) error { return nil }
func (p *voicePort) Hangup(context.Context, session.EndReason) error         { return nil }

func (p *voicePort) lastFrame() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// voiceCaller pushes the caller's frames in real time: the queued speech over a noise floor
// (a phone line is never digitally silent).
type voiceCaller struct {
	conv  *session.Conversation
	mu    sync.Mutex
	queue []int16
	seed  uint32
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (c *voiceCaller) say(pcm []int16) {
	c.mu.Lock()
	c.queue = append(c.queue, pcm...)
	c.mu.Unlock()
}

func (c *voiceCaller) speaking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) > 0
}

func (c *voiceCaller) run() {
	defer close(c.done)
	tk := time.NewTicker(media.FrameDuration)
	defer tk.Stop()
	var f media.Frame
	n := media.SamplesPerFrame(media.PipelineRate)
	for {
		select {
		case <-c.quit:
			return
		case <-tk.C:
		}
		_ = f.Init(media.PipelineRate)
		c.mu.Lock()
		k := min(n, len(c.queue))
		for i := 0; i < n; i++ {
			c.seed = c.seed*1664525 + 1013904223
			v := int32(c.seed>>16)%(2*voiceNoiseLevel+1) - voiceNoiseLevel
			if i < k {
				v += int32(c.queue[i])
			}
			f.Samples[i] = int16(max(min(v, 32767), -32768))
		}
		c.queue = c.queue[k:]
		c.mu.Unlock()
		c.conv.PushFrame(&f)
	}
}

func (c *voiceCaller) stop() {
	c.once.Do(func() { close(c.quit) })
	<-c.done
}

// speak renders text with espeak-ng at the pipeline rate.
func speak(ctx context.Context, mouth tts.Synthesizer, text, language string) ([]int16, error) {
	st, err := mouth.Synthesize(ctx, tts.Request{Text: text, Language: language, SampleRate: media.PipelineRate})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var pcm []int16
	buf := make([]int16, 4096)
	limit := int(voiceMaxUtter / time.Second * media.PipelineRate)
	for len(pcm) < limit {
		n, err := st.Read(buf)
		pcm = append(pcm, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(pcm) == 0 {
		return nil, fmt.Errorf("espeak-ng produced no audio for %q", text)
	}
	return pcm, nil
}

// rehearseVoice runs the rehearsal r on an engine made with o (its STT and TTS set) through
// the audio path. next gives the user's turns; out holds what was already spent on them (a
// simulated user's tokens, which next adds to) and is filled.
func (rt *Runtime) rehearseVoice(ctx context.Context, r Rehearsal, o session.Options, runner *mockRunner, next nextTurn, out *RehearsalResult) (RehearsalResult, error) {
	voice := "en"
	if r.Language != "" {
		voice = strings.ToLower(r.Language)
		if i := strings.IndexAny(voice, "-_"); i > 0 {
			voice = voice[:i]
		}
	}
	mouth, err := tts.NewEspeak(tts.EspeakConfig{Voice: voice})
	if err != nil {
		return RehearsalResult{}, fmt.Errorf("a voice rehearsal speaks the user's turns with espeak-ng, which this node lacks: %w", err)
	}
	sink := &voiceSink{state: session.StateListening, stateSince: time.Now()}
	o.Sink = sink
	o.ID = "rehearsal-voice"
	sess, err := session.New(o)
	if err != nil {
		return RehearsalResult{}, err
	}
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	port := &voicePort{}
	if err := sess.StartVoice(vctx, port); err != nil {
		sess.End(session.EndFailed) // never started: abandoned
		return RehearsalResult{}, fmt.Errorf("%w: the voice engine did not start: %v", ErrProvider, err)
	}
	caller := &voiceCaller{conv: sess, seed: 7, quit: make(chan struct{}), done: make(chan struct{})}
	go caller.run()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		caller.stop()
		done := make(chan struct{})
		go func() { sess.End(session.EndAPI); close(done) }()
		select {
		case <-done:
		case <-time.After(voiceEndWait):
			cancel()
		}
	}
	defer stop()

	// wait polls cond every frame until it holds, the engine ends (false), ctx ends or d passes.
	ended := func() bool {
		select {
		case <-sess.Done():
			return true
		default:
			return false
		}
	}
	wait := func(d time.Duration, cond func() bool) (bool, error) {
		deadline := time.Now().Add(d)
		tk := time.NewTicker(media.FrameDuration)
		defer tk.Stop()
		for {
			if cond() {
				return true, nil
			}
			if ended() {
				return false, nil
			}
			if time.Now().After(deadline) {
				return false, errTimeout
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-tk.C:
			}
		}
	}
	settled := func() bool {
		sink.mu.Lock()
		st, since := sink.state, sink.stateSince
		sink.mu.Unlock()
		now := time.Now()
		return st == session.StateListening && now.Sub(since) >= voiceSettle && now.Sub(port.lastFrame()) >= voiceSettle && !caller.speaking()
	}
	// The greeting, when the agent has one, is played whole first.
	if o.Agent.FirstMessage != "" {
		if ok, err := wait(voiceAnswerWait, func() bool { _, a := sink.counts(); return a >= 1 && settled() }); err != nil {
			return RehearsalResult{}, rehearsalWaitErr(err, "the agent's greeting was not played")
		} else if !ok {
			out.Ended = true
		}
	}
	for i := 0; !out.Ended; i++ {
		text, more, err := next(ctx, i, sess.Transcript())
		if err != nil {
			return RehearsalResult{}, err
		}
		if !more {
			break
		}
		users, agents := sink.counts()
		var keys string
		if i < len(r.DTMF) {
			keys = r.DTMF[i]
		}
		if strings.TrimSpace(text) != "" {
			pcm, err := speak(ctx, mouth, text, r.Language)
			if err != nil {
				return RehearsalResult{}, fmt.Errorf("turn %d could not be spoken: %w", i+1, err)
			}
			caller.say(pcm)
			heard := time.Duration(len(pcm))*time.Second/media.PipelineRate + voiceHearWait
			ok, err := wait(heard, func() bool { u, _ := sink.counts(); return u > users })
			if err != nil {
				if errors.Is(err, errTimeout) {
					return RehearsalResult{}, fmt.Errorf("%w: turn %d (%q) was spoken but never transcribed", ErrNotHeard, i+1, text)
				}
				return RehearsalResult{}, err
			}
			if !ok {
				out.Ended = true
				break
			}
		}
		for _, d := range keys { // keys pressed after what was said, as RFC 4733 events would come
			sess.PushDTMF(d)
			select {
			case <-ctx.Done():
				return RehearsalResult{}, ctx.Err()
			case <-time.After(voiceDTMFSpacing):
			}
		}
		if i+1 < len(r.BargeIn) && r.BargeIn[i+1] {
			// The next turn cuts the agent off: it comes once the reply has been playing for
			// a moment.
			var since time.Time
			ok, err := wait(voiceAnswerWait, func() bool {
				sink.mu.Lock()
				st := sink.state
				sink.mu.Unlock()
				if st != session.StateAgentSpeaking || time.Since(port.lastFrame()) > 3*media.FrameDuration {
					since = time.Time{}
					return false
				}
				if since.IsZero() {
					since = time.Now()
				}
				return time.Since(since) >= voiceBargeAfter
			})
			if err != nil {
				return RehearsalResult{}, rehearsalWaitErr(err, fmt.Sprintf("the agent did not start answering turn %d within %v, so turn %d could not cut in", i+1, voiceAnswerWait, i+2))
			}
			if !ok {
				out.Ended = true
			}
			continue
		}
		ok, err := wait(voiceAnswerWait, func() bool { _, a := sink.counts(); return a > agents && settled() })
		if err != nil {
			return RehearsalResult{}, rehearsalWaitErr(err, fmt.Sprintf("the agent did not answer turn %d within %v", i+1, voiceAnswerWait))
		}
		if !ok {
			out.Ended = true
		}
	}
	stop()
	rt.rehearsalOutcome(sess, runner, store.ChannelVoice, out)
	return *out, nil
}

var errTimeout = errors.New("timed out")

func rehearsalWaitErr(err error, what string) error {
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("%w: %s", ErrProvider, what)
	}
	return err
}
