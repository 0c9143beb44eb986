// Package rigtest holds what the webrtc package's tests share with tests elsewhere in webrtc/:
// the conversation engine wired to the vendor fakes through the real adapters (as the session
// package's own rig does), and helpers that drive the join page in headless Chromium. It is for
// tests only and must never be imported by production code.
package rigtest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/session/llm"
)

// QuietLog discards logs, unless PARLEY_TEST_LOG is set (then everything goes to stderr).
func QuietLog() *slog.Logger {
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// EngineOptions script the fakes.
type EngineOptions struct {
	// DGScript is what the fake Deepgram says each utterance was (cycling).
	DGScript []string
	// Turns are the fake LLM's answers, in order; after them it says "Okay.".
	Turns []fakes.ScriptTurn
	// Speech makes the fake ElevenLabs speak with espeak-ng instead of a 440 Hz tone (it falls
	// back to the tone when espeak-ng is missing). Opus DTX treats a steady tone as background
	// noise after a second or two and stops sending; speech keeps the packets coming as a real
	// agent's voice does.
	Speech bool
}

// Vendors are the fake providers, served over HTTP: Deepgram (speech found by energy, words
// from a script), OpenAI chat and ElevenLabs (a 440 Hz tone).
type Vendors struct {
	DG                    *fakes.DeepgramFake
	Chat                  *fakes.OpenAIChatFake
	EL                    *fakes.ElevenLabsFake
	DGURL, ChatURL, ELURL string
}

// StartVendors serves the fakes until the test ends.
func StartVendors(t testing.TB, o EngineOptions) *Vendors {
	v := &Vendors{}
	script := fakes.NewScript(o.Turns...)
	script.SetFallback(func(string) fakes.ScriptTurn { return fakes.ScriptTurn{Text: "Okay."} })
	v.Chat = fakes.NewOpenAIChatFake(fakes.ScriptOptions{Script: script, APIKey: "sk-test", TokensPerSecond: 400})
	chatSrv := httptest.NewServer(v.Chat)
	t.Cleanup(chatSrv.Close)
	t.Cleanup(v.Chat.Close)
	v.DG = fakes.NewDeepgramFake(fakes.DeepgramFakeOptions{Script: o.DGScript, FinalDelay: 20 * time.Millisecond})
	dgSrv := httptest.NewServer(v.DG)
	t.Cleanup(dgSrv.Close)
	t.Cleanup(func() { v.DG.Close() })
	v.EL = fakes.NewElevenLabsFake(fakes.ElevenLabsFakeOptions{FirstByte: 20 * time.Millisecond, Speed: 4, PerChar: 40 * time.Millisecond, ToneHz: 440, Espeak: o.Speech})
	elSrv := httptest.NewServer(v.EL)
	t.Cleanup(elSrv.Close)
	v.DGURL, v.ChatURL, v.ELURL = dgSrv.URL, chatSrv.URL, elSrv.URL
	return v
}

// Engine builds conversations on the real adapters and records them.
type Engine struct {
	t testing.TB
	*Vendors
	LLM llm.Client
	STT stt.Recognizer
	TTS tts.Synthesizer

	mu    sync.Mutex
	convs []*session.Conversation
	sinks []*RecSink
}

// NewEngine starts the fakes and the adapters.
func NewEngine(t testing.TB, o EngineOptions) *Engine {
	t.Helper()
	v := StartVendors(t, o)
	e := EngineAt(t, v.DGURL, v.ChatURL, v.ELURL)
	e.Vendors = v
	return e
}

// EngineAt builds the real adapters against providers at these URLs (Vendors stays nil).
func EngineAt(t testing.TB, dgURL, chatURL, elURL string) *Engine {
	e := &Engine{t: t}
	var err error
	e.LLM, err = llm.NewOpenAI(llm.Config{BaseURL: chatURL, APIKey: "sk-test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	e.STT, err = stt.NewDeepgram(stt.DeepgramConfig{BaseURL: dgURL, APIKey: "dg-key", ReconnectWindow: 5 * time.Second, Logger: QuietLog()})
	if err != nil {
		t.Fatal(err)
	}
	e.TTS, err = tts.NewElevenLabs(tts.ElevenLabsConfig{BaseURL: elURL, APIKey: "el-key", Voice: "voice1", FirstByteTimeout: 2 * time.Second, MaxRetries: -1, Logger: QuietLog()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Conversation builds (does not start) a conversation; sink may be nil.
func (e *Engine) Conversation(id string, agent session.Agent, sink session.Sink) *session.Conversation {
	e.t.Helper()
	if agent.STT.Endpointing == 0 {
		agent.STT.Endpointing = 300 * time.Millisecond
	}
	rec := &RecSink{Next: sink}
	conv, err := session.New(session.Options{ID: id, Agent: agent, LLM: e.LLM, STT: e.STT, TTS: e.TTS, Sink: rec, Log: QuietLog()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.convs = append(e.convs, conv)
	e.sinks = append(e.sinks, rec)
	e.mu.Unlock()
	return conv
}

// Start returns a web call's Start function that runs agent as conversation id.
func (e *Engine) Start(id string, agent session.Agent) func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error) {
	return func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error) {
		conv := e.Conversation(id, agent, sink)
		if err := conv.StartVoice(ctx, port); err != nil {
			return nil, err
		}
		return conv, nil
	}
}

// Started returns how many conversations were built.
func (e *Engine) Started() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.convs)
}

// Conv returns the i-th conversation built (nil if none).
func (e *Engine) Conv(i int) *session.Conversation {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i >= len(e.convs) {
		return nil
	}
	return e.convs[i]
}

// Sink returns the recording sink of the i-th conversation (nil if none).
func (e *Engine) Sink(i int) *RecSink {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i >= len(e.sinks) {
		return nil
	}
	return e.sinks[i]
}

// AudioBytes returns the audio bytes the fake STT received, over every connection.
func (e *Engine) AudioBytes() int64 {
	var n int64
	for _, c := range e.DG.Connections() {
		n += c.AudioBytes
	}
	return n
}

// RecSink records what the engine reports and passes it on to Next.
type RecSink struct {
	Next  session.Sink
	mu    sync.Mutex
	lines []session.Line
	ended session.EndReason
}

// LineAdded implements session.Sink.
func (s *RecSink) LineAdded(l session.Line) {
	s.mu.Lock()
	s.lines = append(s.lines, l)
	s.mu.Unlock()
	if s.Next != nil {
		s.Next.LineAdded(l)
	}
}

// Interim implements session.Sink.
func (s *RecSink) Interim(t string) {
	if s.Next != nil {
		s.Next.Interim(t)
	}
}

// StateChanged implements session.Sink.
func (s *RecSink) StateChanged(st session.State) {
	if s.Next != nil {
		s.Next.StateChanged(st)
	}
}

// TurnCompleted implements session.Sink.
func (s *RecSink) TurnCompleted(m session.TurnMetrics) {
	if s.Next != nil {
		s.Next.TurnCompleted(m)
	}
}

// Ended implements session.Sink.
func (s *RecSink) Ended(r session.EndReason, c session.Cost) {
	s.mu.Lock()
	s.ended = r
	s.mu.Unlock()
	if s.Next != nil {
		s.Next.Ended(r, c)
	}
}

// Lines returns the lines recorded.
func (s *RecSink) Lines() []session.Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]session.Line(nil), s.lines...)
}

// EndedWith returns the end reason reported ("" while live).
func (s *RecSink) EndedWith() session.EndReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AgentSaying implements session.AgentSayingSink: passed on to Next.
func (s *RecSink) AgentSaying(reply int, text string) {
	if as, ok := s.Next.(session.AgentSayingSink); ok {
		as.AgentSaying(reply, text)
	}
}
