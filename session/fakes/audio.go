package fakes

// Audio helpers shared by the speech fakes (Deepgram, OpenAI STT, ElevenLabs, OpenAI TTS).
// Every name here starts with "audio" so that it cannot clash with the other fakes of this
// package. Quality is not the point: the fakes need recognisable, cheap audio.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// audioMulawToLinear decodes one G.711 µ-law byte (ITU-T G.711 §2).
func audioMulawToLinear(u byte) int16 {
	u = ^u
	sign := u & 0x80
	exp := (u >> 4) & 0x07
	mant := u & 0x0F
	v := ((int(mant) << 3) + 0x84) << exp
	v -= 0x84
	if sign != 0 {
		return int16(-v)
	}
	return int16(v)
}

// audioLinearToMulaw encodes one sample to G.711 µ-law.
func audioLinearToMulaw(s int16) byte {
	v := int(s)
	sign := 0
	if v < 0 {
		v = -v
		sign = 0x80
	}
	if v > 32635 {
		v = 32635
	}
	v += 0x84
	exp := 7
	for mask := 0x4000; v&mask == 0 && exp > 0; mask >>= 1 {
		exp--
	}
	mant := (v >> (exp + 3)) & 0x0F
	return ^byte(sign | exp<<4 | mant)
}

// audioRMS returns the RMS of samples on a 0..1 scale (1 = full-scale square wave).
func audioRMS(samples []int16) float64 {
	if len(samples) == 0 {
		return 0
	}
	var sum float64
	for _, v := range samples {
		f := float64(v) / 32768
		sum += f * f
	}
	return math.Sqrt(sum / float64(len(samples)))
}

// audioTone returns n samples of a sine at freq Hz and amplitude amp (0..1) at rate Hz,
// starting at sample index first (so consecutive calls are phase-continuous).
func audioTone(freq, amp float64, rate int, first int64, n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		t := float64(first+int64(i)) / float64(rate)
		out[i] = int16(math.Round(amp * 32767 * math.Sin(2*math.Pi*freq*t)))
	}
	return out
}

// audioResampleLinear converts pcm from rate in to rate out by linear interpolation.
func audioResampleLinear(pcm []int16, in, out int) []int16 {
	if in == out || len(pcm) == 0 {
		return append([]int16(nil), pcm...)
	}
	n := int(int64(len(pcm)) * int64(out) / int64(in))
	res := make([]int16, n)
	for i := range res {
		pos := float64(i) * float64(in) / float64(out)
		j := int(pos)
		frac := pos - float64(j)
		a := float64(pcm[min(j, len(pcm)-1)])
		b := float64(pcm[min(j+1, len(pcm)-1)])
		res[i] = int16(math.Round(a + (b-a)*frac))
	}
	return res
}

// audioLE appends samples as 16-bit little-endian bytes.
func audioLE(dst []byte, pcm []int16) []byte {
	for _, v := range pcm {
		dst = append(dst, byte(v), byte(uint16(v)>>8))
	}
	return dst
}

// audioWAV is a parsed RIFF/WAVE file.
type audioWAV struct {
	Rate, Channels, Bits int
	Data                 []byte
}

// audioParseWAV parses a PCM RIFF/WAVE file (format 1). A data chunk whose declared size runs
// past the end (streamed WAVs) is taken as "to the end".
func audioParseWAV(b []byte) (audioWAV, error) {
	var w audioWAV
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return w, errors.New("not a RIFF/WAVE file")
	}
	p := 12
	haveFmt := false
	for p+8 <= len(b) {
		id := string(b[p : p+4])
		size := int(binary.LittleEndian.Uint32(b[p+4 : p+8]))
		p += 8
		if size < 0 || size > len(b)-p {
			size = len(b) - p
		}
		switch id {
		case "fmt ":
			if size < 16 {
				return w, errors.New("short fmt chunk")
			}
			if f := binary.LittleEndian.Uint16(b[p:]); f != 1 {
				return w, fmt.Errorf("WAV format %d is not PCM", f)
			}
			w.Channels = int(binary.LittleEndian.Uint16(b[p+2:]))
			w.Rate = int(binary.LittleEndian.Uint32(b[p+4:]))
			w.Bits = int(binary.LittleEndian.Uint16(b[p+14:]))
			haveFmt = true
		case "data":
			if !haveFmt {
				return w, errors.New("data chunk before fmt chunk")
			}
			w.Data = b[p : p+size]
			return w, nil
		}
		p += size + size&1
	}
	return w, errors.New("no data chunk")
}

