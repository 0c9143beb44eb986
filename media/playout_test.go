package media

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media/mediatest"
)

// playoutEpoch is the time the arrival patterns start at.
var playoutEpoch = time.Unix(1000, 0)

// drivePlayout runs one arrival pattern of 20 ms PCMU packets through p: each packet is
// pushed at its arrival, and the clock steps p every 20 ms at phase.
func drivePlayout(p *Playout, a mediatest.Arrivals, phase time.Duration) {
	payload := make([]byte, 160)
	codec.EncodeMulaw(payload, mediatest.Sine(160, 8000, 1000, -20))
	a.Drive(phase, func(at time.Duration) { p.Step(playoutEpoch.Add(at)) }, func(i int, at time.Duration) {
		p.Push(&RTPPacket{PayloadType: 0, SequenceNumber: uint16(i), Timestamp: uint32(i) * 160, SSRC: 7,
			Marker: i == 0, Payload: payload, ReceivedAt: playoutEpoch.Add(at)})
	})
}

// The shared jitter and loss patterns, at four clock phases: the chain conceals no more than
// either receive path did before (mediatest.ArrivalBaselines), conceals nothing for jitter
// within its slack, plays every packet that was not lost or later than the slack, and gives
// the sink exactly what its counters say.
func TestPlayoutPatterns(t *testing.T) {
	const n = 1000
	for _, a := range mediatest.ArrivalPatterns(n) {
		var sum PlayoutStats
		arrived := 0
		for _, ph := range mediatest.ArrivalPhases {
			p, err := NewPlayout(PlayoutConfig{Codec: codec.PCMU})
			if err != nil {
				t.Fatal(err)
			}
			frames := uint64(0)
			p.SetSink(func(*Frame) { frames++ })
			drivePlayout(p, a, ph)
			st := p.Stats()
			p.Close()
			if st.Delivered != frames || st.Frames != frames {
				t.Fatalf("%s: %d frames delivered, stats say %d (receiver %d)", a.Name, frames, st.Delivered, st.Frames)
			}
			sum.Played += st.Played
			sum.Concealed += st.Concealed
			sum.Silence += st.Silence
			sum.Jitter.Late += st.Jitter.Late
			arrived += len(a.ArrivalOrder())
		}
		base := mediatest.ArrivalBaselines[a.Name]
		t.Logf("%-34s concealed %3d (before: SIP %3d, WebRTC %3d) played %d of %d late %d silence %d",
			a.Name, sum.Concealed, base.SIP, base.WebRTC, sum.Played, arrived, sum.Jitter.Late, sum.Silence)
		if sum.Concealed > min(base.SIP, base.WebRTC) {
			t.Errorf("%s: %d frames concealed in 4,000; before, the SIP leg concealed %d and the browser track %d", a.Name, sum.Concealed, base.SIP, base.WebRTC)
		}
		if sum.Played+sum.Jitter.Late != uint64(arrived) {
			t.Errorf("%s: %d packets played and %d dropped late of %d that arrived", a.Name, sum.Played, sum.Jitter.Late, arrived)
		}
	}
}

// playoutRig is a Playout on PCMU with telephone-events on payload type 101, recording what
// reaches its sinks; t0 is the stream's start.
type playoutRig struct {
	p      *Playout
	frames []Frame
	digits []rune
	tone   []byte
}

func newPlayoutRig(t *testing.T) *playoutRig {
	t.Helper()
	p, err := NewPlayout(PlayoutConfig{Codec: codec.PCMU, DTMFPayloadType: 101})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	g := &playoutRig{p: p, tone: make([]byte, 160)}
	codec.EncodeMulaw(g.tone, mediatest.Sine(160, 8000, 1000, -6))
	p.SetSink(func(f *Frame) { g.frames = append(g.frames, *f) })
	p.SetDTMFSink(func(d rune) { g.digits = append(g.digits, d) })
	return g
}

