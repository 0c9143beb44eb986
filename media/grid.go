package media

import "time"

// GridDelay is how long from now to the next instant that is a whole multiple of period since
// the Unix epoch: the common phase of the process's periodic media work. Every 20 ms ticker of
// the media plane (the shared clock's shards, the WebRTC socket's batched reads) starts on this
// grid, so that at low load their work falls in one burst per period instead of one burst
// each: every burst wakes an idle core and the Go runtime's monitor thread, whatever few calls
// it serves. Zero when now is on the grid.
func GridDelay(now time.Time, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	off := time.Duration(now.UnixNano() % int64(period))
	if off == 0 {
		return 0
	}
	return period - off
}

// NewGridTicker returns a ticker of period whose ticks fall on the grid (GridDelay): it waits
// for the next grid instant, then starts a time.Ticker there (which keeps its phase). It blocks
// the caller up to one period; callers are goroutines that would wait for the first tick anyway.
func NewGridTicker(period time.Duration) *time.Ticker {
	if d := GridDelay(time.Now(), period); d > 0 {
		time.Sleep(d)
	}
	return time.NewTicker(period)
}
