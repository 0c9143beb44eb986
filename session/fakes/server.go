package fakes

import (
	"net/http"
	"time"
)

// ServerOptions set the latencies and scripts of every fake behind one Server.
type ServerOptions struct {
	// LLM: time to first token and tokens per second after it; replies from Script (nil:
	// echo what the user said).
	LLMFirstToken   time.Duration
	LLMTokensPerSec float64
	Script          *Script
	// STT: interim results every STTInterimEvery during speech, the final STTFinalDelay after
	// the endpointing silence; transcripts from STTScript, one line per utterance.
	STTInterimEvery time.Duration
	STTFinalDelay   time.Duration
	STTScript       []string
	// TTS: time to first byte, speed against real time, and real speech (espeak-ng) instead of
	// a tone.
	TTSFirstByte time.Duration
	TTSSpeed     float64
	TTSEspeak    bool
}

// Server serves every fake on its vendor's path, so one base URL stands for every vendor.
type Server struct {
	mux        *http.ServeMux
	Chat       *OpenAIChatFake
	Anthropic  *AnthropicFake
	Deepgram   *DeepgramFake
	Transcribe *OpenAISTTFake
	Speech     *OpenAITTSFake
	ElevenLabs *ElevenLabsFake
	WhatsApp   *WhatsAppFake        // Meta's Graph API (issue 19)
	Embeddings OpenAIEmbeddingsFake // issue 16
}

// NewServer builds the fakes.
func NewServer(o ServerOptions) *Server {
	script := o.Script
	if script == nil {
		script = NewScript()
	}
	so := ScriptOptions{Script: script, FirstTokenDelay: o.LLMFirstToken, TokensPerSecond: o.LLMTokensPerSec}
	s := &Server{
		mux:        http.NewServeMux(),
		Chat:       NewOpenAIChatFake(so),
		Anthropic:  NewAnthropicFake(so),
		Deepgram:   NewDeepgramFake(DeepgramFakeOptions{Script: o.STTScript, InterimEvery: o.STTInterimEvery, FinalDelay: o.STTFinalDelay}),
		Transcribe: NewOpenAISTTFake(OpenAISTTFakeOptions{Script: o.STTScript, Latency: o.STTFinalDelay}),
		Speech:     NewOpenAITTSFake(OpenAITTSFakeOptions{FirstByte: o.TTSFirstByte, Speed: o.TTSSpeed, Espeak: o.TTSEspeak}),
		ElevenLabs: NewElevenLabsFake(ElevenLabsFakeOptions{FirstByte: o.TTSFirstByte, Speed: o.TTSSpeed, Espeak: o.TTSEspeak}),
		WhatsApp:   NewWhatsAppFake(),
	}
	s.mux.Handle("/v1/chat/completions", s.Chat)
	s.mux.Handle("/v1/messages", s.Anthropic)
	s.mux.Handle("/v1/listen", s.Deepgram)
	s.mux.Handle("/v1/audio/transcriptions", s.Transcribe)
	s.mux.Handle("/v1/audio/speech", s.Speech)
	s.mux.Handle("/v1/text-to-speech/", s.ElevenLabs)
	s.mux.Handle("/v1/embeddings", s.Embeddings)
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	return s
}

// NewServerWith serves only a WhatsApp fake (the Graph API client's tests).
func NewServerWith(f *WhatsAppFake) *Server { return &Server{mux: http.NewServeMux(), WhatsApp: f} }

// ServeHTTP routes a request to the fake of its path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if IsGraphPath(r.URL.Path) { // /v21.0/… : Graph versions carry a dot, the other vendors' do not
		s.WhatsApp.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close releases stalled requests and open sockets of every fake. Call it before closing the
// HTTP server.
func (s *Server) Close() {
	s.Chat.Close()
	s.Anthropic.Close()
	s.Deepgram.Close()
	s.Transcribe.Close()
	s.Speech.Close()
	s.ElevenLabs.Close()
	s.WhatsApp.Close()
}