// audio pushes audio packet seq (slot seq × 20 ms) arriving at ms milliseconds.
func (g *playoutRig) audio(seq int, ms int) {
	g.p.Push(&RTPPacket{PayloadType: 0, SequenceNumber: uint16(seq), Timestamp: uint32(seq) * 160, SSRC: 3,
		Payload: g.tone, ReceivedAt: playoutEpoch.Add(time.Duration(ms) * time.Millisecond)})
}

// step steps the clock at ms milliseconds.
func (g *playoutRig) step(ms int) { g.p.Step(playoutEpoch.Add(time.Duration(ms) * time.Millisecond)) }

// A packet is a frame at its arrival; a late one within the slack still plays; a lost one is
// concealed once a later one is here and the slack is spent, and the packets held behind it
// follow at once.
func TestPlayoutEagerAndSlack(t *testing.T) {
	g := newPlayoutRig(t)
	g.step(0)
	g.audio(0, 1)
	if len(g.frames) != 1 || rms(g.frames[0].PCM()) < 1000 {
		t.Fatalf("%d frames after the first packet, want 1 (at once)", len(g.frames))
	}
	for ms := 20; ms <= 60; ms += 20 { // packet 1 is late: three steps of slack
		g.step(ms)
	}
	g.audio(1, 61) // 41 ms late: still played, nothing concealed
	if len(g.frames) != 2 || g.p.Stats().Concealed != 0 {
		t.Fatalf("after a packet 41 ms late: %d frames, stats %+v", len(g.frames), g.p.Stats())
	}
	g.audio(3, 65) // packet 2 (slot 40 ms) is lost; 3 and 4 come on time and wait for it
	g.audio(4, 82)
	g.step(80) // 2 is 40 ms past its slot: within the slack
	if len(g.frames) != 2 {
		t.Fatalf("%d frames while the slack lasts, want 2", len(g.frames))
	}
	g.step(100) // the slack is spent: 2 concealed, 3 and 4 follow
	st := g.p.Stats()
	if len(g.frames) != 5 || st.Concealed != 1 || st.Played != 4 || st.ClockFrames != 1 {
		t.Fatalf("after the loss: %d frames, stats %+v", len(g.frames), st)
	}
}

// The clock gives silence before the stream and while the sender is quiet, one frame per step
// once the slack is spent; when the sender comes back after a lost stretch, the rest of the
// stretch's time (the slack's frames) is given as silence at once, the packets whose time the
// silence stood for are skipped, not concealed, and the next packet plays at once with the
// whole slack again.
func TestPlayoutQuietAndLostStretch(t *testing.T) {
	g := newPlayoutRig(t)
	for ms := 0; ms <= 100; ms += 20 {
		g.step(ms)
	}
	if len(g.frames) != 3 || rms(g.frames[0].PCM()) != 0 {
		t.Fatalf("%d frames in six steps before the stream, want 3 of silence", len(g.frames))
	}
	g.frames = g.frames[:0]
	ms := 110
	for seq := 0; seq < 10; seq++ {
		g.audio(seq, ms)
		g.step(ms + 10)
		ms += 20
	}
	for seq := 10; seq < 60; seq++ { // a second lost
		g.step(ms + 10)
		ms += 20
	}
	// The steps owed the frames of packets 1 to 60; all but the slack's three were silence.
	if n := len(g.frames); n != 10+48 {
		t.Fatalf("%d frames for 10 packets and a lost second, want 58", n)
	}
	g.audio(60, ms)
	st := g.p.Stats()
	if len(g.frames) != 61 || st.Concealed != 0 || st.Jitter.Lost != 50 || st.Silence != 3+50 {
		t.Fatalf("the packet after the lost second: %d frames, stats %+v", len(g.frames), st)
	}
	for k := 1; k <= 3; k++ { // the slack is whole again
		g.step(ms + 20*k - 10)
	}
	g.audio(61, ms+59)
	if st := g.p.Stats(); len(g.frames) != 62 || st.ClockFrames != 53 {
		t.Fatalf("a packet 39 ms late after the gap: %d frames, stats %+v", len(g.frames), st)
	}
}

