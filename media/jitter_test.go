package media

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/mediatest"
)

const (
	jtRate  = 8000
	jtFrame = 160
)

func newTestJitter(t testing.TB, clk *mediatest.Clock, minD, maxD time.Duration) *JitterBuffer {
	t.Helper()
	j, err := NewJitterBuffer(JitterOptions{ClockRate: jtRate, FrameSamples: jtFrame, Min: minD, Max: maxD, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// jtPayload is the payload the tests send for a sequence number: its two bytes.
func jtPayload(seq uint16) []byte { return binary.BigEndian.AppendUint16(nil, seq) }

// describePop renders one Pop result: "P1234" for a packet, "M" for a concealment, "M+1235"
// for a concealment with the next packet attached (for FEC), "E" for nothing.
func describePop(p []byte, st PopStatus) string {
	switch st {
	case PopPacket:
		return fmt.Sprintf("P%d", binary.BigEndian.Uint16(p))
	case PopMissing:
		if len(p) == 2 {
			return fmt.Sprintf("M+%d", binary.BigEndian.Uint16(p))
		}
		return "M"
	}
	return strings.ToUpper(st.String()[:1])
}

func TestNewJitterBufferOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    JitterOptions
		ok   bool
	}{
		{"defaults", JitterOptions{ClockRate: 8000, FrameSamples: 160}, true},
		{"opus", JitterOptions{ClockRate: 48000, FrameSamples: 960, Max: time.Second}, true},
		{"no rate", JitterOptions{FrameSamples: 160}, false},
		{"no frame", JitterOptions{ClockRate: 8000}, false},
		{"max<min", JitterOptions{ClockRate: 8000, FrameSamples: 160, Min: 100 * time.Millisecond, Max: 40 * time.Millisecond}, false},
		{"huge payload", JitterOptions{ClockRate: 8000, FrameSamples: 160, MaxPayload: 1 << 20}, false},
		{"two-second packets", JitterOptions{ClockRate: 8000, FrameSamples: 16000}, false},
		{"max too deep", JitterOptions{ClockRate: 8000, FrameSamples: 8, Max: time.Second}, false},
	} {
		_, err := NewJitterBuffer(tc.o)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestJitterBufferScript feeds a scripted stream with loss, reordering, duplicates, late
// packets, a 16-bit sequence wrap, a timestamp jump, a sequence jump, an overflow burst, a
// silence and an SSRC change, one playout tick every 20 ms, and checks every Pop and the
// counters.
func TestJitterBufferScript(t *testing.T) {
	clk := mediatest.NewClock(time.Unix(0, 0))
	j := newTestJitter(t, clk, 20*time.Millisecond, 200*time.Millisecond)
	const ssrcA, ssrcB = 0xAAAA, 0xBBBB
	tsOff := uint32(0) // added to timestamps after the jump
	push := func(ssrc uint32, seqs ...int) {
		for _, s := range seqs {
			seq := uint16(s)
			n := uint32(s) // the sender's packet count, which does not wrap at 16 bits
			if ssrc == ssrcA && s < 65530 {
				n += 65536
			}
			j.Push(seq, n*jtFrame+tsOff, ssrc, false, jtPayload(seq))
		}
	}
	type step struct {
		ssrc uint32
		push []int // pushed (in this order) just before the tick
		want string
	}
	A := func(want string, seqs ...int) step { return step{ssrcA, seqs, want} }
	B := func(want string, seqs ...int) step { return step{ssrcB, seqs, want} }
	script := []step{
		A("P65530", 65530), // target 1 frame: plays at once
		A("P65531", 65531),
		A("P65532", 65533, 65532), // reordered: 65532 after 65533; jitter now asks for 2 frames
		A("P65533"),
		A("P65534", 65534, 65534), // a duplicate of a held packet
		A("M"),                    // 65535 is not here yet: underrun, conceal without advancing
		A("M+0", 0),               // 65535 lost; 0 (across the wrap) is here, attached for FEC
		A("P0", 1),                //
		A("P1", 65535, 2),         // 65535 arrives after its turn: late, target 3 frames
		A("P2", 0),                // a duplicate of a played packet
		A("M"),                    // nothing new: underrun
		A("P3", 3, 4),             //
		A("P4", 5),                //
		A("P5", 6),                //
		A("P6", 7),                //
		A("P7", 8),                //
		A("P8", 9),                //
		A("P9", 10),               //
		A("P10", 11),              //
		A("P11", 12),              //
		A("P12", 13),              //
		A("P13", 14),              //
		A("P14", 15),              //
		A("P15", 16),              //
		A("M"),                    // end of the first 0.5 s window: the level never reached 3, stretch
		A("P16", 17),              //
		A("P17", 18),              //
		A("P18", 19),              //
		A("P19", 20),              // timestamps jump by 10^6 from here on: kept out of the jitter estimate
		A("P20", 21),              //
		A("P21", 19464),           // a wild sequence jump: dropped on probation (RFC 3550 A.1)
		A("P19465", 19465),        // confirmed by its successor: reset, target back to 1, plays at once
		A("M"),                    // underrun
		// A burst over Max (10 frames): playout skips to the newest, keeping the target depth
		// (3 frames: the burst's arrival pattern is very jittery).
		A("P19478", 19466, 19467, 19468, 19469, 19470, 19471, 19472, 19473, 19474, 19475, 19476, 19477, 19478, 19479, 19480),
		A("P19479"),
		A("P19480"),
	}
	// Silence: concealment for Max (10 frames), then nothing.
	for range 10 {
		script = append(script, A("M"))
	}
	script = append(script,
		A("E"),
		A("E"),
		B("P4000", 4000), // a new SSRC: reset, fresh start
		B("P4001", 4001),
	)

	var got []string
	for _, s := range script {
		if slices.Contains(s.push, 20) {
			tsOff = 1_000_000
		}
		push(s.ssrc, s.push...)
		if slices.Contains(s.push, 21) {
			// The timestamp jump did not poison the jitter estimate.
			if st := j.Stats(); st.Jitter > 5*time.Millisecond || st.TSJumps != 1 {
				t.Errorf("after the timestamp jump: jitter %v, %d jumps", st.Jitter, st.TSJumps)
			}
		}
		got = append(got, describePop(j.Pop(nil)))
		clk.Advance(20 * time.Millisecond)
	}
	var want []string
	for _, s := range script {
		want = append(want, s.want)
	}
	if !slices.Equal(got, want) {
		for i := range want {
			mark := ""
			if got[i] != want[i] {
				mark = "   <-- differs"
			}
			t.Logf("tick %2d push %v: got %-8s want %-8s%s", i, script[i].push, got[i], want[i], mark)
		}
		t.Fatalf("Pop sequence differs")
	}
	st := j.Stats()
	wantSt := JitterStats{
		Depth: 20 * time.Millisecond, Buffered: 0, Jitter: st.Jitter,
		Received: 45, Played: 33, Concealed: 15, Lost: 1, Late: 1, Duplicates: 2,
		Reordered: 1, Dropped: 1 + 12, Resets: 2, TSJumps: 1,
	}
	if st != wantSt {
		t.Errorf("stats\n got %+v\nwant %+v", st, wantSt)
	}
}

// A jittery network grows the target depth; a calm one brings it back down to Min.
func TestJitterBufferAdaptsDepth(t *testing.T) {
	clk := mediatest.NewClock(time.Unix(0, 0))
	j := newTestJitter(t, clk, 20*time.Millisecond, 200*time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	// Packets are sent every 20 ms; the network delays each by 0..60 ms (uniform). Arrivals are
	// simulated at 1 ms resolution, with a playout tick every 20 ms.
	type arrival struct {
		at  time.Duration
		seq uint16
	}
	var q []arrival
	var seq uint16
	var lateBefore uint64
	var played, missing int
	run := func(dur time.Duration, maxDelay time.Duration) {
		for ms := time.Duration(0); ms < dur; ms += time.Millisecond {
			if ms%(20*time.Millisecond) == 0 {
				d := time.Duration(0)
				if maxDelay > 0 {
					d = time.Duration(rng.Int64N(int64(maxDelay)))
				}
				q = append(q, arrival{ms + d, seq})
				seq++
			}
			for i := 0; i < len(q); {
				if q[i].at <= ms {
					s := q[i].seq
					j.Push(s, uint32(s)*jtFrame, 1, false, jtPayload(s))
					q = append(q[:i], q[i+1:]...)
					continue
				}
				i++
			}
			if ms%(20*time.Millisecond) == 10*time.Millisecond {
				switch _, st := j.Pop(nil); st {
				case PopPacket:
					played++
				case PopMissing:
					missing++
				}
			}
			clk.Advance(time.Millisecond)
		}
		// Deliver what remains relative to the next phase.
		for i := range q {
			q[i].at -= dur
		}
	}
	run(2*time.Second, 0)
	calm := j.Stats()
	if calm.Depth != 20*time.Millisecond || calm.Concealed != 0 {
		t.Fatalf("calm start: %+v", calm)
	}
	run(10*time.Second, 60*time.Millisecond)
	jittery := j.Stats()
	t.Logf("after 10 s of 0-60 ms jitter: depth %v jitter %v late %d lost %d concealed %d", jittery.Depth, jittery.Jitter, jittery.Late, jittery.Lost, jittery.Concealed)
	if jittery.Depth < 60*time.Millisecond {
		t.Errorf("depth %v under 0-60 ms jitter, want >= 60 ms", jittery.Depth)
	}
	// Once adapted, late packets should be rare: count those in the last 5 s.
	lateBefore = jittery.Late
	run(5*time.Second, 60*time.Millisecond)
	if late := j.Stats().Late - lateBefore; late > 5 {
		t.Errorf("%d late packets in 5 s once adapted, want <= 5", late)
	}
	run(30*time.Second, 0)
	back := j.Stats()
	t.Logf("after 30 s calm: depth %v jitter %v buffered %d", back.Depth, back.Jitter, back.Buffered)
	if back.Depth > 40*time.Millisecond {
		t.Errorf("depth %v after 30 s of calm, want back near 20 ms", back.Depth)
	}
	if back.Buffered > 3 {
		t.Errorf("still %d packets buffered after 30 s of calm", back.Buffered)
	}
	if played < 2000 {
		t.Errorf("played only %d packets", played)
	}
}

// Pop's payload for a packet is exactly what was pushed, whatever its size, and Push copies.
func TestJitterBufferCopiesPayloads(t *testing.T) {
	clk := mediatest.NewClock(time.Unix(0, 0))
	j := newTestJitter(t, clk, 0, 0)
	buf := []byte("hello")
	j.Push(1, 160, 9, true, buf)
	copy(buf, "XXXXX")
	big := make([]byte, 1501)
	j.Push(2, 320, 9, false, big) // too large: dropped
	j.Push(3, 480, 9, false, nil) // empty payload is legal
	dst := make([]byte, 0, 1500)
	p, st := j.Pop(dst)
	if st != PopPacket || string(p) != "hello" {
		t.Fatalf("got %q %v", p, st)
	}
	if p, st = j.Pop(dst); st != PopMissing || len(p) != 0 {
		t.Fatalf("2 was dropped: got %q %v, want a concealment without FEC (3 is empty)", p, st)
	}
	if p, st = j.Pop(dst); st != PopPacket || len(p) != 0 {
		t.Fatalf("got %q %v, want the empty packet 3", p, st)
	}
	if s := j.Stats(); s.Dropped != 1 {
		t.Errorf("dropped %d, want 1", s.Dropped)
	}
}

// A talkspurt that starts (marker bit) while playout conceals for it refills to the target.
func TestJitterBufferMarkerRefills(t *testing.T) {
	clk := mediatest.NewClock(time.Unix(0, 0))
	j := newTestJitter(t, clk, 60*time.Millisecond, 200*time.Millisecond)
	var got []string
	tick := func() {
		got = append(got, describePop(j.Pop(nil)))
		clk.Advance(20 * time.Millisecond)
	}
	j.Push(10, 1600, 1, true, jtPayload(10))
	tick() // filling: 1 of 3
	j.Push(11, 1760, 1, false, jtPayload(11))
	tick()
	j.Push(12, 1920, 1, false, jtPayload(12))
	tick() // 3 buffered: plays 10
	tick()
	tick()
	tick() // underrun
	tick() // underrun
	// The sender was silent (silence suppression); 13 starts a new talkspurt 100 ms later.
	j.Push(13, 1920+160*6, 1, true, jtPayload(13))
	tick()
	j.Push(14, 1920+160*7, 1, false, jtPayload(14))
	tick()
	j.Push(15, 1920+160*8, 1, false, jtPayload(15))
	tick()
	tick()
	want := []string{"E", "E", "P10", "P11", "P12", "M", "M", "E", "E", "P13", "P14"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// FuzzJitterBuffer drives the buffer with arbitrary packets, ticks and clock steps. It must not
// panic, must not grow its storage, and must keep its counters and depth consistent.
func FuzzJitterBuffer(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte(strings.Repeat("\x00\x01\x02\xff\xfe\x80\x7f", 20)))
	f.Add([]byte{0xff, 0xff, 0x00, 0x00, 0x01, 0x80, 0x00, 0x40, 0x20, 0x10})
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := mediatest.NewClock(time.Unix(0, 0))
		j := newTestJitter(t, clk, 20*time.Millisecond, 200*time.Millisecond)
		slots, store := &j.slots[0], &j.payload[0]
		nSlots, nStore := cap(j.slots), cap(j.payload)
		seq, ts, ssrc := uint16(0), uint32(0), uint32(1)
		dst := make([]byte, 0, 1500)
		payload := make([]byte, 1800)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			switch op % 8 {
			case 0, 1, 2: // next packet, maybe reordered/duplicated by arg
				s := seq + uint16(int8(arg)>>3)
				j.Push(s, ts+uint32(int8(arg))*jtFrame, ssrc, arg&1 == 1, payload[:int(arg)*7])
				seq++
				ts += jtFrame
			case 3: // pop
				p, st := j.Pop(dst)
				if len(p) > 1500 || (st == PopEmpty && len(p) != 0) {
					t.Fatalf("pop returned %d bytes with %v", len(p), st)
				}
			case 4:
				clk.Advance(time.Duration(arg) * time.Millisecond)
			case 5: // jumps
				switch arg % 4 {
				case 0:
					seq += uint16(arg) * 300
				case 1:
					ts += uint32(arg) << 20
				case 2:
					ssrc++
				case 3:
					j.Reset()
				}
			case 6: // random packet
				j.Push(uint16(arg)*257, uint32(arg)<<24, ssrc+uint32(arg&1), false, payload[:arg])
			case 7: // wrap soon
				seq = 65535 - uint16(arg%16)
			}
			st := j.Stats()
			if st.Buffered > j.Capacity() || st.Depth < 20*time.Millisecond || st.Depth > 200*time.Millisecond {
				t.Fatalf("inconsistent: %+v", st)
			}
			if st.Played+st.Dropped+uint64(st.Buffered) > st.Received+st.Dropped {
				t.Fatalf("played more than received: %+v", st)
			}
		}
		if &j.slots[0] != slots || &j.payload[0] != store || cap(j.slots) != nSlots || cap(j.payload) != nStore {
			t.Fatal("storage was reallocated")
		}
	})
}

// A long random run: the buffer's storage never grows and Pop always answers.
func TestJitterBufferRandomBounded(t *testing.T) {
	clk := mediatest.NewClock(time.Unix(0, 0))
	j := newTestJitter(t, clk, 20*time.Millisecond, 200*time.Millisecond)
	rng := rand.New(rand.NewPCG(3, 4))
	store := &j.payload[0]
	payload := make([]byte, 200)
	for i := range 100000 {
		switch rng.IntN(10) {
		case 0:
			clk.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
		case 1, 2, 3:
			j.Pop(nil)
		default:
			s := uint16(rng.IntN(1 << 16))
			if rng.IntN(4) > 0 {
				s = uint16(i / 3)
			}
			j.Push(s, rng.Uint32(), uint32(rng.IntN(2)), rng.IntN(2) == 0, payload[:rng.IntN(200)])
		}
	}
	if &j.payload[0] != store {
		t.Fatal("storage reallocated")
	}
	t.Logf("stats after 100k random operations: %+v", j.Stats())
}

func BenchmarkJitterBufferPushPop(b *testing.B) {
	clk := mediatest.NewClock(time.Unix(0, 0))
	j := newTestJitter(b, clk, 20*time.Millisecond, 200*time.Millisecond)
	payload := make([]byte, 160)
	dst := make([]byte, 0, 1500)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s := uint16(i)
		j.Push(s, uint32(i)*jtFrame, 1, false, payload)
		clk.Advance(20 * time.Millisecond)
		if _, st := j.Pop(dst); st != PopPacket {
			b.Fatalf("pop %d: %v", i, st)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
}
