package codec

import (
	"fmt"
	"strings"
	"testing"
)

func ev(event uint8, end bool, dur uint16) []byte {
	b := make([]byte, 4)
	DTMFEvent{Event: event, End: end, Volume: 10, Duration: dur}.MarshalTo(b)
	return b
}

type dtmfPkt struct {
	ts      uint32
	payload []byte
}

// feed pushes packets and returns what was reported, as "digit/duration" words.
func feed(r *DTMFReceiver, pkts []dtmfPkt) string {
	var got []string
	for _, p := range pkts {
		if d, dur, ok := r.Push(p.ts, p.payload); ok {
			got = append(got, fmt.Sprintf("%c/%d", d, dur))
		}
	}
	return strings.Join(got, " ")
}

func TestDTMFReceiver(t *testing.T) {
	cases := []struct {
		name  string
		pkts  []dtmfPkt
		want  string
		flush string // reported by Flush afterwards
	}{
		{
			name: "digit with three end packets is reported once, at the first end",
			pkts: []dtmfPkt{
				{1000, ev(1, false, 160)}, {1000, ev(1, false, 320)}, {1000, ev(1, false, 480)},
				{1000, ev(1, true, 640)}, {1000, ev(1, true, 640)}, {1000, ev(1, true, 640)},
			},
			want: "1/640",
		},
		{
			name: "two digits",
			pkts: []dtmfPkt{
				{1000, ev(1, false, 160)}, {1000, ev(1, true, 320)}, {1000, ev(1, true, 320)}, {1000, ev(1, true, 320)},
				{2000, ev(11, false, 160)}, {2000, ev(11, true, 800)}, {2000, ev(11, true, 800)},
			},
			want: "1/320 #/800",
		},
		{
			name: "same digit twice is two events (different timestamps)",
			pkts: []dtmfPkt{
				{1000, ev(7, true, 800)}, {1000, ev(7, true, 800)},
				{3000, ev(7, true, 800)}, {3000, ev(7, true, 800)},
			},
			want: "7/800 7/800",
		},
		{
			name: "all end packets lost: reported when the next event starts",
			pkts: []dtmfPkt{
				{1000, ev(4, false, 160)}, {1000, ev(4, false, 320)},
				{2600, ev(5, false, 160)}, {2600, ev(5, true, 480)},
			},
			want: "4/320 5/480",
		},
		{
			name: "lost end and a one-packet next event: the second digit comes with the next push",
			pkts: []dtmfPkt{
				{1000, ev(4, false, 160)},
				{2600, ev(5, true, 480)},
				{2600, ev(5, true, 480)},
			},
			want: "4/160 5/480",
		},
		{
			name:  "all end packets lost, nothing follows: Flush reports it",
			pkts:  []dtmfPkt{{1000, ev(9, false, 160)}, {1000, ev(9, false, 320)}},
			want:  "",
			flush: "9/320",
		},
		{
			name: "late retransmission of an earlier event is not reported again",
			pkts: []dtmfPkt{
				{1000, ev(2, true, 320)},
				{2000, ev(3, false, 160)},
				{1000, ev(2, true, 320)},
				{2000, ev(3, true, 480)},
			},
			want: "2/320 3/480",
		},
		{
			name: "reordered start of an older event is ignored",
			pkts: []dtmfPkt{
				{2000, ev(3, false, 160)},
				{1000, ev(2, false, 160)},
				{2000, ev(3, true, 320)},
			},
			want: "3/320",
		},
		{
			name: "first packet lost, end packets arrive",
			pkts: []dtmfPkt{{1000, ev(0, true, 800)}, {1000, ev(0, true, 800)}},
			want: "0/800",
		},
		{
			name: "non-DTMF events and malformed payloads are ignored",
			pkts: []dtmfPkt{
				{500, ev(16, true, 160)}, {600, []byte{1, 2}},
				{1000, ev(12, true, 160)},
			},
			want: "A/160",
		},
		{
			name: "long event in two segments (RFC 4733 §2.5.1.3) is one digit",
			pkts: []dtmfPkt{
				{1000, ev(8, false, 0xFF00)}, {1000, ev(8, false, 0xFFFF)},
				{1000 + 0xFFFF, ev(8, false, 160)}, {1000 + 0xFFFF, ev(8, true, 800)},
			},
			want: "8/65535",
		},
		{
			name: "timestamp wrap-around",
			pkts: []dtmfPkt{
				{0xFFFFFF00, ev(6, true, 160)},
				{0x00000100, ev(6, false, 160)}, {0x00000100, ev(6, true, 320)},
			},
			want: "6/160 6/320",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r DTMFReceiver
			if got := feed(&r, tc.pkts); got != tc.want {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
			var flushed []string
			for {
				d, dur, ok := r.Flush()
				if !ok {
					break
				}
				flushed = append(flushed, fmt.Sprintf("%c/%d", d, dur))
			}
			if got := strings.Join(flushed, " "); got != tc.flush {
				t.Errorf("Flush reported %q, want %q", got, tc.flush)
			}
		})
	}
}

func TestDTMFReceiverReset(t *testing.T) {
	var r DTMFReceiver
	r.Push(1000, ev(1, true, 160))
	r.Reset()
	if _, _, ok := r.Push(1000, ev(1, true, 160)); !ok {
		t.Fatal("after Reset the same event should be new")
	}
}

func BenchmarkDTMFReceiverPush(b *testing.B) {
	var r DTMFReceiver
	p := ev(5, false, 160)
	ts := uint32(0)
	benchLoop(b, func() {
		r.Push(ts, p)
		ts += 1600
	})
}
