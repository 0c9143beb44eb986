package stt_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/session/fakes"
)

const oaiKey = "sk-test"

func newOpenAISTTPair(t testing.TB, fo fakes.OpenAISTTFakeOptions, cfg stt.OpenAISTTConfig) (*fakes.OpenAISTTFake, *stt.OpenAISTT) {
	t.Helper()
	if fo.APIKey == "" {
		fo.APIKey = oaiKey
	}
	fake := fakes.NewOpenAISTTFake(fo)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	cfg.BaseURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = oaiKey
	}
	cfg.Logger = quiet
	a, err := stt.NewOpenAISTT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fake, a
}

func TestOpenAISTTEndpointingLatency(t *testing.T) {
	t.Parallel()
	const latency = 100 * time.Millisecond
	const endpointing = 200 * time.Millisecond
	fake, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{Latency: latency, Script: []string{"what time is it"}}, stt.OpenAISTTConfig{PreRoll: 100 * time.Millisecond})
	s, err := a.Open(context.Background(), stt.StreamOptions{Endpointing: endpointing, Language: "en-GB"})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	f := feed(t, s, 16000, true, segment{300 * time.Millisecond, false}, segment{600 * time.Millisecond, true}, segment{400 * time.Millisecond, false})

	eos := c.waitKind(t, stt.EndOfSpeech, 1, 2*time.Second)
	checkEndpointing(t, f, eos, endpointing, latency)
	if eos.Text != "what time is it" {
		t.Errorf("EndOfSpeech text %q", eos.Text)
	}
	within(t, "utterance start", eos.Start, 300*time.Millisecond, 0, 0)
	within(t, "utterance end", eos.End, 900*time.Millisecond, 0, 0)
	started := c.waitKind(t, stt.SpeechStarted, 1, 0)
	within(t, "SpeechStarted offset", started.Start, 300*time.Millisecond, 0, 0)
	if fin := c.waitKind(t, stt.Final, 1, 0); !fin.SpeechFinal || fin.Text != "what time is it" {
		t.Errorf("final %+v", fin)
	}
	s.Close()
	c.waitClosed(t, time.Second)

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	// 100 ms pre-roll + 600 ms speech + 200 ms kept of the trailing silence.
	within(t, "uploaded audio", r.AudioDuration, 900*time.Millisecond, 0, 0)
	if r.RMS < 0.05 || r.SampleRate != 16000 || r.Channels != 1 || r.Bits != 16 {
		t.Errorf("uploaded %+v", r)
	}
	if st := s.Stats(); st.AudioSent != 900*time.Millisecond || st.Requests != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestOpenAISTTConformance checks the multipart request against the documented API.
func TestOpenAISTTConformance(t *testing.T) {
	t.Parallel()
	fake, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{}, stt.OpenAISTTConfig{Model: "whisper-1", ResponseFormat: "verbose_json"})
	s, err := a.Open(context.Background(), stt.StreamOptions{Language: "fr-FR", Keywords: []string{"Parley", "rendez-vous"}, Endpointing: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 16000, false, segment{200 * time.Millisecond, true}, segment{200 * time.Millisecond, false})
	fin := c.waitKind(t, stt.Final, 1, 2*time.Second)
	if fin.Confidence < 0.85 || fin.Confidence > 0.95 { // exp(avg_logprob = -0.1)
		t.Errorf("confidence %v", fin.Confidence)
	}
	s.Close()
	r := fake.Requests()[0]
	want := map[string]string{"model": "whisper-1", "language": "fr", "response_format": "verbose_json", "prompt": "Parley, rendez-vous"}
	for k, v := range want {
		if r.Fields[k] != v {
			t.Errorf("field %s = %q, want %q", k, r.Fields[k], v)
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+oaiKey || r.FileName != "utterance.wav" || r.FileContentType != "audio/wav" {
		t.Errorf("request %+v", r)
	}
}

func TestOpenAISTTMaxUtteranceCuts(t *testing.T) {
	t.Parallel()
	fake, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{Script: []string{"one", "two", "three"}}, stt.OpenAISTTConfig{MaxUtterance: 500 * time.Millisecond, PreRoll: 1})
	s, err := a.Open(context.Background(), stt.StreamOptions{Endpointing: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 16000, false, segment{1200 * time.Millisecond, true}, segment{200 * time.Millisecond, false})
	eos := c.waitKind(t, stt.EndOfSpeech, 1, 2*time.Second)
	if eos.Text != "one two three" || eos.Start != 0 || eos.End != 1200*time.Millisecond {
		t.Errorf("EndOfSpeech %+v", eos)
	}
	if n := c.count(stt.Final); n != 3 {
		t.Errorf("%d finals, want 3%s", n, dump(c.events()))
	}
	for i, e := range c.events() {
		if e.Kind == stt.Final && e.SpeechFinal != (e.Text == "three") {
			t.Errorf("event %d: SpeechFinal=%v on %q", i, e.SpeechFinal, e.Text)
		}
	}
	s.Close()
	for _, r := range fake.Requests() {
		if r.AudioDuration > 500*time.Millisecond {
			t.Errorf("upload of %v exceeds MaxUtterance", r.AudioDuration)
		}
	}
}

func TestOpenAISTTIgnoresShortNoise(t *testing.T) {
	t.Parallel()
	fake, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{}, stt.OpenAISTTConfig{MinSpeech: 100 * time.Millisecond})
	s, err := a.Open(context.Background(), stt.StreamOptions{Endpointing: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 16000, false, segment{40 * time.Millisecond, true}, segment{300 * time.Millisecond, false})
	s.Close()
	c.waitClosed(t, time.Second)
	if len(c.events()) != 0 || len(fake.Requests()) != 0 {
		t.Errorf("a 40 ms click made events %s and %d requests", dump(c.events()), len(fake.Requests()))
	}
}

func TestOpenAISTTCloseFlushes(t *testing.T) {
	t.Parallel()
	_, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{Latency: 50 * time.Millisecond, Script: []string{"goodbye"}}, stt.OpenAISTTConfig{})
	s, err := a.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 16000, false, segment{300 * time.Millisecond, true})
	s.Close()
	c.waitClosed(t, time.Second)
	if eos := c.waitKind(t, stt.EndOfSpeech, 1, 0); eos.Text != "goodbye" {
		t.Errorf("flushed utterance %+v", eos)
	}
	if err := s.Write(make([]int16, 320), true); !errors.Is(err, stt.ErrClosed) {
		t.Errorf("Write after Close = %v", err)
	}
}