// audioSamplesLE decodes 16-bit little-endian bytes (an odd trailing byte is ignored).
func audioSamplesLE(b []byte) []int16 {
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}

// audioSpeech renders text for a TTS fake at rate Hz: espeak-ng speech when useEspeak is set
// and the program is present, else a tone of perChar per character. It reports whether
// espeak-ng was used.
func audioSpeech(ctx context.Context, text string, rate int, toneHz, amp float64, perChar time.Duration, useEspeak bool, voice string) ([]int16, bool) {
	if useEspeak {
		pcm, err := audioEspeak(ctx, text, voice, rate)
		if err == nil {
			return pcm, true
		}
		audioEspeakWarn.Do(func() { slog.Warn("fakes: espeak-ng unavailable, using a tone", "err", err) })
	}
	n := int(int64(len([]rune(text))) * int64(perChar) * int64(rate) / int64(time.Second))
	return audioTone(toneHz, amp, rate, 0, n), false
}

var audioEspeakWarn sync.Once

// audioEspeak runs espeak-ng (text on stdin, never argv) and returns its speech at rate Hz.
func audioEspeak(ctx context.Context, text, voice string, rate int) ([]int16, error) {
	path, err := exec.LookPath("espeak-ng")
	if err != nil {
		return nil, err
	}
	if voice == "" || strings.HasPrefix(voice, "-") || strings.ContainsAny(voice, " \t\n") {
		voice = "en"
	}
	cmd := exec.CommandContext(ctx, path, "--stdout", "--stdin", "-b", "1", "-v", voice)
	cmd.Stdin = strings.NewReader(text)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("espeak-ng: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	w, err := audioParseWAV(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("espeak-ng output: %w", err)
	}
	if w.Bits != 16 || w.Channels != 1 {
		return nil, fmt.Errorf("espeak-ng output: %d-bit %d-channel", w.Bits, w.Channels)
	}
	return audioResampleLinear(audioSamplesLE(w.Data), w.Rate, rate), nil
}

// audioWaitUntil waits until t, or until ctx or stop ends (false).
func audioWaitUntil(ctx context.Context, stop <-chan struct{}, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// audioStall blocks until the client goes away or the fake is closed.
func audioStall(ctx context.Context, stop <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-stop:
	}
}

// audioPacing says how a TTS fake delivers its audio.
type audioPacing struct {
	FirstByte       time.Duration // from request to the first audio byte
	Speed           float64       // times faster than real time; <= 0 sends as fast as possible
	Chunk           time.Duration // audio per write
	StallAfterBytes int           // > 0: stop sending (but keep the connection) after this many bytes
}

// audioSend writes data (audio at bytesPerSec, frameBytes per sample) in paced chunks through
// write, which gets the chunk and its byte range. The first chunk leaves at start+FirstByte.
// It returns false when the client went away, the fake closed, or a write failed.
func audioSend(ctx context.Context, stop <-chan struct{}, start time.Time, data []byte, bytesPerSec, frameBytes int, p audioPacing, write func(chunk []byte, from, to int) error) bool {
	chunk := int(int64(p.Chunk) * int64(bytesPerSec) / int64(time.Second))
	chunk -= chunk % frameBytes
	if chunk <= 0 {
		chunk = frameBytes
	}
	first := start.Add(p.FirstByte)
	sent := 0
	for sent < len(data) {
		if p.StallAfterBytes > 0 && sent >= p.StallAfterBytes {
			audioStall(ctx, stop)
			return false
		}
		at := first
		if p.Speed > 0 {
			at = first.Add(time.Duration(float64(sent) / float64(bytesPerSec) / p.Speed * float64(time.Second)))
		}
		if !audioWaitUntil(ctx, stop, at) {
			return false
		}
		end := min(sent+chunk, len(data))
		if p.StallAfterBytes > 0 && end > p.StallAfterBytes && sent < p.StallAfterBytes {
			end = p.StallAfterBytes
		}
		if err := write(data[sent:end], sent, end); err != nil {
			return false
		}
		sent = end
	}
	return true
}
