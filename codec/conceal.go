package codec

// fadeConcealer is the simple packet-loss concealment used by the waveform codecs (G.711,
// G.722): it replays the last good frame with a gain that falls linearly to silence over
// fadeFrames lost frames, the "repeat and fade" approach. It keeps one frame of history in a
// buffer grown once to the frame size (320 bytes for G.711, not 120 ms at 16 kHz up front), so in
// steady state remembering and concealing never allocate.
type fadeConcealer struct {
	last     []int16 // grown to the largest frame seen (at most maxConcealFrame), not preallocated
	n        int     // samples in last
	lost     int     // consecutive frames concealed since the last good one
	defFrame int     // frame length used before any frame was decoded (20 ms)
}

const (
	// maxConcealFrame bounds the remembered frame: 120 ms at 16 kHz.
	maxConcealFrame = 1920
	// fadeFrames is how many consecutive lost frames it takes to fade to silence.
	fadeFrames = 3
)

func newFadeConcealer(sampleRate int) fadeConcealer {
	return fadeConcealer{defFrame: sampleRate / 50}
}

// remember records a frame that was decoded correctly.
func (c *fadeConcealer) remember(pcm []int16) {
	if len(pcm) > maxConcealFrame {
		pcm = pcm[len(pcm)-maxConcealFrame:]
	}
	if len(pcm) > cap(c.last) {
		c.last = make([]int16, len(pcm)) // once per frame size: 320 bytes for 20 ms of G.711
	}
	c.last = c.last[:cap(c.last)]
	c.n = copy(c.last, pcm)
	c.lost = 0
}

// conceal writes one replacement frame into dst.
func (c *fadeConcealer) conceal(dst []int16) (int, error) {
	n := c.n
	if n == 0 {
		n = c.defFrame
	}
	n = min(n, len(dst))
	if n == 0 {
		return 0, shortBuffer(len(dst), 1)
	}
	if c.n == 0 || c.lost >= fadeFrames {
		clear(dst[:n])
		c.lost++
		return n, nil
	}
	// The gain falls from (fadeFrames-lost)/fadeFrames to (fadeFrames-lost-1)/fadeFrames across
	// this frame, in 1/32768 steps.
	const one = 1 << 15
	start := int32(one * (fadeFrames - c.lost) / fadeFrames)
	end := int32(one * (fadeFrames - c.lost - 1) / fadeFrames)
	src := c.last[c.n-n : c.n]
	for i := range dst[:n] {
		g := start + (end-start)*int32(i)/int32(n)
		dst[i] = int16(int32(src[i]) * g >> 15)
	}
	c.lost++
	return n, nil
}
