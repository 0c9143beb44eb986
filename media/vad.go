package media

import (
	"fmt"
	"math"
)

// VADOptions configures a VAD.
type VADOptions struct {
	// Rate is the sample rate of the frames, 8000 or 16000 Hz. Default PipelineRate.
	Rate int
	// Aggressiveness, 0 to 3, trades missed speech for false alarms like WebRTC's VAD modes:
	// 0 calls speech most readily (best for not clipping words), 3 is the strictest (best for
	// not mistaking noise for speech).
	Aggressiveness int
}

// Geometry of the analysis: a 32 ms Hann window (20 ms of new samples and 12 ms of the previous
// frame) through a real FFT, the spectrum summed into bands.
const (
	vadMaxFFT   = 512
	vadMaxBands = 16
	vadSubWin   = 8 // frames per minimum-statistics sub-window
	vadNumSub   = 8 // sub-windows: the noise floor is the minimum over the last 1.3-1.5 s

	// vadFloorDBFS is the absolute floor: a frame whose level (over the analysed bands, 100 Hz
	// up; a full-scale sine reads 0 dBFS) is lower is never speech, whatever the noise
	// estimate says, as WebRTC's VAD skips its likelihood test below a minimum energy
	// (kMinEnergy). -60 dBFS, the low end of the usual -55 to -60, sits 34 dB under the
	// nominal active speech level of telephony (about -26 dBFS, ITU-T P.56) and 20 dB under
	// a quiet talker at -40 dBFS, whose words TestVADQuietSpeech still finds, yet about 8 dB
	// over the idle-channel noise a PCM line may carry (ITU-T G.712 allows -65 dBm0p, about
	// -68 dBFS), so line hiss after digital silence is not speech
	// (TestVADFaintNoiseAfterDigitalSilence).
	vadFloorDBFS = -60
	// vadNoiseMinDBFS is the lowest noise estimate, as the per-bin power of white noise at
	// this level: 10 dB under the floor, so a frame that passes the floor is still measured
	// against a noise estimate below it.
	vadNoiseMinDBFS = -70
)

// Band edges in Hz. At 8 kHz the bands stop at 4 kHz.
var vadEdges = [...]float64{100, 250, 400, 550, 700, 900, 1150, 1450, 1800, 2250, 2800, 3450, 4000, 5000, 6200, 8000}

// vadLevel holds the tuning of one aggressiveness mode.
type vadLevel struct {
	threshold float32 // decision threshold on the smoothed score
	memory    float32 // weight of the previous smoothed score: accumulates weak evidence
	hangover  int     // frames of speech kept after the score falls (bridges word gaps)
}

// vadLevels were chosen on espeak-ng speech in white and pink noise at 10 and 20 dB SNR
// (TestVADAccuracy), against WebRTC's VAD (libfvad) on the same audio.
var vadLevels = [4]vadLevel{
	{threshold: 0.5, memory: 0.5, hangover: 4},
	{threshold: 0.5, memory: 0.3, hangover: 4},
	{threshold: 0.3, memory: 0.3, hangover: 2},
	{threshold: 0.5, memory: 0, hangover: 2},
}

// VAD is a voice-activity detector for 20 ms frames of 16-bit mono PCM at 8 or 16 kHz.
//
// For each frame it takes a windowed FFT, sums the power into about fifteen bands from 100 Hz
// up, and tracks each band's noise floor by minimum statistics (the minimum of the smoothed band
// power over the last 1.3 to 1.5 seconds, corrected for its bias, so it follows a rising noise
// within that time and a falling one at once). It then scores the frame with the statistical
// likelihood-ratio test of Sohn, Kim and Sung ("A statistical model-based voice activity
// detector", IEEE Signal Processing Letters 6(1), 1999): the mean over bands of the log
// likelihood ratio of speech-plus-noise to noise, with the a priori SNR estimated by the
// decision-directed method of Ephraim and Malah. The decision smooths the score over time (so
// weak but sustained speech adds up), compares it with a threshold set by the aggressiveness,
// and holds speech for a short hangover after it falls.
//
// Two guards keep faint input from being called speech. A frame below an absolute level
// (-60 dBFS) is never speech and ends any hangover. The noise estimate never falls below that
// of white noise at -70 dBFS, so digital silence (a muted microphone, the padding of a
// recording) cannot drive it to zero and make the faint noise after it look like speech.
//
// A VAD holds its state between frames and is not safe for concurrent use; Process allocates
// nothing.
type VAD struct {
	rate   int
	frameN int // samples per frame
	fftN   int // FFT length
	level  vadLevel
	aggr   int

	// Analysis.
	hist [vadMaxFFT]float32 // the last fftN samples, in sample units
	fft  vadFFT

	nBands     int
	bandLo     [vadMaxBands]int // first bin
	bandHi     [vadMaxBands]int // one past the last bin
	bandNorm   [vadMaxBands]float32
	bandBias   [vadMaxBands]float32
	floorPower float32 // summed band power of a frame at vadFloorDBFS
	noiseMin   float32 // per-bin power of white noise at vadNoiseMinDBFS

	// Per-band state.
	smooth  [vadMaxBands]float32
	curMin  [vadMaxBands]float32
	subMins [vadNumSub][vadMaxBands]float32
	pastMin [vadMaxBands]float32 // the minimum over subMins
	noise   [vadMaxBands]float32
	prevXi  [vadMaxBands]float32 // decision-directed: G²γ of the previous frame
	frames  int
	subPos  int
	subIdx  int

	total    float32 // the last frame's power summed over the bands
	score    float32
	smoothed float32
	hang     int
	speech   bool
}

