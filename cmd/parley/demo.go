package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/providers"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
)

// The demo's scripted dialogue: what the caller says, what the fake recognizer hears, and what
// the fake LLM answers. Every reply is scripted; no vendor account is used.
var demoLines = []string{
	"Hi, I would like to book a table for tonight.",
	"Four people, please.",
	"Seven in the evening.",
	"No, that is all. Thank you!",
}

var demoHeard = []string{"hi i would like to book a table for tonight", "four people please", "seven in the evening", "no that is all thank you"}

var demoReplies = []fakes.ScriptTurn{
	{Text: "Of course. For how many people?"},
	{Text: "A table for four. What time would you like?"},
	{Text: "Done: a table for four at seven tonight. Is there anything else?"},
	{Text: "You're welcome. Enjoy your evening, goodbye!", ToolCalls: []fakes.ScriptToolCall{{Name: session.ToolEndCall, Args: json.RawMessage(`{}`)}}},
}

// cmdDemo runs a whole voice call through the real engine and the real adapters against the
// local fakes: a simulated caller speaks (espeak-ng), the agent answers (espeak-ng voice from
// the fake TTS), and the call is recorded to a stereo WAV (caller left, agent right).
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parley demo", flag.ContinueOnError)
	fs.SetOutput(stdout)
	out := fs.String("out", "data/demo.wav", "where to write the call's recording")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return usageError{err.Error()}
	}
	espeak, err := exec.LookPath("espeak-ng")
	if err != nil {
		return fmt.Errorf("the demo speaks with espeak-ng; install it (apt-get install espeak-ng)")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The fakes, on loopback, with realistic latencies.
	fk := fakes.NewServer(fakes.ServerOptions{LLMFirstToken: 250 * time.Millisecond, LLMTokensPerSec: 40,
		Script: fakes.NewScript(demoReplies...), STTScript: demoHeard, STTFinalDelay: 60 * time.Millisecond,
		TTSFirstByte: 120 * time.Millisecond, TTSSpeed: 4, TTSEspeak: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: fk}
	go hs.Serve(ln)
	defer func() { fk.Close(); hs.Close() }()

	reg := providers.New(providers.Config{FakesURL: "http://" + ln.Addr().String(), Log: log})
	llmc, err := reg.LLM(providers.OpenAI)
	if err != nil {
		return err
	}
	rec, err := reg.STT(providers.Deepgram)
	if err != nil {
		return err
	}
	syn, err := reg.TTS(providers.ElevenLabs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	recorder, err := media.CreateRecorder(ctx, *out, media.RecorderOptions{Format: media.RecordWAV})
	if err != nil {
		return err
	}
	agent := session.Agent{
		Name:         "Demo restaurant",
		SystemPrompt: "You book tables for {{restaurant}}. Be brief.",
		FirstMessage: "Hello, you are through to {{restaurant}}. How can I help?",
		LLMModel:     "demo-model",
		STT:          session.STTSettings{Endpointing: 400 * time.Millisecond},
		Tools:        []session.ToolSpec{{Name: session.ToolEndCall}},
		MaxDuration:  2 * time.Minute,
	}
	conv, err := session.New(session.Options{ID: "demo", Agent: agent, Variables: map[string]any{"restaurant": "Chez Parley"},
		LLM: llmc, STT: rec, TTS: syn, Log: log})
	if err != nil {
		return err
	}
	caller := newDemoCaller(conv)
	conv.AddTap(session.RecorderTap{Rec: recorder})
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := conv.StartVoice(cctx, caller); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Demo call started: a simulated caller talks to an agent whose replies are scripted (no vendor account).")
	go caller.run(cctx)
	for i, line := range demoLines {
		if !caller.waitAgentDone(cctx, 8*time.Second) {
			break
		}
		pcm, err := speak(cctx, espeak, line)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  caller says (%d/%d): %s\n", i+1, len(demoLines), line)
		caller.say(pcm)
	}
	select {
	case <-conv.Done():
	case <-cctx.Done():
		conv.End(session.EndCompleted)
	}
	caller.stop()
	if err := recorder.Close(); err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	fmt.Fprintln(stdout, "\nTranscript:")
	for _, l := range conv.Transcript() {
		if l.Role == session.RoleTool {
			continue
		}
		fmt.Fprintf(stdout, "  %-6s %s\n", l.Role, l.Text)
	}
	fmt.Fprintln(stdout, "\nTurn latency (caller's speech end → first agent audio; fakes: STT final +60ms, LLM first token 250ms, TTS first byte 120ms):")
	for _, m := range conv.Turns() {
		fmt.Fprintf(stdout, "  turn %d: %4d ms total: endpointing %3d ms, LLM first token %3d ms, first sentence %3d ms, TTS first byte %3d ms; Parley's own share %.2f ms\n", m.Turn,
			session.Span(m.SpeechEnd, m.FirstAudioOut).Milliseconds(), session.Span(m.SpeechEnd, m.EndOfTurn).Milliseconds(),
			session.Span(m.LLMRequestSent, m.LLMFirstToken).Milliseconds(), session.Span(m.LLMFirstToken, m.LLMFirstChunk).Milliseconds(),
			session.Span(m.TTSFirstRequest, m.TTSFirstByte).Milliseconds(), float64(m.ParleyShare().Microseconds())/1000)
	}
	fmt.Fprintf(stdout, "\nEnded: %s. Recording (caller left, agent right): %s\nListen with: play %s   (sox) or aplay %s\n", conv.EndReason(), *out, *out, *out)
	return nil
}

// speak renders text with espeak-ng at the pipeline rate.
func speak(ctx context.Context, espeak, text string) ([]int16, error) {
	s, err := tts.NewEspeak(tts.EspeakConfig{Path: espeak})
	if err != nil {
		return nil, err
	}
	st, err := s.Synthesize(ctx, tts.Request{Text: text, SampleRate: media.PipelineRate})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var pcm []int16
	buf := make([]int16, 1600)
	for {
		n, err := st.Read(buf)
		pcm = append(pcm, buf[:n]...)
		if err == io.EOF {
			return pcm, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// demoCaller is the simulated phone: it pushes its speech (or line noise) every 20 ms and
// listens for the agent.
type demoCaller struct {
	conv      *session.Conversation
	mu        sync.Mutex
	queue     []int16
	lastAgent time.Time
	heard     bool
	done      chan struct{}
	once      sync.Once
}

func newDemoCaller(c *session.Conversation) *demoCaller {
	return &demoCaller{conv: c, done: make(chan struct{})}
}

func (d *demoCaller) SendFrame(f *media.Frame) {
	var peak int16
	for _, s := range f.PCM() {
		if s > peak {
			peak = s
		}
	}
	if peak > 500 {
		d.mu.Lock()
		d.lastAgent, d.heard = time.Now(), true
		d.mu.Unlock()
	}
}
func (d *demoCaller) SendDTMF(context.Context, string) error { return session.ErrNotSupported }
func (d *demoCaller) Transfer(context.Context, session.TransferRequest) error {
	return session.ErrNotSupported
}
func (d *demoCaller) Hangup(context.Context, session.EndReason) error { return nil }

func (d *demoCaller) say(pcm []int16) {
	d.mu.Lock()
	d.queue = append(d.queue, pcm...)
	d.heard = false
	d.mu.Unlock()
}

// waitAgentDone waits until the agent has spoken and then been quiet for 700 ms.
func (d *demoCaller) waitAgentDone(ctx context.Context, max time.Duration) bool {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-d.conv.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
		d.mu.Lock()
		ok := d.heard && len(d.queue) == 0 && time.Since(d.lastAgent) > 700*time.Millisecond
		d.mu.Unlock()
		if ok {
			return true
		}
	}
	return true
}

func (d *demoCaller) run(ctx context.Context) {
	tk := time.NewTicker(media.FrameDuration)
	defer tk.Stop()
	var f media.Frame
	n := media.SamplesPerFrame(media.PipelineRate)
	seed := uint32(1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.done:
			return
		case <-tk.C:
		}
		f.Init(media.PipelineRate)
		for i := 0; i < n; i++ { // faint line noise: a phone line is never digitally silent
			seed = seed*1664525 + 1013904223
			f.Samples[i] = int16(int32(seed>>16)%7 - 3)
		}
		d.mu.Lock()
		k := min(n, len(d.queue))
		for i := 0; i < k; i++ {
			f.Samples[i] += d.queue[i]
		}
		d.queue = d.queue[k:]
		d.mu.Unlock()
		d.conv.PushFrame(&f)
	}
}

func (d *demoCaller) stop() { d.once.Do(func() { close(d.done) }) }
