package webrtc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/webrtc/internal/rigtest"
	"github.com/parley-voice/parley/webrtc/webrtctest"
)

// goPort is the audio port of a conversation driven from Go, standing in for a phone call leg:
// it keeps what the engine plays.
type goPort struct {
	mu     sync.Mutex
	frames int
}

func (p *goPort) SendFrame(f *media.Frame) { p.mu.Lock(); p.frames++; p.mu.Unlock() }
func (p *goPort) SendDTMF(context.Context, string) error {
	return session.ErrNotSupported
}
func (p *goPort) Transfer(context.Context, session.TransferRequest) error {
	return session.ErrNotSupported
}
func (p *goPort) Hangup(context.Context, session.EndReason) error { return nil }

// goCaller pushes 20 ms frames in real time: a tone that comes and goes (so turns end and the
// agent answers), over faint noise, like a phone line.
type goCaller struct {
	stop chan struct{}
	done chan struct{}
}

func startGoCaller(conv *session.Conversation, freq float64, on, off time.Duration) *goCaller {
	c := &goCaller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tone := mediatest.NewTone(freq, -20, media.PipelineRate)
		noise := mediatest.NewWhiteNoise(3)
		t := time.NewTicker(media.FrameDuration)
		defer t.Stop()
		var f media.Frame
		start := time.Now()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			f.Init(media.PipelineRate)
			if time.Since(start)%(on+off) < on {
				tone.Fill(f.Samples[:f.N])
			} else {
				noise.Fill(f.Samples[:f.N], -70)
			}
			conv.PushFrame(&f)
		}
	}()
	return c
}

func (c *goCaller) Stop() { close(c.stop); <-c.done }

// phoneCall starts a conversation driven by a Go caller (as a phone call would be) and
// registers it for listening.
func phoneCall(t *testing.T, s *testService, e *rigtest.Engine, id string) *session.Conversation {
	t.Helper()
	conv := e.Conversation(id, bookingAgent, s.Sink(id, nil))
	ctx, cancel := context.WithCancel(context.Background())
	if err := conv.StartVoice(ctx, &goPort{}); err != nil {
		t.Fatal(err)
	}
	unregister := s.Register(conv)
	caller := startGoCaller(conv, 1000, 700*time.Millisecond, 900*time.Millisecond)
	t.Cleanup(func() {
		caller.Stop()
		unregister()
		conv.End(session.EndCallerHungUp)
		cancel()
	})
	return conv
}

// maxTone follows the loudest level of freq seen in the last 300 ms of track i.
func maxTone(c *webrtctest.Client, i int, freq float64, best *float64) {
	if l := toneIn(c.Received(i), 300*time.Millisecond, freq); l > *best {
		*best = l
	}
}

// A listener joins a phone-like call (frames pushed from Go, no WebRTC caller) and hears both
// sides mixed on one track: the caller's 1 kHz and the agent's 440 Hz; it also gets the
// transcript so far and live.
func TestListenMixed(t *testing.T) {
	e := newEngine(t, engineOptions{DGScript: []string{"hello there"}})
	s := newTestService(t, Options{})
	phoneCall(t, s, e, "phone-1")
	ctx := context.Background()
	lt, err := s.CreateListenToken(ctx, "phone-1", ModeListen)
	if err != nil {
		t.Fatal(err)
	}
	l := dial(t, lt.URL, lt.Token, webrtctest.Options{})
	if w := l.Welcome(); w.Role != "listener" || w.Send || w.Receive != 1 {
		t.Fatalf("welcome %+v", w)
	}
	var caller, agent float64 = -200, -200
	waitFor(t, 15*time.Second, "both sides heard by the listener", func() bool {
		maxTone(l, 0, 1000, &caller)
		maxTone(l, 0, 440, &agent)
		return caller > -40 && agent > -40
	})
	waitFor(t, 10*time.Second, "transcript at the listener", func() bool {
		// The greeting may be cut short: the caller's tone barges in.
		return hasLine(l, "agent", "Hello") && hasLine(l, "user", "hello there") && hasLine(l, "agent", "Okay.")
	})
	if len(l.TrackIDs()) != 1 || l.TrackIDs()[0] != "mix" {
		t.Fatalf("tracks %v, want one mixed track", l.TrackIDs())
	}
	// A listener may not take over.
	l.Takeover(true)
	waitFor(t, 3*time.Second, "refusal", func() bool { return len(l.Errors()) > 0 })
}

