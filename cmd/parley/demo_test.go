package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media/mediatest"
)

// make demo: a whole scripted voice call through the real engine and adapters against the fakes
// ends with the agent's goodbye, four measured turns and a readable stereo recording.
func TestDemo(t *testing.T) {
	testenv.NeedCommand(t, "espeak-ng")
	out := filepath.Join(t.TempDir(), "demo.wav")
	stdout, stderr, code := runCLI(t, nil, "demo", "--out", out)
	if code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", code, stderr, stdout)
	}
	if !strings.Contains(stdout, "Ended: agent_ended") {
		t.Fatalf("demo did not end with the agent's goodbye:\n%s", stdout)
	}
	turns := regexp.MustCompile(`turn \d: +\d+ ms total`).FindAllString(stdout, -1)
	if len(turns) != 4 {
		t.Fatalf("want 4 measured turns, got %d:\n%s", len(turns), stdout)
	}
	for _, want := range []string{"user   four people please", "agent  A table for four. What time would you like?"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("transcript lacks %q:\n%s", want, stdout)
		}
	}
	w, err := mediatest.ReadWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	if w.Channels != 2 || w.Rate != 16000 || len(w.Samples)/2 < 10*16000 {
		t.Fatalf("recording: %d channels, %d Hz, %d frames", w.Channels, w.Rate, len(w.Samples)/2)
	}
	// Both sides are in the recording: the caller (left) and the agent (right) each carry sound.
	var left, right float64
	for i := 0; i+1 < len(w.Samples); i += 2 {
		left += float64(w.Samples[i]) * float64(w.Samples[i])
		right += float64(w.Samples[i+1]) * float64(w.Samples[i+1])
	}
	if left < 1e9 || right < 1e9 {
		t.Fatalf("a side is silent: left energy %.3g, right %.3g", left, right)
	}
}
