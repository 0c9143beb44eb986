package sip_test

import (
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

type countingObserver struct {
	mu       sync.Mutex
	started  int
	ended    []session.EndReason
	stats    []sip.CallStats
	sent     map[int]int
	received map[int]int
}

func (o *countingObserver) CallStarted(sip.CallDirection) { o.mu.Lock(); o.started++; o.mu.Unlock() }
func (o *countingObserver) CallEnded(_ sip.CallDirection, r session.EndReason, st sip.CallStats) {
	o.mu.Lock()
	o.ended, o.stats = append(o.ended, r), append(o.stats, st)
	o.mu.Unlock()
}
func (o *countingObserver) Response(sent bool, status int) {
	o.mu.Lock()
	if sent {
		o.sent[status]++
	} else {
		o.received[status]++
	}
	o.mu.Unlock()
}

// TestObserverCounts: issue 22 item 11: an inbound call is counted started and ended once,
// with its reason and RTP statistics, and the responses Parley sent are counted by code.
func TestObserverCounts(t *testing.T) {
	o := &countingObserver{sent: map[int]int{}, received: map[int]int{}}
	s := setupCall(t, sip.Options{Observer: o}, siptest.PhoneOptions{}, siptest.CallOptions{}, engineOptions{})
	ctx := ctxTimeout(t, 10*time.Second)
	waitFor(t, 5*time.Second, "RTP", func() bool { return s.call.RTPReceived() > 10 })
	if err := s.call.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	<-s.pcall.Done()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started != 1 || len(o.ended) != 1 || o.ended[0] != session.EndCallerHungUp || o.stats[0].PacketsSent == 0 {
		t.Errorf("started %d, ended %v, stats %+v", o.started, o.ended, o.stats)
	}
	for _, code := range []int{100, 180, 200} {
		if o.sent[code] == 0 {
			t.Errorf("no %d counted as sent: %v", code, o.sent)
		}
	}
}
