package session

import (
	"context"
	"io"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/session/llm"
)

// nullSTT is a recognizer whose stream drops audio, for measuring the engine's own frame path.
type nullSTT struct{ ev chan stt.Event }

func (n *nullSTT) Open(ctx context.Context, o stt.StreamOptions) (stt.Stream, error) {
	n.ev = make(chan stt.Event, 16)
	return n, nil
}
func (n *nullSTT) Write(pcm []int16, voiced bool) error { return nil }
func (n *nullSTT) Events() <-chan stt.Event             { return n.ev }
func (n *nullSTT) Close() error                         { return nil }
func (n *nullSTT) Stats() stt.Stats                     { return stt.Stats{} }

type nullPort struct{}

func (nullPort) SendFrame(*media.Frame)                          {}
func (nullPort) SendDTMF(context.Context, string) error          { return nil }
func (nullPort) Transfer(context.Context, TransferRequest) error { return ErrNotSupported }
func (nullPort) Hangup(context.Context, EndReason) error         { return nil }

// BenchmarkPushFrame is the engine's per-frame cost on the media path: VAD, recognizer write,
// speech tracking, taps. It must not allocate.
func BenchmarkPushFrame(b *testing.B) {
	c, err := New(Options{ID: "bench", Agent: Agent{SystemPrompt: "x"}, LLM: stubLLM{}, STT: &nullSTT{}, TTS: nullTTS{}, Log: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.StartVoice(ctx, nullPort{}); err != nil {
		b.Fatal(err)
	}
	var f media.Frame
	f.Init(media.PipelineRate)
	for i := range f.PCM() {
		f.Samples[i] = int16((i * 37) % 200)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.PushFrame(&f)
	}
	b.StopTimer()
	c.End(EndCompleted)
}

type nullTTS struct{}

func (nullTTS) Synthesize(ctx context.Context, r tts.Request) (tts.Stream, error) {
	return nil, io.EOF
}

// zeroTTS streams 200 ms of a tone at once: a zero-latency TTS.
type zeroTTS struct{}

func (zeroTTS) Synthesize(ctx context.Context, r tts.Request) (tts.Stream, error) {
	return &toneStream{left: 3200}, nil
}

type toneStream struct{ left int }

func (s *toneStream) Read(buf []int16) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	n := min(len(buf), s.left)
	for i := 0; i < n; i++ {
		buf[i] = 8000
	}
	s.left -= n
	return n, nil
}
func (s *toneStream) Alignment() []tts.Mark { return nil }
func (s *toneStream) Close() error          { return nil }

// scriptedSTT ends a turn whenever the benchmark asks.
type scriptedSTT struct {
	mu sync.Mutex
	ev chan stt.Event
}

func (s *scriptedSTT) Open(ctx context.Context, o stt.StreamOptions) (stt.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ev = make(chan stt.Event, 16)
	return s, nil
}
func (s *scriptedSTT) Write(pcm []int16, voiced bool) error { return nil }
func (s *scriptedSTT) Events() <-chan stt.Event             { return s.ev }
func (s *scriptedSTT) Close() error                         { return nil }
func (s *scriptedSTT) Stats() stt.Stats                     { return stt.Stats{} }

// BenchmarkEngineTurn measures Parley's own share of one voice turn with zero-latency providers:
// from the end-of-turn decision (the recognizer's final with speech_final) to the first agent
// frame on the wire, minus the providers' time (LLM first token, TTS first byte), through the
// real OpenAI-compatible adapter against its fake on loopback. Endpointing silence is excluded
// by construction. It reports p50 and p99 of the share.
func BenchmarkEngineTurn(b *testing.B) {
	chat := fakes.NewOpenAIChatFake(fakes.ScriptOptions{})
	chat.Script().SetFallback(func(string) fakes.ScriptTurn { return fakes.ScriptTurn{Text: "Sure."} })
	srv := httptest.NewServer(chat)
	defer srv.Close()
	defer chat.Close()
	client, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	st := &scriptedSTT{}
	c, err := New(Options{ID: "bench", Agent: Agent{SystemPrompt: "x"}, LLM: client, STT: st, TTS: zeroTTS{}, Log: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.StartVoice(ctx, nullPort{}); err != nil {
		b.Fatal(err)
	}
	var shares []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := len(c.Turns())
		st.ev <- stt.Event{Kind: stt.Final, Text: "hello", SpeechFinal: true, At: time.Now()}
		for len(c.Turns()) == n {
			time.Sleep(50 * time.Microsecond)
		}
		shares = append(shares, c.Turns()[n].ParleyShare())
		// Let the reply finish so the next turn starts from listening, and leave the caller's
		// (simulated) speaking time, during which the pacer goes idle as in a real call.
		b.StopTimer()
		deadline := time.Now().Add(2 * time.Second)
		for c.sinkState() != StateListening && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(60 * time.Millisecond)
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(shares, func(i, j int) bool { return shares[i] < shares[j] })
	if len(shares) > 0 {
		b.ReportMetric(float64(shares[len(shares)/2].Microseconds()), "share-p50-µs")
		b.ReportMetric(float64(shares[len(shares)*99/100].Microseconds()), "share-p99-µs")
	}
	c.End(EndCompleted)
}
