package sip

import (
	"fmt"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
)

// playoutFigures are what one receive path did with one arrival pattern, summed over the
// clock phases tried.
type playoutFigures struct {
	Frames, Played, Concealed, Silence, Late uint64
}

func (f playoutFigures) String() string {
	return fmt.Sprintf("frames %d played %d concealed %d silence %d late %d", f.Frames, f.Played, f.Concealed, f.Silence, f.Late)
}

// playoutPhases are the phases of the 20 ms clock against the packets' slots that the
// patterns are run at.
var playoutPhases = []time.Duration{0, 5 * time.Millisecond, 13 * time.Millisecond, 19 * time.Millisecond}

// legPlayoutRun runs one arrival pattern of PCMU packets through a leg's receive side: each
// packet is handed over as the endpoint's read goroutine would at its arrival, and the shared
// clock ticks the leg every 20 ms at phase, until the last packet.
func legPlayoutRun(t *testing.T, a mediatest.Arrivals, phase time.Duration) playoutFigures {
	t.Helper()
	m, _ := testLeg(t, neg(codec.PCMU, 20))
	frames := uint64(0)
	m.setSink(func(*media.Frame) { frames++ })
	payload := make([]byte, 160)
	tone := mediatest.Sine(160, 8000, 1000, -20)
	codec.EncodeMulaw(payload, tone)
	base := time.Unix(1000, 0)
	tick := phase
	for _, i := range a.ArrivalOrder() {
		for ; tick <= a.At[i]; tick += media.FrameDuration {
			m.tick(base.Add(tick))
		}
		p := media.RTPPacket{PayloadType: 0, SequenceNumber: uint16(i), Timestamp: uint32(i) * 160, SSRC: 7,
			Marker: i == 0, Payload: payload, ReceivedAt: base.Add(a.At[i])}
		m.onPacket(&p)
	}
	st := m.rx.Stats()
	if st.Frames != frames {
		t.Fatalf("%s: %d frames delivered, the receiver made %d", a.Name, frames, st.Frames)
	}
	return playoutFigures{Frames: st.Frames, Played: st.Played, Concealed: st.Concealed, Silence: st.Silence, Late: st.Jitter.Late}
}

// TestLegPlayoutPatterns runs the shared jitter and loss patterns (mediatest.ArrivalPatterns)
// through the SIP leg's receive side at four clock phases.
func TestLegPlayoutPatterns(t *testing.T) {
	const n = 1000
	for _, a := range mediatest.ArrivalPatterns(n) {
		var sum playoutFigures
		for _, ph := range playoutPhases {
			f := legPlayoutRun(t, a, ph)
			sum.Frames += f.Frames
			sum.Played += f.Played
			sum.Concealed += f.Concealed
			sum.Silence += f.Silence
			sum.Late += f.Late
		}
		t.Logf("%-34s %v", a.Name, sum)
	}
}
