package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/parley-voice/parley/media/tts"
)

// DefaultLines are what callers say, in turn: short sentences of everyday requests.
var DefaultLines = []string{
	"Hello, I would like to book a table for tonight.",
	"Four people, at seven in the evening.",
	"Yes, please put it under the name Martin.",
	"Could you also tell me if there is parking nearby?",
	"Thank you, that is all I needed.",
}

// Speech sources of MakeUtterances.
const (
	SourceEspeak    = "espeak-ng"
	SourceSynthetic = "synthetic"
	SourceAuto      = "auto" // espeak-ng when installed, else synthetic
)

// Utterance is one thing a caller says, ready to send: mono PCM at Rate whose speech ends
// exactly at the end of its last 20 ms frame (silence is added before it to make the length a
// whole number of frames), so the send time of the last frame is the moment the speech ends.
type Utterance struct {
	Text string  `json:"text"`
	Rate int     `json:"rate"`
	PCM  []int16 `json:"-"`
	// Speech is the time from the first to the last loud 5 ms piece; LongestGap the longest quiet
	// stretch inside it (it must stay below the agent's endpointing silence, or the agent would
	// answer mid-sentence).
	Speech     time.Duration `json:"speech_ns"`
	LongestGap time.Duration `json:"longest_gap_ns"`
}

// Frames returns the number of 20 ms frames of u.
func (u Utterance) Frames() int { return len(u.PCM) / (u.Rate / 50) }

// MakeUtterances renders lines at rate Hz with source (SourceEspeak, SourceSynthetic or
// SourceAuto) and returns them with the source actually used. Each is trimmed to its loud part
// (threshold DefaultThresholdDBFS, the STT fakes' speech threshold) and frame-aligned.
func MakeUtterances(ctx context.Context, lines []string, rate int, source string) ([]Utterance, string, error) {
	if len(lines) == 0 {
		return nil, "", errors.New("bench: no lines to say")
	}
	if rate < 8000 || rate > 48000 || rate%50 != 0 {
		return nil, "", fmt.Errorf("bench: sample rate %d", rate)
	}
	var es *tts.Espeak
	switch source {
	case SourceEspeak, SourceAuto:
		var err error
		es, err = tts.NewEspeak(tts.EspeakConfig{})
		if err != nil {
			if source == SourceEspeak {
				return nil, "", fmt.Errorf("bench: %w", err)
			}
			source = SourceSynthetic
		} else {
			source = SourceEspeak
		}
	case SourceSynthetic:
	default:
		return nil, "", fmt.Errorf("bench: unknown speech source %q (espeak-ng, synthetic, auto)", source)
	}
	out := make([]Utterance, 0, len(lines))
	for i, line := range lines {
		var pcm []int16
		var err error
		if es != nil {
			pcm, err = espeakPCM(ctx, es, line, rate)
		} else {
			pcm = SpeechLike(line, rate, uint32(i+1))
		}
		if err != nil {
			return nil, "", err
		}
		u, err := NewUtterance(line, pcm, rate)
		if err != nil {
			return nil, "", fmt.Errorf("bench: line %d: %w", i+1, err)
		}
		out = append(out, u)
	}
	return out, source, nil
}

func espeakPCM(ctx context.Context, es *tts.Espeak, text string, rate int) ([]int16, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := es.Synthesize(ctx, tts.Request{Text: text, SampleRate: rate})
	if err != nil {
		return nil, fmt.Errorf("bench: espeak-ng: %w", err)
	}
	defer st.Close()
	var pcm []int16
	buf := make([]int16, 4096)
	for len(pcm) < 60*rate { // at most a minute of speech
		n, err := st.Read(buf)
		pcm = append(pcm, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return pcm, nil
		}
		if err != nil {
			return nil, fmt.Errorf("bench: espeak-ng: %w", err)
		}
	}
	return pcm, nil
}

