package session

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/session/llm"
)

// Tap receives copies of a voice conversation's audio, both directions, as 20 ms frames at
// media.PipelineRate: the caller's as it arrives, the agent's (or a human's during a takeover)
// as it is played. Both are called on media goroutines: they must not block and must not keep
// the frame. Recorders and listeners are taps.
type Tap interface {
	CallerFrame(f *media.Frame)
	AgentFrame(f *media.Frame)
}

// taps is a copy-on-write list so the media path reads it without locks or allocation.
type taps struct {
	mu   sync.Mutex
	list atomic.Pointer[[]Tap]
}

func (t *taps) add(x Tap) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur []Tap
	if p := t.list.Load(); p != nil {
		cur = *p
	}
	next := append(append([]Tap(nil), cur...), x)
	t.list.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			cur := *t.list.Load()
			var next []Tap
			for _, y := range cur {
				if y != x {
					next = append(next, y)
				}
			}
			t.list.Store(&next)
		})
	}
}

func (t *taps) caller(f *media.Frame) {
	if p := t.list.Load(); p != nil {
		for _, x := range *p {
			x.CallerFrame(f)
		}
	}
}

func (t *taps) agent(f *media.Frame) {
	if p := t.list.Load(); p != nil {
		for _, x := range *p {
			x.AgentFrame(f)
		}
	}
}

// HoldTap is a Tap that is told when the call goes on hold and comes back (issue 22 item 4):
// a recorder pauses, so the recording holds neither the hold music nor the wait.
type HoldTap interface {
	Hold(on bool)
}

// hold tells the taps that listen whether the call is on hold.
func (t *taps) hold(on bool) {
	if p := t.list.Load(); p != nil {
		for _, x := range *p {
			if h, ok := x.(HoldTap); ok {
				h.Hold(on)
			}
		}
	}
}

// AddTap adds a tap; the returned function removes it.
func (c *Conversation) AddTap(t Tap) (remove func()) { return c.taps.add(t) }

// RecorderTap records a conversation's two sides with a media.Recorder.
type RecorderTap struct{ Rec *media.Recorder }

// CallerFrame implements Tap.
func (r RecorderTap) CallerFrame(f *media.Frame) { r.Rec.WriteFrame(media.RecordCaller, f) }

// AgentFrame implements Tap.
func (r RecorderTap) AgentFrame(f *media.Frame) { r.Rec.WriteFrame(media.RecordAgent, f) }

// Hold implements HoldTap: the recording pauses while the call is on hold.
func (r RecorderTap) Hold(on bool) { HoldRecorder{Rec: r.Rec}.Hold(on) }

// HoldRecorder is a tap that only pauses and resumes a recorder fed elsewhere (a phone call's
// recorder is fed by the SIP leg's own tap).
type HoldRecorder struct{ Rec *media.Recorder }

// CallerFrame implements Tap; the frames reach the recorder another way.
func (HoldRecorder) CallerFrame(*media.Frame) {}

// AgentFrame implements Tap.
func (HoldRecorder) AgentFrame(*media.Frame) {}

// Hold implements HoldTap.
func (h HoldRecorder) Hold(on bool) {
	if on {
		h.Rec.Pause()
	} else {
		h.Rec.Resume()
	}
}

// PushText hands the engine text the caller typed during a voice call (a browser page's text
// box): it is a caller turn of its own, and interrupts the agent if it is speaking.
func (c *Conversation) PushText(text string) {
	text = strings.TrimSpace(text)
	if text == "" || !c.pushOK.Load() {
		return
	}
	select {
	case c.textCh <- text:
	default:
	}
}

func (c *Conversation) onText(text string) {
	if c.takeover != nil {
		c.takeoverLine(RoleUser, text, map[string]any{"typed": true})
		return
	}
	if c.state == StateAgentSpeaking || c.state == StateThinking {
		c.listTurn(true)
		c.cancelResponse()
		c.stopSpeaking(true)
	}
	c.setState(StateUserSpeaking)
	c.finals = append(c.finals[:0], text)
	now := c.now()
	c.speechStart, c.speechEnd = now, now
	c.cur = TurnMetrics{STTFinal: now}
	c.endTurn("text")
}

// ErrTakeoverActive says a human has already taken the conversation over.
var ErrTakeoverActive = errors.New("session: a human has already taken over")

