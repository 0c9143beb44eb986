package mediatest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

var speechCache sync.Map // speechKey -> []int16

type speechKey struct {
	text string
	rate int
}

// Speech returns text spoken by espeak-ng (English voice, 160 words per minute) as mono PCM at
// rate Hz. It skips t (or fails it under PARLEY_REQUIRE_PEERS=1) when espeak-ng is missing.
// Results are cached per text and rate for the life of the test binary; the returned slice is
// a copy the caller may change.
func Speech(t testing.TB, text string, rate int) []int16 {
	t.Helper()
	bin := testenv.NeedCommand(t, "espeak-ng")
	key := speechKey{text, rate}
	if v, ok := speechCache.Load(key); ok {
		return append([]int16(nil), v.([]int16)...)
	}
	out := filepath.Join(t.TempDir(), "speech.wav")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-v", "en", "-s", "160", "-w", out, text)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, msg)
	}
	w, err := ReadWAV(out)
	if err != nil {
		t.Fatalf("reading espeak-ng output: %v", err)
	}
	if w.Channels != 1 {
		t.Fatalf("espeak-ng wrote %d channels, want 1", w.Channels)
	}
	pcm := Resample(w.Samples, w.Rate, rate)
	if len(pcm) == 0 {
		t.Fatal(fmt.Sprintf("espeak-ng produced no audio for %q", text))
	}
	speechCache.Store(key, pcm)
	return append([]int16(nil), pcm...)
}
