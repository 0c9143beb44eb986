package session

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/session/llm"
)

// Every turn gets its own complete metrics, not only the first.
func TestTurnMetricsEveryTurn(t *testing.T) {
	chat := fakes.NewOpenAIChatFake(fakes.ScriptOptions{})
	chat.Script().SetFallback(func(string) fakes.ScriptTurn { return fakes.ScriptTurn{Text: "Sure."} })
	srv := httptest.NewServer(chat)
	defer srv.Close()
	defer chat.Close()
	client, _ := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"})
	st := &scriptedSTT{}
	c, err := New(Options{ID: "turns", Agent: Agent{SystemPrompt: "x"}, LLM: client, STT: st, TTS: zeroTTS{}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartVoice(context.Background(), nullPort{}); err != nil {
		t.Fatal(err)
	}
	defer c.End(EndCompleted)
	for i := 1; i <= 3; i++ {
		st.ev <- stt.Event{Kind: stt.Final, Text: "hello", SpeechFinal: true, At: time.Now()}
		waitFor(t, 5*time.Second, "turn metrics", func() bool { return len(c.Turns()) == i })
		waitFor(t, 5*time.Second, "listening", func() bool { return c.State() == StateListening })
	}
	for i, m := range c.Turns() {
		if m.Turn != i+1 || m.EndOfTurn.IsZero() || m.FirstAudioOut.Before(m.EndOfTurn) || m.LLMFirstToken.Before(m.LLMRequestSent) {
			t.Fatalf("turn %d metrics %+v", i+1, m)
		}
		if i > 0 && !m.EndOfTurn.After(c.Turns()[i-1].FirstAudioOut) {
			t.Fatalf("turn %d reuses the previous turn's timestamps: %+v", i+1, m)
		}
	}
}
