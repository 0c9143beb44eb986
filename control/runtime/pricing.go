package runtime

import (
	"fmt"
	"math"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Pricing is what a live conversation costs the organization, in micro-USD. Test-mode
// conversations cost nothing.
type Pricing struct {
	CallPerMinute  int64 // voice conversations (phone and browser), per started second pro rata
	STTPerMinute   int64 // audio sent to speech-to-text
	TTSPer1KChars  int64 // text sent to text-to-speech
	LLMInputPer1M  int64 // LLM prompt tokens
	LLMOutputPer1M int64 // LLM completion tokens
}

// DefaultPricing is the price list when none is configured.
var DefaultPricing = Pricing{
	CallPerMinute:  5_000,   // $0.005 a minute
	STTPerMinute:   4_300,   // $0.0043 a minute
	TTSPer1KChars:  30_000,  // $0.03 per 1,000 characters
	LLMInputPer1M:  150_000, // $0.15 per million tokens
	LLMOutputPer1M: 600_000, // $0.60 per million tokens
}

// Micros returns what a conversation of channel that used cost is charged, rounded up to a
// whole micro-dollar. Only voice channels pay for call time.
func (p Pricing) Micros(channel string, cost session.Cost) int64 {
	f := float64(p.STTPerMinute)*cost.STTSeconds/60 +
		float64(p.TTSPer1KChars)*float64(cost.TTSCharacters)/1000 +
		float64(p.LLMInputPer1M)*float64(cost.LLMInputTokens)/1e6 +
		float64(p.LLMOutputPer1M)*float64(cost.LLMOutputTokens)/1e6
	if channel == store.ChannelPhone || channel == store.ChannelVoice {
		f += float64(p.CallPerMinute) * cost.CallSeconds / 60
	}
	if f <= 0 || math.IsNaN(f) {
		return 0
	}
	return int64(math.Ceil(f))
}

// ChargePart is one part of a conversation's charge, recorded as its own credit transaction.
type ChargePart struct {
	Kind        store.CreditKind
	Micros      int64
	Description string
}

// Parts breaks the charge Micros gives into its parts: call_minutes, stt_seconds, llm_tokens
// and tts_characters for a voice conversation, one chat_turns part for a text one (a chat
// pays for what its turns used). Parts of nothing are left out. The parts add up to Micros
// exactly: each is rounded down, and what the rounding left goes to the largest.
func (p Pricing) Parts(channel string, cost session.Cost) []ChargePart {
	total := p.Micros(channel, cost)
	if total <= 0 {
		return nil
	}
	llm := float64(p.LLMInputPer1M)*float64(cost.LLMInputTokens)/1e6 + float64(p.LLMOutputPer1M)*float64(cost.LLMOutputTokens)/1e6
	tokens := fmt.Sprintf("%d input and %d output tokens", cost.LLMInputTokens, cost.LLMOutputTokens)
	stt := float64(p.STTPerMinute) * cost.STTSeconds / 60
	tts := float64(p.TTSPer1KChars) * float64(cost.TTSCharacters) / 1000
	type raw struct {
		kind store.CreditKind
		f    float64
		desc string
	}
	var rs []raw
	if channel == store.ChannelPhone || channel == store.ChannelVoice {
		rs = []raw{
			{store.CreditCallMinutes, float64(p.CallPerMinute) * cost.CallSeconds / 60, fmt.Sprintf("Call time, %.1f s", cost.CallSeconds)},
			{store.CreditSTTSeconds, stt, fmt.Sprintf("Speech-to-text, %.1f s of audio", cost.STTSeconds)},
			{store.CreditLLMTokens, llm, "Language model, " + tokens},
			{store.CreditTTSCharacters, tts, fmt.Sprintf("Text-to-speech, %d characters", cost.TTSCharacters)},
		}
	} else {
		rs = []raw{{store.CreditChatTurns, llm + stt + tts, "Chat, " + tokens}}
	}
	var parts []ChargePart
	sum, largest := int64(0), -1
	for _, r := range rs {
		if !(r.f > 0) {
			continue
		}
		m := int64(math.Floor(r.f))
		parts = append(parts, ChargePart{Kind: r.kind, Micros: m, Description: r.desc})
		sum += m
		if largest < 0 || m > parts[largest].Micros {
			largest = len(parts) - 1
		}
	}
	if largest < 0 {
		return nil
	}
	parts[largest].Micros += total - sum
	out := parts[:0]
	for _, c := range parts {
		if c.Micros > 0 {
			out = append(out, c)
		}
	}
	return out
}

// ReservePerMinute is what a minute of a live conversation of channel may cost, which a call
// in progress holds ahead (see billing.Hold): call time and speech-to-text for the whole
// minute, text-to-speech for 1,000 characters (faster than anyone speaks), and the language
// model for 20,000 input and 500 output tokens (several turns, each sending the prompt and
// the transcript again). Text conversations hold nothing: they are checked before each turn.
func (p Pricing) ReservePerMinute(channel string) int64 {
	if channel != store.ChannelPhone && channel != store.ChannelVoice {
		return 0
	}
	return p.CallPerMinute + p.STTPerMinute + p.TTSPer1KChars + (p.LLMInputPer1M*20_000+p.LLMOutputPer1M*500+999_999)/1_000_000
}
