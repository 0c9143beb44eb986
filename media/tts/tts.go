// Package tts turns the agent's text into 16-bit PCM. It holds the streaming text-to-speech
// adapters (ElevenLabs HTTP streaming, with or without character timestamps; any
// OpenAI-compatible /v1/audio/speech endpoint; the local espeak-ng program) behind one small
// interface, Synthesizer, that the conversation engine consumes.
//
// Every network adapter speaks its vendor's real wire protocol against a configurable base URL,
// so tests and the benchmark run it against the local fakes in session/fakes.
//
// What it must never do: hold audio back. A Stream's Read returns what one network (or pipe)
// read produced as soon as it is decoded and resampled; nothing is buffered beyond that one
// read (one JSON line for ElevenLabs with-timestamps, whose audio is base64 inside it), and
// steady-state reads allocate nothing. It never blocks past its timeouts: a provider
// that stalls before the first byte or mid-stream makes Read fail with ErrTimeout, and Close or
// cancelling the context stops a stream promptly.
package tts

import (
	"context"
	"fmt"
	"time"
)

// Synthesizer starts speech synthesis.
type Synthesizer interface {
	// Synthesize sends r to the provider and returns once it answered (status and headers, or
	// for espeak-ng once the process started). Audio is then pulled with Stream.Read. ctx
	// bounds the whole stream.
	Synthesize(ctx context.Context, r Request) (Stream, error)
}

// Request is one piece of text to speak.
type Request struct {
	// Text to speak; it must not be empty.
	Text string
	// Voice and Model override the adapter's configured defaults when not empty.
	Voice, Model string
	// Language is a BCP 47 tag; adapters that take one send its primary subtag.
	Language string
	// SampleRate of the PCM Read returns. Zero means 16000.
	SampleRate int
}

// DefaultSampleRate is the rate used when Request.SampleRate is zero.
const DefaultSampleRate = 16000

func (r Request) normalize() (Request, error) {
	if r.SampleRate == 0 {
		r.SampleRate = DefaultSampleRate
	}
	if r.SampleRate < 4000 || r.SampleRate > 48000 {
		return r, fmt.Errorf("%w: sample rate %d Hz out of range 4000..48000", ErrInvalidRequest, r.SampleRate)
	}
	if r.Text == "" {
		return r, fmt.Errorf("%w: empty text", ErrInvalidRequest)
	}
	return r, nil
}

// Stream is one synthesis in progress.
type Stream interface {
	// Read fills buf with 16-bit PCM at the request's SampleRate and returns how many samples
	// it wrote; io.EOF at the end. It returns as soon as one read from the provider has been
	// decoded, so n may be less than len(buf). Cancelling ctx or Close stops it promptly.
	Read(buf []int16) (int, error)
	// Alignment returns word timings when the provider gives them (they grow as audio arrives;
	// the returned slice is never modified afterwards), nil otherwise.
	Alignment() []Mark
	// Close stops the stream and releases the connection or process. It is idempotent.
	Close() error
}

// Mark is the timing of one word of the request's text in the synthesized audio.
type Mark struct {
	// Text is the word as the provider aligned it.
	Text string
	// Start and End are offsets from the start of the stream's audio.
	Start, End time.Duration
	// CharOffset is the byte offset of the word in Request.Text, so that
	// Text[:CharOffset+len(Mark.Text)] is what has been said once End has been played.
	CharOffset int
}

// primaryLanguage returns the primary subtag of a BCP 47 tag ("en-US" → "en").
func primaryLanguage(tag string) string {
	for i := 0; i < len(tag); i++ {
		if tag[i] == '-' || tag[i] == '_' {
			return tag[:i]
		}
	}
	return tag
}
