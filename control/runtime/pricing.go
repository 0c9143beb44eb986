package runtime

import (
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
