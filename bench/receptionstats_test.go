package bench

import (
	"testing"
	"time"
)

func TestReceptionStats(t *testing.T) {
	t0 := time.Unix(100, 0)
	cases := []struct {
		name       string
		seqs       []uint16
		jitterMs   []int // arrival offset of each packet from its slot, ms
		lost       int64
		minJ, maxJ time.Duration
	}{
		{name: "clean", seqs: []uint16{10, 11, 12, 13, 14}, jitterMs: []int{0, 0, 0, 0, 0}, lost: 0, maxJ: time.Microsecond},
		{name: "two lost", seqs: []uint16{10, 11, 14, 15}, jitterMs: []int{0, 0, 0, 0}, lost: 2, maxJ: time.Microsecond},
		{name: "wraps", seqs: []uint16{65534, 65535, 0, 2}, jitterMs: []int{0, 0, 0, 0}, lost: 1, maxJ: time.Microsecond},
		{name: "reordered", seqs: []uint16{5, 7, 6, 8}, jitterMs: []int{0, 0, 0, 0}, lost: 0, maxJ: 50 * time.Millisecond},
		{name: "jittery", seqs: []uint16{1, 2, 3, 4, 5, 6, 7, 8}, jitterMs: []int{0, 10, 0, 10, 0, 10, 0, 10}, lost: 0, minJ: 2 * time.Millisecond, maxJ: 10 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReceptionStats(8000)
			for i, s := range c.seqs {
				slot := int(s-c.seqs[0]) % 65536
				ts := uint32(1000 + slot*160)
				at := t0.Add(time.Duration(slot)*20*time.Millisecond + time.Duration(c.jitterMs[i])*time.Millisecond)
				r.Push(s, ts, at)
			}
			if r.Received() != uint64(len(c.seqs)) || r.Lost() != c.lost {
				t.Errorf("received %d lost %d, want lost %d", r.Received(), r.Lost(), c.lost)
			}
			if j := r.Jitter(); j < c.minJ || j > c.maxJ {
				t.Errorf("jitter %v, want %v–%v", j, c.minJ, c.maxJ)
			}
		})
	}
	if newReceptionStats(8000).Lost() != 0 {
		t.Error("lost before any packet")
	}
}
