package webrtc

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/pion/rtp"
)

// encodeTone returns n packets of a 20 ms Opus (or PCMU) tone, as a browser would send them.
func encodeTone(t testing.TB, c Codec, freq float64, n int) []rtp.Packet {
	t.Helper()
	log := &packetLog{keep: true}
	s, err := newAudioSender(audioSenderOptions{Codec: c, Track: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := mediatest.NewTone(freq, -20, media.PipelineRate)
	for i := 0; i < n; i++ {
		if err := s.Write(toneFrame(g)); err != nil {
			t.Fatal(err)
		}
	}
	return log.pkts
}

// encodeFrames returns the Opus packets of frames as the service's sender makes them.
func encodeFrames(t testing.TB, frames []media.Frame) []rtp.Packet {
	t.Helper()
	log := &packetLog{keep: true}
	s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range frames {
		if err := s.Write(&frames[i]); err != nil {
			t.Fatal(err)
		}
	}
	return log.pkts
}

// browserStream returns n packets of a continuous 20 ms tone in codec c (Opus without DTX),
// numbered as one stream.
func browserStream(t testing.TB, c Codec, n int) []rtp.Packet {
	t.Helper()
	enc := encodeTone(t, c, 1000, 40)
	step := uint32(960)
	if c == CodecPCMU {
		step = 160
	}
	out := make([]rtp.Packet, n)
	for i := range out {
		out[i] = enc[i%len(enc)]
		out[i].SequenceNumber = enc[0].SequenceNumber + uint16(i)
		out[i].Timestamp = enc[0].Timestamp + uint32(i)*step
		out[i].Marker = i == 0
	}
	return out
}

func TestAudioReceiverDecodes(t *testing.T) {
	for _, tc := range []struct {
		codec Codec
		pt    uint8
	}{{CodecOpus, 111}, {CodecPCMU, 0}} {
		t.Run(string(tc.codec), func(t *testing.T) {
			var got []int16
			var now time.Duration
			r, err := newAudioReceiverClock(tc.codec, tc.pt, func(f *media.Frame) {
				if f.Rate != media.PipelineRate || f.N != 320 {
					t.Fatalf("frame of %d samples at %d Hz", f.N, f.Rate)
				}
				got = append(got, f.PCM()...)
			}, func() time.Duration { return now })
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pkts := encodeTone(t, tc.codec, 1000, 50)
			for i := range pkts {
				now = time.Duration(i) * media.FrameDuration
				r.catchUp(now) // the playout clock's step, just before the packet
				if i == 20 {
					continue // one packet lost: concealed, the frames stay continuous
				}
				r.Receive(&pkts[i], now)
				if i == 21 && len(got) != 20*320 {
					t.Fatalf("%d frames when the packet that follows the lost one came, want 20 (it waits for the slack)", len(got)/320)
				}
			}
			if len(got) != len(pkts)*320 {
				t.Fatalf("%d samples out for %d packets in", len(got), len(pkts))
			}
			if st := r.play.Stats(); st.Concealed != 1 {
				t.Fatalf("%d frames concealed for one lost packet", st.Concealed)
			}
			if l := mediatest.DetectTone(got[len(got)/2:], media.PipelineRate, 1000); l < -26 {
				t.Fatalf("1 kHz at %.1f dBFS after decode and resampling, want about -20", l)
			}
			if st := r.Stats(); st.Packets != uint64(len(pkts)-1) || st.Frames != uint64(len(got)/320) || st.ClockFrames != 1 {
				t.Fatalf("stats %+v", st)
			}
			if r.LastPacket().IsZero() {
				t.Fatal("no arrival time")
			}
			// The page goes quiet: the clock's path keeps the frames coming, one per 20 ms once
			// the packets are more than the slack behind, never a burst.
			base := r.Stats().ClockFrames
			for k := 1; k <= 10; k++ {
				r.catchUp(now + time.Duration(k)*media.FrameDuration)
				if got := r.Stats().ClockFrames - base; got != uint64(max(0, k-3)) {
					t.Fatalf("%d steps into the quiet, the clock produced %d frames, want %d", k, got, max(0, k-3))
				}
			}
			r.catchUp(now + time.Minute)
			if got := r.Stats().ClockFrames - base; got != 8 {
				t.Fatalf("after a long stall the clock produced %d frames at once, want 1 (no burst)", got-7)
			}
		})
	}
}

// playoutRun simulates one (PCMU) receive path until the last packet: packets arrive at the
// given times (< 0: never) and the service's playout clock steps it every 20 ms at phase. It
// returns the receiver's stats and its playout's.
func playoutRun(t *testing.T, pkts []rtp.Packet, arrive []time.Duration, phase time.Duration) (audioReceiverStats, media.PlayoutStats) {
	t.Helper()
	return playoutRunLate(t, pkts, arrive, phase, 0)
}

// playoutRunLate is playoutRun with the socket read in batches every period (what the service
// does with pollConn).
func playoutRunLate(t *testing.T, pkts []rtp.Packet, arrive []time.Duration, phase, period time.Duration) (audioReceiverStats, media.PlayoutStats) {
	t.Helper()
	var now time.Duration
	frames := 0
	r, err := newAudioReceiverClock(CodecPCMU, 0, func(*media.Frame) { frames++ }, func() time.Duration { return now })
	if err != nil {
		t.Fatal(err)
	}
	if period > 0 {
		r.batchedReads(period)
	}
	defer r.Close()
	order := make([]int, len(pkts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(arrive[a] - arrive[b]) })
	tick := phase + 60*time.Millisecond // the call's first steps come shortly before its first packet (at 100 ms)
	for _, i := range order {
		if arrive[i] < 0 {
			continue // lost
		}
		for ; tick <= arrive[i]; tick += media.FrameDuration {
			now = tick
			r.catchUp(tick)
		}
		now = arrive[i]
		r.Receive(&pkts[i], now)
	}
	st := r.Stats()
	if int(st.Frames) != frames {
		t.Fatalf("%d frames delivered, stats say %d", frames, st.Frames)
	}
	return st, r.play.Stats()
}

// Each packet that comes in time is one frame, delivered at its arrival; the clock only fills
// in where packets are missing or late past the slack; a lost packet is concealed,
// a lost or quiet stretch is silence, and nothing is concealed for jitter the slack covers.
func TestAudioReceiverPlayout(t *testing.T) {
	const n = 1000                         // 20 s
	pkts := browserStream(t, CodecPCMU, n) // the timing is the codec's business: PCMU is cheap to decode
	rng := rand.New(rand.NewPCG(1, 2))
	jitter := func(ms float64) time.Duration {
		return time.Duration((rng.Float64()*2 - 1) * ms * float64(time.Millisecond))
	}
	slot := func(i int) time.Duration { return 100*time.Millisecond + time.Duration(i)*media.FrameDuration }
	for _, tc := range []struct {
		name                            string
		arrive                          func(i int) time.Duration // < 0: lost
		dtx                             [2]int                    // packets [a, b) never sent: the sequence numbers go on
		maxClock, maxConcealed, maxLate int                       // bounds
		frames                          int                       // expected frames, ±3
	}{
		{name: "steady", arrive: func(i int) time.Duration { return slot(i) + jitter(1) },
			frames: n},
		{name: "jitter ±8 ms", arrive: func(i int) time.Duration { return slot(i) + jitter(8) },
			frames: n},
		{name: "sender clock 0.5% slow", arrive: func(i int) time.Duration { return slot(i) * 1005 / 1000 },
			frames: n},
		{name: "sender clock 0.5% fast", arrive: func(i int) time.Duration { return slot(i) * 995 / 1000 },
			frames: n},
		{name: "bursts", arrive: func(i int) time.Duration {
			if i%10 == 5 {
				return slot(i) + 25*time.Millisecond // late, arrives with the next one
			}
			return slot(i) + jitter(1)
		}, frames: n},
		{name: "5% loss", arrive: func(i int) time.Duration {
			if i%20 == 7 {
				return -1
			}
			return slot(i) + jitter(1)
		}, maxClock: n/20 + 2, maxConcealed: n / 20, frames: n},
		{name: "1 s lost", arrive: func(i int) time.Duration {
			if i >= 300 && i < 350 {
				return -1
			}
			return slot(i) + jitter(1)
		}, maxClock: 50, frames: n},
		{name: "1 s silence (DTX)", dtx: [2]int{300, 350}, arrive: func(i int) time.Duration {
			if i >= 300 && i < 350 {
				return -1
			}
			return slot(i) + jitter(1)
		}, maxClock: 50, frames: n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, phase := range []time.Duration{0, 5 * time.Millisecond, 13 * time.Millisecond, 19 * time.Millisecond} {
				arrive := make([]time.Duration, n)
				for i := range arrive {
					arrive[i] = tc.arrive(i)
				}
				sent := slices.Clone(pkts)
				if a, b := tc.dtx[0], tc.dtx[1]; b > a {
					for i := b; i < n; i++ {
						sent[i].SequenceNumber -= uint16(b - a) // RFC 7587 §3.1.3: DTX sends nothing
					}
				}
				st, rx := playoutRun(t, sent, arrive, phase)
				t.Logf("phase %v: %+v concealed %d silence %d skipped %d late %d", phase, st, rx.Concealed, rx.Silence, rx.Skipped, rx.Jitter.Late)
				if d := int(st.Frames) - tc.frames; d < -3 || d > 3 {
					t.Errorf("phase %v: %d frames for %d slots", phase, st.Frames, tc.frames)
				}
				if int(st.ClockFrames) > tc.maxClock {
					t.Errorf("phase %v: the clock produced %d frames, want at most %d", phase, st.ClockFrames, tc.maxClock)
				}
				if int(rx.Concealed) > tc.maxConcealed {
					t.Errorf("phase %v: %d frames concealed, want at most %d", phase, rx.Concealed, tc.maxConcealed)
				}
				if int(rx.Jitter.Late) > tc.maxLate {
					t.Errorf("phase %v: %d packets came too late, want at most %d", phase, rx.Jitter.Late, tc.maxLate)
				}
			}
		})
	}
}

// Batched socket reads (pollConn, every DefaultReadPeriod, or 10 ms) hand each packet to its
// receiver up to one period after it arrived, in bursts; every packet still becomes one frame
// and concealment over 1,000 frames does not rise against reads as the packets come, under
// network jitter of ±1 and ±8 ms, at every phase of the reads and of the playout clock.
func TestAudioReceiverPlayoutBatchedReads(t *testing.T) {
	const n = 1000
	pkts := browserStream(t, CodecPCMU, n)
	for _, period := range []time.Duration{DefaultReadPeriod, 10 * time.Millisecond} {
		for _, ms := range []float64{1, 8} {
			rng := rand.New(rand.NewPCG(3, uint64(ms)))
			arrive := make([]time.Duration, n)
			for i := range arrive {
				arrive[i] = 100*time.Millisecond + time.Duration(i)*media.FrameDuration + time.Duration((rng.Float64()*2-1)*ms*float64(time.Millisecond))
			}
			for _, readPhase := range []time.Duration{0, 3 * time.Millisecond, 7 * time.Millisecond} {
				batched := make([]time.Duration, n)
				for i, a := range arrive {
					batched[i] = ((a-readPhase)/period+1)*period + readPhase // the next read after arrival
				}
				for _, phase := range []time.Duration{0, 5 * time.Millisecond, 13 * time.Millisecond, 19 * time.Millisecond} {
					_, plain := playoutRun(t, pkts, arrive, phase)
					st, got := playoutRunLate(t, pkts, batched, phase, period)
					if got.Concealed > plain.Concealed || got.Jitter.Late > plain.Jitter.Late {
						t.Errorf("period %v, jitter ±%v ms, reads at %v, clock at %v: batched reads conceal %d (late %d), reads as they come %d (late %d)",
							period, ms, readPhase, phase, got.Concealed, got.Jitter.Late, plain.Concealed, plain.Jitter.Late)
					}
					if d := int(st.Frames) - n; d < -3 || d > 3 {
						t.Errorf("period %v, jitter ±%v ms, reads at %v, clock at %v: %d frames for %d slots", period, ms, readPhase, phase, st.Frames, n)
					}
				}
			}
		}
	}
}

// The playout clock produces an overdue frame itself, on its own goroutine; a receiver taken
// off the clock gets no more.
func TestAudioReceiverPlayoutClock(t *testing.T) {
	var now atomic.Int64
	frames := make(chan struct{}, 10)
	r, err := newAudioReceiverClock(CodecOpus, 111, func(*media.Frame) { frames <- struct{}{} },
		func() time.Duration { return time.Duration(now.Load()) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pkts := encodeTone(t, CodecOpus, 1000, 1)
	now.Store(int64(time.Second))
	r.Receive(&pkts[0], time.Second)
	<-frames
	c := newPlayoutClock()
	remove := c.add(r)
	if c.len() != 1 {
		t.Fatalf("%d receivers on the clock", c.len())
	}
	at := time.Second
	for range 3 { // within the slack: the next packet may still come
		at += media.FrameDuration
		c.tick(at)
	}
	if len(frames) != 0 {
		t.Fatal("a frame before it was owed")
	}
	at += media.FrameDuration
	now.Store(int64(at))
	c.tick(at)
	if len(frames) != 1 || r.Stats().ClockFrames != 1 {
		t.Fatalf("%d frames delivered by the tick, stats %+v", len(frames), r.Stats())
	}
	<-frames
	remove()
	remove()
	if c.len() != 0 {
		t.Fatalf("%d receivers on the clock after remove", c.len())
	}
	c.tick(at + time.Second)
	if len(frames) != 0 {
		t.Fatal("a receiver off the clock got a frame")
	}
}

// BenchmarkAudioReceiver: one Opus packet in, one 16 kHz frame out (jitter buffer, decode at
// 48 kHz, resample), on the arrival path.
func BenchmarkAudioReceiver(b *testing.B) {
	pkts := browserStream(b, CodecOpus, 500)
	var now time.Duration
	r, err := newAudioReceiverClock(CodecOpus, 111, func(*media.Frame) {}, func() time.Duration { return now })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	var seq uint16
	var ts uint32
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := pkts[i%len(pkts)]
		p.SequenceNumber, p.Timestamp = seq, ts
		seq++
		ts += 960
		now += media.FrameDuration
		r.Receive(&p, now)
	}
	if st := r.Stats(); st.Frames != st.Packets {
		b.Fatalf("%+v: want one frame per packet", st)
	}
}
