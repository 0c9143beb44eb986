package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/session/llm"
)

func TestRegistryAgainstFakes(t *testing.T) {
	mux := http.NewServeMux()
	chat := fakes.NewOpenAIChatFake(fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "hi there"})})
	defer chat.Close()
	el := fakes.NewElevenLabsFake(fakes.ElevenLabsFakeOptions{})
	defer el.Close()
	mux.Handle("/v1/chat/completions", chat)
	mux.Handle("/v1/text-to-speech/", el)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	r := New(Config{FakesURL: srv.URL})
	c, err := r.LLM("")
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := r.LLM("OpenAI"); c2 != c {
		t.Fatal("adapters are not shared")
	}
	s, err := c.Stream(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		text += ev.Text
	}
	if text != "hi there" {
		t.Fatalf("text %q", text)
	}
	syn, err := r.TTS("elevenlabs")
	if err != nil {
		t.Fatal(err)
	}
	st, err := syn.Synthesize(context.Background(), tts.Request{Text: "hello", SampleRate: 16000})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 320)
	total := 0
	for {
		n, err := st.Read(buf)
		total += n
		if err != nil {
			break
		}
	}
	if total == 0 {
		t.Fatal("no audio from the TTS fake")
	}
	for _, name := range []string{"deepgram", "openai"} {
		if _, err := r.STT(name); err != nil {
			t.Fatalf("STT %s: %v", name, err)
		}
	}
	if _, err := r.LLM("bogus"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown provider: %v", err)
	}
}