// A sender in discontinuous transmission (Opus DTX: a packet every 400 ms, the sequence
// numbers going on, the timestamps following the time) gets one frame per 20 ms step, on
// time: the silence the clock gives between its packets, and at each packet the slack's
// frames the clock had not given yet, so that the VAD's count of silence keeps up with the
// time.
func TestPlayoutDTX(t *testing.T) {
	g := newPlayoutRig(t)
	seq, ts := 0, uint32(0)
	send := func(ms int) {
		g.p.Push(&RTPPacket{PayloadType: 0, SequenceNumber: uint16(seq), Timestamp: ts, SSRC: 3,
			Payload: g.tone, ReceivedAt: playoutEpoch.Add(time.Duration(ms) * time.Millisecond)})
		seq++
	}
	steps := 0
	for ms := 0; ms < 3000; ms += 20 {
		if ms < 200 || ms%400 == 0 { // talk for 200 ms, then a DTX packet every 400 ms
			ts = uint32(ms / 20 * 160)
			send(ms + 2)
			if got := len(g.frames); got < steps || got > steps+1 {
				t.Fatalf("at %d ms, after %d steps: %d frames", ms, steps, got)
			}
		}
		g.step(ms + 10)
		steps++
	}
	if st := g.p.Stats(); st.Concealed != 0 || st.Jitter.Lost != 0 {
		t.Fatalf("DTX taken for loss: %+v", st)
	}
}

// After an RFC 3389 comfort-noise packet the sender is quiet by its own word: the noise goes on
// at every step, with no slack to wait out, until the next talkspurt plays at once.
func TestPlayoutComfortNoise(t *testing.T) {
	g := newPlayoutRig(t)
	g.step(0)
	g.audio(0, 1)
	g.p.Push(&RTPPacket{PayloadType: PayloadTypeCN, ComfortNoise: true, SequenceNumber: 1, Timestamp: 160, SSRC: 3,
		Payload: []byte{40}, ReceivedAt: playoutEpoch.Add(21 * time.Millisecond)})
	g.step(30) // the comfort-noise packet's own slot
	for k := 1; k <= 8; k++ {
		g.step(30 + 20*k)
		if len(g.frames) != 2+k {
			t.Fatalf("%d steps after the comfort-noise packet's slot: %d frames, want %d", k, len(g.frames), 2+k)
		}
	}
	if r := rms(g.frames[5].PCM()); r < 50 || r > 1000 {
		t.Fatalf("comfort noise at rms %.0f", r)
	}
	// The next talkspurt: the sequence numbers go on, the timestamps went on with the time.
	g.p.Push(&RTPPacket{PayloadType: 0, SequenceNumber: 2, Timestamp: 10 * 160, SSRC: 3, Marker: true,
		Payload: g.tone, ReceivedAt: playoutEpoch.Add(202 * time.Millisecond)})
	if st := g.p.Stats(); len(g.frames) != 11 || st.Played != 2 || st.Concealed != 0 || st.Jitter.Lost != 0 {
		t.Fatalf("the talkspurt after comfort noise: %d frames, stats %+v", len(g.frames), st)
	}
}

// Telephone-events go to the DTMF sink, never to the frames; a digit whose end packets were
// all lost is reported 400 ms after its last packet, by the clock.
func TestPlayoutDTMF(t *testing.T) {
	g := newPlayoutRig(t)
	ev := func(seq int, ms int, digit uint8, end bool, dur uint16) {
		var b [codec.DTMFEventLen]byte
		codec.DTMFEvent{Event: digit, End: end, Volume: 10, Duration: dur}.MarshalTo(b[:])
		g.p.Push(&RTPPacket{PayloadType: 101, SequenceNumber: uint16(seq), Timestamp: 1000 * uint32(digit), SSRC: 3,
			Payload: b[:], ReceivedAt: playoutEpoch.Add(time.Duration(ms) * time.Millisecond)})
	}
	ev(0, 0, 5, false, 160)
	ev(1, 20, 5, false, 320)
	ev(2, 40, 5, true, 480)
	ev(3, 41, 5, true, 480) // the end is sent three times (RFC 4733 §2.5.1.4)
	ev(4, 60, 9, false, 160)
	if string(g.digits) != "5" {
		t.Fatalf("digits %q, want \"5\"", string(g.digits))
	}
	g.step(400)
	if string(g.digits) != "5" {
		t.Fatalf("digit 9 reported %v after its last packet", 340*time.Millisecond)
	}
	g.step(480)
	if string(g.digits) != "59" {
		t.Fatalf("digits %q after 9's end was lost, want \"59\"", string(g.digits))
	}
	if st := g.p.Stats(); st.Played != 0 || st.Packets != 5 {
		t.Fatalf("stats %+v", st)
	}
}

