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
	// OpusComplexity is the encoder's complexity, 1–10; zero is DefaultOpusComplexity.
	OpusComplexity int
	// OpusApplication is the encoder's mode: OpusLowDelay (default: CELT only, no in-band
	// FEC) or OpusVoIP (SILK wideband with in-band FEC). See Options.OpusApplication.
	OpusApplication string
	// Forward, when set, also gets each packet sent (SFU listeners of the same audio); it must
	// not keep the packet.
	Forward func(p *rtp.Packet)
	Now     func() time.Time
}

// silenceHangover is how many frames of digital silence after audio are still encoded and sent
// before the sender goes quiet (80 ms per pause). The first carries the end of the audio that
// the encoder's lookahead and the resampler's delay still held; the rest leave the receiver's
// decoder settled on silence, so that what it plays through the gap (concealment, or libopus's
// comfort noise, which tracks the level of the last frames it decoded) is silence rather than a
// smear of the last syllable. Measured with libopus's own concealment through a 1 s gap after
// speech (TestAudioSenderSilenceGap): 2 frames leave comfort noise at about -62 dBFS RMS, 3 at
// -70 dBFS, 4 at -82 dBFS, inaudible. Browsers conceal with NetEq's expand, which fades out on
// its own. Each pause costs silenceHangover encodes (about 0.6 ms of CPU).
const silenceHangover = 4

// frameSamples is the length of the frames the sender takes: 20 ms at media.PipelineRate.
const frameSamples = media.PipelineRate / 50

// audioSenderStats are an audioSender's counters. Every frame Write takes (20 ms at the pipeline
// rate, before Close) ends up in exactly one of Sent, DTX, Silence or Errors.
type audioSenderStats struct {
	Sent    uint64 // packets sent
	DTX     uint64 // frames encoded but not sent: the Opus encoder coded them as DTX
	Silence uint64 // frames of digital silence neither encoded nor sent (past the hangover)
	Errors  uint64 // frames lost to an encoder or track error
	Resets  uint64 // encoder resets at the start of a talkspurt after a quiet stretch
}

// audioSender turns the engine's 16 kHz 20 ms frames into RTP on a local track: resample to the
// encoder's rate (8 kHz for PCMU; for Opus 48 kHz, or none at 16 kHz, which libopus takes as is),
// encode (Opus with in-band FEC and DTX, or PCMU), stamp and write. It allocates nothing per
// frame.
//
// Silence is not sent, for both codecs (RFC 7587 §3.1.3 for Opus; RFC 3551 §4.1 for PCMU, and
// in WebRTC the path stays alive without media through ICE consent checks, RFC 7675, and RTCP):
//   - The engine only sends frames while it has audio, so across its pauses the RTP timestamp
//     follows the wall clock (RFC 3550 §5.1).
//   - Frames of digital silence (every sample zero, as the engine pads and pauses its speech) are
//     checked for before any work: after silenceHangover of them have gone out, the rest are
//     neither resampled, encoded nor sent; only the RTP timestamp advances over them. Quiet but
//     non-zero audio (a faint tone, hold music, background noise) is never taken for silence.
//   - Opus DTX packets of 2 bytes or less, which the encoder makes itself when its voice
//     activity detection calls a frame silence, are not sent (RFC 7587 §3.1.3).
//
// Sequence numbers stay contiguous through a gap while timestamps jump over it, which is how a
// receiver tells DTX from loss. The first packet after a gap carries the marker bit (RFC 3551
// §4.1, RFC 7587 §3.1.3); after a quiet stretch or a pause the encoder and resampler start
// again from a clean state, so the talkspurt is not predicted from audio that ended long ago.
type audioSender struct {
	mu      sync.Mutex
	enc     codec.Encoder
	reset   interface{ Reset() error } // the Opus encoder; nil for PCMU, which keeps no state
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
	// hush counts the frames of digital silence in a row, up to silenceHangover+1 (quiet: the
	// encoder is being skipped). It starts quiet, so a call's leading silence is not sent either.
	hush int
	// dirty: the encoder and resampler have had audio since they were new or last reset.
	dirty bool

	st audioSenderStats
}

