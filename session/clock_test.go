package session

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/llm"
)

// Turn-taking on a manual clock (Options.Now and Options.NewTimer): the loop's timers fire when
// the clock passes their deadline and not an instant before, and the turn's timestamps are the
// clock's, so the thresholds are checked exactly, without sleeping.

// clockRig is a voice conversation on a manual clock, with a recognizer the test scripts, an
// LLM that thinks until it is cancelled and a TTS that says one frame of tone.
type clockRig struct {
	t    *testing.T
	clk  *mediatest.Clock
	conv *Conversation
	stt  *scriptedSTT
	tts  *recTTS
	llm  *waitLLM
	port *testPort
	t0   time.Time
}

// newClockRig starts the conversation; each TTS request says speech of audio (0: one frame).
func newClockRig(t *testing.T, a Agent, speech time.Duration) *clockRig {
	t.Helper()
	r := &clockRig{t: t, clk: mediatest.NewClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)),
		stt: &scriptedSTT{}, tts: &recTTS{samples: int(speech.Seconds() * media.PipelineRate)}, llm: &waitLLM{asked: make(chan struct{}, 4)}, port: newTestPort()}
	r.t0 = r.clk.Now()
	conv, err := New(Options{ID: "clock", Agent: a, LLM: r.llm, STT: r.stt, TTS: r.tts, Log: quiet(),
		Now:      r.clk.Now,
		NewTimer: func(d time.Duration) media.PacerTimer { return r.clk.NewTimer(d) }})
	if err != nil {
		t.Fatal(err)
	}
	r.conv = conv
	ctx, cancel := context.WithCancel(context.Background())
	if err := conv.StartVoice(ctx, r.port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-conv.Done():
		case <-time.After(10 * time.Second):
			t.Error("conversation did not stop")
		}
	})
	return r
}

// armed waits until n of the loop's timers are armed on the manual clock.
func (r *clockRig) armed(n int) {
	r.t.Helper()
	waitFor(r.t, 5*time.Second, "armed timers", func() bool { return r.clk.Armed() == n })
}

// TestEndpointingOnManualClock: after the caller stops speaking with a final transcript, the turn
// ends exactly EndpointSilence later on the conversation's clock, and not 1 ms before.
func TestEndpointingOnManualClock(t *testing.T) {
	r := newClockRig(t, Agent{SystemPrompt: "x"}, 0)
	c := r.conv
	silence := c.agent.Turn.EndpointSilence

	c.vadCh <- vadEvent{speech: true, at: r.clk.Now()}
	waitFor(t, 5*time.Second, "the caller speaking", func() bool { return c.State() == StateUserSpeaking })
	r.clk.Advance(time.Second)
	r.stt.ev <- stt.Event{Kind: stt.Final, Text: "A table for two, please.", At: r.clk.Now()}
	speechEnd := r.clk.Now()
	c.vadCh <- vadEvent{speech: false, at: speechEnd}
	r.armed(2) // the endpoint (EndpointSilence) and the MaxWait fallback

	r.clk.Advance(silence - time.Millisecond)
	if n := r.clk.Armed(); n != 2 {
		t.Fatalf("%d timers armed 1 ms before the endpoint; want 2 (nothing fired)", n)
	}
	if l := userLines(c); len(l) != 0 {
		t.Fatalf("the turn ended before the endpointing silence: %+v", l)
	}

	r.clk.Advance(time.Millisecond)
	waitFor(t, 5*time.Second, "the caller's line", func() bool { return len(userLines(c)) == 1 })
	select {
	case <-r.llm.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the LLM was not asked for the reply")
	}
	l := userLines(c)[0]
	if l.Text != "A table for two, please." || !l.Start.Equal(r.t0) || !l.End.Equal(speechEnd) {
		t.Errorf("caller's line = %q %v–%v; want the words from %v to %v", l.Text, l.Start, l.End, r.t0, speechEnd)
	}
	r.armed(0) // MaxWait was stopped with the turn
	if s := c.State(); s != StateThinking {
		t.Errorf("state = %s, want %s", s, StateThinking)
	}

	c.End(EndCompleted)
	turns := c.Turns()
	if len(turns) != 1 {
		t.Fatalf("turns = %+v, want one", turns)
	}
	m := turns[0]
	if m.Endpointing != "vad" || !m.SpeechEnd.Equal(speechEnd) || !m.EndOfTurn.Equal(speechEnd.Add(silence)) {
		t.Errorf("turn = endpointing %q, speech end %v, end of turn %v; want vad, %v, %v",
			m.Endpointing, m.SpeechEnd, m.EndOfTurn, speechEnd, speechEnd.Add(silence))
	}
}

