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

const oaiKey = "sk-test"

func newOpenAITTSPair(t testing.TB, fo fakes.OpenAITTSFakeOptions, cfg tts.OpenAITTSConfig) (*fakes.OpenAITTSFake, *tts.OpenAITTS) {
	t.Helper()
	if fo.APIKey == "" {
		fo.APIKey = oaiKey
	}
	fake := fakes.NewOpenAITTSFake(fo)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	cfg.BaseURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = oaiKey
	}
	cfg.Logger = quiet
	o, err := tts.NewOpenAITTS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fake, o
}

func TestOpenAITTSFirstByteAndResampledTone(t *testing.T) {
	t.Parallel()
	const firstByte = 120 * time.Millisecond
	_, o := newOpenAITTSPair(t, fakes.OpenAITTSFakeOptions{FirstByte: firstByte, Speed: 5, ToneHz: 700, Chunk: 25 * time.Millisecond}, tts.OpenAITTSConfig{})
	start := time.Now()
	s, err := o.Synthesize(context.Background(), tts.Request{Text: "good evening"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pcm, first, err := readAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "time to first audio", first.Sub(start), firstByte, 0, loadSlack)
	// 12 × 60 ms = 720 ms: 17280 samples at 24 kHz → 11520 at 16 kHz (+ flushed filter tail).
	if len(pcm) < 11520 || len(pcm) > 11520+40 {
		t.Errorf("%d samples, want ~11520", len(pcm))
	}
	assertTone(t, pcm, 16000, 700, 0.3)
}

func TestOpenAITTSOtherRates(t *testing.T) {
	t.Parallel()
	_, o := newOpenAITTSPair(t, fakes.OpenAITTSFakeOptions{Speed: -1}, tts.OpenAITTSConfig{})
	for _, rate := range []int{8000, 24000, 48000} {
		s, err := o.Synthesize(context.Background(), tts.Request{Text: "rate test", SampleRate: rate})
		if err != nil {
			t.Fatal(err)
		}
		pcm, _, err := readAll(t, s)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := 9 * 60 * rate / 1000
		if len(pcm) < want || len(pcm) > want+60 {
			t.Errorf("%d Hz: %d samples, want ~%d", rate, len(pcm), want)
		}
		assertTone(t, pcm, rate, 440, 0.3)
	}
}

// TestOpenAITTSConformance checks the request against the documented API.
func TestOpenAITTSConformance(t *testing.T) {
	t.Parallel()
	fake, o := newOpenAITTSPair(t, fakes.OpenAITTSFakeOptions{Speed: -1}, tts.OpenAITTSConfig{Model: "tts-1", Voice: "nova", Speed: 1.25, Instructions: "Speak warmly."})
	s, err := o.Synthesize(context.Background(), tts.Request{Text: "hi there", Voice: "shimmer"})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, s)
	s.Close()
	r := fake.Requests()[0]
	if r.Method != "POST" || r.Path != "/v1/audio/speech" || r.Header.Get("Authorization") != "Bearer "+oaiKey || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %v", r.Method, r.Path, r.Header)
	}
	want := map[string]any{"model": "tts-1", "input": "hi there", "voice": "shimmer", "response_format": "pcm", "speed": 1.25, "instructions": "Speak warmly."}
	for k, v := range want {
		if r.Body[k] != v {
			t.Errorf("body %s = %v, want %v", k, r.Body[k], v)
		}
	}
	if len(r.Body) != len(want) {
		t.Errorf("body has extra fields: %s", r.RawBody)
	}
}

func TestOpenAITTSErrors(t *testing.T) {
	t.Parallel()
	t.Run("500", func(t *testing.T) {
		t.Parallel()
		fake, o := newOpenAITTSPair(t, fakes.OpenAITTSFakeOptions{FailStatus: 503}, tts.OpenAITTSConfig{MaxRetries: 1, RetryBackoff: 5 * time.Millisecond})
		_, err := o.Synthesize(context.Background(), tts.Request{Text: "x"})
		var pe *tts.ProviderError
		if !errors.Is(err, tts.ErrUnavailable) || !errors.As(err, &pe) || pe.Status != 503 || pe.Code != "server_error" {
			t.Errorf("err = %v", err)
		}
		if n := len(fake.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
	t.Run("auth", func(t *testing.T) {
		t.Parallel()
		_, o := newOpenAITTSPair(t, fakes.OpenAITTSFakeOptions{}, tts.OpenAITTSConfig{APIKey: "sk-bad"})
		if _, err := o.Synthesize(context.Background(), tts.Request{Text: "x"}); !errors.Is(err, tts.ErrAuth) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("stall", func(t *testing.T) {
		t.Parallel()
		_, o := newOpenAITTSPair(t, fakes.OpenAITTSFakeOptions{StallBeforeFirstByte: true}, tts.OpenAITTSConfig{FirstByteTimeout: 150 * time.Millisecond})
		start := time.Now()
		if _, err := o.Synthesize(context.Background(), tts.Request{Text: "x"}); !errors.Is(err, tts.ErrTimeout) {
			t.Errorf("err = %v", err)
		}
		within(t, "timeout", time.Since(start), 150*time.Millisecond, 0, loadSlack)
	})
	t.Run("bad config", func(t *testing.T) {
		t.Parallel()
		if _, err := tts.NewOpenAITTS(tts.OpenAITTSConfig{Speed: 9}); !errors.Is(err, tts.ErrInvalidOptions) {
			t.Errorf("speed 9 accepted: %v", err)
		}
		if _, err := tts.NewOpenAITTS(tts.OpenAITTSConfig{BaseURL: "ftp://x"}); !errors.Is(err, tts.ErrInvalidOptions) {
			t.Errorf("ftp accepted: %v", err)
		}
	})
}
