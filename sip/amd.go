package sip

import (
	"math"
	"time"

	"github.com/parley-voice/parley/media"
)

// AMDClass is what answered an outbound call.
type AMDClass string

// AMD classes.
const (
	AMDHuman   AMDClass = "human"
	AMDMachine AMDClass = "machine"
	AMDUnknown AMDClass = "unknown"
)

// AMDAction is what to do when a machine answered.
type AMDAction string

// AMD actions.
const (
	// AMDHangup ends the call (end reason voicemail).
	AMDHangup AMDAction = "hangup"
	// AMDLeaveMessage waits for the beep (or the end of the greeting) and then starts the
	// conversation, which speaks Message (or its first message) and ends.
	AMDLeaveMessage AMDAction = "leave_message"
	// AMDContinue starts the conversation as for a human.
	AMDContinue AMDAction = "continue"
)

// AMDOptions configure answering-machine detection on an outbound call. The zero tuning values
// take the defaults, which are those of Asterisk's AMD application.
type AMDOptions struct {
	Enabled   bool
	OnMachine AMDAction // default AMDHangup
	// Message is said after the beep when OnMachine is AMDLeaveMessage; the conversation ends
	// once it is spoken. Empty lets the conversation run as configured.
	Message string

	InitialSilence       time.Duration // no speech this long after the answer: machine (2.5 s)
	GreetingLength       time.Duration // a greeting longer than this: machine (1.5 s)
	AfterGreetingSilence time.Duration // silence after a short greeting: human (800 ms)
	TotalAnalysis        time.Duration // undecided after this: unknown (5 s)
	MaxWords             int           // this many words: machine (3)
	MinWordLength        time.Duration // shorter voiced runs are not words (100 ms)
	// BeepWait bounds the wait for the beep when leaving a message (20 s); EndOfGreeting is
	// the silence after the greeting that starts the message when no beep comes (2 s).
	BeepWait      time.Duration
	EndOfGreeting time.Duration
}

func (o AMDOptions) withDefaults() AMDOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.InitialSilence, 2500*time.Millisecond)
	def(&o.GreetingLength, 1500*time.Millisecond)
	def(&o.AfterGreetingSilence, 800*time.Millisecond)
	def(&o.TotalAnalysis, 5*time.Second)
	def(&o.MinWordLength, 100*time.Millisecond)
	def(&o.BeepWait, 20*time.Second)
	def(&o.EndOfGreeting, 2*time.Second)
	if o.MaxWords <= 0 {
		o.MaxWords = 3
	}
	if o.OnMachine == "" {
		o.OnMachine = AMDHangup
	}
	return o
}

// AMDResult is the outcome of answering-machine detection.
type AMDResult struct {
	Class AMDClass
	// Reason says which rule decided: "initial_silence", "long_greeting", "max_words", "beep",
	// "after_greeting_silence" or "timeout".
	Reason string
	// Beep is set when a beep was heard (during detection or while waiting to leave a
	// message), BeepHz its frequency.
	Beep   bool
	BeepHz float64
	// Greeting is how long the greeting has lasted so far; Words counts its words; Elapsed is
	// the audio analysed.
	Greeting time.Duration
	Words    int
	Elapsed  time.Duration
}

// Beep detection: a tone at one of the usual voicemail beep frequencies (1 kHz, 1.4 kHz,
// 2 kHz, each ±50 Hz) holding most of the frame's power for beepFrames frames in a row.
var beepFreqs = [...]float64{950, 1000, 1050, 1350, 1400, 1450, 1950, 2000, 2050}

const (
	beepFrames   = 4    // 80 ms
	beepFraction = 0.55 // share of the frame's power in the tone
	beepMinDBFS  = -40  // quieter than this is not a beep
)

// AMD classifies the start of an answered call as a human or an answering machine from its
// audio, frame by frame, with the rules of Asterisk's AMD: the silence before the first word,
// the greeting's length, how many words it has, the silence after it; and a beep detector
// (Goertzel filters at 1, 1.4 and 2 kHz) that marks a machine at once. Once decided it keeps
// listening for the beep when asked (WaitingBeep). Feed it 20 ms frames at 16 kHz; it allocates
// nothing per frame and is not safe for concurrent use.
type AMD struct {
	o   AMDOptions
	vad *media.VAD
	res AMDResult

	decided   bool
	heard     bool // speech was heard
	inWord    bool
	wordRun   time.Duration
	silence   time.Duration // current silence
	firstWord time.Duration // elapsed at the first speech
	beepRun   int
	beepHz    float64

	win   []float64 // Hann window for one frame
	coeff [len(beepFreqs)]float64
	cosw  [len(beepFreqs)]float64
	sinw  [len(beepFreqs)]float64
	wsum  float64
}

