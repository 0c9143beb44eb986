package media

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/parley-voice/parley/codec"
)

// RTPPacketSource is where an RTPReceiver pulls packets from; RTPEndpoint implements it.
type RTPPacketSource interface {
	TryReadPacket(dst *RTPPacket) bool
}

// RTPReceiverConfig configures an RTPReceiver.
type RTPReceiverConfig struct {
	// Codec is the negotiated payload format; packets whose payload type is Codec.PayloadType
	// are decoded as audio. Its ClockRate must be a multiple of 50 (20 ms packets).
	Codec codec.Info
	// Decoder decodes Codec; nil means codec.NewDecoder(Codec). The receiver owns it: Close
	// closes it when it is an io.Closer (Opus).
	Decoder codec.Decoder
	// OutputRate is the rate of the frames produced; zero means PipelineRate (16 kHz).
	OutputRate int
	// MinDelay and MaxDelay bound the jitter buffer's playout delay (JitterOptions.Min/Max).
	MinDelay, MaxDelay time.Duration
	// Now is the jitter buffer's clock; nil means time.Now.
	Now func() time.Time
}

// RTPReceiverStats counts what an RTPReceiver produced.
type RTPReceiverStats struct {
	Frames       uint64 // frames produced by ReadFrame
	Played       uint64 // frames decoded from an audio packet
	Concealed    uint64 // frames concealed for a missing packet or a payload that did not decode
	ComfortNoise uint64 // frames of comfort noise generated from RFC 3389 packets
	Silence      uint64 // frames of silence (nothing to play: before the stream, or it went quiet)
	DecodeErrors uint64 // audio payloads the decoder rejected
	// OtherPayloads counts packets of other payload types (for example RFC 4733
	// telephone-events), which are not audio and are kept out of the jitter buffer.
	OtherPayloads uint64
	Jitter        JitterStats
}

// Kinds of payload stored in the jitter buffer, in the first byte of each stored payload.
const (
	rxKindAudio byte = iota
	rxKindCN
)

// RTPReceiver is the receive chain of one call leg: RTP packet → jitter buffer → decode →
// resample → 20 ms Frame at OutputRate (RFC 3550 timing, ITU-T G.711 / codec package decoding).
//
// Push (or Pull from an RTPEndpoint) feeds packets as they arrive; ReadFrame is called once per
// 20 ms by the playout clock and always produces a full frame: decoded audio, concealment of a
// lost packet (codec.Concealer), comfort noise after an RFC 3389 packet, or silence.
//
// Comfort noise (payload type 13) is turned into white noise at the level the packet carries
// (RFC 3389 §3.1; 0 dBov is taken as the RMS of a full-scale sine), band-limited by passing it
// through the same resampler as the audio. The optional spectral parameters are not modelled.
// The noise continues while the sender stays quiet and stops at the next audio packet.
//
// In steady state nothing here allocates. An RTPReceiver is not safe for concurrent use: one
// goroutine (the playout clock) pushes and reads.
type RTPReceiver struct {
	pt      uint8
	dec     codec.Decoder
	conceal codec.Concealer // nil when the decoder cannot conceal
	rs      *codec.Resampler
	jb      *JitterBuffer
	inN     int // samples of one 20 ms frame at the decoder's rate
	outRate int

	push    []byte  // kind byte + payload, for JitterBuffer.Push
	pop     []byte  // JitterBuffer.Pop destination
	pcm     []int16 // decoded samples at the decoder's rate
	scratch RTPPacket

	cnAmp   int32 // comfort-noise amplitude (uniform noise in [-cnAmp, cnAmp]); -1 when off
	noise   uint32
	st      RTPReceiverStats
	decRate int
}