func TestOpenAISTTErrors(t *testing.T) {
	t.Parallel()
	t.Run("auth is not retried", func(t *testing.T) {
		t.Parallel()
		fake, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{}, stt.OpenAISTTConfig{APIKey: "sk-wrong", MaxRetries: 3})
		s, _ := a.Open(context.Background(), stt.StreamOptions{Endpointing: 100 * time.Millisecond})
		c := collect(s)
		feed(t, s, 16000, false, segment{200 * time.Millisecond, true}, segment{200 * time.Millisecond, false})
		e := c.waitKind(t, stt.Error, 1, 2*time.Second)
		var pe *stt.ProviderError
		if !errors.Is(e.Err, stt.ErrAuth) || !errors.As(e.Err, &pe) || pe.Code != "invalid_api_key" {
			t.Errorf("error %v", e.Err)
		}
		c.waitKind(t, stt.EndOfSpeech, 1, time.Second) // the engine still learns the utterance ended
		s.Close()
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("5xx is retried", func(t *testing.T) {
		t.Parallel()
		fake, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{FailFirst: 2, FailStatus: 503, Script: []string{"third time lucky"}}, stt.OpenAISTTConfig{MaxRetries: 2, RetryBackoff: 5 * time.Millisecond})
		s, _ := a.Open(context.Background(), stt.StreamOptions{Endpointing: 100 * time.Millisecond})
		c := collect(s)
		feed(t, s, 16000, false, segment{200 * time.Millisecond, true}, segment{200 * time.Millisecond, false})
		if eos := c.waitKind(t, stt.EndOfSpeech, 1, 2*time.Second); eos.Text != "third time lucky" {
			t.Errorf("EndOfSpeech %+v", eos)
		}
		s.Close()
		if n, st := len(fake.Requests()), s.Stats(); n != 3 || st.Requests != 3 {
			t.Errorf("%d requests (stats %d), want 3", n, st.Requests)
		}
	})
	t.Run("5xx exhausts retries", func(t *testing.T) {
		t.Parallel()
		_, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{FailStatus: 500}, stt.OpenAISTTConfig{MaxRetries: 1, RetryBackoff: 5 * time.Millisecond})
		s, _ := a.Open(context.Background(), stt.StreamOptions{Endpointing: 100 * time.Millisecond})
		c := collect(s)
		feed(t, s, 16000, false, segment{200 * time.Millisecond, true}, segment{200 * time.Millisecond, false})
		if e := c.waitKind(t, stt.Error, 1, 2*time.Second); !errors.Is(e.Err, stt.ErrUnavailable) {
			t.Errorf("error %v", e.Err)
		}
		s.Close()
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		_, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{Latency: 5 * time.Second}, stt.OpenAISTTConfig{RequestTimeout: 150 * time.Millisecond, MaxRetries: -1})
		s, _ := a.Open(context.Background(), stt.StreamOptions{Endpointing: 100 * time.Millisecond})
		c := collect(s)
		start := time.Now()
		feed(t, s, 16000, false, segment{200 * time.Millisecond, true}, segment{200 * time.Millisecond, false})
		e := c.waitKind(t, stt.Error, 1, 2*time.Second)
		if !errors.Is(e.Err, stt.ErrTimeout) || e.At.Sub(start) > time.Second {
			t.Errorf("error %v after %v", e.Err, e.At.Sub(start))
		}
		s.Close()
	})
}

func TestOpenAISTTWriteAllocs(t *testing.T) {
	_, a := newOpenAISTTPair(t, fakes.OpenAISTTFakeOptions{}, stt.OpenAISTTConfig{MaxUtterance: time.Second})
	s, err := a.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	collect(s)
	b := newBurst(16000)
	speech, silence := b.frame(true), b.frame(false)
	// Warm up: let the utterance buffers grow to their steady size.
	for range 200 {
		s.Write(speech, true)
	}
	if n := testing.AllocsPerRun(500, func() { s.Write(speech, true) }); n != 0 {
		t.Errorf("voiced Write allocates %v per frame", n)
	}
	if n := testing.AllocsPerRun(10, func() { s.Write(silence, false) }); n != 0 {
		t.Errorf("unvoiced Write allocates %v per frame", n)
	}
}

func BenchmarkOpenAISTTWrite(b *testing.B) {
	_, a := newOpenAISTTPair(b, fakes.OpenAISTTFakeOptions{}, stt.OpenAISTTConfig{})
	s, err := a.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	collect(s)
	frame := newBurst(16000).frame(false)
	b.ReportAllocs()
	for b.Loop() {
		s.Write(frame, false)
	}
}
