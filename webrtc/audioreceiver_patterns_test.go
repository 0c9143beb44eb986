package webrtc

import (
	"fmt"
	"testing"
	"time"

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

// TestAudioReceiverPlayoutPatterns runs the shared jitter and loss patterns
// (mediatest.ArrivalPatterns) through the browser track's receive path at four clock phases.
func TestAudioReceiverPlayoutPatterns(t *testing.T) {
	const n = 1000
	pkts := browserStream(t, CodecPCMU, n)
	for _, a := range mediatest.ArrivalPatterns(n) {
		var sum playoutFigures
		for _, ph := range playoutPhases {
			_, rx := playoutRun(t, pkts, a.At, ph)
			sum.Frames += rx.Frames
			sum.Played += rx.Played
			sum.Concealed += rx.Concealed
			sum.Silence += rx.Silence
			sum.Late += rx.Jitter.Late
		}
		t.Logf("%-34s %v", a.Name, sum)
	}
	_ = media.FrameDuration
}
