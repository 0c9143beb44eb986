package webrtc

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
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

// Opus DTX by the encoder, in the VoIP mode (libopus's CELT-only low-delay mode makes no DTX
// frames; digital silence is still skipped in both): audio that is not digital silence but that
// libopus's voice activity detection calls silence (here noise of ±1 LSB) is encoded, and the
// encoder's DTX packets are not sent; speech after it starts a talkspurt with the timestamp kept
// in step.
func TestAudioSenderDTX(t *testing.T) {
	now := time.Unix(100, 0)
	log := &packetLog{keep: true}
	s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, OpusApplication: OpusVoIP, Track: log, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var hiss media.Frame
	hiss.Init(media.PipelineRate)
	for i := 0; i < 50; i++ {
		for j := range hiss.N {
			hiss.Samples[j] = int16(r.IntN(3) - 1)
		}
		_ = s.Write(&hiss)
		now = now.Add(20 * time.Millisecond)
	}
	st := s.Counts()
	if st.DTX == 0 || st.Sent >= 50 || st.Silence != 0 || st.Sent+st.DTX != 50 {
		t.Fatalf("DTX of 50 frames of faint noise: %+v", st)
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
	checkSequence(t, log.pkts)
	if sent, skipped, _ := s.Stats(); sent != uint64(n+1) || sent+skipped != 51 {
		t.Fatalf("Stats: %d sent, %d skipped of 51 frames", sent, skipped)
	}
}

// checkSequence fails unless the packets' sequence numbers follow one another.
func checkSequence(t *testing.T, pkts []rtp.Packet) {
	t.Helper()
	for i := 1; i < len(pkts); i++ {
		if pkts[i].SequenceNumber != pkts[i-1].SequenceNumber+1 {
			t.Fatalf("packet %d: sequence number %d after %d", i, pkts[i].SequenceNumber, pkts[i-1].SequenceNumber)
		}
	}
}

// countingEncoder counts what the sender asks of its encoder.
type countingEncoder struct {
	codec.Encoder
	reset           interface{ Reset() error }
	encodes, resets int
}

func (c *countingEncoder) Encode(dst []byte, pcm []int16) (int, error) {
	c.encodes++
	return c.Encoder.Encode(dst, pcm)
}

func (c *countingEncoder) Reset() error {
	c.resets++
	return c.reset.Reset()
}

// countEncodes puts a countingEncoder between s and its encoder.
func countEncodes(s *audioSender) *countingEncoder {
	c := &countingEncoder{Encoder: s.enc, reset: s.reset}
	s.enc = c
	if s.reset != nil {
		s.reset = c
	}
	return c
}

// voiced is 3 s of speechLike as 20 ms frames with its frames of digital silence (the pauses
// between syllables) left out; made once, as it is slow under the race detector.
var voiced = sync.OnceValue(func() []media.Frame {
	pcm := speechLike(3 * media.PipelineRate)
	var out []media.Frame
	for i := 0; i+frameSamples <= len(pcm); i += frameSamples {
		var f media.Frame
		_ = f.SetPCM(media.PipelineRate, pcm[i:i+frameSamples])
		if !isDigitalSilence(f.PCM()) {
			out = append(out, f)
		}
	}
	return out
})

// voicedFrames returns a copy of the first n voiced frames.
func voicedFrames(t testing.TB, n int) []media.Frame {
	t.Helper()
	v := voiced()
	if len(v) < n {
		t.Fatalf("%d voiced frames, want %d", len(v), n)
	}
	return append([]media.Frame(nil), v[:n]...)
}

// meanSquare returns the mean of the squared samples.
func meanSquare(pcm []int16) float64 {
	var e float64
	for _, v := range pcm {
		e += float64(v) * float64(v)
	}
	return e / float64(max(len(pcm), 1))
}

// Input-side DTX: speech, a second of digital silence, speech again. On the wire: the speech,
// silenceHangover frames of silence, nothing through the rest of it, then the speech again as a
// new talkspurt — sequence numbers contiguous, the timestamp jumping over the silence, the
// marker on the first packet after it, the encoder neither called through the silence nor
// predicting from before it; and the packets decode (with concealment through the gap, as a
// receiver does) to the speech's energy and to silence in between.
func TestAudioSenderSilenceGap(t *testing.T) {
	const speech, quiet = 50, 50 // frames
	voiced := voicedFrames(t, 2*speech)
	var zero media.Frame
	zero.Init(media.PipelineRate)
	frames := make([]*media.Frame, 0, 2*speech+quiet)
	for i := range speech {
		frames = append(frames, &voiced[i])
	}
	for range quiet {
		frames = append(frames, &zero)
	}
	for i := range speech {
		frames = append(frames, &voiced[speech+i])
	}
	for _, tc := range []struct {
		codec Codec
		rate  int    // the Opus encoder's
		ticks uint32 // RTP clock per frame
		out   int    // samples per frame the decoder gives
	}{
		{CodecOpus, 16000, 960, 320},
		{CodecOpus, 48000, 960, 320},
		{CodecPCMU, 0, 160, 160},
	} {
		t.Run(string(tc.codec)+strconv.Itoa(tc.rate), func(t *testing.T) {
			now := time.Unix(100, 0)
			log := &packetLog{keep: true}
			forwarded := 0
			s, err := newAudioSender(audioSenderOptions{Codec: tc.codec, OpusRate: tc.rate, Track: log,
				Forward: func(*rtp.Packet) { forwarded++ }, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			enc := countEncodes(s)
			for _, f := range frames {
				if err := s.Write(f); err != nil {
					t.Fatal(err)
				}
				now = now.Add(media.FrameDuration)
			}

			// The wire.
			p := log.pkts
			const before = speech + silenceHangover // packets before the gap
			if len(p) != before+speech || forwarded != len(p) {
				t.Fatalf("%d packets (%d forwarded), want %d", len(p), forwarded, before+speech)
			}
			checkSequence(t, p)
			for i := 1; i < len(p); i++ {
				want := tc.ticks
				if i == before {
					want = (quiet - silenceHangover + 1) * tc.ticks // over the frames not sent
				}
				if d := p[i].Timestamp - p[i-1].Timestamp; d != want {
					t.Fatalf("packet %d: timestamp step %d, want %d", i, d, want)
				}
				if p[i].Marker != (i == before) {
					t.Fatalf("packet %d: marker %v", i, p[i].Marker)
				}
			}
			if !p[0].Marker {
				t.Fatal("no marker on the first packet")
			}
			if d := p[len(p)-1].Timestamp - p[0].Timestamp; d != uint32(len(frames)-1)*tc.ticks {
				t.Fatalf("timestamps span %d ticks, want %d", d, uint32(len(frames)-1)*tc.ticks)
			}

			// The encoder and the counters.
			if enc.encodes != len(p) {
				t.Fatalf("%d frames encoded, want %d (none of the silence past the hangover)", enc.encodes, len(p))
			}
			wantResets := 0
			if tc.codec == CodecOpus {
				wantResets = 1
			}
			st := s.Counts()
			if enc.resets != wantResets || st.Resets != uint64(wantResets) {
				t.Fatalf("%d encoder resets (%d counted), want %d", enc.resets, st.Resets, wantResets)
			}
			if st.Sent != uint64(len(p)) || st.Silence != quiet-silenceHangover || st.DTX != 0 || st.Errors != 0 {
				t.Fatalf("counts %+v", st)
			}
			if sent, skipped, errs := s.Stats(); sent != st.Sent || skipped != st.Silence || errs != 0 {
				t.Fatalf("Stats() %d, %d, %d", sent, skipped, errs)
			}

			// Decode as a receiver: each packet at its timestamp, concealment for the frames
			// not sent.
			var dec interface {
				Decode(dst []int16, payload []byte) (int, error)
				Conceal(dst []int16, next []byte) (int, error)
			}
			if tc.codec == CodecOpus {
				d, err := codec.NewOpusDecoder(media.PipelineRate)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				dec = d
			} else {
				dec = codec.NewG711Decoder(codec.MuLaw)
			}
			out := make([]int16, len(frames)*tc.out)
			next := 0 // frame
			for _, pk := range p {
				at := int((pk.Timestamp - p[0].Timestamp) / tc.ticks)
				for ; next < at; next++ {
					if n, err := dec.Conceal(out[next*tc.out:(next+1)*tc.out], nil); err != nil || n != tc.out {
						t.Fatalf("conceal frame %d: %d, %v", next, n, err)
					}
				}
				if n, err := dec.Decode(out[at*tc.out:(at+1)*tc.out], pk.Payload); err != nil || n != tc.out {
					t.Fatalf("decode frame %d: %d, %v", at, n, err)
				}
				next = at + 1
			}
			in := func(from, to int) float64 {
				var e float64
				for _, f := range frames[from:to] {
					e += meanSquare(f.PCM())
				}
				return e / float64(to-from)
			}
			got := func(from, to int) float64 { return meanSquare(out[from*tc.out : to*tc.out]) }
			for _, seg := range []struct {
				name     string
				from, to int
			}{
				{"speech before the silence", 0, speech},
				{"speech after the silence", speech + quiet, len(frames)},
				{"first 100 ms after the silence", speech + quiet, speech + quiet + 5},
			} {
				ratio := got(seg.from, seg.to) / in(seg.from, seg.to)
				t.Logf("%s: decoded/input energy %.2f", seg.name, ratio)
				if ratio < 0.5 || ratio > 2 {
					t.Fatalf("%s: decoded energy %.3g of the input's", seg.name, ratio)
				}
			}
			// What the receiver plays through the gap: below -70 dBFS (silenceHangover).
			level := func(ms float64) float64 { return 10 * math.Log10(ms/(32767*32767)+1e-20) }
			gap := got(before, speech+quiet)
			t.Logf("the silence decodes to %.1f dBFS RMS", level(gap))
			if level(gap) > -70 {
				t.Fatalf("the silence decodes to %.1f dBFS RMS, want below -70", level(gap))
			}
		})
	}
}

// How many frames of silence go out depends on the length of the pause: up to
// silenceHangover all, then none; the encoder starts afresh only after frames were skipped.
func TestAudioSenderHangover(t *testing.T) {
	voiced := voicedFrames(t, 20)
	var zero media.Frame
	zero.Init(media.PipelineRate)
	for zeros := 0; zeros <= silenceHangover+2; zeros++ {
		t.Run(strconv.Itoa(zeros), func(t *testing.T) {
			now := time.Unix(100, 0)
			log := &packetLog{keep: true}
			s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: log, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			enc := countEncodes(s)
			write := func(f *media.Frame) {
				if err := s.Write(f); err != nil {
					t.Fatal(err)
				}
				now = now.Add(media.FrameDuration)
			}
			for i := range 10 {
				write(&voiced[i])
			}
			for range zeros {
				write(&zero)
			}
			for i := range 10 {
				write(&voiced[10+i])
			}
			skipped := max(zeros-silenceHangover, 0)
			if len(log.pkts) != 20+zeros-skipped || s.Counts().Silence != uint64(skipped) {
				t.Fatalf("%d packets, counts %+v", len(log.pkts), s.Counts())
			}
			checkSequence(t, log.pkts)
			first := log.pkts[10+zeros-skipped] // the first packet of the second stretch of speech
			if first.Marker != (skipped > 0) || enc.resets != min(skipped, 1) {
				t.Fatalf("after %d zero frames: marker %v, %d encoder resets", zeros, first.Marker, enc.resets)
			}
			if d := first.Timestamp - log.pkts[0].Timestamp; d != uint32(10+zeros)*960 {
				t.Fatalf("timestamp %d ticks from the first, want %d", d, (10+zeros)*960)
			}
		})
	}
}

// Leading silence (before the agent first speaks) and silence right after a pause of the
// engine are not sent at all: there is nothing to fade out.
func TestAudioSenderSilenceAfterPause(t *testing.T) {
	now := time.Unix(100, 0)
	log := &packetLog{keep: true}
	s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: log, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var zero media.Frame
	zero.Init(media.PipelineRate)
	voiced := voicedFrames(t, 10)
	write := func(f *media.Frame) {
		t.Helper()
		if err := s.Write(f); err != nil {
			t.Fatal(err)
		}
		now = now.Add(media.FrameDuration)
	}
	write(&zero)
	write(&zero)
	write(&voiced[0])
	if len(log.pkts) != 1 || !log.pkts[0].Marker {
		t.Fatalf("leading silence: %d packets", len(log.pkts))
	}
	write(&voiced[1])
	now = now.Add(time.Second) // the engine pauses
	write(&zero)
	write(&voiced[2])
	p := log.pkts
	if len(p) != 3 || !p[2].Marker || p[1].Marker {
		t.Fatalf("silence after a pause: %d packets", len(p))
	}
	checkSequence(t, p)
	if d := p[2].Timestamp - p[1].Timestamp; d != 52*960 {
		t.Fatalf("timestamp across a 1 s pause and a frame of silence: %d, want %d", d, 52*960)
	}
	if st := s.Counts(); st.Silence != 3 || st.Resets != 1 {
		t.Fatalf("counts %+v", st)
	}
}

// Quiet audio that is not digital silence is never taken for it: a -50 dBFS 440 Hz tone (what
// hold music or a faint ringback looks like) is encoded, every frame of it, for both codecs.
// (Whether an Opus frame is then sent is libopus's DTX decision: its voice activity detection
// takes a steady tone for background noise, and most of these frames come out as DTX.)
func TestAudioSenderQuietToneNotSkipped(t *testing.T) {
	for _, c := range []Codec{CodecOpus, CodecPCMU} {
		t.Run(string(c), func(t *testing.T) {
			log := &packetLog{keep: true}
			s, err := newAudioSender(audioSenderOptions{Codec: c, Track: log})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			enc := countEncodes(s)
			g := mediatest.NewTone(440, -50, media.PipelineRate)
			const n = 100
			for i := 0; i < n; i++ {
				f := toneFrame(g)
				if slices.Max(f.PCM()) <= 0 {
					t.Fatal("the tone is not audible")
				}
				if err := s.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			st := s.Counts()
			if st.Silence != 0 || enc.encodes != n || st.Sent+st.DTX != n {
				t.Fatalf("%d of %d frames encoded, counts %+v", enc.encodes, n, st)
			}
			if c == CodecPCMU && st.Sent != n {
				t.Fatalf("PCMU: %d of %d frames sent", st.Sent, n)
			}
			checkSequence(t, log.pkts)
			t.Logf("%s: %+v", c, st)
		})
	}
}

// Digital silence is every sample zero, and only that; samples past N do not count.
func TestIsDigitalSilence(t *testing.T) {
	var f media.Frame
	f.Init(media.PipelineRate)
	if !isDigitalSilence(f.PCM()) || !isDigitalSilence(f.PCM()[:100]) || !isDigitalSilence(nil) {
		t.Fatal("zeros are not silence")
	}
	for _, i := range []int{0, 1, 159, 318, 319} {
		for _, v := range []int16{1, -1, math.MinInt16} {
			f.Samples[i] = v
			if isDigitalSilence(f.PCM()) || isDigitalSilence(f.PCM()[i:i+1]) {
				t.Fatalf("sample %d = %d is silence", i, v)
			}
			f.Samples[i] = 0
		}
	}
	f.Samples[frameSamples] = 1 // past N: not part of the frame
	if !isDigitalSilence(f.PCM()) {
		t.Fatal("a sample past the frame's end counted")
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
// steady tone (mostly DTX frames once the encoder takes it for noise), speech (10 s of
// speechLike, whose pauses between syllables hold digital silence), voiced speech alone (every
// frame encoded and sent), speech at complexity 1, and digital silence (past the hangover:
// neither encoded nor sent).
func BenchmarkAudioSender(b *testing.B) {
	speech := speechFrames()
	voiced := voicedFrames(b, 100)
	tone := toneFrame(mediatest.NewTone(440, -20, media.PipelineRate))
	var silence media.Frame
	silence.Init(media.PipelineRate)
	for _, tc := range []struct {
		name       string
		complexity int
		frame      func(i int) *media.Frame
	}{
		{"tone", 0, func(int) *media.Frame { return tone }},
		{"speech", 0, func(i int) *media.Frame { return &speech[i%len(speech)] }},
		{"speech/voiced", 0, func(i int) *media.Frame { return &voiced[i%len(voiced)] }},
		{"speech/complexity1", 1, func(i int) *media.Frame { return &speech[i%len(speech)] }},
		{"silence", 0, func(int) *media.Frame { return &silence }},
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
			st := s.Counts()
			frames := float64(st.Sent + st.DTX + st.Silence)
			b.ReportMetric(float64(st.DTX)/frames, "dtx-share")
			b.ReportMetric(float64(st.Silence)/frames, "silence-share")
		})
	}
}

// BenchmarkIsDigitalSilence: the check on every frame, for a silent frame (all 320 samples
// read) and a frame of speech.
func BenchmarkIsDigitalSilence(b *testing.B) {
	var zero media.Frame
	zero.Init(media.PipelineRate)
	voiced := voicedFrames(b, 1)
	for _, tc := range []struct {
		name string
		f    *media.Frame
		want bool
	}{{"silence", &zero, true}, {"speech", &voiced[0], false}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if isDigitalSilence(tc.f.PCM()) != tc.want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
