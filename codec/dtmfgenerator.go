package codec

import "fmt"

// DTMFGenerator produces the RFC 4733 telephone-event packets that send a string of DTMF digits.
//
// Call Next once per 20 ms packet interval (DTMFPacketMs), on the same clock that paces the
// audio. Each call either returns a packet to send, or nothing (n == 0) for an interval in the
// gap between digits, during which the caller sends audio as usual; ok turns false when the
// digits are all sent. For each digit (RFC 4733 §2.5.1):
//
//   - the first packet has the marker bit set (§2.5.1.1);
//   - all packets of the digit carry the same RTP timestamp, the digit's start: the caller's
//     base timestamp (the RTP timestamp at the first Next call) plus tsOffset (§2.5.1.2);
//   - the duration grows by one packet interval per packet, from one interval up to the tone
//     length (§2.5.1.2);
//   - the last packet has the E bit and is sent three times, in three consecutive intervals
//     (§2.5.1.4); the two repeats fall in the following gap.
//
// Tone and gap lengths are rounded up to whole packet intervals; a gap is at least the two
// intervals of the repeated end packets. The generator allocates only in NewDTMFGenerator.
type DTMFGenerator struct {
	events    []uint8
	frame     uint32 // timestamp units per packet interval
	toneTicks int    // packets carrying the tone
	gapTicks  int    // intervals from the last tone packet to the next digit's first packet, >= 2
	volume    uint8

	idx   int    // digit being sent
	tick  int    // interval within the digit's cycle
	clock uint32 // intervals since the first Next call
	start uint32 // timestamp offset of the current digit
}

// DTMFPacketMs is the interval between telephone-event packets the generator assumes.
const DTMFPacketMs = 20

// DTMFDefaultVolume is the power level the generator announces, in -dBm0.
const DTMFDefaultVolume = 10

// NewDTMFGenerator returns a generator that sends digits (0–9, *, #, A–D) at the RTP clock rate
// of the negotiated telephone-event format, each toneMs long, separated by gapMs. Typical
// values are 100 ms and 100 ms. The tone must fit the 16-bit duration field (at most 1.36 s at
// a 48 kHz clock, 8.19 s at 8 kHz).
func NewDTMFGenerator(clockRate uint32, digits string, toneMs, gapMs int) (*DTMFGenerator, error) {
	if clockRate == 0 || clockRate%50 != 0 {
		return nil, fmt.Errorf("%w: telephone-event clock rate %d", ErrUnsupported, clockRate)
	}
	if toneMs <= 0 || gapMs < 0 {
		return nil, fmt.Errorf("%w: DTMF tone %d ms, gap %d ms", ErrUnsupported, toneMs, gapMs)
	}
	g := &DTMFGenerator{
		frame:     clockRate / 1000 * DTMFPacketMs,
		toneTicks: (toneMs + DTMFPacketMs - 1) / DTMFPacketMs,
		gapTicks:  max(2, (gapMs+DTMFPacketMs-1)/DTMFPacketMs),
		volume:    DTMFDefaultVolume,
	}
	if uint64(g.toneTicks)*uint64(g.frame) > 0xFFFF {
		return nil, fmt.Errorf("%w: DTMF tone of %d ms overflows the duration field at %d Hz", ErrUnsupported, toneMs, clockRate)
	}
	for _, d := range digits {
		e, ok := DigitToEvent(d)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not a DTMF digit", ErrUnsupported, d)
		}
		g.events = append(g.events, e)
	}
	if len(g.events) == 0 {
		return nil, fmt.Errorf("%w: no DTMF digits to send", ErrUnsupported)
	}
	return g, nil
}

// SetVolume sets the power level announced in the packets, 0–63 (-dBm0).
func (g *DTMFGenerator) SetVolume(v uint8) error {
	if v > 63 {
		return fmt.Errorf("%w: telephone-event volume %d > 63", ErrUnsupported, v)
	}
	g.volume = v
	return nil
}

// Next advances one packet interval. It writes a 4-byte payload into dst and returns its length
// n, whether the RTP marker bit is to be set, and the packet's RTP timestamp as an offset from
// the base timestamp; n == 0 means send nothing this interval. ok is false once all digits have
// been sent (and on a dst shorter than 4 bytes, which consumes nothing).
func (g *DTMFGenerator) Next(dst []byte) (n int, marker bool, tsOffset uint32, ok bool) {
	if g.idx >= len(g.events) || len(dst) < DTMFEventLen {
		return 0, false, 0, false
	}
	cycle := g.toneTicks + g.gapTicks
	if g.idx == len(g.events)-1 {
		cycle = g.toneTicks + 2 // no gap after the last digit's repeats
	}
	event, t := g.events[g.idx], g.tick
	if t == 0 {
		g.start = g.clock * g.frame
	}
	g.clock++
	if g.tick++; g.tick == cycle {
		g.idx++
		g.tick = 0
	}
	if t >= g.toneTicks+2 {
		return 0, false, 0, true // gap: send nothing
	}
	ev := DTMFEvent{
		Event:    event,
		Volume:   g.volume,
		End:      t >= g.toneTicks-1,
		Duration: uint16(uint32(min(t+1, g.toneTicks)) * g.frame),
	}
	n, _ = ev.MarshalTo(dst)
	return n, t == 0, g.start, true
}

// Done reports whether every digit has been sent.
func (g *DTMFGenerator) Done() bool { return g.idx >= len(g.events) }
