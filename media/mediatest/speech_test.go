package mediatest

import "testing"

func TestSpeechFixture(t *testing.T) {
	pcm := Speech(t, "Hello, this is a test.", 16000)
	if d := float64(len(pcm)) / 16000; d < 0.5 || d > 5 {
		t.Fatalf("speech lasts %.2f s, want between 0.5 and 5", d)
	}
	if lvl := LevelDBFS(pcm); lvl < -40 {
		t.Errorf("speech level %.1f dBFS, want audible", lvl)
	}
	again := Speech(t, "Hello, this is a test.", 16000)
	again[0]++ // the cache must hand out copies
	if third := Speech(t, "Hello, this is a test.", 16000); third[0] != pcm[0] {
		t.Error("cache returned a shared slice")
	}
	if n8 := len(Speech(t, "Hello, this is a test.", 8000)); n8 != len(pcm)/2 && n8 != len(pcm)/2+1 && n8 != len(pcm)/2-1 {
		t.Errorf("8 kHz speech has %d samples, 16 kHz %d", n8, len(pcm))
	}
}