// NewVAD returns a detector for 20 ms frames at o.Rate.
func NewVAD(o VADOptions) (*VAD, error) {
	if o.Rate == 0 {
		o.Rate = PipelineRate
	}
	v := &VAD{rate: o.Rate}
	switch o.Rate {
	case 8000:
		v.fftN = 256
	case 16000:
		v.fftN = 512
	default:
		return nil, fmt.Errorf("media: VAD supports 8000 and 16000 Hz, not %d", o.Rate)
	}
	if err := v.SetAggressiveness(o.Aggressiveness); err != nil {
		return nil, err
	}
	v.frameN = SamplesPerFrame(o.Rate)
	v.fft.init(v.fftN)   // also the shared analysis window, v.fft.window
	var winPower float64 // Σ w²
	for i := range v.fftN {
		w := 0.5 - 0.5*math.Cos(2*math.Pi*(float64(i)+0.5)/float64(v.fftN))
		winPower += w * w
	}
	// Levels in dBFS (a full-scale sine reads 0 dBFS, so the mean square of x/32768 is
	// ½·10^(L/10)). A mean square q gives E|X[k]|² = q·Σw² per bin, and by Parseval the bins
	// up to n/2 sum to n·q·Σw²/2.
	dbfs := func(l float64) float64 { return 0.5 * math.Pow(10, l/10) }
	v.floorPower = float32(dbfs(vadFloorDBFS) * winPower * float64(v.fftN) / 2)
	v.noiseMin = float32(dbfs(vadNoiseMinDBFS) * winPower)
	binHz := float64(o.Rate) / float64(v.fftN)
	nyq := float64(o.Rate) / 2
	for b := 0; b+1 < len(vadEdges) && vadEdges[b+1] <= nyq; b++ {
		lo := int(math.Round(vadEdges[b] / binHz))
		hi := int(math.Round(vadEdges[b+1] / binHz))
		if hi > v.fftN/2 {
			hi = v.fftN / 2
		}
		v.bandLo[b], v.bandHi[b] = lo, hi
		// The minimum of a smoothed power estimate sits below its mean by a factor that
		// shrinks as the band averages more bins (more degrees of freedom); calibrated on
		// white and pink noise.
		bins := float64(hi - lo)
		v.bandNorm[b] = float32(1 / bins)
		v.bandBias[b] = float32(1 + 1.5/math.Sqrt(bins))
		v.nBands = b + 1
	}
	v.Reset()
	return v, nil
}

// SetAggressiveness sets the mode, 0 (most readily speech) to 3 (strictest).
func (v *VAD) SetAggressiveness(a int) error {
	if a < 0 || a > 3 {
		return fmt.Errorf("media: VAD aggressiveness %d is not 0 to 3", a)
	}
	v.aggr = a
	v.level = vadLevels[a]
	return nil
}

// Aggressiveness returns the mode.
func (v *VAD) Aggressiveness() int { return v.aggr }

// Rate returns the sample rate the detector expects.
func (v *VAD) Rate() int { return v.rate }

// Reset forgets the noise estimate and the decision history (use it when the audio source
// changes).
func (v *VAD) Reset() {
	clear(v.hist[:])
	for b := range v.nBands {
		v.smooth[b] = 0
		v.curMin[b] = math.MaxFloat32
		for s := range v.subMins {
			v.subMins[s][b] = math.MaxFloat32
		}
		v.pastMin[b] = math.MaxFloat32
		v.noise[b] = 0
		v.prevXi[b] = 0
	}
	v.frames, v.subPos, v.subIdx = 0, 0, 0
	v.score, v.smoothed, v.hang, v.speech = 0, 0, 0, false
}

// Score returns the mean log-likelihood ratio of the last frame (0 for noise, growing with
// the frame's SNR), for callers that want their own thresholds.
func (v *VAD) Score() float64 { return float64(v.score) }

