// Package stt turns caller audio into text. It holds the streaming speech-to-text adapters
// (Deepgram live streaming over WebSocket, and any OpenAI-compatible transcription endpoint such
// as OpenAI, whisper.cpp server or faster-whisper servers) behind two small interfaces,
// Recognizer and Stream, that the conversation engine consumes.
//
// Every adapter speaks its vendor's real wire protocol against a configurable base URL, so tests
// and the benchmark run it against the local fakes in session/fakes.
//
// What it must never do: block or allocate on the caller's frame path. Stream.Write copies a
// frame into a bounded queue and returns; when the provider falls behind the frame is dropped
// and counted, never queued without limit. Network I/O, retries and reconnects happen on
// goroutines the stream owns and waits for. It knows nothing of SIP, RTP or Parley's HTTP API.
package stt

import (
	"context"
	"fmt"
	"time"
)

// Recognizer opens speech-to-text streams, one per call (or per utterance session).
type Recognizer interface {
	// Open connects to the provider and returns a live stream. ctx bounds the whole stream:
	// cancelling it stops the stream at once (no flush) and closes Events.
	Open(ctx context.Context, o StreamOptions) (Stream, error)
}

// StreamOptions describe the audio the engine will write and how it wants it recognised.
type StreamOptions struct {
	// Language is a BCP 47 tag ("en", "en-US"); empty leaves the adapter's default.
	Language string
	// Model overrides the adapter's configured model when not empty.
	Model string
	// SampleRate of the PCM given to Write, in Hz. Zero means 16000.
	SampleRate int
	// Encoding on the wire to the provider: "linear16" (default) or "mulaw". Write always takes
	// 16-bit PCM; the adapter encodes. Per-utterance adapters upload WAV whatever this says.
	Encoding string
	// Endpointing is the silence after speech that ends an utterance. Zero leaves the provider's
	// default; a negative value turns provider endpointing off (Deepgram endpointing=false).
	Endpointing time.Duration
	// UtteranceEnd asks for a word-gap based end of utterance (Deepgram utterance_end_ms).
	// Zero disables it.
	UtteranceEnd time.Duration
	// Interim asks for interim (partial) results.
	Interim bool
	// Keywords boost recognition of these words or phrases.
	Keywords []string
}

const (
	// DefaultSampleRate is the rate used when StreamOptions.SampleRate is zero.
	DefaultSampleRate = 16000
	// EncodingLinear16 is 16-bit signed little-endian PCM.
	EncodingLinear16 = "linear16"
	// EncodingMulaw is G.711 µ-law (ITU-T G.711 §2), one byte per sample.
	EncodingMulaw = "mulaw"
)

// normalize fills defaults and rejects options no adapter can honour.
func (o StreamOptions) normalize() (StreamOptions, error) {
	if o.SampleRate == 0 {
		o.SampleRate = DefaultSampleRate
	}
	if o.SampleRate < 4000 || o.SampleRate > 48000 {
		return o, fmt.Errorf("%w: sample rate %d Hz out of range 4000..48000", ErrInvalidOptions, o.SampleRate)
	}
	switch o.Encoding {
	case "":
		o.Encoding = EncodingLinear16
	case EncodingLinear16, EncodingMulaw:
	default:
		return o, fmt.Errorf("%w: encoding %q (want %q or %q)", ErrInvalidOptions, o.Encoding, EncodingLinear16, EncodingMulaw)
	}
	if o.UtteranceEnd < 0 {
		return o, fmt.Errorf("%w: negative UtteranceEnd", ErrInvalidOptions)
	}
	return o, nil
}

// Stream is one live recognition session.
type Stream interface {
	// Write hands one frame of 16-bit PCM (SampleRate, mono) to the recognizer, with the engine's
	// VAD decision for the frame. It never blocks: frames are queued in a bounded buffer and
	// dropped (counted) when the connection is backed up. It returns ErrClosed once the stream
	// has ended.
	Write(pcm []int16, voiced bool) error
	// Events delivers recognition events in order. It is closed when the stream ends (after
	// Close, on a fatal error, or when the Open context is cancelled). Keep draining it: Close
	// waits (bounded) for final results to be delivered.
	Events() <-chan Event
	// Close finishes gracefully: pending audio is flushed to the provider, final results are
	// delivered, then the connection is closed. It is safe to call more than once.
	Close() error
	// Stats reports counters for the cost meter and for health.
	Stats() Stats
}

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	// Interim is a partial transcript that may still change.
	Interim EventKind = iota + 1
	// Final is a transcript segment that will not change.
	Final
	// SpeechStarted reports the start of speech (provider VAD or engine VAD).
	SpeechStarted
	// EndOfSpeech ends an utterance (Deepgram speech_final=true or UtteranceEnd; end of an
	// uploaded utterance). Its Text is the whole utterance: the Finals since the last
	// EndOfSpeech joined by spaces.
	EndOfSpeech
	// Reconnected reports that the provider connection dropped and was re-established; the
	// audio of the gap may be missing. Err holds the cause of the drop.
	Reconnected
	// Error reports a failure. The stream may go on (a failed utterance upload) or end (Events
	// is then closed).
	Error
)

// String names the kind for logs.
func (k EventKind) String() string {
	switch k {
	case Interim:
		return "interim"
	case Final:
		return "final"
	case SpeechStarted:
		return "speech_started"
	case EndOfSpeech:
		return "end_of_speech"
	case Reconnected:
		return "reconnected"
	case Error:
		return "error"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one recognition event.
type Event struct {
	Kind EventKind
	// Text is the transcript (Interim, Final, EndOfSpeech).
	Text string
	// Confidence in 0..1 when the provider gives one.
	Confidence float64
	// Start and End are offsets into the audio written to the stream (time since the first
	// sample given to Write). They never go backwards across reconnects.
	Start, End time.Duration
	// SpeechFinal is set on a Final that also ends the utterance.
	SpeechFinal bool
	// At is when the adapter received the event.
	At time.Time
	// Err is set on Error and Reconnected events.
	Err error
}

// Stats are a stream's counters.
type Stats struct {
	// AudioSent is how much audio reached the provider (what it bills).
	AudioSent time.Duration
	// FramesDropped counts frames lost to a full queue, a failed send or a dropped upload.
	FramesDropped uint64
	// Reconnects counts re-established connections.
	Reconnects int
	// Requests counts HTTP requests made (per-utterance adapters), retries included.
	Requests int
}

// samplesToDuration converts a sample count at rate Hz to a duration.
func samplesToDuration(n int64, rate int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(n * int64(time.Second) / int64(rate))
}

// durationToSamples converts a duration to a sample count at rate Hz.
func durationToSamples(d time.Duration, rate int) int64 {
	return int64(d) * int64(rate) / int64(time.Second)
}
