package media

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media/mediatest"
)

// TestJitterBufferEagerScript drives PopNext (after every arrival) and PopDue (when the clock
// owes a frame) through in-order, reordered, lost and duplicated packets.
func TestJitterBufferEagerScript(t *testing.T) {
	clk := mediatest.NewClock(time.Unix(1000, 0))
	j := newTestJitter(t, clk, 20*time.Millisecond, 200*time.Millisecond)
	var got []string
	push := func(seq uint16) {
		j.Push(seq, uint32(seq)*jtFrame, 7, false, jtPayload(seq))
		for {
			p, ok := j.PopNext(nil)
			if !ok {
				return
			}
			got = append(got, describePop(p, PopPacket))
		}
	}
	due := func() {
		p, st := j.PopDue(nil)
		got = append(got, describePop(p, st))
	}
	push(100) // in order: out at once, whatever the depth
	push(101)
	due()     // nothing newer is here: the sender is late or quiet, nothing is lost
	push(102) // the late packet still plays
	push(104) // 103 is missing: 104 waits
	push(105)
	push(103) // reordered: 103, 104 and 105 go together
	push(107) // 106 is missing and does not come
	due()     // lost: concealed with 107 attached for FEC
	push(108)
	push(106) // too late now
	push(108) // duplicate
	want := "P100 P101 E P102 P103 P104 P105 M+107 P107 P108"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("eager playout\n got %s\nwant %s", s, want)
	}
	st := j.Stats()
	if st.Played != 8 || st.Lost != 1 || st.Concealed != 1 || st.Late != 1 || st.Duplicates != 1 || st.Reordered != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRTPReceiverEager: ReadNext decodes in-order packets as they come; ReadDue conceals a lost
// one, keeps the comfort noise going, and gives silence before the stream.
func TestRTPReceiverEager(t *testing.T) {
	r, err := NewRTPReceiver(RTPReceiverConfig{Codec: codec.PCMU})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var f Frame
	if st, err := r.ReadDue(&f); err != nil || st != PopEmpty || f.N != 320 || rms(f.PCM()) != 0 {
		t.Fatalf("before the stream: %v %v N %d rms %.0f", st, err, f.N, rms(f.PCM()))
	}
	tone := toneG711(10, 1000, -6)
	push := func(i int, payload []byte, pt uint8) {
		r.Push(&RTPPacket{PayloadType: pt, ComfortNoise: pt == PayloadTypeCN, SequenceNumber: uint16(300 + i), Timestamp: uint32(160 * i), SSRC: 9, Payload: payload})
	}
	push(0, tone[0], 0)
	if ok, err := r.ReadNext(&f); !ok || err != nil || f.N != 320 || rms(f.PCM()) < 1000 {
		t.Fatalf("first packet: %v %v N %d", ok, err, f.N)
	}
	if ok, _ := r.ReadNext(&f); ok {
		t.Fatal("a second frame from one packet")
	}
	push(2, tone[2], 0) // 1 is lost
	if ok, _ := r.ReadNext(&f); ok {
		t.Fatal("played past a gap without the clock")
	}
	if st, _ := r.ReadDue(&f); st != PopMissing || f.N != 320 {
		t.Fatalf("gap: %v N %d", st, f.N)
	}
	if ok, err := r.ReadNext(&f); !ok || err != nil || rms(f.PCM()) < 1000 {
		t.Fatalf("after the gap: %v %v", ok, err)
	}
	push(3, []byte{40}, PayloadTypeCN) // comfort noise at -40 dBov
	if ok, _ := r.ReadNext(&f); !ok {
		t.Fatal("comfort-noise packet not taken")
	}
	for range 3 { // the sender is quiet: the clock's frames keep the noise going
		if st, _ := r.ReadDue(&f); st != PopEmpty || rms(f.PCM()) < 50 || rms(f.PCM()) > 1000 {
			t.Fatalf("quiet: %v rms %.0f", st, rms(f.PCM()))
		}
	}
	s := r.Stats()
	if s.Played != 2 || s.Concealed != 1 || s.ComfortNoise != 4 || s.Silence != 1 || s.Jitter.Lost != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRTPEndpointOnPacket: with OnPacket set, packets reach the owner on the read goroutine,
// in order and whole, and the receive ring stays empty.
func TestRTPEndpointOnPacket(t *testing.T) {
	got := make(chan RTPPacket, 64)
	a, b := rtpEndpointPair(t, func(_, c *RTPConfig) {
		c.OnPacket = func(p *RTPPacket) {
			var cp RTPPacket
			cp.CopyFrom(p)
			got <- cp
		}
	})
	for i, p := range toneG711(5, 1000, -6) {
		if err := a.WriteSample(p, 160); err != nil {
			t.Fatal(err)
		}
		select {
		case q := <-got:
			if len(q.Payload) != 160 || q.PayloadType != 0 || q.ReceivedAt.IsZero() || string(q.Payload) != string(p) {
				t.Fatalf("packet %d: pt %d, %d bytes", i, q.PayloadType, len(q.Payload))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("packet %d not handed over", i)
		}
	}
	var dst RTPPacket
	if b.TryReadPacket(&dst) {
		t.Fatal("the ring got a packet that OnPacket took")
	}
	if s := b.Stats(); s.PacketsReceived != 5 {
		t.Fatalf("stats %+v", s)
	}
}

// BenchmarkRTPReceiverEager is the eager receive path of one packet: push, decode, resample.
func BenchmarkRTPReceiverEager(b *testing.B) {
	r, err := NewRTPReceiver(RTPReceiverConfig{Codec: codec.PCMU})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	payload := toneG711(1, 1000, -6)[0]
	p := RTPPacket{PayloadType: 0, SSRC: 1, Payload: payload}
	var f Frame
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.SequenceNumber, p.Timestamp = uint16(i), uint32(160*i)
		r.Push(&p)
		if ok, _ := r.ReadNext(&f); !ok {
			b.Fatal("no frame")
		}
	}
}
