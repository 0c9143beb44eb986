package webrtc

import (
	"fmt"
	"sync"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/pion/rtp"
)

// rtpWriter is where an audioSender puts its packets (*pion.TrackLocalStaticRTP).
type rtpWriter interface {
	WriteRTP(p *rtp.Packet) error
}

// audioSenderOptions configure an audioSender.
type audioSenderOptions struct {
	Codec       Codec
	Track       rtpWriter
	OpusBitrate int
	// OpusRate is the PCM rate given to the Opus encoder: 16000 (the engine's own rate: no
	// resampling, SILK wideband, the cheapest) or 48000 (resampled up first). The RTP clock is
	// 48 kHz either way (RFC 7587 §4.1). Zero means 16000.
	OpusRate int
	// OpusComplexity is the encoder's complexity, 1–10; zero is the codec's default (5).
	OpusComplexity int
	// Forward, when set, also gets each packet sent (SFU listeners of the same audio); it must
	// not keep the packet.
	Forward func(p *rtp.Packet)
	Now     func() time.Time
}

// audioSender turns the engine's 16 kHz 20 ms frames into RTP on a local track: resample to the
// encoder's rate (8 kHz for PCMU; for Opus 48 kHz, or none at 16 kHz, which libopus takes as is),
// encode (Opus with in-band FEC and DTX, or PCMU), stamp and write. The engine only
// sends frames while it has audio, so the RTP timestamp follows the wall clock across pauses and
// the first packet after one carries the marker bit (RFC 3550 §5.1, RFC 3551 §4.1). Opus DTX
// packets of 2 bytes or less are not sent (RFC 7587 §3.1.3). It allocates nothing per frame.
type audioSender struct {
	mu      sync.Mutex
	enc     codec.Encoder
	closer  interface{ Close() error }
	rs      *codec.Resampler
	track   rtpWriter
	forward func(*rtp.Packet)
	now     func() time.Time
	isOpus  bool

	ticks    uint32 // RTP clock ticks per 20 ms
	pcm      []int16
	payload  []byte
	pkt      rtp.Packet
	started  bool
	lastSend time.Time
	talk     bool // a talkspurt is under way (the marker has been sent)
	closed   bool

	sent, skipped, errors uint64
}

func newAudioSender(o audioSenderOptions) (*audioSender, error) {
	if o.Track == nil {
		return nil, fmt.Errorf("webrtc: audio sender needs a track")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &audioSender{track: o.Track, forward: o.Forward, now: o.Now, payload: make([]byte, 1500)}
	var rate int
	switch o.Codec {
	case CodecOpus:
		bitrate := o.OpusBitrate
		if bitrate == 0 {
			bitrate = 32000
		}
		rate = o.OpusRate
		if rate == 0 {
			rate = media.PipelineRate
		}
		if rate != media.PipelineRate && rate != 48000 {
			return nil, fmt.Errorf("webrtc: Opus encoder rate %d (want 16000 or 48000)", rate)
		}
		enc, err := codec.NewOpusEncoder(codec.OpusOptions{SampleRate: rate, Bitrate: bitrate, Complexity: o.OpusComplexity, FEC: true, DTX: true, Signal: "voice"})
		if err != nil {
			return nil, err
		}
		s.enc, s.closer, s.isOpus = enc, enc, true
		s.ticks = 960
		s.pkt.PayloadType = codec.Opus.PayloadType
	case CodecPCMU:
		s.enc = codec.NewG711Encoder(codec.MuLaw)
		rate, s.ticks = 8000, 160
		s.pkt.PayloadType = codec.PCMU.PayloadType
	default:
		return nil, fmt.Errorf("webrtc: cannot send codec %q", o.Codec)
	}
	rs, err := codec.NewResampler(media.PipelineRate, rate)
	if err != nil {
		return nil, err
	}
	s.rs = rs
	s.pcm = make([]int16, media.SamplesPerFrame(rate))
	s.pkt.Version = 2
	s.pkt.SequenceNumber = uint16(randUint32())
	s.pkt.Timestamp = randUint32()
	return s, nil
}

// Write sends one frame; f must be 20 ms at media.PipelineRate. It never blocks on the network
// beyond a UDP write and never keeps f.
func (s *audioSender) Write(f *media.Frame) error {
	if f.Rate != media.PipelineRate || f.N != media.SamplesPerFrame(media.PipelineRate) {
		return fmt.Errorf("webrtc: frame of %d samples at %d Hz, want 20 ms at %d Hz", f.N, f.Rate, media.PipelineRate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	n := s.rs.Process(s.pcm, f.PCM())
	size, err := s.enc.Encode(s.payload, s.pcm[:n])
	if err != nil {
		s.errors++
		return err
	}
	now := s.now()
	marker := false
	switch {
	case !s.started:
		s.started, marker = true, true
	default:
		s.pkt.Timestamp += s.ticks
		// RFC 3550 §5.1: through a pause the timestamp follows the sampling clock.
		if gap := now.Sub(s.lastSend); gap > 3*media.FrameDuration {
			if extra := uint32(gap/media.FrameDuration) - 1; extra > 0 {
				s.pkt.Timestamp += extra * s.ticks
			}
			s.talk = false
		}
	}
	s.lastSend = now
	if s.isOpus && size <= 2 {
		// A DTX frame: nothing worth sending; the next voiced packet starts a talkspurt.
		s.skipped++
		s.talk = false
		return nil
	}
	if !s.talk {
		marker, s.talk = true, true
	}
	s.pkt.Marker = marker
	s.pkt.Payload = s.payload[:size]
	s.pkt.SequenceNumber++
	err = s.track.WriteRTP(&s.pkt)
	if s.forward != nil {
		s.forward(&s.pkt)
	}
	s.pkt.Payload = nil
	if err != nil {
		s.errors++
		return err
	}
	s.sent++
	return nil
}

// Stats returns packets sent, DTX frames skipped and errors.
func (s *audioSender) Stats() (sent, skipped, errors uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.skipped, s.errors
}

// Close frees the encoder; later writes are dropped. It is idempotent.
func (s *audioSender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}
