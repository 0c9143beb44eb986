package media

import (
	"runtime"
	"testing"
	"time"

	"github.com/pion/rtp"
)

func TestRTPQueueOrderAndDrop(t *testing.T) {
	q := newRTPQueue(4)
	at := time.Unix(10, 0)
	var p rtp.Packet
	for i := range 6 {
		p.Header = rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: uint16(i), Timestamp: uint32(160 * i), SSRC: 9}
		if i == 2 {
			p.PayloadType = PayloadTypeCN
		}
		p.Payload = []byte{byte(i), byte(i)}
		ok := q.push(&p, at)
		if ok != (i < 4) {
			t.Fatalf("push %d = %v, want %v", i, ok, i < 4)
		}
	}
	if q.len() != 4 || q.dropped.Load() != 2 {
		t.Fatalf("len %d dropped %d, want 4 and 2", q.len(), q.dropped.Load())
	}
	var got RTPPacket
	for i := range 4 {
		if !q.pop(&got) {
			t.Fatalf("pop %d: empty", i)
		}
		if got.SequenceNumber != uint16(i) || got.Timestamp != uint32(160*i) || got.SSRC != 9 ||
			len(got.Payload) != 2 || got.Payload[0] != byte(i) || !got.ReceivedAt.Equal(at) {
			t.Fatalf("pop %d = %+v", i, got)
		}
		if got.ComfortNoise != (i == 2) {
			t.Fatalf("pop %d ComfortNoise = %v", i, got.ComfortNoise)
		}
	}
	if q.pop(&got) {
		t.Fatal("pop from empty queue succeeded")
	}
	// The ring keeps working after wrapping around.
	p.Header.SequenceNumber = 100
	if !q.push(&p, at) || !q.pop(&got) || got.SequenceNumber != 100 {
		t.Fatalf("push/pop after wrap = %+v", got)
	}
}

func TestRTPQueueNoAllocs(t *testing.T) {
	q := newRTPQueue(8)
	p := rtp.Packet{Header: rtp.Header{Version: 2}, Payload: make([]byte, 160)}
	var dst RTPPacket
	at := time.Now()
	q.push(&p, at)
	q.pop(&dst) // grows dst.Payload once
	allocs := testing.AllocsPerRun(1000, func() {
		q.push(&p, at)
		q.pop(&dst)
	})
	if allocs != 0 {
		t.Fatalf("push+pop allocates %v times, want 0", allocs)
	}
}

func TestRTPQueueConcurrent(t *testing.T) {
	q := newRTPQueue(8)
	const n = 5000
	done := make(chan struct{})
	go func() {
		defer close(done)
		var p rtp.Packet
		p.Payload = make([]byte, 4)
		for i := range n {
			p.SequenceNumber = uint16(i)
			p.Payload[0] = byte(i)
			for !q.push(&p, time.Time{}) {
				q.dropped.Add(^uint64(0)) // undo the drop count: this test retries instead
				runtime.Gosched()
			}
		}
	}()
	var got RTPPacket
	for i := 0; i < n; {
		if !q.pop(&got) {
			select {
			case <-q.ready:
			case <-done:
			}
			continue
		}
		if got.SequenceNumber != uint16(i) || got.Payload[0] != byte(i) {
			t.Fatalf("packet %d arrived as seq %d payload %d", i, got.SequenceNumber, got.Payload[0])
		}
		i++
	}
	<-done
}
