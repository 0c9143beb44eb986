package webrtc

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
)

// TestAudioReceiverPlayoutPatterns runs the shared jitter and loss patterns
// (mediatest.ArrivalPatterns) through the browser track's receive path at four clock phases,
// each packet received as the track's reader does and the receiver stepped as the playout
// clock does: it conceals no more than it did before the shared chain
// (mediatest.ArrivalBaselines), and does exactly what the shared chain does on its own, which
// the SIP leg's test checks too (TestLegPlayoutPatterns): the same pattern gives the same
// concealment on both.
func TestAudioReceiverPlayoutPatterns(t *testing.T) {
	const n = 1000
	pkts := browserStream(t, CodecPCMU, n)
	for _, a := range mediatest.ArrivalPatterns(n) {
		var sum mediatest.Tally
		for _, ph := range mediatest.ArrivalPhases {
			var now time.Duration
			frames := uint64(0)
			r, err := newAudioReceiverClock(CodecPCMU, 0, func(*media.Frame) { frames++ }, func() time.Duration { return now })
			if err != nil {
				t.Fatal(err)
			}
			ref, err := media.NewPlayout(media.PlayoutConfig{Codec: codec.PCMU})
			if err != nil {
				t.Fatal(err)
			}
			var pkt media.RTPPacket
			a.Drive(ph, func(at time.Duration) {
				now = at
				r.catchUp(at)
				ref.Step(monoEpoch.Add(at))
			}, func(i int, at time.Duration) {
				now = at
				r.Receive(&pkts[i], at)
				p := &pkts[i]
				pkt = media.RTPPacket{PayloadType: p.PayloadType, Marker: p.Marker, SequenceNumber: p.SequenceNumber,
					Timestamp: p.Timestamp, SSRC: p.SSRC, Payload: p.Payload, ReceivedAt: monoEpoch.Add(at)}
				ref.Push(&pkt)
			})
			st, want := r.play.Stats(), ref.Stats()
			r.Close()
			ref.Close()
			if st.Delivered != frames {
				t.Fatalf("%s: %d frames delivered, the chain says %d", a.Name, frames, st.Delivered)
			}
			if st.RTPReceiverStats != want.RTPReceiverStats || st.Delivered != want.Delivered {
				t.Errorf("%s, clock at %v: the receiver did\n%+v\nthe shared chain alone\n%+v", a.Name, ph, st, want)
			}
			sum.Add(st.Concealed, st.Played, st.Jitter.Late)
		}
		sum.Check(t, a.Name, mediatest.ArrivalBaselines[a.Name].WebRTC)
	}
}
