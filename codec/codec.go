// Package codec converts audio between 16-bit linear PCM and the payload formats that Parley
// carries over RTP: G.711 µ-law and A-law (ITU-T G.711), G.722 at 64 kbit/s (ITU-T G.722),
// Opus (RFC 6716 through libopus, RTP mapping RFC 7587) and RFC 4733 telephone-events. It also
// resamples between the 8, 16, 24 and 48 kHz rates those formats and the speech engines use.
//
// Everything here is a pure function, or a small stateful object, over buffers the caller owns.
// The package sits on the media hot path (one call per 20 ms frame per call leg), so nothing in it
// may allocate or block per frame: no I/O, no locks that can wait, no goroutines, no hidden
// buffering. Allocation happens only when an encoder, decoder or resampler is created. Bad input
// (short buffers, corrupt packets, unsupported rates) yields an error, never a panic. Encoders,
// decoders and resamplers keep per-stream state and are not safe for concurrent use: give each
// stream its own.
package codec

import "strings"

// Encoder turns one frame of mono 16-bit PCM at SampleRate into one RTP payload.
//
// Encode encodes all of pcm into dst and returns the number of bytes written. It returns an
// error (and writes nothing useful) when dst is too small or pcm is not a frame size the codec
// accepts. It never allocates.
type Encoder interface {
	Encode(dst []byte, pcm []int16) (int, error)
	SampleRate() int
}

// Decoder turns one RTP payload into mono 16-bit PCM at SampleRate.
//
// Decode decodes all of payload into dst and returns the number of samples written. It returns
// an error when dst is too small or the payload is corrupt. It never allocates.
type Decoder interface {
	Decode(dst []int16, payload []byte) (int, error)
	SampleRate() int
}

// Concealer is implemented by decoders that can fill in for a packet that never arrived.
//
// Conceal writes a replacement for the missing packet into dst and returns the number of
// samples written (the duration of the last packet decoded, or 20 ms before any, capped by
// len(dst)). next is the packet after the gap if it has already arrived, else nil: Opus uses its
// in-band FEC data (RFC 6716 §2.1.7) to rebuild the lost frame, and runs packet-loss concealment
// otherwise. After concealing with next, decode next itself normally. G.711 and G.722 repeat the
// last frame and fade it out over a few frames.
type Concealer interface {
	Conceal(dst []int16, next []byte) (int, error)
}

// NewEncoder returns an encoder for the codec info names (PCMU, PCMA, G722 or opus; the name is
// matched without regard to case). Opus uses info.SampleRate when it is one Opus supports
// (8, 12, 16, 24 or 48 kHz), else 48 kHz, with the other OpusOptions at their defaults.
func NewEncoder(info Info) (Encoder, error) {
	switch {
	case strings.EqualFold(info.Name, PCMU.Name):
		return NewG711Encoder(MuLaw), nil
	case strings.EqualFold(info.Name, PCMA.Name):
		return NewG711Encoder(ALaw), nil
	case strings.EqualFold(info.Name, G722.Name):
		return NewG722Encoder(), nil
	case strings.EqualFold(info.Name, Opus.Name):
		return NewOpusEncoder(OpusOptions{SampleRate: opusRateOrDefault(info.SampleRate)})
	}
	return nil, unsupported(info)
}

// NewDecoder returns a decoder for the codec info names; see NewEncoder. Every decoder it
// returns also implements Concealer.
func NewDecoder(info Info) (Decoder, error) {
	switch {
	case strings.EqualFold(info.Name, PCMU.Name):
		return NewG711Decoder(MuLaw), nil
	case strings.EqualFold(info.Name, PCMA.Name):
		return NewG711Decoder(ALaw), nil
	case strings.EqualFold(info.Name, G722.Name):
		return NewG722Decoder(), nil
	case strings.EqualFold(info.Name, Opus.Name):
		return NewOpusDecoder(opusRateOrDefault(info.SampleRate))
	}
	return nil, unsupported(info)
}
