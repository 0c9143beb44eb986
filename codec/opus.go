package codec

/*
#cgo pkg-config: opus
#include <opus.h>

typedef struct { int err; opus_int32 val; } parley_ctl_result;

// opus_encoder_ctl and opus_decoder_ctl are variadic, which cgo cannot call: these wrappers
// pass one integer argument, which is what every SET request takes.
static int parley_enc_set(OpusEncoder *st, int req, opus_int32 v) { return opus_encoder_ctl(st, req, v); }
static parley_ctl_result parley_enc_get(OpusEncoder *st, int req) {
	parley_ctl_result r; r.val = 0; r.err = opus_encoder_ctl(st, req, &r.val); return r;
}
static int parley_enc_reset(OpusEncoder *st) { return opus_encoder_ctl(st, OPUS_RESET_STATE); }
static int parley_dec_reset(OpusDecoder *st) { return opus_decoder_ctl(st, OPUS_RESET_STATE); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Opus through libopus (RFC 6716), mono. The encoder and decoder keep their C state in memory
// that libopus allocated; Encode, Decode and Conceal hand libopus pointers straight into the
// caller's slices, so a frame costs one cgo call and no allocation. Close frees the C state; a
// cleanup attached at creation frees it if Close is never called.

// OpusMaxFrame is the longest Opus frame, 120 ms, in samples at 48 kHz.
const OpusMaxFrame = 5760

// OpusMaxPacket is a safe size for an Opus packet buffer (the libopus recommendation).
const OpusMaxPacket = 4000

// OpusError is an error code returned by libopus.
type OpusError int

// Error returns the libopus description of the code.
func (e OpusError) Error() string {
	switch e {
	case C.OPUS_BAD_ARG:
		return "opus: invalid argument"
	case C.OPUS_BUFFER_TOO_SMALL:
		return "opus: buffer too small"
	case C.OPUS_INTERNAL_ERROR:
		return "opus: internal error"
	case C.OPUS_INVALID_PACKET:
		return "opus: corrupted packet"
	case C.OPUS_UNIMPLEMENTED:
		return "opus: request not implemented"
	case C.OPUS_INVALID_STATE:
		return "opus: invalid state"
	case C.OPUS_ALLOC_FAIL:
		return "opus: memory allocation failed"
	}
	return fmt.Sprintf("opus: error %d", int(e))
}

// Is lets errors.Is match OpusError against this package's sentinels.
func (e OpusError) Is(target error) bool {
	switch e {
	case C.OPUS_INVALID_PACKET:
		return target == ErrInvalidPacket
	case C.OPUS_BUFFER_TOO_SMALL:
		return target == ErrShortBuffer
	case C.OPUS_BAD_ARG:
		return target == ErrFrameSize
	}
	return false
}

// OpusOptions configures an OpusEncoder. The zero value is 48 kHz VoIP at 32 kbit/s, complexity
// 5, no FEC, no DTX.
type OpusOptions struct {
	// SampleRate of the PCM given to Encode: 48000 (default), 24000, 16000, 12000 or 8000.
	SampleRate int
	// Bitrate in bit/s, 6000–510000. Zero selects 24000 at 16 kHz and below, 32000 above.
	Bitrate int
	// Complexity 1–10 trades CPU for quality; zero selects 5. (SetComplexity accepts 0 too.)
	Complexity int
	// FEC turns on in-band forward error correction (RFC 6716 §2.1.7, LBRR): each packet also
	// carries a coarse copy of the previous frame, which OpusDecoder.Conceal uses. It only works
	// in the SILK and hybrid modes (speech at moderate bitrates).
	FEC bool
	// DTX turns on discontinuous transmission: during silence the encoder returns packets of at
	// most 2 bytes, which need not be sent (RFC 7587 §3.1.3), with a comfort-noise update every
	// 400 ms.
	DTX bool
	// PacketLossPercent is the expected loss, 0–100; the encoder spends more bits on FEC as it
	// grows. With FEC on and this at zero, 10 is used, since libopus codes no FEC at 0%.
	PacketLossPercent int
	// Application is "voip" (default), "audio" or "lowdelay".
	Application string
	// Signal hints the content: "" or "auto" (default), "voice" or "music".
	Signal string
}

// opusRateOK reports whether libopus accepts rate.
func opusRateOK(rate int) bool {
	switch rate {
	case 8000, 12000, 16000, 24000, 48000:
		return true
	}
	return false
}

func opusRateOrDefault(rate int) int {
	if opusRateOK(rate) {
		return rate
	}
	return 48000
}

// opusFrameOK reports whether n samples at rate is an Opus frame duration: 2.5, 5, 10, 20, 40,
// 60, 80, 100 or 120 ms.
func opusFrameOK(n, rate int) bool {
	unit := rate / 400 // 2.5 ms
	if n <= 0 || n%unit != 0 {
		return false
	}
	switch n / unit {
	case 1, 2, 4, 8, 16, 24, 32, 40, 48:
		return true
	}
	return false
}

// OpusEncoder encodes mono 16-bit PCM to Opus packets. Not safe for concurrent use.
type OpusEncoder struct {
	st      *C.OpusEncoder
	rate    int
	cleanup runtime.Cleanup
}

// NewOpusEncoder creates an encoder configured by o.
func NewOpusEncoder(o OpusOptions) (*OpusEncoder, error) {
	if o.SampleRate == 0 {
		o.SampleRate = 48000
	}
	if !opusRateOK(o.SampleRate) {
		return nil, fmt.Errorf("%w: opus sample rate %d", ErrUnsupported, o.SampleRate)
	}
	var app C.int
	switch strings.ToLower(o.Application) {
	case "", "voip":
		app = C.OPUS_APPLICATION_VOIP
	case "audio":
		app = C.OPUS_APPLICATION_AUDIO
	case "lowdelay", "restricted-lowdelay":
		app = C.OPUS_APPLICATION_RESTRICTED_LOWDELAY
	default:
		return nil, fmt.Errorf("%w: opus application %q", ErrUnsupported, o.Application)
	}
	var signal C.opus_int32
	switch strings.ToLower(o.Signal) {
	case "", "auto":
		signal = C.OPUS_AUTO
	case "voice":
		signal = C.OPUS_SIGNAL_VOICE
	case "music":
		signal = C.OPUS_SIGNAL_MUSIC
	default:
		return nil, fmt.Errorf("%w: opus signal %q", ErrUnsupported, o.Signal)
	}
	if o.Bitrate == 0 {
		o.Bitrate = 32000
		if o.SampleRate <= 16000 {
			o.Bitrate = 24000
		}
	}
	if o.Complexity == 0 {
		o.Complexity = 5
	}
	if o.FEC && o.PacketLossPercent == 0 {
		o.PacketLossPercent = 10
	}
	var cerr C.int
	st := C.opus_encoder_create(C.opus_int32(o.SampleRate), 1, app, &cerr)
	if cerr != C.OPUS_OK || st == nil {
		return nil, fmt.Errorf("opus encoder: %w", OpusError(cerr))
	}
	e := &OpusEncoder{st: st, rate: o.SampleRate}
	e.cleanup = runtime.AddCleanup(e, func(st *C.OpusEncoder) { C.opus_encoder_destroy(st) }, st)
	for _, set := range []func() error{
		func() error { return e.SetBitrate(o.Bitrate) },
		func() error { return e.SetComplexity(o.Complexity) },
		func() error { return e.SetFEC(o.FEC) },
		func() error { return e.SetDTX(o.DTX) },
		func() error { return e.SetPacketLoss(o.PacketLossPercent) },
		func() error { return e.ctl(C.OPUS_SET_SIGNAL_REQUEST, signal, "signal") },
	} {
		if err := set(); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

func (e *OpusEncoder) ctl(req C.int, v C.opus_int32, what string) error {
	if e.st == nil {
		return ErrClosed
	}
	rc := C.parley_enc_set(e.st, req, v)
	runtime.KeepAlive(e)
	if rc != C.OPUS_OK {
		return fmt.Errorf("opus set %s %d: %w", what, int(v), OpusError(rc))
	}
	return nil
}

func (e *OpusEncoder) get(req C.int) (int, error) {
	if e.st == nil {
		return 0, ErrClosed
	}
	r := C.parley_enc_get(e.st, req)
	runtime.KeepAlive(e)
	if r.err != C.OPUS_OK {
		return 0, OpusError(r.err)
	}
	return int(r.val), nil
}

// SetBitrate sets the target bitrate in bit/s (6000–510000).
func (e *OpusEncoder) SetBitrate(bps int) error {
	if bps < 6000 || bps > 510000 {
		return fmt.Errorf("%w: opus bitrate %d", ErrUnsupported, bps)
	}
	return e.ctl(C.OPUS_SET_BITRATE_REQUEST, C.opus_int32(bps), "bitrate")
}

// SetComplexity sets the computational complexity, 0–10.
func (e *OpusEncoder) SetComplexity(c int) error {
	if c < 0 || c > 10 {
		return fmt.Errorf("%w: opus complexity %d", ErrUnsupported, c)
	}
	return e.ctl(C.OPUS_SET_COMPLEXITY_REQUEST, C.opus_int32(c), "complexity")
}

// SetFEC turns in-band forward error correction on or off.
func (e *OpusEncoder) SetFEC(on bool) error {
	return e.ctl(C.OPUS_SET_INBAND_FEC_REQUEST, boolToC(on), "fec")
}

// SetDTX turns discontinuous transmission on or off.
func (e *OpusEncoder) SetDTX(on bool) error {
	return e.ctl(C.OPUS_SET_DTX_REQUEST, boolToC(on), "dtx")
}

// SetPacketLoss sets the expected packet loss in percent (0–100).
func (e *OpusEncoder) SetPacketLoss(pct int) error {
	if pct < 0 || pct > 100 {
		return fmt.Errorf("%w: opus packet loss %d%%", ErrUnsupported, pct)
	}
	return e.ctl(C.OPUS_SET_PACKET_LOSS_PERC_REQUEST, C.opus_int32(pct), "packet loss")
}

// Bitrate returns the bitrate the encoder is targeting, in bit/s.
func (e *OpusEncoder) Bitrate() (int, error) { return e.get(C.OPUS_GET_BITRATE_REQUEST) }

// Lookahead returns the encoder's algorithmic delay in samples at SampleRate.
func (e *OpusEncoder) Lookahead() (int, error) { return e.get(C.OPUS_GET_LOOKAHEAD_REQUEST) }

// Reset returns the encoder to a freshly initialised state, keeping its settings.
func (e *OpusEncoder) Reset() error {
	if e.st == nil {
		return ErrClosed
	}
	rc := C.parley_enc_reset(e.st)
	runtime.KeepAlive(e)
	if rc != C.OPUS_OK {
		return OpusError(rc)
	}
	return nil
}

// SampleRate returns the PCM rate the encoder takes.
func (e *OpusEncoder) SampleRate() int { return e.rate }

// Encode encodes one frame (2.5, 5, 10, 20, 40, 60, 80, 100 or 120 ms of samples) into dst and
// returns the packet length. With DTX on, a result of 2 bytes or fewer marks a silent frame that
// need not be sent. OpusMaxPacket bytes of dst is always enough.
func (e *OpusEncoder) Encode(dst []byte, pcm []int16) (int, error) {
	if e.st == nil {
		return 0, ErrClosed
	}
	if !opusFrameOK(len(pcm), e.rate) {
		return 0, ErrFrameSize
	}
	if len(dst) == 0 {
		return 0, shortBuffer(0, 1)
	}
	n := C.opus_encode(e.st, (*C.opus_int16)(unsafe.Pointer(&pcm[0])), C.int(len(pcm)),
		(*C.uchar)(unsafe.Pointer(&dst[0])), C.opus_int32(min(len(dst), 1<<30)))
	runtime.KeepAlive(e)
	if n < 0 {
		return 0, OpusError(n)
	}
	return int(n), nil
}

// Close frees the encoder's C state. It is safe to call more than once; the encoder returns
// ErrClosed afterwards.
func (e *OpusEncoder) Close() error {
	if e.st == nil {
		return nil
	}
	e.cleanup.Stop()
	C.opus_encoder_destroy(e.st)
	e.st = nil
	return nil
}

// rawOpusEncode calls libopus with no checks, for the benchmark comparing the wrapper's cost.
func rawOpusEncode(e *OpusEncoder, dst []byte, pcm []int16) int {
	return int(C.opus_encode(e.st, (*C.opus_int16)(unsafe.Pointer(&pcm[0])), C.int(len(pcm)),
		(*C.uchar)(unsafe.Pointer(&dst[0])), C.opus_int32(len(dst))))
}

// OpusDecoder decodes Opus packets to mono 16-bit PCM and conceals lost ones. Not safe for
// concurrent use.
type OpusDecoder struct {
	st      *C.OpusDecoder
	rate    int
	last    int // samples in the last decoded or concealed frame
	cleanup runtime.Cleanup
}

// NewOpusDecoder creates a mono decoder producing PCM at sampleRate (48000, 24000, 16000, 12000
// or 8000). Any Opus packet, whatever its coded bandwidth or channel count, decodes at that rate.
func NewOpusDecoder(sampleRate int) (*OpusDecoder, error) {
	if !opusRateOK(sampleRate) {
		return nil, fmt.Errorf("%w: opus sample rate %d", ErrUnsupported, sampleRate)
	}
	var cerr C.int
	st := C.opus_decoder_create(C.opus_int32(sampleRate), 1, &cerr)
	if cerr != C.OPUS_OK || st == nil {
		return nil, fmt.Errorf("opus decoder: %w", OpusError(cerr))
	}
	d := &OpusDecoder{st: st, rate: sampleRate, last: sampleRate / 50}
	d.cleanup = runtime.AddCleanup(d, func(st *C.OpusDecoder) { C.opus_decoder_destroy(st) }, st)
	return d, nil
}

// SampleRate returns the PCM rate the decoder produces.
func (d *OpusDecoder) SampleRate() int { return d.rate }

// Decode decodes one packet into dst and returns the number of samples. dst must hold the
// packet's duration (at most 120 ms); an empty or corrupt packet is an error wrapping
// ErrInvalidPacket.
func (d *OpusDecoder) Decode(dst []int16, payload []byte) (int, error) {
	if d.st == nil {
		return 0, ErrClosed
	}
	if len(payload) == 0 {
		return 0, ErrInvalidPacket
	}
	if len(dst) == 0 {
		return 0, shortBuffer(0, d.rate/50)
	}
	n := C.opus_decode(d.st, (*C.uchar)(unsafe.Pointer(&payload[0])), C.opus_int32(len(payload)),
		(*C.opus_int16)(unsafe.Pointer(&dst[0])), C.int(min(len(dst), d.rate/400*48)), 0)
	runtime.KeepAlive(d)
	if n < 0 {
		return 0, OpusError(n)
	}
	d.last = int(n)
	return int(n), nil
}

// Conceal fills in for one lost packet, the length of the last one (20 ms before any), capped
// by len(dst) and rounded down to whole 2.5 ms. When next (the packet after the gap) is given,
// the frame is rebuilt from the FEC data in next if it has any, and by packet-loss concealment
// otherwise; then decode next itself with Decode. A corrupt next falls back to concealment.
func (d *OpusDecoder) Conceal(dst []int16, next []byte) (int, error) {
	if d.st == nil {
		return 0, ErrClosed
	}
	unit := d.rate / 400
	n := min(d.last, len(dst)) / unit * unit
	if n == 0 {
		return 0, shortBuffer(len(dst), unit)
	}
	out := (*C.opus_int16)(unsafe.Pointer(&dst[0]))
	var rc C.int = -1
	if len(next) > 0 {
		rc = C.opus_decode(d.st, (*C.uchar)(unsafe.Pointer(&next[0])), C.opus_int32(len(next)), out, C.int(n), 1)
	}
	if rc < 0 {
		rc = C.opus_decode(d.st, nil, 0, out, C.int(n), 0)
	}
	runtime.KeepAlive(d)
	if rc < 0 {
		return 0, OpusError(rc)
	}
	d.last = int(rc)
	return int(rc), nil
}

// Reset returns the decoder to a freshly initialised state.
func (d *OpusDecoder) Reset() error {
	if d.st == nil {
		return ErrClosed
	}
	rc := C.parley_dec_reset(d.st)
	runtime.KeepAlive(d)
	if rc != C.OPUS_OK {
		return OpusError(rc)
	}
	d.last = d.rate / 50
	return nil
}

// Close frees the decoder's C state. It is safe to call more than once; the decoder returns
// ErrClosed afterwards.
func (d *OpusDecoder) Close() error {
	if d.st == nil {
		return nil
	}
	d.cleanup.Stop()
	C.opus_decoder_destroy(d.st)
	d.st = nil
	return nil
}

// rawOpusDecode calls libopus with no checks, for the benchmark comparing the wrapper's cost.
func rawOpusDecode(d *OpusDecoder, dst []int16, payload []byte) int {
	return int(C.opus_decode(d.st, (*C.uchar)(unsafe.Pointer(&payload[0])), C.opus_int32(len(payload)),
		(*C.opus_int16)(unsafe.Pointer(&dst[0])), C.int(len(dst)), 0))
}

// OpusPacketSamples returns the duration of an Opus packet in samples at sampleRate, reading
// only its TOC and frame count (RFC 6716 §3.1), or an error for a malformed packet.
func OpusPacketSamples(packet []byte, sampleRate int) (int, error) {
	if len(packet) == 0 {
		return 0, ErrInvalidPacket
	}
	n := C.opus_packet_get_nb_samples((*C.uchar)(unsafe.Pointer(&packet[0])), C.opus_int32(len(packet)), C.opus_int32(sampleRate))
	if n < 0 {
		return 0, OpusError(n)
	}
	return int(n), nil
}

func boolToC(b bool) C.opus_int32 {
	if b {
		return 1
	}
	return 0
}
