package session

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TurnMetrics are the timestamps of one turn, from the caller's speech end to the first agent
// audio on the wire. Zero times mean the stage did not happen (a text turn has no audio).
type TurnMetrics struct {
	Turn           int       `json:"turn"`
	SpeechEnd      time.Time `json:"speech_end,omitempty"`
	STTFinal       time.Time `json:"stt_final,omitempty"`
	EndOfTurn      time.Time `json:"end_of_turn,omitempty"`
	LLMRequestSent time.Time `json:"llm_request_sent,omitempty"`
	LLMFirstToken  time.Time `json:"llm_first_token,omitempty"`
	// LLMFirstChunk is when the first speakable chunk (a sentence or clause) of the reply was
	// complete; the tokens before it are the LLM's time.
	LLMFirstChunk   time.Time `json:"llm_first_chunk,omitempty"`
	TTSFirstRequest time.Time `json:"tts_first_request,omitempty"`
	TTSFirstByte    time.Time `json:"tts_first_byte,omitempty"`
	FirstAudioOut   time.Time `json:"first_audio_out,omitempty"`
	// Endpointing is how the end of turn was decided: "provider" (STT end-of-speech), "vad"
	// (silence after a final) or "max_wait".
	Endpointing string `json:"endpointing,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// KnowledgeStart and KnowledgeDone bracket the turn's knowledge retrieval (knowledge mode
	// auto); it lies between EndOfTurn and LLMRequestSent, so it is part of ParleyShare.
	KnowledgeStart time.Time `json:"knowledge_start,omitempty"`
	KnowledgeDone  time.Time `json:"knowledge_done,omitempty"`
}

// Span returns b-a, or 0 when either is unset.
func Span(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() {
		return 0
	}
	return b.Sub(a)
}

// ParleyShare is Parley's own part of the turn latency: everything between speech end and the
// first audio out except the providers' time (STT final wait, LLM time to its first sentence,
// TTS first byte) and the endpointing wait. It is what the engine itself adds.
func (m TurnMetrics) ParleyShare() time.Duration {
	if m.FirstAudioOut.IsZero() || m.EndOfTurn.IsZero() {
		return 0
	}
	chunk := m.LLMFirstChunk
	if chunk.IsZero() {
		chunk = m.LLMFirstToken
	}
	d := Span(m.EndOfTurn, m.LLMRequestSent) + // decision → request on the wire
		Span(chunk, m.TTSFirstRequest) + // first sentence complete → first TTS request
		Span(m.TTSFirstByte, m.FirstAudioOut) // first TTS byte → first frame out
	return d
}

// Metrics feeds turn timings into Prometheus histograms.
type Metrics struct {
	stages    *prometheus.HistogramVec
	share     prometheus.Histogram
	turns     *prometheus.CounterVec
	providers *prometheus.CounterVec // kind, vendor
}

// NewMetrics registers the engine's collectors with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_turn_stage_seconds",
			Help:    "Duration of each stage of a conversation turn.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .04, .08, .16, .32, .64, 1.28, 2.56, 5},
		}, []string{"stage"}),
		share: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_turn_parley_share_seconds",
			Help:    "Parley's own share of the turn latency (providers and endpointing excluded).",
			Buckets: []float64{.0001, .0002, .0005, .001, .002, .005, .01, .02, .04, .08},
		}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_turns_total", Help: "Conversation turns by how their end was decided.",
		}, []string{"endpointing"}),
		providers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_provider_errors_total", Help: "Provider failures (a stream that failed, a request that failed), by kind (stt, llm, tts) and vendor.",
		}, []string{"kind", "vendor"}),
	}
	if reg != nil {
		reg.MustRegister(m.stages, m.share, m.turns, m.providers)
	}
	return m
}

// Vendors name the providers of a conversation, for the provider metrics; "" is "unknown".
type Vendors struct{ STT, LLM, TTS string }

// ProviderError counts one failure of a provider of kind stt, llm or tts. The vendor label is
// bounded: a name of letters, digits, '-' and '_' of up to 32 bytes, else "other".
func (m *Metrics) ProviderError(kind, vendor string) {
	if m == nil {
		return
	}
	m.providers.WithLabelValues(kind, boundedVendor(vendor)).Inc()
}

func boundedVendor(v string) string {
	if v == "" {
		return "unknown"
	}
	if len(v) > 32 {
		return "other"
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return "other"
		}
	}
	return v
}

// Observe records one turn.
func (m *Metrics) Observe(t TurnMetrics) {
	if m == nil {
		return
	}
	obs := func(stage string, a, b time.Time) {
		if d := Span(a, b); d > 0 {
			m.stages.WithLabelValues(stage).Observe(d.Seconds())
		}
	}
	obs("endpointing", t.SpeechEnd, t.EndOfTurn)
	obs("stt_final", t.SpeechEnd, t.STTFinal)
	obs("llm_first_token", t.LLMRequestSent, t.LLMFirstToken)
	obs("llm_first_chunk", t.LLMFirstToken, t.LLMFirstChunk)
	obs("tts_first_byte", t.TTSFirstRequest, t.TTSFirstByte)
	obs("knowledge", t.KnowledgeStart, t.KnowledgeDone)
	obs("turn_total", t.SpeechEnd, t.FirstAudioOut)
	if !t.FirstAudioOut.IsZero() {
		m.share.Observe(t.ParleyShare().Seconds())
	}
	if t.Endpointing != "" {
		m.turns.WithLabelValues(t.Endpointing).Inc()
	}
}

// Cost meters what a conversation used.
type Cost struct {
	STTSeconds      float64 `json:"stt_seconds"`
	LLMInputTokens  int     `json:"llm_input_tokens"`
	LLMOutputTokens int     `json:"llm_output_tokens"`
	TTSCharacters   int     `json:"tts_characters"`
	CallSeconds     float64 `json:"call_seconds"`
}