// NewAMD returns a detector for o.
func NewAMD(o AMDOptions) (*AMD, error) {
	vad, err := media.NewVAD(media.VADOptions{Rate: media.PipelineRate, Aggressiveness: 2})
	if err != nil {
		return nil, err
	}
	n := media.SamplesPerFrame(media.PipelineRate)
	a := &AMD{o: o.withDefaults(), vad: vad, win: make([]float64, n)}
	for i := range a.win {
		a.win[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n-1))
		a.wsum += a.win[i]
	}
	for i, f := range beepFreqs {
		w := 2 * math.Pi * f / media.PipelineRate
		a.coeff[i], a.cosw[i], a.sinw[i] = 2*math.Cos(w), math.Cos(w), math.Sin(w)
	}
	return a, nil
}

// Process analyses one frame and reports whether the classification is decided (it stays
// decided; Result holds it).
func (a *AMD) Process(f *media.Frame) bool {
	pcm := f.PCM()
	step := f.Duration()
	if f.Rate != media.PipelineRate || len(pcm) != len(a.win) {
		return a.decided
	}
	a.res.Elapsed += step
	if hz, ok := a.beep(pcm); ok {
		a.beepRun++
		a.beepHz = hz
		if a.beepRun >= beepFrames && !a.res.Beep {
			a.res.Beep, a.res.BeepHz = true, hz
			a.decide(AMDMachine, "beep")
		}
	} else {
		a.beepRun = 0
	}
	voiced, err := a.vad.Process(pcm)
	if err != nil {
		voiced = false
	}
	if a.beepRun > 0 {
		voiced = false // a tone is not a word
	}
	if voiced {
		if !a.heard {
			a.heard = true
			a.firstWord = a.res.Elapsed - step
		}
		a.silence = 0
		a.wordRun += step
		a.inWord = true
	} else {
		if a.inWord && a.wordRun >= a.o.MinWordLength {
			a.res.Words++
		}
		a.inWord = false
		a.wordRun = 0
		a.silence += step
	}
	if a.heard {
		a.res.Greeting = a.res.Elapsed - a.firstWord - a.silence
	}
	if a.decided {
		return true
	}
	switch {
	case !a.heard && a.silence >= a.o.InitialSilence:
		a.decide(AMDMachine, "initial_silence")
	case a.heard && a.res.Greeting >= a.o.GreetingLength:
		a.decide(AMDMachine, "long_greeting")
	case a.res.Words+boolInt(a.inWord && a.wordRun >= a.o.MinWordLength) >= a.o.MaxWords:
		a.decide(AMDMachine, "max_words")
	case a.heard && !a.inWord && a.silence >= a.o.AfterGreetingSilence:
		a.decide(AMDHuman, "after_greeting_silence")
	case a.res.Elapsed >= a.o.TotalAnalysis:
		a.decide(AMDUnknown, "timeout")
	}
	return a.decided
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a *AMD) decide(c AMDClass, why string) {
	if a.decided {
		return
	}
	a.decided = true
	a.res.Class, a.res.Reason = c, why
}

// Result returns the classification (Class is empty until decided).
func (a *AMD) Result() AMDResult { return a.res }

// ReadyForMessage reports, while waiting to leave a message, whether to speak now: the beep was
// heard and has ended, or the greeting was followed by EndOfGreeting of silence, or BeepWait
// passed since the call was answered.
func (a *AMD) ReadyForMessage() bool {
	switch {
	case a.res.Beep && a.beepRun == 0:
		return true
	case a.heard && !a.inWord && a.silence >= a.o.EndOfGreeting && a.beepRun == 0:
		return true
	case a.res.Elapsed >= a.o.BeepWait:
		return true
	}
	return false
}

// beep reports whether the frame is a beep tone and at which frequency.
func (a *AMD) beep(pcm []int16) (float64, bool) {
	var energy float64
	for _, v := range pcm {
		x := float64(v)
		energy += x * x
	}
	meanSq := energy / float64(len(pcm))
	if meanSq <= 0 || 10*math.Log10(meanSq/(32767*32767)) < beepMinDBFS {
		return 0, false
	}
	best, bestFrac := 0.0, 0.0
	for i := range beepFreqs {
		var s1, s2 float64
		c := a.coeff[i]
		for j, v := range pcm {
			s0 := float64(v)*a.win[j] + c*s1 - s2
			s2, s1 = s1, s0
		}
		re := s1 - s2*a.cosw[i]
		im := s2 * a.sinw[i]
		amp := 2 * math.Sqrt(re*re+im*im) / a.wsum
		frac := amp * amp / 2 / meanSq
		if frac > bestFrac {
			best, bestFrac = beepFreqs[i], frac
		}
	}
	return best, bestFrac >= beepFraction
}
