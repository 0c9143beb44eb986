package bench

import (
	"math"
	"time"
)

// Defaults of EnergyDetector.
const (
	DefaultThresholdDBFS = -40.0
	DefaultHangover      = 600 * time.Millisecond
	// energyBlock is the resolution of onsets and offsets.
	energyBlock = 5 * time.Millisecond
)

// LevelDBFS returns the RMS level of pcm in dB relative to full scale, where a full-scale square
// wave is 0 dB (a full-scale sine is -3 dB): the scale of the speech threshold of Parley's STT
// fakes (RMS 0.01 of full scale = -40 dB). Silence (or no samples) is -inf.
func LevelDBFS(pcm []int16) float64 {
	if len(pcm) == 0 {
		return math.Inf(-1)
	}
	var sum float64
	for _, v := range pcm {
		f := float64(v)
		sum += f * f
	}
	if sum == 0 {
		return math.Inf(-1)
	}
	return 10*math.Log10(sum/float64(len(pcm))) - 20*math.Log10(32768)
}

// EnergyEvent is what an EnergyDetector noticed in a block of audio.
type EnergyEvent uint8

// Events.
const (
	EnergyNone   EnergyEvent = iota
	EnergyOnset              // sound started (At is its first 5 ms block)
	EnergyOffset             // sound stopped Hangover ago (At is the end of its last block)
)

// EnergyDetector tells when sound starts and stops in a stream of audio blocks, by the level of
// each 5 ms piece. A piece at or above ThresholdDBFS is sound. The first such piece is an onset
// at once; silence lasting Hangover after the last piece of sound is an offset, timed at the end
// of that last piece. Pieces shorter than 5 ms (the tail of a block) are judged on their own.
//
// It is the caller's ear: it hears the agent by energy, so it needs no knowledge of what the
// agent says. It allocates nothing. Not safe for concurrent use.
type EnergyDetector struct {
	ThresholdDBFS float64
	Hangover      time.Duration

	active  bool
	lastEnd time.Time // end of the last piece of sound
}

// NewEnergyDetector returns a detector with the given threshold and hangover (zero values take
// the defaults).
func NewEnergyDetector(thresholdDBFS float64, hangover time.Duration) *EnergyDetector {
	if thresholdDBFS == 0 {
		thresholdDBFS = DefaultThresholdDBFS
	}
	if hangover <= 0 {
		hangover = DefaultHangover
	}
	return &EnergyDetector{ThresholdDBFS: thresholdDBFS, Hangover: hangover}
}

// Active reports whether sound is on (an onset was reported and no offset since).
func (d *EnergyDetector) Active() bool { return d.active }

// Reset forgets the state: the next sound is a new onset.
func (d *EnergyDetector) Reset() { d.active, d.lastEnd = false, time.Time{} }

// Push examines pcm (at rate Hz) whose first sample is heard at at, and returns the first event
// it finds with its time. A block may hold both the end of a sound and the start of another;
// only the first event is returned and the rest of the block is still examined, so the state
// stays right (the second event is lost, which the caller's turn-taking never needs).
func (d *EnergyDetector) Push(at time.Time, pcm []int16, rate int) (EnergyEvent, time.Time) {
	if rate <= 0 {
		return EnergyNone, time.Time{}
	}
	step := int(int64(rate) * int64(energyBlock) / int64(time.Second))
	if step < 1 {
		step = 1
	}
	ev, when := EnergyNone, time.Time{}
	for i := 0; i < len(pcm); i += step {
		j := min(i+step, len(pcm))
		start := at.Add(time.Duration(int64(i) * int64(time.Second) / int64(rate)))
		end := at.Add(time.Duration(int64(j) * int64(time.Second) / int64(rate)))
		if LevelDBFS(pcm[i:j]) >= d.ThresholdDBFS {
			if !d.active {
				d.active = true
				if ev == EnergyNone {
					ev, when = EnergyOnset, start
				}
			}
			d.lastEnd = end
			continue
		}
		if d.active && end.Sub(d.lastEnd) >= d.Hangover {
			d.active = false
			if ev == EnergyNone {
				ev, when = EnergyOffset, d.lastEnd
			}
		}
	}
	return ev, when
}

// Check reports an offset when sound is on and nothing loud has been pushed for Hangover
// before now: for a stream that stops arriving (the far end sends nothing during silence).
func (d *EnergyDetector) Check(now time.Time) (EnergyEvent, time.Time) {
	if d.active && now.Sub(d.lastEnd) >= d.Hangover {
		d.active = false
		return EnergyOffset, d.lastEnd
	}
	return EnergyNone, time.Time{}
}
