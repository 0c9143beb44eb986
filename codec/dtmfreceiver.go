package codec

// DTMFReceiver turns a stream of RFC 4733 telephone-event packets into DTMF digits, reporting
// each digit once however many packets carry it.
//
// All packets of one event carry the event's start as their RTP timestamp (RFC 4733 §2.5.1.2),
// and the last is sent three times with the E bit (§2.5.1.4). The receiver reports a digit at
// its first end packet and ignores the other packets with that timestamp. If every end packet
// of an event is lost, the digit is reported when the next event begins (a new timestamp), or
// by Flush (call it when the stream stops, or a few hundred milliseconds after the last
// packet). An event longer than 0xFFFF timestamp units continues as a new segment with a later
// timestamp (§2.5.1.3); it is recognised and reported once. Events other than the sixteen DTMF
// keys (e.g. flash, 16) are ignored. The zero value is ready to use; it never allocates.
type DTMFReceiver struct {
	have     bool   // a current event exists
	reported bool   // the current event was reported
	ts       uint32 // RTP timestamp of the current event (of its latest segment)
	event    uint8
	segBase  uint32 // duration of the event's earlier segments
	segDur   uint16 // duration so far of the latest segment

	recent  [8]uint32 // timestamps of recently reported events, for de-duplication
	nrecent int

	queue [4]dtmfDigit // digits ready to report, oldest first
	qhead int
	qlen  int
}

type dtmfDigit struct {
	digit rune
	dur   uint16
}

// Push feeds one telephone-event packet with its RTP timestamp. It reports a digit (with its
// duration in timestamp units, saturated at 0xFFFF) when one is complete. A packet can complete
// two digits (the previous, whose end was lost, and itself); the second is reported by the next
// Push or Flush. Malformed payloads are ignored.
func (r *DTMFReceiver) Push(rtpTimestamp uint32, payload []byte) (digit rune, dur uint16, ok bool) {
	r.push(rtpTimestamp, payload)
	return r.pop()
}

func (r *DTMFReceiver) push(ts uint32, payload []byte) {
	ev, err := ParseDTMFEvent(payload)
	if err != nil {
		return
	}
	if _, isDigit := EventToDigit(ev.Event); !isDigit {
		return
	}
	if r.have && ts == r.ts {
		if r.reported || ev.Event != r.event {
			return // retransmitted end packet, or a stray
		}
		r.segDur = max(r.segDur, ev.Duration)
		if ev.End {
			r.report()
		}
		return
	}
	if r.wasReported(ts) {
		return // a late copy of an event already reported
	}
	if r.have && int32(ts-r.ts) < 0 {
		return // older than the current event: reordered beyond use
	}
	if r.have && !r.reported && ev.Event == r.event && r.segDur >= 0xFF00 && ts-r.ts == uint32(r.segDur) {
		// A long event's next segment (RFC 4733 §2.5.1.3).
		r.segBase += uint32(r.segDur)
		r.ts, r.segDur = ts, ev.Duration
		if ev.End {
			r.report()
		}
		return
	}
	if r.have && !r.reported {
		r.report() // every end packet of the previous event was lost
	}
	r.have, r.reported = true, false
	r.ts, r.event, r.segBase, r.segDur = ts, ev.Event, 0, ev.Duration
	if ev.End {
		r.report()
	}
}

// Flush reports a digit still waiting: one queued by Push, or the current event when its end
// packets never came.
func (r *DTMFReceiver) Flush() (digit rune, dur uint16, ok bool) {
	if r.qlen == 0 && r.have && !r.reported {
		r.report()
	}
	return r.pop()
}

// Reset forgets all events.
func (r *DTMFReceiver) Reset() { *r = DTMFReceiver{} }

func (r *DTMFReceiver) report() {
	r.reported = true
	r.recent[r.nrecent%len(r.recent)] = r.ts
	r.nrecent++
	d, _ := EventToDigit(r.event)
	if r.qlen == len(r.queue) { // cannot happen with the one-in, one-out pattern; keep newest
		r.qhead = (r.qhead + 1) % len(r.queue)
		r.qlen--
	}
	r.queue[(r.qhead+r.qlen)%len(r.queue)] = dtmfDigit{digit: d, dur: uint16(min(r.segBase+uint32(r.segDur), 0xFFFF))}
	r.qlen++
}

func (r *DTMFReceiver) pop() (rune, uint16, bool) {
	if r.qlen == 0 {
		return 0, 0, false
	}
	d := r.queue[r.qhead]
	r.qhead = (r.qhead + 1) % len(r.queue)
	r.qlen--
	return d.digit, d.dur, true
}

func (r *DTMFReceiver) wasReported(ts uint32) bool {
	for i := 0; i < min(r.nrecent, len(r.recent)); i++ {
		if r.recent[i] == ts {
			return true
		}
	}
	return false
}
