package sip_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sipgosip "github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/session/llm"
	"github.com/parley-voice/parley/sip"
)

// quiet is the logger of the tests; PARLEY_TEST_LOG=1 shows the server's lines.
func quiet() *slog.Logger {
	if os.Getenv("PARLEY_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// engine is the conversation engine wired to the vendor fakes through the real adapters, as
// session/rig_test.go does.
type engine struct {
	dg     *fakes.DeepgramFake
	chat   *fakes.OpenAIChatFake
	el     *fakes.ElevenLabsFake
	script *fakes.Script
	llm    llm.Client
	stt    stt.Recognizer
	tts    tts.Synthesizer
	agent  session.Agent
}

type engineOptions struct {
	agent      session.Agent
	noGreeting bool // the agent waits for the caller
	turns      []fakes.ScriptTurn
	dgScript   []string
}

func newEngine(t testing.TB, o engineOptions) *engine {
	t.Helper()
	e := &engine{agent: o.agent}
	e.script = fakes.NewScript(o.turns...)
	e.chat = fakes.NewOpenAIChatFake(fakes.ScriptOptions{Script: e.script, APIKey: "sk-test", TokensPerSecond: 400})
	chatSrv := httptest.NewServer(e.chat)
	t.Cleanup(chatSrv.Close)
	t.Cleanup(e.chat.Close)
	var err error
	if e.llm, err = llm.NewOpenAI(llm.Config{BaseURL: chatSrv.URL, APIKey: "sk-test", Model: "gpt-test"}); err != nil {
		t.Fatal(err)
	}
	e.dg = fakes.NewDeepgramFake(fakes.DeepgramFakeOptions{Script: o.dgScript})
	dgSrv := httptest.NewServer(e.dg)
	t.Cleanup(dgSrv.Close)
	t.Cleanup(func() { e.dg.Close() })
	if e.stt, err = stt.NewDeepgram(stt.DeepgramConfig{BaseURL: dgSrv.URL, APIKey: "dg-key", ReconnectWindow: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	e.el = fakes.NewElevenLabsFake(fakes.ElevenLabsFakeOptions{FirstByte: 10 * time.Millisecond, Speed: 8, PerChar: 40 * time.Millisecond, ToneHz: 440})
	elSrv := httptest.NewServer(e.el)
	t.Cleanup(elSrv.Close)
	if e.tts, err = tts.NewElevenLabs(tts.ElevenLabsConfig{BaseURL: elSrv.URL, APIKey: "el-key", Voice: "voice1", MaxRetries: -1}); err != nil {
		t.Fatal(err)
	}
	if e.agent.FirstMessage == "" && !o.noGreeting {
		e.agent.FirstMessage = "Hello, thanks for calling. How can I help you today?"
	}
	if e.agent.STT.Endpointing == 0 {
		e.agent.STT.Endpointing = 300 * time.Millisecond
	}
	return e
}

// factory builds a conversation for a call.
func (e *engine) factory() sip.ConversationFactory {
	return func(ctx context.Context, c *sip.Call) (*session.Conversation, error) {
		return session.New(session.Options{ID: c.ID(), Agent: e.agent, LLM: e.llm, STT: e.stt, TTS: e.tts, Log: quiet()})
	}
}

// heardSTTAudio reports whether the fake recognizer got audio and detected an utterance.
func (e *engine) utterances() int {
	n := 0
	for _, c := range e.dg.Connections() {
		n += c.Utterances
	}
	return n
}

// router is an in-memory number table.
type router struct {
	mu      sync.Mutex
	numbers map[string]sip.Plan
	refuse  map[string]*sip.Refusal
	calls   []sip.InboundCall
	events  []sip.Event
}

func newRouter() *router {
	return &router{numbers: map[string]sip.Plan{}, refuse: map[string]*sip.Refusal{}}
}

func (r *router) add(number string, p sip.Plan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.OnEvent == nil {
		p.OnEvent = r.record
	}
	r.numbers[number] = p
}

func (r *router) record(ev sip.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *router) Inbound(ctx context.Context, c sip.InboundCall) (sip.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if ref, ok := r.refuse[c.To]; ok {
		return sip.Plan{}, ref
	}
	p, ok := r.numbers[c.To]
	if !ok {
		return sip.Plan{}, sip.RefuseUnknownNumber(c.To)
	}
	return p, nil
}

func (r *router) kinds() []sip.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sip.EventKind
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}

func (r *router) lastEnded() (sip.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == sip.EventEnded {
			return r.events[i], true
		}
	}
	return sip.Event{}, false
}

// loopbackTrunk allows 127.0.0.1.
func loopbackTrunk(name string) sip.Trunk {
	return sip.Trunk{Name: name, URI: "sip:127.0.0.1:5060", Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

// newServer starts a Parley SIP server on 127.0.0.1 with ports from the OS and a random RTP
// range, and closes it at the end of the test.
func newServer(t testing.TB, o sip.Options) *sip.Server {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.RTPPorts == (media.PortRange{}) {
		// 20000–39999: baresip's tests take 40000 and up.
		base := testenv.RTPBase(399)
		o.RTPPorts = media.PortRange{Min: base, Max: base + 399}
	}
	if o.RTPIP == (netip.Addr{}) {
		o.RTPIP = netip.MustParseAddr("127.0.0.1")
	}
	if o.Logger == nil {
		o.Logger = quiet()
	}
	if o.Trunks == nil {
		o.Trunks = sip.NewStaticTrunks(loopbackTrunk("loop"))
	}
	if o.TransferAllow == nil {
		// The test phones are on loopback: allowed as the documented setting allows a LAN PBX.
		o.TransferAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	s, err := sip.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("server did not stop; goroutines in sip:\n%s", sipStacks())
		}
	})
	return s
}

// target is the SIP URI of number at the server over transport t.
func target(s *sip.Server, t sip.Transport, number string) string {
	return "sip:" + number + "@" + s.Addr(t).String()
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// toneLevel returns the level in dBFS of freq in the loudest 200 ms window of pcm (16 kHz).
func toneLevel(pcm []int16, freq float64) float64 {
	best := -200.0
	const win = 3200
	for i := 0; i+win <= len(pcm); i += win / 2 {
		if l := mediatest.DetectTone(pcm[i:i+win], 16000, freq); l > best {
			best = l
		}
	}
	return best
}

// toneSource returns a phone audio source: a tone at freq and dBFS.
func toneSource(freq, dBFS float64) func([]int16) {
	g := mediatest.NewTone(freq, dBFS, 16000)
	return func(dst []int16) { g.Fill(dst) }
}

// burstSource plays a tone for on, then silence for off, repeating: speech-like energy for the
// fake recognizer.
func burstSource(freq, dBFS float64, on, off time.Duration) func([]int16) {
	g := mediatest.NewTone(freq, dBFS, 16000)
	n := 0
	onN, period := int(on/media.FrameDuration), int((on+off)/media.FrameDuration)
	return func(dst []int16) {
		if n%period < onN {
			g.Fill(dst)
		} else {
			clear(dst)
		}
		n++
	}
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func init() {
	if os.Getenv("PARLEY_SIP_DEBUG") == "1" {
		sipgosip.SIPDebug = true // print every SIP message (debugging only)
	}
}

// sipStacks returns the stacks of the goroutines running code of this package, so that a
// server that does not stop says what it waits for.
func sipStacks() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "parley/sip.") && !strings.Contains(g, "sipStacks") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
