package tts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media/tts"
)

func TestEspeakSpeaks(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "espeak-ng")
	e, err := tts.NewEspeak(tts.EspeakConfig{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "Hello from Parley. This is a test."})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pcm, first, err := readAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if d := first.Sub(start); d > time.Second {
		t.Errorf("first audio after %v", d)
	}
	secs := float64(len(pcm)) / 16000
	if secs < 1 || secs > 5 {
		t.Errorf("%.2f s of speech for two short sentences", secs)
	}
	if r := rms(pcm); r < 0.02 {
		t.Errorf("speech RMS %.4f: silent?", r)
	}
	// Speech energy sits in the voice band, not at the resampler's edge.
	if goertzel(pcm, 16000, 7900) > goertzel(pcm, 16000, 500) {
		t.Error("more energy at 7.9 kHz than at 500 Hz")
	}
	if s.Alignment() != nil {
		t.Error("espeak-ng stream has an alignment")
	}
}

// TestEspeakTextIsNotArguments: text goes on stdin, so option-like text is spoken, and voices
// that look like options are refused.
func TestEspeakTextIsNotArguments(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "espeak-ng")
	e, err := tts.NewEspeak(tts.EspeakConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "--help -w /tmp/x", SampleRate: 8000})
	if err != nil {
		t.Fatal(err)
	}
	pcm, _, err := readAll(t, s)
	s.Close()
	if err != nil || len(pcm) < 4000 {
		t.Errorf("option-like text: %d samples, err %v", len(pcm), err)
	}
	for _, v := range []string{"-w/tmp/x", "en --stdout", "", "a;b"} {
		if _, err := e.Synthesize(context.Background(), tts.Request{Text: "x", Voice: v}); v != "" && !errors.Is(err, tts.ErrInvalidRequest) {
			t.Errorf("voice %q: %v", v, err)
		}
	}
	if _, err := e.Synthesize(context.Background(), tts.Request{Text: "x", Voice: "no-such-voice"}); err != nil {
		t.Fatalf("synthesize: %v", err)
	}
}

func TestEspeakUnknownVoiceFails(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "espeak-ng")
	e, _ := tts.NewEspeak(tts.EspeakConfig{})
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "hello", Voice: "zz-nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := readAll(t, s); err == nil {
		t.Error("unknown voice read to a clean end")
	}
}

func TestEspeakClose(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "espeak-ng")
	e, _ := tts.NewEspeak(tts.EspeakConfig{Speed: 120})
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "This is a long text that would take a good while to speak out loud, word after word after word."})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 320)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	s.Close()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Close took %v", d)
	}
	if _, err := s.Read(buf); !errors.Is(err, tts.ErrClosed) {
		t.Errorf("Read after Close = %v", err)
	}
}
