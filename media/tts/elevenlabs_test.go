package tts_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/fakes"
)

const elKey = "xi-test-key"

func newElevenPair(t testing.TB, fo fakes.ElevenLabsFakeOptions, cfg tts.ElevenLabsConfig) (*fakes.ElevenLabsFake, *tts.ElevenLabs) {
	t.Helper()
	if fo.APIKey == "" {
		fo.APIKey = elKey
	}
	fake := fakes.NewElevenLabsFake(fo)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	cfg.BaseURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = elKey
	}
	if cfg.Voice == "" {
		cfg.Voice = "voice-123"
	}
	cfg.Logger = quiet
	e, err := tts.NewElevenLabs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fake, e
}

func TestElevenLabsFirstByteAndTone(t *testing.T) {
	t.Parallel()
	const firstByte = 150 * time.Millisecond
	fake, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{FirstByte: firstByte, Speed: 4}, tts.ElevenLabsConfig{})
	start := time.Now()
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pcm, first, err := readAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "time to first audio", first.Sub(start), firstByte, 0, loadSlack)
	// 11 characters × 60 ms at 16 kHz, sent 4× faster than real time.
	if len(pcm) != 11*960 {
		t.Errorf("%d samples, want %d", len(pcm), 11*960)
	}
	// The last 40 ms chunk leaves (660-40)/4 ms after the first.
	within(t, "whole stream", time.Since(start), firstByte+620*time.Millisecond/4, 10*time.Millisecond, loadSlack)
	assertTone(t, pcm, 16000, 440, 0.3)
	if s.Alignment() != nil {
		t.Error("plain stream has an alignment")
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d requests", n)
	}
}

func TestElevenLabsUlaw8000(t *testing.T) {
	t.Parallel()
	_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Speed: -1, ToneHz: 600}, tts.ElevenLabsConfig{OutputFormat: "ulaw_8000"})
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "telephone", SampleRate: 16000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pcm, _, err := readAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	// 9 × 60 ms resampled 8 → 16 kHz: 8640 samples plus the filter's flushed tail.
	if len(pcm) < 8640 || len(pcm) > 8640+40 {
		t.Errorf("%d samples, want ~8640", len(pcm))
	}
	assertTone(t, pcm, 16000, 600, 0.3)
}

func TestElevenLabsWithTimestamps(t *testing.T) {
	t.Parallel()
	fake, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Speed: 8, Chunk: 100 * time.Millisecond}, tts.ElevenLabsConfig{WithTimestamps: true, OutputFormat: "pcm_24000"})
	text := "hello big world"
	s, err := e.Synthesize(context.Background(), tts.Request{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]int16, 320)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	early := s.Alignment() // grows as chunks arrive: nothing complete yet or a prefix
	pcm, _, err := readAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	pcm = append(buf, pcm...)
	if want := 15 * 960; len(pcm) < want || len(pcm) > want+40 {
		t.Errorf("%d samples, want ~%d", len(pcm), want)
	}
	assertTone(t, pcm, 16000, 440, 0.3)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	want := []tts.Mark{
		{Text: "hello", Start: 0, End: ms(300), CharOffset: 0},
		{Text: "big", Start: ms(360), End: ms(540), CharOffset: 6},
		{Text: "world", Start: ms(600), End: ms(900), CharOffset: 10},
	}
	got := s.Alignment()
	if len(got) != len(want) {
		t.Fatalf("alignment %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mark %d = %+v, want %+v", i, got[i], want[i])
		}
		if text[got[i].CharOffset:got[i].CharOffset+len(got[i].Text)] != got[i].Text {
			t.Errorf("mark %d does not point into the text", i)
		}
	}
	if len(early) > len(got) {
		t.Errorf("early snapshot longer than the final one")
	}
	r := fake.Requests()[0]
	if !r.WithTimestamps || r.Query.Get("output_format") != "pcm_24000" {
		t.Errorf("request %s %v", r.Path, r.Query)
	}
}

// TestElevenLabsConformance checks the request against the documented API.
func TestElevenLabsConformance(t *testing.T) {
	t.Parallel()
	vs := &tts.ElevenLabsVoiceSettings{Stability: 0.4, SimilarityBoost: 0.8, Style: 0.1, UseSpeakerBoost: true, Speed: 1.1}
	fake, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Speed: -1}, tts.ElevenLabsConfig{Model: "eleven_turbo_v2_5", VoiceSettings: vs})
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "bonjour", Voice: "vx/9", Language: "fr-FR"})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, s)
	s.Close()
	r := fake.Requests()[0]
	if r.Method != "POST" || r.Path != "/v1/text-to-speech/vx%2F9/stream" || r.VoiceID != "vx/9" || r.Query.Get("output_format") != "pcm_16000" {
		t.Errorf("request line %s %s ?%v", r.Method, r.Path, r.Query)
	}
	if r.Header.Get("xi-api-key") != elKey || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", r.Header)
	}
	b := r.Body
	if b["text"] != "bonjour" || b["model_id"] != "eleven_turbo_v2_5" || b["language_code"] != "fr" {
		t.Errorf("body %s", r.RawBody)
	}
	set, _ := b["voice_settings"].(map[string]any)
	if set["stability"] != 0.4 || set["similarity_boost"] != 0.8 || set["style"] != 0.1 || set["use_speaker_boost"] != true || set["speed"] != 1.1 {
		t.Errorf("voice_settings %v", set)
	}
}