// A renegotiated codec takes over; the same codec again keeps the chain (and its counters).
func TestPlayoutSetCodec(t *testing.T) {
	g := newPlayoutRig(t)
	g.audio(0, 0)
	if err := g.p.SetCodec(codec.PCMU, 101); err != nil {
		t.Fatal(err)
	}
	g.audio(1, 20)
	if st := g.p.Stats(); st.Played != 2 || st.Jitter.Received != 2 {
		t.Fatalf("same codec: stats %+v", st)
	}
	if err := g.p.SetCodec(codec.PCMA, 0); err != nil {
		t.Fatal(err)
	}
	alaw := make([]byte, 160)
	codec.EncodeAlaw(alaw, mediatest.Sine(160, 8000, 1000, -6))
	g.p.Push(&RTPPacket{PayloadType: 8, SequenceNumber: 500, Timestamp: 99, SSRC: 4, Payload: alaw, ReceivedAt: playoutEpoch.Add(40 * time.Millisecond)})
	if len(g.frames) != 3 || rms(g.frames[2].PCM()) < 1000 {
		t.Fatalf("%d frames after the switch to PCMA", len(g.frames))
	}
	if st := g.p.Stats(); st.Played != 3 {
		t.Fatalf("the counters did not carry over the switch: %+v", st)
	}
}

// Tick runs the steps due at now: several after a late wake-up, one after a long stall (the
// schedule restarts rather than bursting).
func TestPlayoutTick(t *testing.T) {
	g := newPlayoutRig(t)
	g.audio(0, 0)
	g.p.Tick(playoutEpoch)
	g.p.Tick(playoutEpoch.Add(100 * time.Millisecond)) // woke 80 ms late: steps at 20 … 100
	if n := len(g.frames); n != 1+3 {
		t.Fatalf("%d frames after six steps of quiet, want 4 (the packet's, then one per step after three)", n)
	}
	g.p.Tick(playoutEpoch.Add(time.Minute))
	if n := len(g.frames); n != 5 {
		t.Fatalf("%d frames after a stall, want one more (5)", n)
	}
}

// Push and Step allocate nothing in steady state, on time and with a loss.
func TestPlayoutNoAllocs(t *testing.T) {
	g := newPlayoutRig(t)
	g.p.SetSink(func(*Frame) {})
	seq, ms := 0, 0
	round := func() {
		g.step(ms)
		if seq%10 != 5 {
			g.audio(seq, ms+3)
		}
		seq++
		ms += 20
	}
	for range 100 {
		round()
	}
	if a := testing.AllocsPerRun(500, round); a != 0 {
		t.Fatalf("%.1f allocations per packet and step", a)
	}
}

// BenchmarkPlayout is one 20 ms PCMU packet in and one 16 kHz frame out (jitter buffer, decode,
// resample) plus the clock's step: the per-packet path of every call.
func BenchmarkPlayout(b *testing.B) {
	p, err := NewPlayout(PlayoutConfig{Codec: codec.PCMU})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	p.SetSink(func(*Frame) {})
	payload := make([]byte, 160)
	codec.EncodeMulaw(payload, mediatest.Sine(160, 8000, 1000, -20))
	pkt := RTPPacket{PayloadType: 0, SSRC: 9, Payload: payload}
	now := playoutEpoch
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(FrameDuration)
		p.Step(now)
		pkt.ReceivedAt = now.Add(time.Millisecond)
		p.Push(&pkt)
		pkt.SequenceNumber++
		pkt.Timestamp += 160
	}
	if st := p.Stats(); st.Played != st.Packets {
		b.Fatalf("%+v: want one frame per packet", st)
	}
}