// A listener of a web call asking for split tracks gets the call's own packets forwarded on two
// tracks, without transcoding: the caller's Opus from the caller's browser, the agent's Opus
// as encoded for the caller.
func TestListenSplitForwarded(t *testing.T) {
	e := newEngine(t, engineOptions{DGScript: []string{"hello there"}})
	s := newTestService(t, Options{})
	ctx := context.Background()
	wc, _ := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "conv-split", Start: e.Start("conv-split", bookingAgent)})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	c.SendTone(1000, -20)
	waitFor(t, 5*time.Second, "the caller's audio flowing", func() bool { return e.AudioBytes() > 3200 })
	lt, _ := s.CreateListenToken(ctx, "conv-split", ModeListen)
	l := dial(t, lt.URL, lt.Token, webrtctest.Options{Tracks: "split"})
	if w := l.Welcome(); w.Receive != 2 {
		t.Fatalf("welcome %+v", w)
	}
	waitFor(t, 5*time.Second, "two tracks", func() bool { return len(l.TrackIDs()) == 2 })
	ids := l.TrackIDs()
	ci, ai := 0, 1
	if ids[0] == "agent" {
		ci, ai = 1, 0
	}
	if ids[ci] != "caller" || ids[ai] != "agent" {
		t.Fatalf("track ids %v", ids)
	}
	var callerOnCaller, agentOnAgent float64 = -200, -200
	waitFor(t, 15*time.Second, "each side on its own track", func() bool {
		maxTone(l, ci, 1000, &callerOnCaller)
		maxTone(l, ai, 440, &agentOnAgent)
		return callerOnCaller > -40 && agentOnAgent > -40
	})
	if bleed := toneIn(l.Received(ci), 2*time.Second, 440); bleed > -50 {
		t.Fatalf("the agent's tone is on the caller's track (%.1f dBFS)", bleed)
	}
	// Forwarded, not transcoded: the listener runs no encoder and no tap of its own.
	for _, p := range s.peerList() {
		if p.role == roleListener && (len(p.lis.senders) != 0 || p.lis.removeTap != nil) {
			t.Fatalf("the split listener transcodes (%d encoders)", len(p.lis.senders))
		}
	}
	l.Close()
	c.Close()
	s.Close()
	checkNoLeaks(t)
}

// A human takes over a web call: the agent stops, the human's voice (a 700 Hz tone) reaches the
// caller, the page learns it, and handing back resumes the agent.
func TestTakeover(t *testing.T) {
	e := newEngine(t, engineOptions{DGScript: []string{"hello there", "i need a person"}})
	s := newTestService(t, Options{})
	ctx := context.Background()
	wc, _ := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "conv-take", Start: e.Start("conv-take", bookingAgent)})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	waitFor(t, 5*time.Second, "conversation registered", func() bool {
		_, err := s.CreateListenToken(ctx, "conv-take", ModeTakeover)
		return err == nil
	})
	tt, _ := s.CreateListenToken(ctx, "conv-take", ModeTakeover)
	h := dial(t, tt.URL, tt.Token, webrtctest.Options{})
	if w := h.Welcome(); w.Role != "takeover" || !w.Send {
		t.Fatalf("welcome %+v", w)
	}
	waitFor(t, 10*time.Second, "greeting done", func() bool { return hasLine(c, "agent", "Hello, how can I help?") })

	h.Takeover(true)
	waitFor(t, 5*time.Second, "takeover started", func() bool { return hasLine(c, "system", "took over") })
	h.SendPCM(mediatest.Sine(media.PipelineRate, media.PipelineRate, 700, -20)) // one second of "speech", then quiet
	var human float64 = -200
	waitFor(t, 10*time.Second, "the human's voice at the caller", func() bool {
		maxTone(c, 0, 700, &human)
		return human > -40
	})
	waitFor(t, 10*time.Second, "the human's words as an agent line marked human", func() bool {
		for _, l := range c.Lines() {
			if l.Role == "agent" && l.Meta["human"] == true {
				return true
			}
		}
		return false
	})
	h.SetSource(nil)
	h.Takeover(false)
	waitFor(t, 5*time.Second, "handed back", func() bool { return hasLine(c, "system", "handed the conversation back") })
	// The agent is back: the caller speaks and the agent answers.
	c.SendPCM(mediatest.Sine(media.PipelineRate, media.PipelineRate, 1000, -20))
	waitFor(t, 10*time.Second, "the agent answering after the hand-back", func() bool { return hasLine(c, "agent", "Okay.") })
	if r := e.Conv(0).EndReason(); r != "" {
		t.Fatalf("the call ended: %s", r)
	}
	// The takeover page leaves: the caller's call goes on; then the caller hangs up.
	h.Hangup()
	waitFor(t, 5*time.Second, "the takeover page gone", func() bool { return s.ActiveCalls() == 1 })
	h.Close()
	if r := e.Conv(0).EndReason(); r != "" {
		t.Fatalf("the takeover page's leaving ended the call: %s", r)
	}
	c.Hangup()
	waitFor(t, 5*time.Second, "the call over", func() bool { return e.Conv(0).EndReason() == session.EndCallerHungUp })
	c.Close()
	s.Close()
	checkNoLeaks(t)
}
