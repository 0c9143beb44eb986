package webrtc

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/pion/rtp"
)

// packetLog is an rtpWriter that keeps copies of what it was given.
type packetLog struct {
	pkts []rtp.Packet
	keep bool
}

func (l *packetLog) WriteRTP(p *rtp.Packet) error {
	if l.keep {
		c := *p
		c.Payload = append([]byte(nil), p.Payload...)
		l.pkts = append(l.pkts, c)
	}
	return nil
}

func toneFrame(g *mediatest.Tone) *media.Frame {
	var f media.Frame
	f.Init(media.PipelineRate)
	g.Fill(f.Samples[:f.N])
	return &f
}

func TestAudioSenderTimestamps(t *testing.T) {
	for _, tc := range []struct {
		codec Codec
		rate  int
		ticks uint32
		pt    uint8
	}{
		{CodecOpus, 16000, 960, 111},
		{CodecOpus, 48000, 960, 111},
		{CodecPCMU, 0, 160, 0},
	} {
		t.Run(string(tc.codec)+strconv.Itoa(tc.rate), func(t *testing.T) {
			now := time.Unix(100, 0)
			log := &packetLog{keep: true}
			s, err := newAudioSender(audioSenderOptions{Codec: tc.codec, OpusRate: tc.rate, Track: log, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			g := mediatest.NewTone(440, -20, media.PipelineRate)
			for i := 0; i < 3; i++ {
				if err := s.Write(toneFrame(g)); err != nil {
					t.Fatal(err)
				}
				now = now.Add(20 * time.Millisecond)
			}
			now = now.Add(480 * time.Millisecond) // a pause: 500 ms since the last frame
			if err := s.Write(toneFrame(g)); err != nil {
				t.Fatal(err)
			}
			p := log.pkts
			if len(p) != 4 {
				t.Fatalf("%d packets", len(p))
			}
			for i := 1; i < 4; i++ {
				if p[i].SequenceNumber != p[i-1].SequenceNumber+1 {
					t.Fatalf("sequence numbers %d then %d", p[i-1].SequenceNumber, p[i].SequenceNumber)
				}
			}
			if d := p[1].Timestamp - p[0].Timestamp; d != tc.ticks || p[2].Timestamp-p[1].Timestamp != tc.ticks {
				t.Fatalf("timestamp step %d, want %d", d, tc.ticks)
			}
			if d := p[3].Timestamp - p[2].Timestamp; d != 25*tc.ticks {
				t.Fatalf("timestamp across a 500 ms pause advanced %d, want %d", d, 25*tc.ticks)
			}
			if !p[0].Marker || p[1].Marker || p[2].Marker || !p[3].Marker {
				t.Fatalf("markers %v %v %v %v, want the first of each talkspurt", p[0].Marker, p[1].Marker, p[2].Marker, p[3].Marker)
			}
			if p[0].PayloadType != tc.pt {
				t.Fatalf("payload type %d", p[0].PayloadType)
			}
		})
	}
}

// Opus DTX: during digital silence the encoder's tiny packets are not sent, and speech after it
// starts a talkspurt with the timestamp kept in step.
func TestAudioSenderDTX(t *testing.T) {
	now := time.Unix(100, 0)
	log := &packetLog{keep: true}
	s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: log, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var silence media.Frame
	silence.Init(media.PipelineRate)
	for i := 0; i < 50; i++ {
		_ = s.Write(&silence)
		now = now.Add(20 * time.Millisecond)
	}
	sent, skipped, _ := s.Stats()
	if skipped == 0 || sent >= 50 {
		t.Fatalf("DTX: %d sent, %d skipped of 50 silent frames", sent, skipped)
	}
	n := len(log.pkts)
	g := mediatest.NewTone(440, -20, media.PipelineRate)
	_ = s.Write(toneFrame(g))
	last := log.pkts[len(log.pkts)-1]
	if len(log.pkts) != n+1 || !last.Marker {
		t.Fatal("speech after DTX silence is not a new talkspurt")
	}
	if d := last.Timestamp - log.pkts[0].Timestamp; d != 50*960 {
		t.Fatalf("timestamp after 50 frames %d ticks from the first, want %d", d, 50*960)
	}
}

func TestAudioSenderRejectsBadFrames(t *testing.T) {
	s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: &packetLog{}})
	if err != nil {
		t.Fatal(err)
	}
	var f media.Frame
	f.Init(8000)
	if s.Write(&f) == nil {
		t.Fatal("an 8 kHz frame was accepted")
	}
	s.Close()
	s.Close()
	f.Init(media.PipelineRate)
	if err := s.Write(&f); err != nil {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := newAudioSender(audioSenderOptions{Codec: "g729", Track: &packetLog{}}); err == nil {
		t.Fatal("unknown codec accepted")
	}
	if _, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, OpusRate: 44100, Track: &packetLog{}}); err == nil {
		t.Fatal("a 44.1 kHz encoder accepted")
	}
}

