package runtime

import (
	"testing"

	"github.com/parley-voice/parley/session"
)

func TestPricing(t *testing.T) {
	p := Pricing{CallPerMinute: 600, STTPerMinute: 60, TTSPer1KChars: 1000, LLMInputPer1M: 1_000_000, LLMOutputPer1M: 2_000_000}
	cases := []struct {
		name    string
		channel string
		cost    session.Cost
		want    int64
	}{
		{"nothing", "phone", session.Cost{}, 0},
		{"a phone minute", "phone", session.Cost{CallSeconds: 60}, 600},
		{"chat time is free", "chat", session.Cost{CallSeconds: 60}, 0},
		{"browser call", "voice", session.Cost{CallSeconds: 30, STTSeconds: 30}, 330},
		{"tokens", "chat", session.Cost{LLMInputTokens: 10, LLMOutputTokens: 5}, 20},
		{"characters round up", "chat", session.Cost{TTSCharacters: 1}, 1},
	}
	for _, c := range cases {
		if got := p.Micros(c.channel, c.cost); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
