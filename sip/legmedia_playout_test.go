package sip

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
)

// pcmuPacket returns packet i of a 20 ms PCMU stream that arrived at at.
func pcmuPacket(i int, at time.Time, payload []byte) *media.RTPPacket {
	return &media.RTPPacket{PayloadType: 0, SequenceNumber: uint16(i), Timestamp: uint32(i) * 160, SSRC: 7,
		Marker: i == 0, Payload: payload, ReceivedAt: at}
}

// TestLegPlayoutPatterns runs the shared jitter and loss patterns (mediatest.ArrivalPatterns)
// through the SIP leg's receive side at four clock phases, each packet handed over as the
// endpoint's read goroutine does (onPacket) and the leg ticked as the shared clock does: the
// leg conceals no more than it did before the shared chain (mediatest.ArrivalBaselines), and
// does exactly what the shared chain does on its own, which the browser track's test checks
// too (TestAudioReceiverPlayoutPatterns): the same pattern gives the same concealment on both.
func TestLegPlayoutPatterns(t *testing.T) {
	const n = 1000
	payload := make([]byte, 160)
	codec.EncodeMulaw(payload, mediatest.Sine(160, 8000, 1000, -20))
	base := time.Unix(1000, 0)
	for _, a := range mediatest.ArrivalPatterns(n) {
		var sum mediatest.Tally
		for _, ph := range mediatest.ArrivalPhases {
			m, _ := testLeg(t, neg(codec.PCMU, 20))
			frames := uint64(0)
			m.setSink(func(*media.Frame) { frames++ })
			ref, err := media.NewPlayout(media.PlayoutConfig{Codec: codec.PCMU})
			if err != nil {
				t.Fatal(err)
			}
			a.Drive(ph, func(at time.Duration) {
				m.tick(base.Add(at))
				ref.Step(base.Add(at))
			}, func(i int, at time.Duration) {
				m.onPacket(pcmuPacket(i, base.Add(at), payload))
				ref.Push(pcmuPacket(i, base.Add(at), payload))
			})
			st, want := m.play.Load().Stats(), ref.Stats()
			ref.Close()
			if st.Delivered != frames {
				t.Fatalf("%s: %d frames delivered, the chain says %d", a.Name, frames, st.Delivered)
			}
			if st.RTPReceiverStats != want.RTPReceiverStats || st.Delivered != want.Delivered {
				t.Errorf("%s, clock at %v: the leg did\n%+v\nthe shared chain alone\n%+v", a.Name, ph, st, want)
			}
			sum.Add(st.Concealed, st.Played, st.Jitter.Late)
		}
		sum.Check(t, a.Name, mediatest.ArrivalBaselines[a.Name].SIP)
	}
}

// A peer that sends 30 ms PCMU packets: the leg cuts them to the 20 ms pipeline without loss.
func TestLegPlayoutPtime30(t *testing.T) {
	m, _ := testLeg(t, neg(codec.PCMU, 30))
	var out []int16
	m.setSink(func(f *media.Frame) { out = append(out, f.PCM()...) })
	tone := mediatest.Sine(8000, 8000, 700, -12)
	payload := make([]byte, 240)
	base := time.Unix(1000, 0)
	for i := 0; i+240 <= len(tone); i += 240 {
		codec.EncodeMulaw(payload, tone[i:i+240])
		at := base.Add(time.Duration(i/8) * time.Millisecond)
		m.tick(at)
		m.onPacket(&media.RTPPacket{PayloadType: 0, SequenceNumber: uint16(i / 240), Timestamp: uint32(1000 + i), SSRC: 7, Payload: payload, ReceivedAt: at})
	}
	st := m.play.Load().Stats()
	if st.Played != uint64(len(tone)/240*240/160) || st.Concealed != 0 || st.Jitter.Dropped != 0 {
		t.Errorf("%d frames played for %d samples (%+v)", st.Played, len(tone)/240*240, st)
	}
	if lvl := mediatest.DetectTone(out[len(out)/2:], media.PipelineRate, 700); lvl < -16 {
		t.Errorf("tone at %.1f dBFS after rebuffering", lvl)
	}
}