func TestElevenLabsErrors(t *testing.T) {
	t.Parallel()
	t.Run("auth", func(t *testing.T) {
		t.Parallel()
		fake, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{}, tts.ElevenLabsConfig{APIKey: "wrong", MaxRetries: 3})
		_, err := e.Synthesize(context.Background(), tts.Request{Text: "hi"})
		var pe *tts.ProviderError
		if !errors.Is(err, tts.ErrAuth) || !errors.As(err, &pe) || pe.Code != "invalid_api_key" {
			t.Errorf("err = %v", err)
		}
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("auth failure retried: %d requests", n)
		}
	})
	t.Run("500 retried then reported", func(t *testing.T) {
		t.Parallel()
		fake, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{FailStatus: 500}, tts.ElevenLabsConfig{MaxRetries: 2, RetryBackoff: 5 * time.Millisecond})
		_, err := e.Synthesize(context.Background(), tts.Request{Text: "hi"})
		if !errors.Is(err, tts.ErrUnavailable) {
			t.Errorf("err = %v", err)
		}
		if n := len(fake.Requests()); n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
	})
	t.Run("429", func(t *testing.T) {
		t.Parallel()
		_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{FailStatus: 429}, tts.ElevenLabsConfig{MaxRetries: -1})
		if _, err := e.Synthesize(context.Background(), tts.Request{Text: "hi"}); !errors.Is(err, tts.ErrRateLimited) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("validation", func(t *testing.T) {
		t.Parallel()
		_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Voices: []string{"known"}}, tts.ElevenLabsConfig{})
		_, err := e.Synthesize(context.Background(), tts.Request{Text: "hi", Voice: "unknown"})
		var pe *tts.ProviderError
		if !errors.Is(err, tts.ErrBadRequest) || !errors.As(err, &pe) || pe.Status != 404 || pe.Code != "voice_not_found" {
			t.Errorf("err = %v", err)
		}
		if _, err := e.Synthesize(context.Background(), tts.Request{}); !errors.Is(err, tts.ErrInvalidRequest) {
			t.Errorf("empty text: %v", err)
		}
	})
	t.Run("stall before first byte", func(t *testing.T) {
		t.Parallel()
		_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{StallBeforeFirstByte: true}, tts.ElevenLabsConfig{FirstByteTimeout: 200 * time.Millisecond, MaxRetries: 3})
		start := time.Now()
		_, err := e.Synthesize(context.Background(), tts.Request{Text: "hi"})
		if !errors.Is(err, tts.ErrTimeout) {
			t.Errorf("err = %v", err)
		}
		within(t, "timeout", time.Since(start), 200*time.Millisecond, 0, loadSlack)
	})
	t.Run("stall mid-stream", func(t *testing.T) {
		t.Parallel()
		_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Speed: -1, StallAfterBytes: 3200}, tts.ElevenLabsConfig{StallTimeout: 200 * time.Millisecond})
		s, err := e.Synthesize(context.Background(), tts.Request{Text: "a longer sentence"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pcm, first, err := readAll(t, s)
		if !errors.Is(err, tts.ErrTimeout) || len(pcm) != 1600 {
			t.Errorf("err = %v after %d samples", err, len(pcm))
		}
		within(t, "stall detected", time.Since(first), 200*time.Millisecond, 0, loadSlack)
	})
}

func TestElevenLabsCloseAndCancelArePrompt(t *testing.T) {
	t.Parallel()
	_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Speed: 1}, tts.ElevenLabsConfig{})
	text := "a sentence long enough to take a few seconds to stream in real time"

	s, err := e.Synthesize(context.Background(), tts.Request{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 320)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := s.Read(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	start := time.Now()
	s.Close()
	s.Close() // idempotent
	select {
	case err := <-done:
		if !errors.Is(err, tts.ErrClosed) {
			t.Errorf("Read after Close: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Read still blocked after Close")
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("Close took %v to stop Read", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s, err = e.Synthesize(ctx, tts.Request{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(time.Second)
	for {
		_, err := s.Read(buf)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Read after cancel: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Read still producing after cancel")
		}
	}
}

// TestElevenLabsPausedReaderIsNotAStall: the stall timeout measures the provider, not the
// consumer; an engine that stops reading while its output queue drains keeps its stream.
func TestElevenLabsPausedReaderIsNotAStall(t *testing.T) {
	t.Parallel()
	_, e := newElevenPair(t, fakes.ElevenLabsFakeOptions{Speed: -1}, tts.ElevenLabsConfig{StallTimeout: 80 * time.Millisecond, FirstByteTimeout: 80 * time.Millisecond})
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "patience"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]int16, 320)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	<-time.After(250 * time.Millisecond) // the consumer pauses (simulated), longer than StallTimeout
	pcm, _, err := readAll(t, s)
	if err != nil || len(pcm)+320 != 8*960 {
		t.Errorf("after a pause: %d samples, err %v", len(pcm)+320, err)
	}
}