// speechLike returns n samples at 16 kHz of a voiced, speech-like signal: a gliding 120–185 Hz
// glottal tone with two drifting formants, in 4.5 syllables a second. Unlike a steady tone (which
// Opus's voice activity detector soon takes for background noise and sends as DTX), the encoder
// codes every syllable as speech: it costs what speech costs (within a few percent of espeak-ng's
// on the reference VM).
func speechLike(n int) []int16 {
	out := make([]int16, n)
	phase := 0.0
	for i := range out {
		t := float64(i) / media.PipelineRate
		f0 := 140 + 30*math.Sin(2*math.Pi*0.7*t) + 15*math.Sin(2*math.Pi*3.1*t)
		phase += 2 * math.Pi * f0 / media.PipelineRate
		syl := math.Mod(t*4.5, 1)
		env := 0.0
		if syl < 0.7 {
			env = math.Sin(math.Pi * syl / 0.7)
		}
		k := math.Floor(t * 4.5)
		f1, f2 := 500+300*math.Sin(k*1.7), 1500+700*math.Sin(k*2.3)
		v := 0.0
		for h := 1; float64(h)*f0 < 7000; h++ {
			hf := float64(h) * f0
			w := 1/(1+math.Pow((hf-f1)/150, 2)) + 0.6/(1+math.Pow((hf-f2)/200, 2)) + 0.05
			v += w * math.Sin(float64(h)*phase) / float64(h)
		}
		out[i] = int16(6000 * env * v)
	}
	return out
}

// speechFrames returns 10 s of speechLike as 20 ms frames.
func speechFrames() []media.Frame {
	pcm := speechLike(10 * media.PipelineRate)
	out := make([]media.Frame, len(pcm)/320)
	for i := range out {
		out[i].Init(media.PipelineRate)
		copy(out[i].Samples[:320], pcm[i*320:])
	}
	return out
}

// BenchmarkAudioSender: one 20 ms frame Opus-encoded (at 16 kHz, FEC, DTX) and stamped: a
// steady tone (mostly DTX frames once the encoder takes it for noise) and speech, at complexity
// 5 (the default) and 1.
func BenchmarkAudioSender(b *testing.B) {
	speech := speechFrames()
	tone := toneFrame(mediatest.NewTone(440, -20, media.PipelineRate))
	for _, tc := range []struct {
		name       string
		complexity int
		frame      func(i int) *media.Frame
	}{
		{"tone", 0, func(int) *media.Frame { return tone }},
		{"speech", 0, func(i int) *media.Frame { return &speech[i%len(speech)] }},
		{"speech/complexity1", 1, func(i int) *media.Frame { return &speech[i%len(speech)] }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: &packetLog{}, OpusComplexity: tc.complexity})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := s.Write(tc.frame(i)); err != nil {
					b.Fatal(err)
				}
			}
			sent, skipped, _ := s.Stats()
			b.ReportMetric(float64(skipped)/float64(sent+skipped), "dtx-share")
		})
	}
}