func newAudioSender(o audioSenderOptions) (*audioSender, error) {
	if o.Track == nil {
		return nil, fmt.Errorf("webrtc: audio sender needs a track")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &audioSender{track: o.Track, forward: o.Forward, now: o.Now, payload: make([]byte, 1500), hush: silenceHangover + 1}
	var rate int
	switch o.Codec {
	case CodecOpus:
		bitrate := o.OpusBitrate
		if bitrate == 0 {
			bitrate = 32000
		}
		if o.OpusComplexity == 0 {
			o.OpusComplexity = DefaultOpusComplexity
		}
		rate = o.OpusRate
		if rate == 0 {
			rate = media.PipelineRate
		}
		if rate != media.PipelineRate && rate != 48000 {
			return nil, fmt.Errorf("webrtc: Opus encoder rate %d (want 16000 or 48000)", rate)
		}
		app, err := opusApplication(o.OpusApplication)
		if err != nil {
			return nil, err
		}
		// In-band FEC is SILK's (LBRR, RFC 6716 §2.1.7): only the VoIP mode has it.
		enc, err := codec.NewOpusEncoder(codec.OpusOptions{SampleRate: rate, Bitrate: bitrate, Complexity: o.OpusComplexity, FEC: app == OpusVoIP, DTX: true, Signal: "voice", Application: app})
		if err != nil {
			return nil, err
		}
		s.enc, s.reset, s.closer, s.isOpus = enc, enc, enc, true
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

// opusApplication checks an Opus encoder mode; "" is DefaultOpusApplication.
func opusApplication(a string) (string, error) {
	switch a {
	case "":
		return DefaultOpusApplication, nil
	case OpusLowDelay, OpusVoIP:
		return a, nil
	}
	return "", fmt.Errorf("webrtc: Opus application %q (want %s or %s)", a, OpusLowDelay, OpusVoIP)
}

// isDigitalSilence reports whether every sample of pcm is zero. For a whole frame it is one call
// of the runtime's vectorised memequal against its zero block (about 11 ns for 640 bytes of
// silence, less for audio, which differs early); no copy, no allocation.
func isDigitalSilence(pcm []int16) bool {
	if len(pcm) == frameSamples {
		return *(*[frameSamples]int16)(pcm) == [frameSamples]int16{}
	}
	for _, v := range pcm {
		if v != 0 {
			return false
		}
	}
	return true
}

// Write sends one frame; f must be 20 ms at media.PipelineRate. It never blocks on the network
// beyond a UDP write and never keeps f.
func (s *audioSender) Write(f *media.Frame) error {
	if f.Rate != media.PipelineRate || f.N != frameSamples {
		return fmt.Errorf("webrtc: frame of %d samples at %d Hz, want 20 ms at %d Hz", f.N, f.Rate, media.PipelineRate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	pcm := f.PCM()
	now := s.now()
	// A pause: the engine sent nothing for more than three frames (RFC 3550 §5.1: the timestamp
	// follows the sampling clock through it).
	paused := s.started && now.Sub(s.lastSend) > 3*media.FrameDuration
	if isDigitalSilence(pcm) {
		if paused {
			s.hush = silenceHangover + 1 // silence after a pause: nothing to fade out
		}
		if s.hush++; s.hush > silenceHangover {
			s.hush = silenceHangover + 1
			// Quiet: no encoding, no packet; only the clock moves on (RFC 7587 §3.1.3).
			s.advance(now)
			s.talk = false
			s.st.Silence++
			return nil
		}
	} else {
		if s.dirty && (s.hush > silenceHangover || paused) {
			// The first audio after a quiet stretch or a pause: start the encoder and the
			// resampler afresh, so that they do not predict from audio that ended long ago.
			s.rs.Reset()
			if s.reset != nil {
				if err := s.reset.Reset(); err != nil {
					s.st.Errors++
					return err
				}
				s.st.Resets++
			}
			s.dirty = false
		}
		s.hush = 0
	}
	n := s.rs.Process(s.pcm, pcm)
	s.dirty = true
	size, err := s.enc.Encode(s.payload, s.pcm[:n])
	if err != nil {
		s.st.Errors++
		return err
	}
	s.advance(now)
	if s.isOpus && size <= 2 {
		// A DTX frame: nothing worth sending; the next voiced packet starts a talkspurt.
		s.st.DTX++
		s.talk = false
		return nil
	}
	if !s.talk {
		s.pkt.Marker, s.talk = true, true
	} else {
		s.pkt.Marker = false
	}
	s.pkt.Payload = s.payload[:size]
	s.pkt.SequenceNumber++
	err = s.track.WriteRTP(&s.pkt)
	if s.forward != nil {
		s.forward(&s.pkt)
	}
	s.pkt.Payload = nil
	if err != nil {
		s.st.Errors++
		return err
	}
	s.st.Sent++
	return nil
}

// advance moves the RTP timestamp to the frame being handled at now: one frame on, plus the
// frames the engine did not send during a pause (RFC 3550 §5.1); a pause ends the talkspurt. The
// first frame keeps the random initial timestamp.
func (s *audioSender) advance(now time.Time) {
	if !s.started {
		s.started = true
	} else {
		s.pkt.Timestamp += s.ticks
		if gap := now.Sub(s.lastSend); gap > 3*media.FrameDuration {
			if extra := uint32(gap/media.FrameDuration) - 1; extra > 0 {
				s.pkt.Timestamp += extra * s.ticks
			}
			s.talk = false
		}
	}
	s.lastSend = now
}

// Stats returns packets sent, frames not sent (Opus DTX or digital silence: sent+skipped is
// every frame handled) and errors. Counts has them apart.
func (s *audioSender) Stats() (sent, skipped, errors uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Sent, s.st.DTX + s.st.Silence, s.st.Errors
}

// Counts returns the sender's counters.
func (s *audioSender) Counts() audioSenderStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
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