// NewUtterance trims pcm to its loud part and frame-aligns it (see Utterance).
func NewUtterance(text string, pcm []int16, rate int) (Utterance, error) {
	step := rate / 200 // 5 ms
	first, last := -1, -1
	gap, longest := 0, 0
	for i := 0; i+step <= len(pcm); i += step {
		if LevelDBFS(pcm[i:i+step]) >= DefaultThresholdDBFS {
			if first < 0 {
				first = i
			}
			if gap > longest && last >= 0 {
				longest = gap
			}
			gap = 0
			last = i + step
			continue
		}
		gap += step
	}
	if first < 0 {
		return Utterance{}, errors.New("no speech in the audio")
	}
	// Refine both ends to the sample: the first and last samples as loud as the peak of a sine
	// at the threshold, inside the first and last loud pieces.
	peak := int16(math.Sqrt2 * 32768 * math.Pow(10, DefaultThresholdDBFS/20))
	loud := func(v int16) bool { return v >= peak || v <= -peak }
	for i := first; i < first+step; i++ {
		if loud(pcm[i]) {
			first = i
			break
		}
	}
	for i := last - 1; i >= last-step; i-- {
		if loud(pcm[i]) {
			last = i + 1
			break
		}
	}
	speech := pcm[first:last]
	frame := rate / 50
	lead := (frame - len(speech)%frame) % frame
	out := make([]int16, lead+len(speech))
	copy(out[lead:], speech)
	toDur := func(n int) time.Duration { return time.Duration(int64(n) * int64(time.Second) / int64(rate)) }
	return Utterance{Text: text, Rate: rate, PCM: out, Speech: toDur(len(speech)), LongestGap: toDur(longest)}, nil
}

// SpeechLike returns a speech-like signal for text at rate Hz, for machines without espeak-ng:
// a voiced sound (a 110–140 Hz glottal pulse train shaped by three fixed formants, at about
// -20 dB) whose loudness rises and falls in syllables of 160–260 ms, about 65 ms per character
// of text. Between syllables it dips but stays above the speech threshold, as connected speech
// does, so an energy endpointer hears one utterance. seed varies pitch and rhythm.
func SpeechLike(text string, rate int, seed uint32) []int16 {
	chars := max(len([]rune(text)), 4)
	n := chars * 65 * rate / 1000
	out := make([]int16, n)
	raw := make([]float64, n)
	rnd := func() float64 { // LCG, deterministic per seed
		seed = seed*1664525 + 1013904223
		return float64(seed>>8) / float64(1<<24)
	}
	f0 := 110 + 30*rnd()
	formants := [3]struct{ f, bw float64 }{{600, 80}, {1200, 100}, {2500, 150}}
	type reson struct{ a1, a2, g, y1, y2 float64 }
	var rs [3]reson
	for k, fm := range formants {
		if fm.f >= float64(rate)/2 {
			continue
		}
		r := math.Exp(-math.Pi * fm.bw / float64(rate))
		th := 2 * math.Pi * fm.f / float64(rate)
		rs[k] = reson{a1: 2 * r * math.Cos(th), a2: -r * r, g: 1 - r}
	}
	syl := 0
	sylLen := int((0.16 + 0.1*rnd()) * float64(rate))
	phase := 0.0
	for i := range raw {
		if syl >= sylLen {
			syl, sylLen = 0, int((0.16+0.1*rnd())*float64(rate))
		}
		env := 0.35 + 0.65*math.Sin(math.Pi*float64(syl)/float64(sylLen)) // never below 0.35
		syl++
		// Glottal pulses with a slow pitch drift.
		f := f0 * (1 + 0.08*math.Sin(2*math.Pi*float64(i)/float64(rate)*0.7))
		phase += f / float64(rate)
		x := 0.0
		if phase >= 1 {
			phase -= 1
			x = 1
		}
		y := 0.0
		for k := range rs {
			r := &rs[k]
			if r.g == 0 {
				continue
			}
			v := r.g*x + r.a1*r.y1 + r.a2*r.y2
			r.y2, r.y1 = r.y1, v
			y += v
		}
		raw[i] = y * env
	}
	// Scale to -20 dB RMS.
	var sum float64
	for _, v := range raw {
		sum += v * v
	}
	g := 0.0
	if sum > 0 {
		g = 0.1 * 32768 / math.Sqrt(sum/float64(n))
	}
	for i, v := range raw {
		out[i] = int16(max(-32767, min(32767, v*g)))
	}
	// Fade in and out over 10 ms so the ends are clean.
	fade := rate / 100
	for i := 0; i < fade && i < n; i++ {
		g := float64(i) / float64(fade)
		out[i] = int16(float64(out[i]) * g)
		out[n-1-i] = int16(float64(out[n-1-i]) * g)
	}
	return out
}
