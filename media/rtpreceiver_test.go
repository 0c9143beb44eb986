package media

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media/mediatest"
)

// toneG711 returns n 20 ms PCMU payloads of a continuous sine at freq Hz and dBFS.
func toneG711(n int, freq, dBFS float64) [][]byte {
	gen := mediatest.NewTone(freq, dBFS, 8000)
	pcm := make([]int16, 160)
	out := make([][]byte, n)
	for i := range out {
		gen.Fill(pcm)
		out[i] = make([]byte, 160)
		codec.EncodeMulaw(out[i], pcm)
	}
	return out
}

func rms(pcm []int16) float64 {
	var s float64
	for _, v := range pcm {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(pcm)))
}

// receiverRig drives an RTPReceiver with a manual clock, one packet and one frame per 20 ms.
type receiverRig struct {
	t   *testing.T
	clk *mediatest.Clock
	r   *RTPReceiver
	seq uint16
	ts  uint32
}

func newReceiverRig(t *testing.T, info codec.Info) *receiverRig {
	clk := newRTPTestClock()
	r, err := NewRTPReceiver(RTPReceiverConfig{Codec: info, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &receiverRig{t: t, clk: clk, r: r, seq: 500, ts: 8000}
}

// step delivers (unless payload is nil: lost) the next packet, then reads one frame.
func (g *receiverRig) step(pt uint8, payload []byte) (Frame, PopStatus) {
	g.t.Helper()
	if payload != nil {
		g.r.Push(&RTPPacket{PayloadType: pt, ComfortNoise: pt == PayloadTypeCN, SequenceNumber: g.seq, Timestamp: g.ts, SSRC: 42, Payload: payload})
	}
	g.seq++
	g.ts += 160
	var f Frame
	st, _ := g.r.ReadFrame(&f)
	if f.Rate != PipelineRate || f.N != 320 {
		g.t.Fatalf("frame rate %d N %d, want 16000 and 320", f.Rate, f.N)
	}
	g.clk.Advance(FrameDuration)
	return f, st
}

func TestRTPReceiverConfigErrors(t *testing.T) {
	tests := []RTPReceiverConfig{
		{Codec: codec.Info{Name: "PCMU", ClockRate: 0}},
		{Codec: codec.Info{Name: "PCMU", ClockRate: 8001}},
		{Codec: codec.Info{Name: "nonsense", ClockRate: 8000, SampleRate: 8000}},
		{Codec: codec.PCMU, OutputRate: 11025},
	}
	for _, cfg := range tests {
		if _, err := NewRTPReceiver(cfg); err == nil {
			t.Errorf("NewRTPReceiver(%+v) succeeded", cfg)
		}
	}
}

func TestRTPReceiverToneThroughChain(t *testing.T) {
	g := newReceiverRig(t, codec.PCMU)
	// Before any packet: silence.
	if f, st := g.step(0, nil); st != PopEmpty || rms(f.PCM()) != 0 {
		t.Fatalf("before the stream: %v, rms %v", st, rms(f.PCM()))
	}
	g.seq, g.ts = 500, 8000
	var played []int16
	for _, p := range toneG711(50, 1000, -10) {
		f, st := g.step(0, p)
		if st == PopPacket {
			played = append(played, f.PCM()...)
		}
	}
	if len(played) < 40*320 {
		t.Fatalf("only %d samples played of 50 packets", len(played))
	}
	tail := played[len(played)-16000/2:] // the last 0.5 s, past the resampler's start-up
	if lvl := mediatest.DetectTone(tail, PipelineRate, 1000); math.Abs(lvl-(-10)) > 1 {
		t.Fatalf("1 kHz tone at %.1f dBFS after the chain, want -10", lvl)
	}
	if lvl := mediatest.DetectTone(tail, PipelineRate, 7000); lvl > -50 {
		t.Fatalf("image at 7 kHz at %.1f dBFS: resampling does not filter", lvl)
	}
	if s := g.r.Stats(); s.DecodeErrors != 0 || s.Concealed != 0 || s.Played != uint64(len(played)/320) {
		t.Fatalf("stats %+v", s)
	}
}

func TestRTPReceiverConcealsLoss(t *testing.T) {
	g := newReceiverRig(t, codec.PCMU)
	tone := toneG711(30, 440, -12)
	for _, p := range tone[:20] {
		g.step(0, p)
	}
	g.step(0, nil) // lost
	var sawConceal bool
	for _, p := range tone[21:] {
		f, st := g.step(0, p)
		if st == PopMissing {
			sawConceal = true
			if rms(f.PCM()) == 0 {
				t.Fatal("concealed frame is silent: no repeat-and-fade")
			}
		}
	}
	// One packet lost; the jitter buffer may conceal one more frame to deepen itself after the
	// underrun (its documented adaptation).
	if s := g.r.Stats(); !sawConceal || s.Jitter.Lost != 1 || s.Concealed < 1 || s.Concealed > 2 {
		t.Fatalf("lost %d, concealed %d frames (saw %v); want 1 lost, 1-2 concealed", s.Jitter.Lost, s.Concealed, sawConceal)
	}
}

func TestRTPReceiverComfortNoise(t *testing.T) {
	g := newReceiverRig(t, codec.PCMU)
	for _, p := range toneG711(10, 440, -12) {
		g.step(0, p)
	}
	const level = 40 // -40 dBov
	g.step(PayloadTypeCN, []byte{level})
	var noise []int16
	for range 30 { // the sender goes quiet; the noise goes on
		f, _ := g.step(0, nil)
		noise = append(noise, f.PCM()...)
	}
	if s := g.r.Stats(); s.ComfortNoise < 25 || s.DecodeErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
	tail := noise[len(noise)-8000:]
	want := 32767 / math.Sqrt2 * math.Pow(10, -level/20.0)
	// Noise made at 8 kHz fills 0-4 kHz; the resampler's band edge takes off a little.
	if got := rms(tail); math.Abs(20*math.Log10(got/want)) > 2 {
		t.Fatalf("comfort noise RMS %.1f, want %.1f (±2 dB)", got, want)
	}
	// Audio resumes: decoded again, noise off.
	g.seq += 5
	g.ts += 800
	var st PopStatus
	for _, p := range toneG711(20, 440, -12) {
		_, st = g.step(0, p)
	}
	if st != PopPacket {
		t.Fatalf("audio after comfort noise: %v", st)
	}
	before := g.r.Stats().ComfortNoise
	g.step(0, toneG711(1, 440, -12)[0])
	if g.r.Stats().ComfortNoise != before {
		t.Fatal("comfort noise still generated after audio resumed")
	}
}

func TestRTPReceiverOtherPayloadsAndBadAudio(t *testing.T) {
	g := newReceiverRig(t, codec.PCMU)
	tone := toneG711(20, 440, -12)
	for _, p := range tone[:10] {
		g.step(0, p)
	}
	g.r.Push(&RTPPacket{PayloadType: 101, SequenceNumber: 1, Payload: []byte{1, 0, 0, 160}})
	if g.r.Stats().OtherPayloads != 1 {
		t.Fatal("telephone-event not counted")
	}
	// An empty PCMU payload does not decode: counted, concealed, never a panic.
	g.r.Push(&RTPPacket{PayloadType: 0, SequenceNumber: g.seq, Timestamp: g.ts, SSRC: 42, Payload: []byte{}})
	g.seq++
	g.ts += 160
	for _, p := range tone[10:] {
		g.step(0, p)
	}
	var f Frame
	for range 10 {
		g.r.ReadFrame(&f)
		g.clk.Advance(FrameDuration)
	}
	if s := g.r.Stats(); s.DecodeErrors != 1 || s.Concealed < 1 {
		t.Fatalf("stats %+v, want 1 decode error concealed", s)
	}
}

func TestRTPReceiverG722NoResampler(t *testing.T) {
	r, err := NewRTPReceiver(RTPReceiverConfig{Codec: codec.G722})
	if err != nil {
		t.Fatal(err)
	}
	if r.rs != nil || r.inN != 320 {
		t.Fatalf("G.722 decodes at 16 kHz: resampler %v, inN %d", r.rs, r.inN)
	}
}

// TestRTPReceiverFromEndpoints is the whole receive side over UDP: an endpoint sends a G.711
// tone, the other receives it, and the receiver turns it into 16 kHz frames.
func TestRTPReceiverFromEndpoints(t *testing.T) {
	a, b := rtpEndpointPair(t, nil)
	clk := newRTPTestClock() // the playout clock: one frame per 20 ms step
	r, err := NewRTPReceiver(RTPReceiverConfig{Codec: codec.PCMU, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var (
		f      Frame
		played []int16
	)
	for i, p := range toneG711(50, 1000, -6) {
		if err := a.WriteSample(p, 160); err != nil {
			t.Fatal(err)
		}
		rtpWaitFor(t, "packet at B", func() bool { return b.Stats().PacketsReceived == uint64(i+1) })
		if n := r.Pull(b); n != 1 {
			t.Fatalf("pulled %d packets, want 1", n)
		}
		if st, err := r.ReadFrame(&f); err != nil {
			t.Fatal(err)
		} else if st == PopPacket {
			played = append(played, f.PCM()...)
		}
		clk.Advance(FrameDuration)
	}
	if len(played) < 45*320 {
		t.Fatalf("played %d samples of 50 packets", len(played))
	}
	if lvl := mediatest.DetectTone(played[len(played)/2:], PipelineRate, 1000); math.Abs(lvl-(-6)) > 1 {
		t.Fatalf("tone at %.1f dBFS, want -6", lvl)
	}
	if s := r.Stats(); s.Jitter.Lost != 0 || s.DecodeErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRTPReceiverChainNoAllocs(t *testing.T) {
	c := newReceiverChainBench(t, false)
	for range 100 {
		c.step(t)
	}
	if allocs := testing.AllocsPerRun(200, func() { c.step(t) }); allocs != 0 {
		t.Fatalf("receive chain allocates %v times per frame, want 0", allocs)
	}
}

// receiverChainBench is one call's receive side without the socket: datagram → endpoint parse,
// statistics and ring → RTPReceiver (jitter buffer, G.711 decode, 8→16 kHz) → Frame [→ VAD].
type receiverChainBench struct {
	e      *RTPEndpoint
	r      *RTPReceiver
	vad    *VAD
	clk    *mediatest.Clock
	pkts   [][]byte
	i      int
	seq    uint16
	ts     uint32
	f      Frame
	played int
}

func newReceiverChainBench(tb testing.TB, withVAD bool) *receiverChainBench {
	return newReceiverChainBenchRate(tb, withVAD, PipelineRate)
}

func newReceiverChainBenchRate(tb testing.TB, withVAD bool, outRate int) *receiverChainBench {
	tb.Helper()
	clk := newRTPTestClock()
	e, err := newRTPEndpoint(RTPConfig{Ports: rtpTestPorts(tb), Logger: rtpDiscardLog, Now: clk.Now})
	if err != nil {
		tb.Fatal(err)
	}
	r, err := NewRTPReceiver(RTPReceiverConfig{Codec: codec.PCMU, Now: clk.Now, OutputRate: outRate})
	if err != nil {
		tb.Fatal(err)
	}
	c := &receiverChainBench{e: e, r: r, clk: clk}
	for _, p := range toneG711(50, 440, -20) {
		c.pkts = append(c.pkts, rtpRaw(tb, 0, 0, 0, 0x4242, p))
	}
	if withVAD {
		if c.vad, err = NewVAD(VADOptions{Rate: outRate}); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

func (c *receiverChainBench) step(tb testing.TB) {
	buf := c.pkts[c.i%len(c.pkts)]
	c.i++
	binary.BigEndian.PutUint16(buf[2:], c.seq)
	binary.BigEndian.PutUint32(buf[4:], c.ts)
	c.seq++
	c.ts += 160
	c.e.handleRTP(buf, rtpLoopbackAddr(4000))
	c.r.Pull(c.e)
	st, err := c.r.ReadFrame(&c.f)
	if err != nil {
		tb.Fatal(err)
	}
	if st == PopPacket {
		c.played++
	}
	if c.vad != nil {
		if _, err := c.vad.ProcessFrame(&c.f); err != nil {
			tb.Fatal(err)
		}
	}
	c.clk.Advance(FrameDuration)
}

func benchReceiverChain(b *testing.B, withVAD bool, outRate int) {
	c := newReceiverChainBenchRate(b, withVAD, outRate)
	for range 100 { // past the jitter buffer's prefetch
		c.step(b)
	}
	c.played = 0
	b.ReportAllocs()
	cpu0 := udpCPUTime()
	b.ResetTimer()
	for b.Loop() {
		c.step(b)
	}
	b.StopTimer()
	// Process CPU time per op: on a shared machine wall-clock ns/op includes time spent waiting
	// for a core; this does not.
	b.ReportMetric(float64((udpCPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(c.played)/float64(b.N), "played/op")
}

// BenchmarkRTPReceiverChain is "RTP read → decode → resample → frame": one 20 ms G.711 packet
// per op, from datagram (after the socket read) to 16 kHz Frame.
func BenchmarkRTPReceiverChain(b *testing.B) { benchReceiverChain(b, false, PipelineRate) }

// BenchmarkRTPReceiverChainVAD adds voice-activity detection: RTP parse + jitter buffer + G.711
// decode + 8→16 kHz resample + VAD per 20 ms frame (target ≤ 5 µs).
func BenchmarkRTPReceiverChainVAD(b *testing.B) { benchReceiverChain(b, true, PipelineRate) }

// BenchmarkRTPReceiverChainNoResample is the same chain with 8 kHz frames and an 8 kHz VAD, to
// show what the 8→16 kHz resampler costs in the two benchmarks above.
func BenchmarkRTPReceiverChainNoResample(b *testing.B) { benchReceiverChain(b, true, 8000) }