// TestSilenceTimeoutOnManualClock: with nobody speaking, the reprompt is spoken exactly
// SilenceTimeout after the agent started listening, and the call ends (silence_timeout) exactly
// SilenceTimeout after the last reprompt was heard.
func TestSilenceTimeoutOnManualClock(t *testing.T) {
	const timeout = 5 * time.Second
	r := newClockRig(t, Agent{SystemPrompt: "x", SilenceTimeout: timeout, Reprompts: 1, RepromptText: "Are you still there?"}, 0)
	c := r.conv
	r.armed(1) // the silence timeout

	r.clk.Advance(timeout - time.Millisecond)
	if n := r.clk.Armed(); n != 1 {
		t.Fatalf("%d timers armed 1 ms before the silence timeout; want 1 (nothing fired)", n)
	}
	if got := r.tts.texts(); len(got) != 0 {
		t.Fatalf("spoke %q before the silence timeout", got)
	}

	r.clk.Advance(time.Millisecond)
	waitFor(t, 5*time.Second, "the reprompt heard and the agent listening again", func() bool {
		return len(agentLines(c)) == 1 && c.State() == StateListening && r.clk.Armed() == 1
	})
	l := agentLines(c)[0]
	at := r.t0.Add(timeout)
	if l.Text != "Are you still there?" || !l.Start.Equal(at) || !l.End.Equal(at) {
		t.Errorf("reprompt line = %q %v–%v; want the reprompt at %v", l.Text, l.Start, l.End, at)
	}
	if got := r.tts.texts(); len(got) != 1 || got[0] != "Are you still there?" {
		t.Errorf("TTS asked for %q, want the reprompt once", got)
	}

	r.clk.Advance(timeout - time.Millisecond)
	select {
	case <-c.Done():
		t.Fatalf("ended (%s) before the second silence timeout", c.EndReason())
	default:
	}
	r.clk.Advance(time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end at the second silence timeout")
	}
	if got := c.EndReason(); got != EndSilenceTimeout {
		t.Errorf("end reason = %s, want %s", got, EndSilenceTimeout)
	}
	r.port.mu.Lock()
	h := append([]EndReason(nil), r.port.hangups...)
	r.port.mu.Unlock()
	if len(h) != 1 || h[0] != EndSilenceTimeout {
		t.Errorf("hang-ups = %v, want one with %s", h, EndSilenceTimeout)
	}
	if got, want := c.Cost().CallSeconds, (2 * timeout).Seconds(); got != want {
		t.Errorf("call seconds = %v, want %v (the clock's)", got, want)
	}
}

// TestBargeInOnManualClock: the caller speaking over the agent cuts it exactly BargeInMin after
// the speech began (the VAD already heard SpeechStart of it), and not 1 ms before.
func TestBargeInOnManualClock(t *testing.T) {
	r := newClockRig(t, Agent{SystemPrompt: "x", FirstMessage: "Hello, and welcome to the example company."}, 5*time.Second)
	c := r.conv
	waitFor(t, 5*time.Second, "the greeting playing", func() bool { return c.State() == StateAgentSpeaking })

	c.vadCh <- vadEvent{speech: true, at: r.clk.Now()}
	r.armed(1) // the barge-in timer
	rest := c.agent.Turn.BargeInMin - c.agent.Turn.SpeechStart
	r.clk.Advance(rest - time.Millisecond)
	if n := r.clk.Armed(); n != 1 || c.State() != StateAgentSpeaking {
		t.Fatalf("1 ms before BargeInMin: %d timers armed, state %s; want the agent still speaking", n, c.State())
	}
	r.clk.Advance(time.Millisecond)
	waitFor(t, 5*time.Second, "the agent cut off", func() bool { return c.State() == StateUserSpeaking })
	for _, l := range agentLines(c) { // the caller may have heard too little for a line
		if !l.Interrupted || l.Text == c.first {
			t.Errorf("greeting line = %+v; want the part heard, marked interrupted", l)
		}
	}
}

// TestDTMFTimeoutOnManualClock: a turn of keypad digits ends exactly DTMFTimeout after the last
// digit, and not 1 ms before.
func TestDTMFTimeoutOnManualClock(t *testing.T) {
	r := newClockRig(t, Agent{SystemPrompt: "x"}, 0)
	c := r.conv
	wait := c.agent.Turn.DTMFTimeout

	c.PushDTMF('4')
	r.armed(1) // the inter-digit timeout
	r.clk.Advance(wait / 2)
	c.PushDTMF('2')
	waitFor(t, 5*time.Second, "the second digit", func() bool { return len(userLines(c)) == 2 })
	last := r.clk.Now()
	r.clk.Advance(wait - time.Millisecond)
	select {
	case <-r.llm.asked:
		t.Fatal("the turn of digits ended before the inter-digit timeout")
	default:
	}
	if n := r.clk.Armed(); n != 1 {
		t.Fatalf("%d timers armed 1 ms before the inter-digit timeout; want 1", n)
	}
	r.clk.Advance(time.Millisecond)
	select {
	case <-r.llm.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the LLM was not asked after the inter-digit timeout")
	}
	c.End(EndCompleted)
	turns := c.Turns()
	if len(turns) != 1 || turns[0].Endpointing != "dtmf_timeout" || !turns[0].EndOfTurn.Equal(last.Add(wait)) {
		t.Errorf("turns = %+v; want one ended by dtmf_timeout at %v", turns, last.Add(wait))
	}
}

func userLines(c *Conversation) []Line  { return linesOf(c, RoleUser) }
func agentLines(c *Conversation) []Line { return linesOf(c, RoleAgent) }

// linesOf returns the transcript's lines of a role.
func linesOf(c *Conversation, role Role) []Line {
	var out []Line
	for _, l := range c.Transcript() {
		if l.Role == role {
			out = append(out, l)
		}
	}
	return out
}

// waitLLM thinks until its context is cancelled; asked receives a value for each request.
type waitLLM struct{ asked chan struct{} }

func (w *waitLLM) Stream(ctx context.Context, _ llm.Request) (llm.Stream, error) {
	select {
	case w.asked <- struct{}{}:
	default:
	}
	return waitStream{ctx}, nil
}

type waitStream struct{ ctx context.Context }

func (s waitStream) Recv() (llm.Event, error) { <-s.ctx.Done(); return llm.Event{}, s.ctx.Err() }
func (s waitStream) Close() error             { return nil }

// recTTS records what it is asked to say and says samples of tone for it (0: one frame).
type recTTS struct {
	samples int
	mu      sync.Mutex
	said    []string
}

func (r *recTTS) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	r.mu.Lock()
	r.said = append(r.said, req.Text)
	r.mu.Unlock()
	return &toneStream{left: max(r.samples, media.SamplesPerFrame(media.PipelineRate))}, nil
}

func (r *recTTS) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.said...)
}