// Takeover is a human speaking instead of the agent.
type Takeover struct {
	c      *Conversation
	vad    *media.VAD
	stream stt.Stream
	once   sync.Once
	ended  chan struct{}
	frame  media.Frame
}

// StartTakeover pauses the agent: from now on the human's frames (Send) go to the caller instead
// of the agent's voice; the caller is still transcribed, and the human's words are transcribed
// as agent lines marked human. End hands the conversation back to the agent, which then knows
// what was said.
func (c *Conversation) StartTakeover() (*Takeover, error) {
	if !c.started.Load() {
		return nil, errors.New("session: takeover needs a live voice conversation")
	}
	vad, err := media.NewVAD(media.VADOptions{Rate: media.PipelineRate, Aggressiveness: c.opts.VADAggressiveness})
	if err != nil {
		return nil, err
	}
	s, err := c.stt.Open(c.ctx, c.sttOptions())
	if err != nil {
		return nil, err
	}
	t := &Takeover{c: c, vad: vad, stream: s, ended: make(chan struct{})}
	res := make(chan error, 1)
	select {
	case c.takeCh <- takeReq{t: t, start: true, res: res}:
	case <-c.ctx.Done(): // ending: the loop may be gone (and Done may wait for our caller)
		s.Close()
		return nil, ErrEnded
	}
	select {
	case err := <-res:
		if err != nil {
			s.Close()
			return nil, err
		}
	case <-c.ctx.Done():
		s.Close()
		return nil, ErrEnded
	}
	c.wg.Add(1)
	go t.transcribe()
	return t, nil
}

// Send plays one 20 ms frame of the human's voice to the caller. It never blocks: when the
// output is backed up the frame is dropped.
func (t *Takeover) Send(f *media.Frame) {
	select {
	case <-t.ended:
		return
	default:
	}
	pcm := f.PCM()
	t.c.out.writeRaw(pcm)
	voiced, err := t.vad.Process(pcm)
	if err == nil {
		_ = t.stream.Write(pcm, voiced)
	}
}

// End hands the conversation back to the agent.
func (t *Takeover) End() {
	t.once.Do(func() {
		close(t.ended)
		res := make(chan error, 1)
		select {
		case t.c.takeCh <- takeReq{t: t, res: res}:
			select {
			case <-res:
			case <-t.c.ctx.Done():
			}
		case <-t.c.ctx.Done():
		}
		t.stream.Close()
	})
}

// transcribe turns the human's speech into agent lines.
func (t *Takeover) transcribe() {
	defer t.c.wg.Done()
	for ev := range t.stream.Events() {
		if ev.Kind != stt.Final || strings.TrimSpace(ev.Text) == "" {
			continue
		}
		select {
		case t.c.humanCh <- strings.TrimSpace(ev.Text):
		case <-t.c.ctx.Done():
			return
		}
	}
}

type takeReq struct {
	t     *Takeover
	start bool
	res   chan error
}

// onTakeover starts or ends a takeover in the loop.
func (c *Conversation) onTakeover(r takeReq) {
	if r.start {
		if c.takeover != nil {
			r.res <- ErrTakeoverActive
			return
		}
		c.cancelResponse()
		c.stopSpeaking(true)
		c.tSilence.stop()
		c.takeover = r.t
		c.setState(StateTakeover)
		now := c.now()
		c.addLine(Line{Role: RoleSystem, Text: "a human took over the conversation", Start: now, End: now})
		r.res <- nil
		return
	}
	if c.takeover != r.t {
		r.res <- nil
		return
	}
	c.takeover = nil
	now := c.now()
	c.addLine(Line{Role: RoleSystem, Text: "the human handed the conversation back to the agent", Start: now, End: now})
	c.appendHistory(llm.Message{Role: llm.RoleUser, Content: "[A human colleague spoke with the caller for a while (see above) and has now handed the conversation back to you. Carry on from there.]"}, -1)
	c.finals, c.interim = nil, ""
	c.enterListening()
	r.res <- nil
}

// takeoverLine records a line said during a takeover and keeps it in the agent's history.
func (c *Conversation) takeoverLine(role Role, text string, meta map[string]any) {
	now := c.now()
	c.addLine(Line{Role: role, Text: text, Start: now, End: now, Meta: meta})
	if role == RoleUser {
		c.appendHistory(llm.Message{Role: llm.RoleUser, Content: text}, -1)
	} else {
		c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: "[human colleague] " + text}, -1)
	}
}
