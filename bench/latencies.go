package bench

import "time"

// Latencies are the configured delays a turn must wait for outside Parley: the agent's
// endpointing silence and the fake vendors' latencies (`parley fakes` flags).
type Latencies struct {
	Endpointing     time.Duration `json:"endpointing_ns"`
	STTInterimEvery time.Duration `json:"stt_interim_every_ns"`
	STTFinalDelay   time.Duration `json:"stt_final_delay_ns"`
	LLMFirstToken   time.Duration `json:"llm_first_token_ns"`
	LLMTokensPerSec float64       `json:"llm_tokens_per_sec"`
	// LLMFirstChunkTokens is how many tokens of the scripted reply arrive before its first
	// speakable chunk is complete (1 for the harness's script, whose reply starts "Okay.").
	LLMFirstChunkTokens int           `json:"llm_first_chunk_tokens"`
	TTSFirstByte        time.Duration `json:"tts_first_byte_ns"`
	TTSSpeed            float64       `json:"tts_speed"`
}

// JambonzLatencies are jambonz's load-test mock vendor latencies (STT interim results every
// 250 ms, LLM first token at 400 ms then 60 tokens/s, TTS first audio at 150 ms), with the
// agent definition's default endpointing (600 ms), so that results compare across systems.
func JambonzLatencies() Latencies {
	return Latencies{Endpointing: 600 * time.Millisecond, STTInterimEvery: 250 * time.Millisecond,
		LLMFirstToken: 400 * time.Millisecond, LLMTokensPerSec: 60, LLMFirstChunkTokens: 1,
		TTSFirstByte: 150 * time.Millisecond, TTSSpeed: 4}
}

// LLMFirstChunk is the configured time from the LLM request to its first speakable chunk.
func (l Latencies) LLMFirstChunk() time.Duration {
	d := l.LLMFirstToken
	if l.LLMTokensPerSec > 0 && l.LLMFirstChunkTokens > 1 {
		d += time.Duration(float64(l.LLMFirstChunkTokens-1) / l.LLMTokensPerSec * float64(time.Second))
	}
	return d
}

// Outside is everything of a turn's latency that is not Parley's: endpointing silence, STT
// final delay, LLM time to the first chunk and TTS time to the first byte. A turn's latency
// minus Outside is Parley's own share, as the caller hears it.
func (l Latencies) Outside() time.Duration {
	return l.Endpointing + l.STTFinalDelay + l.LLMFirstChunk() + l.TTSFirstByte
}