// NewRTPReceiver builds a receive chain for cfg.Codec.
func NewRTPReceiver(cfg RTPReceiverConfig) (*RTPReceiver, error) {
	info := cfg.Codec
	if info.ClockRate == 0 || info.ClockRate%50 != 0 {
		return nil, fmt.Errorf("media: RTP receiver needs a clock rate that is a multiple of 50 Hz, got %d", info.ClockRate)
	}
	dec := cfg.Decoder
	outRate := cfg.OutputRate
	if outRate == 0 {
		outRate = PipelineRate
	}
	if dec == nil {
		di := info
		if strings.EqualFold(info.Name, codec.Opus.Name) {
			// libopus decodes any stream at any of its rates (RFC 6716 §2): decoding at the
			// output rate skips a resampler, and the decoder itself does less.
			di.SampleRate = outRate
		}
		d, err := codec.NewDecoder(di)
		if err != nil {
			return nil, fmt.Errorf("media: RTP receiver: %w", err)
		}
		dec = d
	}
	decRate := dec.SampleRate()
	inN, outN := SamplesPerFrame(decRate), SamplesPerFrame(outRate)
	if inN == 0 || outN == 0 {
		return nil, fmt.Errorf("media: RTP receiver cannot frame %d Hz → %d Hz", decRate, outRate)
	}
	r := &RTPReceiver{
		pt:      info.PayloadType,
		dec:     dec,
		inN:     inN,
		outRate: outRate,
		decRate: decRate,
		push:    make([]byte, 0, 1+maxPayloadOf(info)),
		pop:     make([]byte, 0, 1+maxPayloadOf(info)),
		pcm:     make([]int16, decodeRoom(info, inN)),
		cnAmp:   -1,
		noise:   0x9e3779b9,
	}
	if c, ok := dec.(codec.Concealer); ok {
		r.conceal = c
	}
	if decRate != outRate {
		rs, err := codec.NewResampler(decRate, outRate)
		if err != nil {
			return nil, fmt.Errorf("media: RTP receiver: %w", err)
		}
		r.rs = rs
	}
	jb, err := NewJitterBuffer(JitterOptions{
		ClockRate:    info.ClockRate,
		FrameSamples: info.ClockRate / 50,
		Min:          cfg.MinDelay,
		Max:          cfg.MaxDelay,
		MaxPayload:   1 + maxPayloadOf(info),
		Now:          cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	r.jb = jb
	return r, nil
}

// maxPayloadOf is the largest 20 ms payload of a codec, which sizes the jitter buffer's slots:
// G.711 and G.722 carry 8 bytes per millisecond (RFC 3551 §4.5.2, §4.5.14), so a 20 ms packet
// is 160 bytes (and comfort noise is smaller); other codecs get MaxRTPPayload.
func maxPayloadOf(info codec.Info) int {
	switch strings.ToUpper(info.Name) {
	case "PCMU", "PCMA", "G722":
		return 160
	}
	return MaxRTPPayload
}

// decodeRoom is how many samples one payload may decode to: a 160-byte G.711 or G.722 payload
// is one 20 ms frame (the jitter buffer keeps nothing longer); Opus may carry up to 120 ms.
func decodeRoom(info codec.Info, frameN int) int {
	if maxPayloadOf(info) < MaxRTPPayload {
		return frameN
	}
	return MaxFrameSamples
}

// Push feeds one received packet to the jitter buffer (the payload is copied). Audio of the
// negotiated payload type and comfort noise are kept; other payload types are counted and left
// out.
func (r *RTPReceiver) Push(p *RTPPacket) {
	var kind byte
	switch {
	case p.PayloadType == r.pt:
		kind = rxKindAudio
	case p.ComfortNoise:
		kind = rxKindCN
	default:
		r.st.OtherPayloads++
		return
	}
	if len(p.Payload) > MaxRTPPayload {
		r.st.DecodeErrors++
		return
	}
	r.push = append(r.push[:0], kind)
	r.push = append(r.push, p.Payload...)
	r.jb.Push(p.SequenceNumber, p.Timestamp, p.SSRC, p.Marker, r.push)
}

// Pull pushes every packet src has queued and returns how many it took.
func (r *RTPReceiver) Pull(src RTPPacketSource) int {
	n := 0
	for src.TryReadPacket(&r.scratch) {
		r.Push(&r.scratch)
		n++
	}
	return n
}

// ReadFrame produces the next 20 ms frame into f at OutputRate and reports what the jitter
// buffer produced for it (PopPacket also for a comfort-noise packet). The frame is always full;
// an error is returned only alongside a usable frame (concealment or silence), when the decoder
// rejected a payload or could not conceal.
func (r *RTPReceiver) ReadFrame(f *Frame) (PopStatus, error) {
	payload, st := r.jb.Pop(r.pop[:0])
	r.pop = payload[:0]
	return st, r.produce(f, payload, st)
}

// ReadNext is eager playout (JitterBuffer.PopNext): when the next packet in sequence is here it
// decodes it into f at once and reports true, whatever the buffer's depth. A consumer that
// needs no steady pace (speech recognition) calls it after every Push and calls ReadDue when
// its clock finds it owes a frame; it does not mix with ReadFrame. An error comes only with a
// usable (concealed) frame.
func (r *RTPReceiver) ReadNext(f *Frame) (bool, error) {
	payload, ok := r.jb.PopNext(r.pop[:0])
	r.pop = payload[:0]
	if !ok {
		return false, nil
	}
	return true, r.produce(f, payload, PopPacket)
}

// ReadDue produces the frame an eager consumer's clock owes when ReadNext had none
// (JitterBuffer.PopDue): the concealment of a packet known to be lost, or comfort noise or
// silence while the sender is late or quiet.
func (r *RTPReceiver) ReadDue(f *Frame) (PopStatus, error) {
	payload, st := r.jb.PopDue(r.pop[:0])
	r.pop = payload[:0]
	return st, r.produce(f, payload, st)
}

// produce turns what the jitter buffer gave into one frame.
func (r *RTPReceiver) produce(f *Frame, payload []byte, st PopStatus) error {
	r.st.Frames++
	var err error
	n := 0
	switch st {
	case PopPacket:
		kind, body := payload[0], payload[1:]
		if kind == rxKindCN {
			if len(body) > 0 {
				r.setNoiseLevel(int(body[0] & 0x7f))
			} else if r.cnAmp < 0 {
				r.setNoiseLevel(127) // no level byte: as quiet as it gets
			}
			n = r.fillNoise()
			break
		}
		r.cnAmp = -1
		n, err = r.dec.Decode(r.pcm, body)
		if err == nil {
			r.st.Played++
			break
		}
		r.st.DecodeErrors++
		err = fmt.Errorf("media: decode RTP payload: %w", err)
		var cerr error
		n, cerr = r.concealOne(nil)
		err = errors.Join(err, cerr)
	case PopMissing:
		if r.cnAmp >= 0 {
			n = r.fillNoise()
			break
		}
		var next []byte
		if len(payload) > 1 && payload[0] == rxKindAudio {
			next = payload[1:]
		}
		n, err = r.concealOne(next)
	default: // PopEmpty
		if r.cnAmp >= 0 {
			n = r.fillNoise()
			break
		}
		n = r.silence()
	}
	f.Rate = r.outRate
	if r.rs == nil {
		f.N = copy(f.Samples[:], r.pcm[:n])
	} else {
		f.N = r.rs.Process(f.Samples[:], r.pcm[:n])
	}
	return err
}

// concealOne fills one frame for a missing packet, falling back to silence.
func (r *RTPReceiver) concealOne(next []byte) (int, error) {
	if r.conceal != nil {
		n, err := r.conceal.Conceal(r.pcm[:r.inN], next)
		if err == nil && n > 0 {
			r.st.Concealed++
			return n, nil
		}
		if err != nil {
			return r.silence(), fmt.Errorf("media: conceal lost packet: %w", err)
		}
	}
	r.st.Concealed++
	clear(r.pcm[:r.inN])
	return r.inN, nil
}

func (r *RTPReceiver) silence() int {
	r.st.Silence++
	clear(r.pcm[:r.inN])
	return r.inN
}

// setNoiseLevel sets the comfort-noise level from an RFC 3389 level byte (-dBov, 0..127).
// Uniform noise in [-A, A] has an RMS of A/√3.
func (r *RTPReceiver) setNoiseLevel(dBov int) {
	rms := 32767 / math.Sqrt2 * math.Pow(10, -float64(dBov)/20)
	r.cnAmp = int32(math.Round(rms * math.Sqrt(3)))
}

// fillNoise writes one frame of uniform white noise at the comfort-noise level (xorshift32).
func (r *RTPReceiver) fillNoise() int {
	r.st.ComfortNoise++
	span := uint64(2*r.cnAmp + 1)
	x := r.noise
	for i := range r.pcm[:r.inN] {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		r.pcm[i] = int16(int32((uint64(x)*span)>>32) - r.cnAmp)
	}
	r.noise = x
	return r.inN
}

// Stats returns the receiver's counters, with the jitter buffer's.
func (r *RTPReceiver) Stats() RTPReceiverStats {
	s := r.st
	s.Jitter = r.jb.Stats()
	return s
}

// Close releases the decoder (Opus holds C memory). It is idempotent as far as the decoder is.
func (r *RTPReceiver) Close() error {
	if c, ok := r.dec.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
