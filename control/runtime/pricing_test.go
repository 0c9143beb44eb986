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

// TestPricingParts: a charge is broken down by kind and the parts add up to Micros exactly.
func TestPricingParts(t *testing.T) {
	p := Pricing{CallPerMinute: 600, STTPerMinute: 60, TTSPer1KChars: 1000, LLMInputPer1M: 1_000_000, LLMOutputPer1M: 2_000_000}
	voice := session.Cost{CallSeconds: 30.5, STTSeconds: 29.9, LLMInputTokens: 11, LLMOutputTokens: 3, TTSCharacters: 7}
	parts := p.Parts("phone", voice)
	var sum int64
	kinds := ""
	for _, c := range parts {
		sum += c.Micros
		kinds += string(c.Kind) + " "
		if c.Micros <= 0 || c.Description == "" {
			t.Errorf("part %+v", c)
		}
	}
	if sum != p.Micros("phone", voice) || kinds != "call_minutes stt_seconds llm_tokens tts_characters " {
		t.Fatalf("parts %+v add up to %d, want %d", parts, sum, p.Micros("phone", voice))
	}
	chat := p.Parts("chat", session.Cost{CallSeconds: 60, LLMInputTokens: 10, LLMOutputTokens: 5})
	if len(chat) != 1 || chat[0].Kind != "chat_turns" || chat[0].Micros != 20 {
		t.Fatalf("chat parts %+v", chat)
	}
	if got := p.Parts("phone", session.Cost{}); len(got) != 0 {
		t.Fatalf("nothing used: %+v", got)
	}
	if got := p.ReservePerMinute("chat"); got != 0 {
		t.Fatalf("a chat holds %d a minute", got)
	}
	if got := DefaultPricing.ReservePerMinute("phone"); got != 5_000+4_300+30_000+3_000+300 {
		t.Fatalf("a phone call holds %d a minute", got)
	}
}
