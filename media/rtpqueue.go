package media

import (
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
)

// rtpQueue is the bounded single-producer/single-consumer ring between the endpoint's read loop
// (producer) and its owner (consumer). The read loop never waits: when the ring is full the packet
// is dropped and counted. Every slot owns a MaxRTPPayload buffer allocated up front, so pushing
// and popping allocate nothing.
type rtpQueue struct {
	slots   []RTPPacket
	head    atomic.Uint64 // next slot to pop; written by the consumer only
	tail    atomic.Uint64 // next slot to push; written by the producer only
	dropped atomic.Uint64
	ready   chan struct{} // holds one token when a push may have made data available
}

func newRTPQueue(size int) *rtpQueue {
	q := &rtpQueue{slots: make([]RTPPacket, size), ready: make(chan struct{}, 1)}
	backing := make([]byte, size*MaxRTPPayload)
	for i := range q.slots {
		q.slots[i].Payload = backing[i*MaxRTPPayload : i*MaxRTPPayload : (i+1)*MaxRTPPayload]
	}
	return q
}

// push copies p into the next slot. It reports false (and counts a drop) when the ring is full.
func (q *rtpQueue) push(p *rtp.Packet, at time.Time) bool {
	t := q.tail.Load()
	if t-q.head.Load() >= uint64(len(q.slots)) {
		q.dropped.Add(1)
		return false
	}
	s := &q.slots[t%uint64(len(q.slots))]
	s.PayloadType = p.PayloadType
	s.Marker = p.Marker
	s.SequenceNumber = p.SequenceNumber
	s.Timestamp = p.Timestamp
	s.SSRC = p.SSRC
	s.ComfortNoise = p.PayloadType == PayloadTypeCN
	s.Payload = append(s.Payload[:0], p.Payload...)
	s.ReceivedAt = at
	q.tail.Store(t + 1)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop copies the oldest packet into dst. It reports false when the ring is empty.
func (q *rtpQueue) pop(dst *RTPPacket) bool {
	h := q.head.Load()
	if h == q.tail.Load() {
		return false
	}
	dst.CopyFrom(&q.slots[h%uint64(len(q.slots))])
	q.head.Store(h + 1)
	return true
}

// len returns the number of queued packets.
func (q *rtpQueue) len() int { return int(q.tail.Load() - q.head.Load()) }
