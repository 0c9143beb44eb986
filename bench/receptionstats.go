package bench

import "time"

// receptionStats counts what an RTP receiver saw: packets, losses by extended sequence number
// (RFC 3550 §A.3) and the interarrival jitter estimate (RFC 3550 §6.4.1, A.8). It is for a
// receiver without an RTPEndpoint (the WebRTC caller); not safe for concurrent use.
type receptionStats struct {
	clock    float64 // RTP clock rate
	started  bool
	baseSeq  uint32
	maxSeq   uint32 // extended
	received uint64
	transit  float64 // seconds
	jitter   float64 // seconds
}

func newReceptionStats(clockRate int) *receptionStats {
	return &receptionStats{clock: float64(clockRate)}
}

// Push records a packet with sequence number seq and RTP timestamp ts that arrived at at.
func (r *receptionStats) Push(seq uint16, ts uint32, at time.Time) {
	if !r.started {
		r.started = true
		r.baseSeq, r.maxSeq = uint32(seq), uint32(seq)
	} else {
		// Extend seq to the cycle nearest the highest seen.
		cycle := r.maxSeq &^ 0xFFFF
		ext := cycle | uint32(seq)
		if d := int32(ext - r.maxSeq); d < -0x8000 {
			ext += 0x10000
		} else if d > 0x8000 && ext >= 0x10000 {
			ext -= 0x10000
		}
		if ext > r.maxSeq {
			r.maxSeq = ext
		}
	}
	r.received++
	// Relative transit time in seconds; its change between packets drives the estimate.
	transit := float64(at.UnixNano())/1e9 - float64(ts)/r.clock
	if r.received > 1 {
		d := transit - r.transit
		if d < 0 {
			d = -d
		}
		r.jitter += (d - r.jitter) / 16
	}
	r.transit = transit
}

// Received returns the packets seen.
func (r *receptionStats) Received() uint64 { return r.received }

// Lost returns the packets expected (by sequence number) but never seen; duplicates can make
// it negative, as in RFC 3550.
func (r *receptionStats) Lost() int64 {
	if !r.started {
		return 0
	}
	expected := int64(r.maxSeq-r.baseSeq) + 1
	return expected - int64(r.received)
}

// Jitter returns the current interarrival jitter.
func (r *receptionStats) Jitter() time.Duration {
	return time.Duration(r.jitter * float64(time.Second))
}
