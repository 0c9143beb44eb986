package sip

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
)

// Fixtures: a voicemail greeting followed by the beep, and a person answering "Hello?".
const voicemailGreeting = "Hi, you have reached the voicemail of John Smith. " +
	"I am not available right now. Please leave your name and number after the tone."

// amdFixture returns speech (espeak-ng) with a faint line noise, then extra PCM appended.
func amdFixture(t testing.TB, text string, lead time.Duration, tail ...[]int16) []int16 {
	t.Helper()
	speech := mediatest.Speech(t, text, media.PipelineRate)
	var pcm []int16
	pcm = append(pcm, make([]int16, int(lead.Seconds()*media.PipelineRate))...)
	pcm = append(pcm, speech...)
	for _, x := range tail {
		pcm = append(pcm, x...)
	}
	noise := mediatest.WhiteNoise(len(pcm), -60, 3)
	for i := range pcm {
		v := int32(pcm[i]) + int32(noise[i])
		pcm[i] = int16(max(-32768, min(32767, v)))
	}
	return pcm
}

func silence(d time.Duration) []int16 { return make([]int16, int(d.Seconds()*media.PipelineRate)) }

func beepTone(hz float64, d time.Duration) []int16 {
	return mediatest.Sine(int(d.Seconds()*media.PipelineRate), media.PipelineRate, hz, -10)
}

// runAMD feeds pcm frame by frame until the detector decides, and returns its result and how
// much audio it took.
func runAMD(t testing.TB, a *AMD, pcm []int16) (AMDResult, time.Duration) {
	t.Helper()
	var f media.Frame
	n := media.SamplesPerFrame(media.PipelineRate)
	for i := 0; i+n <= len(pcm); i += n {
		f.SetPCM(media.PipelineRate, pcm[i:i+n])
		if a.Process(&f) {
			return a.Result(), time.Duration(i/n+1) * media.FrameDuration
		}
	}
	return a.Result(), time.Duration(len(pcm)/n) * media.FrameDuration
}

func TestAMDClassifies(t *testing.T) {
	cases := []struct {
		name   string
		pcm    func(t testing.TB) []int16
		class  AMDClass
		reason string
	}{
		{"long greeting and beep", func(t testing.TB) []int16 {
			return amdFixture(t, voicemailGreeting, 300*time.Millisecond, silence(400*time.Millisecond), beepTone(1000, 500*time.Millisecond), silence(2*time.Second))
		}, AMDMachine, "long_greeting|max_words"},
		{"short hello", func(t testing.TB) []int16 {
			return amdFixture(t, "Hello?", 400*time.Millisecond, silence(3*time.Second))
		}, AMDHuman, "after_greeting_silence"},
		{"silence", func(t testing.TB) []int16 { return silence(4 * time.Second) }, AMDMachine, "initial_silence"},
		{"beep at 1400 Hz", func(t testing.TB) []int16 {
			return append(silence(500*time.Millisecond), append(beepTone(1400, 400*time.Millisecond), silence(time.Second)...)...)
		}, AMDMachine, "beep"},
		{"beep at 2000 Hz", func(t testing.TB) []int16 {
			return append(silence(500*time.Millisecond), append(beepTone(2000, 400*time.Millisecond), silence(time.Second)...)...)
		}, AMDMachine, "beep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAMD(AMDOptions{Enabled: true})
			if err != nil {
				t.Fatal(err)
			}
			res, took := runAMD(t, a, tc.pcm(t))
			if res.Class != tc.class || !slices.Contains(strings.Split(tc.reason, "|"), res.Reason) {
				t.Fatalf("got %s (%s) after %v, want %s (%s); %+v", res.Class, res.Reason, took, tc.class, tc.reason, res)
			}
			if took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// TestAMDWaitsForBeep: leaving a message waits for the beep to end, not for the first pause.
func TestAMDWaitsForBeep(t *testing.T) {
	greeting := amdFixture(t, voicemailGreeting, 300*time.Millisecond)
	pcm := append(append(append([]int16(nil), greeting...), silence(500*time.Millisecond)...), beepTone(1000, 600*time.Millisecond)...)
	beepEnd := len(pcm)
	pcm = append(pcm, silence(3*time.Second)...)
	a, err := NewAMD(AMDOptions{Enabled: true, OnMachine: AMDLeaveMessage})
	if err != nil {
		t.Fatal(err)
	}
	var f media.Frame
	n := media.SamplesPerFrame(media.PipelineRate)
	readyAt := -1
	for i := 0; i+n <= len(pcm); i += n {
		f.SetPCM(media.PipelineRate, pcm[i:i+n])
		if a.Process(&f) && a.ReadyForMessage() {
			readyAt = i + n
			break
		}
	}
	res := a.Result()
	if !res.Beep || res.BeepHz != 1000 {
		t.Fatalf("no beep heard: %+v", res)
	}
	if readyAt < beepEnd || readyAt > beepEnd+5*n {
		t.Errorf("ready for the message at %v, the beep ended at %v", time.Duration(readyAt)*time.Second/media.PipelineRate,
			time.Duration(beepEnd)*time.Second/media.PipelineRate)
	}
}

// TestAMDUnknown: a pattern no rule decides within the analysis time is unknown.
func TestAMDUnknown(t *testing.T) {
	a, err := NewAMD(AMDOptions{Enabled: true, GreetingLength: 10 * time.Second, MaxWords: 100, AfterGreetingSilence: 3 * time.Second, TotalAnalysis: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pcm := amdFixture(t, "one two three four five six seven eight", 200*time.Millisecond, silence(time.Second))
	res, _ := runAMD(t, a, pcm)
	if res.Class != AMDUnknown || res.Reason != "timeout" {
		t.Fatalf("%+v", res)
	}
}

func BenchmarkAMDProcess(b *testing.B) {
	a, err := NewAMD(AMDOptions{Enabled: true, TotalAnalysis: time.Hour, InitialSilence: time.Hour, GreetingLength: time.Hour, MaxWords: 1 << 30, AfterGreetingSilence: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	pcm := mediatest.WhiteNoise(media.SamplesPerFrame(media.PipelineRate), -30, 1)
	var f media.Frame
	f.SetPCM(media.PipelineRate, pcm)
	b.ReportAllocs()
	for b.Loop() {
		a.Process(&f)
	}
}
