package session

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/session/llm"
)

// rig is a conversation wired to the vendor fakes through the real adapters, with a simulated
// caller pushing real-time frames.
type rig struct {
	t      *testing.T
	dg     *fakes.DeepgramFake
	chat   *fakes.OpenAIChatFake
	el     *fakes.ElevenLabsFake
	script *fakes.Script
	port   *testPort
	sink   *testSink
	conv   *Conversation
	caller *caller
	llm    llm.Client
	stt    stt.Recognizer
	tts    tts.Synthesizer
}

type rigOptions struct {
	agent     Agent
	vars      map[string]any
	turns     []fakes.ScriptTurn
	dgScript  []string
	dgFinal   time.Duration
	ttsFirst  time.Duration
	ttsStall  bool
	tools     ToolRunner
	know      Knowledge // issue 16
	retry     bool
	noStart   bool
	sttKind   string // "deepgram" (default) or "openai"
	ttsChunks time.Duration
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, port: newTestPort(), sink: newTestSink()}
	r.script = fakes.NewScript(o.turns...)
	r.chat = fakes.NewOpenAIChatFake(fakes.ScriptOptions{Script: r.script, APIKey: "sk-test", TokensPerSecond: 200})
	chatSrv := httptest.NewServer(r.chat)
	t.Cleanup(chatSrv.Close)
	t.Cleanup(r.chat.Close)
	var client llm.Client
	client, err := llm.NewOpenAI(llm.Config{BaseURL: chatSrv.URL, APIKey: "sk-test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	if o.retry {
		client = llm.WithRetry(client, llm.RetryPolicy{Attempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
	}
	r.llm = client

	if o.sttKind == "openai" {
		f := fakes.NewOpenAISTTFake(fakes.OpenAISTTFakeOptions{Script: o.dgScript, Latency: o.dgFinal})
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		r.stt, err = stt.NewOpenAISTT(stt.OpenAISTTConfig{BaseURL: srv.URL, APIKey: "k", Model: "whisper-1"})
	} else {
		r.dg = fakes.NewDeepgramFake(fakes.DeepgramFakeOptions{Script: o.dgScript, FinalDelay: o.dgFinal})
		srv := httptest.NewServer(r.dg)
		t.Cleanup(srv.Close)
		t.Cleanup(func() { r.dg.Close() })
		r.stt, err = stt.NewDeepgram(stt.DeepgramConfig{BaseURL: srv.URL, APIKey: "dg-key", ReconnectWindow: 5 * time.Second})
	}
	if err != nil {
		t.Fatal(err)
	}
	first := o.ttsFirst
	if first == 0 {
		first = 20 * time.Millisecond
	}
	r.el = fakes.NewElevenLabsFake(fakes.ElevenLabsFakeOptions{FirstByte: first, Speed: 8, PerChar: 40 * time.Millisecond, ToneHz: 440, StallBeforeFirstByte: o.ttsStall})
	elSrv := httptest.NewServer(r.el)
	t.Cleanup(elSrv.Close)
	r.tts, err = tts.NewElevenLabs(tts.ElevenLabsConfig{BaseURL: elSrv.URL, APIKey: "el-key", Voice: "voice1", FirstByteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	a := o.agent
	if a.STT.Endpointing == 0 {
		a.STT.Endpointing = 300 * time.Millisecond
	}
	r.conv, err = New(Options{ID: "conv-test", Agent: a, Variables: o.vars, LLM: r.llm, STT: r.stt, TTS: r.tts, Tools: o.tools, Knowledge: o.know, Sink: r.sink, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r.caller = newCaller(r.conv)
	if !o.noStart {
		r.start()
	}
	return r
}

func (r *rig) start() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.conv.StartVoice(ctx, r.port); err != nil {
		r.t.Fatal(err)
	}
	go r.caller.run()
	r.t.Cleanup(func() {
		r.caller.stop()
		cancel()
		select {
		case <-r.conv.Done():
		case <-time.After(10 * time.Second):
			r.t.Error("conversation did not stop")
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lines returns the transcript's lines of a role.
func (r *rig) lines(role Role) []Line { return linesOf(r.conv, role) }

// testPort records what the engine plays and asks of the channel.
type testPort struct {
	mu        sync.Mutex
	frames    []frameRec
	hangups   []EndReason
	transfers []TransferRequest
	dtmf      []string
	transfer  func(TransferRequest) error
}

type frameRec struct {
	at  time.Time
	rms float64
}

func newTestPort() *testPort { return &testPort{} }

func (p *testPort) SendFrame(f *media.Frame) {
	var sum float64
	for _, s := range f.PCM() {
		sum += float64(s) * float64(s)
	}
	rms := 0.0
	if f.N > 0 {
		rms = math.Sqrt(sum / float64(f.N))
	}
	p.mu.Lock()
	p.frames = append(p.frames, frameRec{time.Now(), rms})
	p.mu.Unlock()
}

func (p *testPort) SendDTMF(ctx context.Context, d string) error {
	p.mu.Lock()
	p.dtmf = append(p.dtmf, d)
	p.mu.Unlock()
	return nil
}

func (p *testPort) Transfer(ctx context.Context, t TransferRequest) error {
	p.mu.Lock()
	p.transfers = append(p.transfers, t)
	fn := p.transfer
	p.mu.Unlock()
	if fn != nil {
		return fn(t)
	}
	return nil
}

func (p *testPort) Hangup(ctx context.Context, reason EndReason) error {
	p.mu.Lock()
	p.hangups = append(p.hangups, reason)
	p.mu.Unlock()
	return nil
}

func (p *testPort) frameTimes() []frameRec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]frameRec(nil), p.frames...)
}

// testSink records what the engine reports.
type testSink struct {
	mu     sync.Mutex
	states []stateRec
	turns  []TurnMetrics
	ended  EndReason
	lines  []Line
	interm []string
}

type stateRec struct {
	s  State
	at time.Time
}

func newTestSink() *testSink { return &testSink{} }

func (s *testSink) LineAdded(l Line) { s.mu.Lock(); s.lines = append(s.lines, l); s.mu.Unlock() }
func (s *testSink) Interim(t string) { s.mu.Lock(); s.interm = append(s.interm, t); s.mu.Unlock() }
func (s *testSink) StateChanged(st State) {
	s.mu.Lock()
	s.states = append(s.states, stateRec{st, time.Now()})
	s.mu.Unlock()
}
func (s *testSink) TurnCompleted(m TurnMetrics) {
	s.mu.Lock()
	s.turns = append(s.turns, m)
	s.mu.Unlock()
}
func (s *testSink) Ended(r EndReason, c Cost) { s.mu.Lock(); s.ended = r; s.mu.Unlock() }

func (s *testSink) endedWith() EndReason { s.mu.Lock(); defer s.mu.Unlock(); return s.ended }

// lastState returns when the engine last entered st.
func (s *testSink) lastState(st State) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.states) - 1; i >= 0; i-- {
		if s.states[i].s == st {
			return s.states[i].at
		}
	}
	return time.Time{}
}

// caller pushes 20 ms frames in real time: queued speech, else faint noise, like a phone line.
type caller struct {
	conv  *Conversation
	mu    sync.Mutex
	queue []int16
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	noise *mediatest.Noise
}

func newCaller(c *Conversation) *caller {
	return &caller{conv: c, quit: make(chan struct{}), done: make(chan struct{}), noise: mediatest.NewWhiteNoise(7)}
}

func (c *caller) say(pcm []int16) {
	c.mu.Lock()
	c.queue = append(c.queue, pcm...)
	c.mu.Unlock()
}

func (c *caller) speaking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) > 0
}

func (c *caller) run() {
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
		f.Init(media.PipelineRate)
		c.noise.Fill(f.Samples[:n], -70) // a phone line is never digitally silent
		c.mu.Lock()
		k := min(n, len(c.queue))
		for i := 0; i < k; i++ {
			f.Samples[i] = sat16(int32(f.Samples[i]) + int32(c.queue[i]))
		}
		c.queue = c.queue[k:]
		c.mu.Unlock()
		c.conv.PushFrame(&f)
	}
}

func (c *caller) stop() {
	c.once.Do(func() { close(c.quit) })
	<-c.done
}

// speech returns an utterance of real speech (espeak-ng) at the pipeline rate.
func speech(t *testing.T, text string) []int16 {
	return mediatest.Speech(t, text, media.PipelineRate)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// stubLLM is an LLM client that is never called.
type stubLLM struct{}

func (stubLLM) Stream(ctx context.Context, r llm.Request) (llm.Stream, error) {
	return nil, context.Canceled
}

func sat16(v int32) int16 {
	if v > 32767 {
		return 32767
	}
	if v < -32768 {
		return -32768
	}
	return int16(v)
}
