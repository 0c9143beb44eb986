package bench

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

func TestSpeechLikeIsOneLoudUtterance(t *testing.T) {
	for _, rate := range []int{8000, 16000, 48000} {
		pcm := SpeechLike("Four people, at seven in the evening.", rate, 3)
		u, err := NewUtterance("x", pcm, rate)
		if err != nil {
			t.Fatal(err)
		}
		if u.Speech < 2*time.Second || u.Speech > 3*time.Second {
			t.Errorf("rate %d: speech lasts %v", rate, u.Speech)
		}
		if u.LongestGap > 50*time.Millisecond {
			t.Errorf("rate %d: a gap of %v inside the speech", rate, u.LongestGap)
		}
		if lvl := LevelDBFS(u.PCM); lvl < -30 || lvl > -10 {
			t.Errorf("rate %d: level %.1f dB", rate, lvl)
		}
	}
}

func TestNewUtteranceAlignsSpeechEndToFrame(t *testing.T) {
	rate := 8000
	// 123 ms of silence, 333 ms of tone, 77 ms of silence.
	pcm := append(append(make([]int16, 984), tone(2664, rate, 300, 0.3)...), make([]int16, 616)...)
	u, err := NewUtterance("t", pcm, rate)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.PCM)%160 != 0 {
		t.Fatalf("length %d is not whole frames", len(u.PCM))
	}
	last := u.PCM[len(u.PCM)-40:] // the last 5 ms are loud: speech ends at the frame's end
	if LevelDBFS(last) < DefaultThresholdDBFS {
		t.Error("the utterance does not end with speech")
	}
	if d := u.Speech - 333*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("speech %v, want 333 ms", u.Speech)
	}
	if u.Frames() != len(u.PCM)/160 {
		t.Errorf("frames %d", u.Frames())
	}
	if _, err := NewUtterance("silence", make([]int16, 8000), rate); err == nil {
		t.Error("no error for silence")
	}
}

func TestMakeUtterancesSynthetic(t *testing.T) {
	us, src, err := MakeUtterances(context.Background(), DefaultLines[:2], 8000, SourceSynthetic)
	if err != nil || src != SourceSynthetic || len(us) != 2 {
		t.Fatalf("got %d utterances from %q: %v", len(us), src, err)
	}
	if _, _, err := MakeUtterances(context.Background(), nil, 8000, SourceAuto); err == nil {
		t.Error("no error for no lines")
	}
	if _, _, err := MakeUtterances(context.Background(), DefaultLines, 8000, "sox"); err == nil {
		t.Error("no error for an unknown source")
	}
	if _, _, err := MakeUtterances(context.Background(), DefaultLines, 1234, SourceSynthetic); err == nil {
		t.Error("no error for a bad rate")
	}
}

func TestMakeUtterancesEspeak(t *testing.T) {
	testenv.NeedCommand(t, "espeak-ng")
	us, src, err := MakeUtterances(context.Background(), DefaultLines[:2], 16000, SourceEspeak)
	if err != nil || src != SourceEspeak {
		t.Fatalf("source %q: %v", src, err)
	}
	for _, u := range us {
		if u.Speech < 500*time.Millisecond || u.Speech > 5*time.Second {
			t.Errorf("%q lasts %v", u.Text, u.Speech)
		}
		if u.LongestGap >= 600*time.Millisecond {
			t.Errorf("%q has a %v gap: it would end the turn early", u.Text, u.LongestGap)
		}
	}
}