// ProcessFrame classifies one Frame; it must be at the detector's rate.
func (v *VAD) ProcessFrame(f *Frame) (bool, error) {
	if f.Rate != v.rate {
		return false, fmt.Errorf("media: VAD at %d Hz got a frame at %d Hz", v.rate, f.Rate)
	}
	return v.Process(f.PCM())
}

// Process classifies one 20 ms frame (160 samples at 8 kHz, 320 at 16 kHz) and reports
// whether it is speech.
func (v *VAD) Process(pcm []int16) (bool, error) {
	if len(pcm) != v.frameN {
		return false, fmt.Errorf("media: VAD at %d Hz needs %d samples, got %d", v.rate, v.frameN, len(pcm))
	}
	n, keep := v.fftN, v.fftN-v.frameN
	copy(v.hist[:keep], v.hist[v.frameN:n])
	for i, s := range pcm {
		v.hist[keep+i] = float32(s)
	}
	power := v.fft.realPower(v.hist[:n], v.fft.window[:n])

	// Band powers, normalised per bin so bands of different widths compare, and the level of
	// the frame over all bands.
	var bands [vadMaxBands]float32
	var total float32
	for b := range v.nBands {
		var s float32
		for _, p := range power[v.bandLo[b]:v.bandHi[b]] {
			s += p
		}
		total += s
		bands[b] = s * v.bandNorm[b]
	}

	v.total = total
	v.trackNoise(&bands)
	v.score = v.likelihood(&bands)
	if total < v.floorPower {
		// Below the absolute floor: never speech, and no evidence carried into the next
		// frame (not even hangover: a muted source ends speech at once).
		v.smoothed, v.hang, v.speech = 0, 0, false
	} else {
		v.decide()
	}
	v.frames++
	return v.speech, nil
}

// trackNoise updates the minimum statistics and the noise estimate of every band. The estimate
// never falls below the power of white noise at vadNoiseMinDBFS: digital silence (a muted
// microphone, the padding of a recording) would otherwise drive it to zero, and then any faint
// noise after it would look like speech for as long as the silence stays in the window.
func (v *VAD) trackNoise(bands *[vadMaxBands]float32) {
	const alpha = 0.7 // smoothing of the band power before taking minima
	n := v.nBands
	smooth, curMin, noise := v.smooth[:n], v.curMin[:n], v.noise[:n]
	pastMin, bias := v.pastMin[:n], v.bandBias[:n]
	first := v.frames == 0
	for b := range smooth {
		if first {
			smooth[b] = bands[b]
		} else {
			smooth[b] = alpha*smooth[b] + (1-alpha)*bands[b]
		}
		curMin[b] = min(curMin[b], smooth[b])
	}
	v.subPos++
	if v.subPos == vadSubWin {
		v.subMins[v.subIdx] = v.curMin
		v.subIdx = (v.subIdx + 1) % vadNumSub
		v.subPos = 0
		for b := range pastMin {
			m := float32(math.MaxFloat32)
			for s := range v.subMins {
				m = min(m, v.subMins[s][b])
			}
			pastMin[b] = m
			curMin[b] = math.MaxFloat32
		}
	}
	for b := range noise {
		m := min(curMin[b], pastMin[b])
		if m == math.MaxFloat32 {
			m = smooth[b]
		}
		noise[b] = max(m*bias[b], v.noiseMin)
	}
}

// likelihood returns the mean over bands of the log likelihood ratio (Sohn et al. 1999, eq. 3)
// with the decision-directed a priori SNR.
func (v *VAD) likelihood(bands *[vadMaxBands]float32) float32 {
	const dd = 0.6 // weight of the previous frame in the a priori SNR
	n := v.nBands
	noise, prevXi := v.noise[:n], v.prevXi[:n]
	var sum float32
	prod := 1.0 // of 1+ξ, each at most about 1e4: the sum of their logs is one log
	for b := range noise {
		gamma := bands[b] / noise[b]
		gamma = min(gamma, 1e4)
		ml := max(gamma-1, 0)
		xi := dd*prevXi[b] + (1-dd)*ml
		xi = max(xi, 0.003) // -25 dB floor keeps the ratio defined
		g := xi / (1 + xi)
		prevXi[b] = g * g * gamma
		sum += gamma * g
		prod *= 1 + float64(xi)
	}
	return (sum - float32(math.Log(prod))) / float32(n)
}

// decide turns the score into a decision: the score is smoothed over time (so weak but
// sustained speech adds up), compared with the threshold, and speech is held for a short
// hangover after it falls.
func (v *VAD) decide() {
	l := v.level
	v.smoothed = v.score + l.memory*v.smoothed
	if v.smoothed >= l.threshold {
		v.speech = true
		v.hang = l.hangover
		return
	}
	if v.hang > 0 {
		v.hang--
		v.speech = true
		return
	}
	v.speech = false
}
