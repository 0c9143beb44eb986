package codec

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// g722RoundTrip encodes pcm in 20 ms frames and decodes the result.
func g722RoundTrip(t testing.TB, pcm []int16) (payload []byte, out []int16) {
	enc, dec := NewG722Encoder(), NewG722Decoder()
	payload = make([]byte, len(pcm)/2)
	out = make([]int16, len(pcm))
	for i := 0; i < len(pcm); i += 320 {
		n, err := enc.Encode(payload[i/2:], pcm[i:i+320])
		if err != nil || n != 160 {
			t.Fatalf("encode frame %d: n=%d err=%v", i/320, n, err)
		}
		m, err := dec.Decode(out[i:], payload[i/2:i/2+160])
		if err != nil || m != 320 {
			t.Fatalf("decode frame %d: n=%d err=%v", i/320, m, err)
		}
	}
	return payload, out
}

func TestG722ToneRoundTrip(t *testing.T) {
	// Thresholds are those measured with this implementation (in the comment) less a margin.
	cases := []struct {
		freq, amp float64
		minSNR    float64
	}{
		{300, 10000, 55},  // measured 62.3 dB
		{1000, 10000, 40}, // measured 47.2 dB
		{3000, 10000, 35}, // measured 41.0 dB
		{1000, 1000, 37},  // measured 43.6 dB: quiet signal
		{6000, 8000, 22},  // measured 27.0 dB: upper band, 2-bit ADPCM
	}
	for _, tc := range cases {
		pcm := tone(16000, tc.freq, tc.amp, 16000, 0) // 1 s
		_, out := g722RoundTrip(t, pcm)
		// Skip 100 ms of adaptation, then compare delay-aligned.
		snr := snrDB(pcm[1600:len(pcm)-G722Delay], out[1600+G722Delay:])
		t.Logf("%g Hz amplitude %g: SNR %.1f dB", tc.freq, tc.amp, snr)
		if snr < tc.minSNR {
			t.Errorf("%g Hz: SNR %.1f dB, want >= %g", tc.freq, snr, tc.minSNR)
		}
	}
}

func TestG722Delay(t *testing.T) {
	// Tones at unrelated frequencies, so that the alignment is not ambiguous by a period.
	pcm := make([]int16, 16000)
	for _, f := range []float64{217, 1130, 2790} {
		for i, v := range tone(16000, f, 6000, len(pcm), 0) {
			pcm[i] += v
		}
	}
	_, out := g722RoundTrip(t, pcm)
	if lag := bestLag(pcm[1600:8000], out[1600:], 64); lag != G722Delay {
		t.Errorf("best alignment at %d samples, G722Delay is %d", lag, G722Delay)
	}
}

func TestG722ChunkingDoesNotMatter(t *testing.T) {
	pcm := tone(16000, 1000, 12000, 3200, 0)
	whole, _ := g722RoundTrip(t, pcm)
	enc := NewG722Encoder()
	pieces := make([]byte, 0, len(whole))
	buf := make([]byte, 100)
	for i := 0; i < len(pcm); {
		n := min(len(pcm)-i, 2*(1+i%37)) // uneven, even-sized chunks
		m, err := enc.Encode(buf, pcm[i:i+n])
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, buf[:m]...)
		i += n
	}
	if string(pieces) != string(whole) {
		t.Fatal("encoding in uneven chunks differs from 20 ms frames")
	}
	enc.Reset()
	again := make([]byte, len(whole))
	if _, err := enc.Encode(again, pcm); err != nil || string(again) != string(whole) {
		t.Fatalf("after Reset the encoder does not start afresh (err %v)", err)
	}
}

func TestG722Errors(t *testing.T) {
	enc, dec := NewG722Encoder(), NewG722Decoder()
	if _, err := enc.Encode(make([]byte, 10), make([]int16, 3)); !errors.Is(err, ErrFrameSize) {
		t.Errorf("odd sample count: %v", err)
	}
	if _, err := enc.Encode(make([]byte, 10), make([]int16, 40)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short payload buffer: %v", err)
	}
	if _, err := dec.Decode(make([]int16, 10), make([]byte, 10)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short pcm buffer: %v", err)
	}
	if _, err := dec.Decode(make([]int16, 10), nil); !errors.Is(err, ErrInvalidPacket) {
		t.Errorf("empty payload: %v", err)
	}
	if enc.SampleRate() != 16000 || dec.SampleRate() != 16000 {
		t.Error("G.722 runs at 16 kHz")
	}
}

func TestG722ConcealRepeatsAndFades(t *testing.T) {
	pcm := tone(16000, 440, 10000, 960, 0)
	payload, _ := g722RoundTrip(t, pcm)
	dec := NewG722Decoder()
	out := make([]int16, 320)
	for i := 0; i < 3; i++ {
		if _, err := dec.Decode(out, payload[i*160:(i+1)*160]); err != nil {
			t.Fatal(err)
		}
	}
	last := energy(out)
	n, err := dec.Conceal(out, nil)
	if err != nil || n != 320 {
		t.Fatalf("conceal: n=%d err=%v", n, err)
	}
	if e := energy(out); e <= 0.2*last || e >= last {
		t.Fatalf("first concealed frame energy %g, last good %g: want a partly faded repeat", e, last)
	}
	for i := 1; i < fadeFrames; i++ {
		dec.Conceal(out, nil)
	}
	dec.Conceal(out, nil)
	if energy(out) != 0 {
		t.Fatal("long loss should fade to silence")
	}
}

// TestG722InteropFFmpeg checks the codec against FFmpeg's independent G.722 implementation in
// both directions. Both follow the fixed-point arithmetic of the standard (FFmpeg's encoder
// without its optional trellis search), so bitstreams and decoded samples must be identical.
func TestG722InteropFFmpeg(t *testing.T) {
	ffmpeg := testenv.NeedCommand(t, "ffmpeg")
	dir := t.TempDir()
	pcm := make([]int16, 16000)
	for _, f := range []float64{300, 1200, 3100, 5500} { // both sub-bands
		for i, v := range tone(16000, f, 5000, len(pcm), 0) {
			pcm[i] += v
		}
	}
	ours, ourPCM := g722RoundTrip(t, pcm)

	// FFmpeg decodes our bitstream.
	g722File := filepath.Join(dir, "ours.g722")
	if err := os.WriteFile(g722File, ours, 0o600); err != nil {
		t.Fatal(err)
	}
	theirPCMFile := filepath.Join(dir, "theirs.raw")
	run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "g722", "-i", g722File, "-f", "s16le", "-acodec", "pcm_s16le", theirPCMFile)
	theirPCM := readS16(t, theirPCMFile)
	n := min(len(theirPCM), len(ourPCM))
	if n < len(pcm)*9/10 {
		t.Fatalf("ffmpeg decoded %d samples of %d", len(theirPCM), len(pcm))
	}
	// Both follow the standard's fixed-point arithmetic, so the results are bit-exact.
	for i := range n {
		if ourPCM[i] != theirPCM[i] {
			t.Fatalf("ffmpeg decodes our G.722 differently from us from sample %d: %d vs %d (SNR %.1f dB)",
				i, theirPCM[i], ourPCM[i], snrDB(ourPCM[:n], theirPCM[:n]))
		}
	}

	// We decode FFmpeg's bitstream.
	rawFile := filepath.Join(dir, "in.raw")
	writeS16(t, rawFile, pcm)
	theirG722 := filepath.Join(dir, "theirs.g722")
	run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "s16le", "-ar", "16000", "-ac", "1", "-i", rawFile, "-acodec", "g722", "-f", "g722", theirG722)
	bits, err := os.ReadFile(theirG722)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range min(len(bits), len(ours)) {
		if bits[i] == ours[i] {
			same++
		}
	}
	if same != len(ours) || len(bits) != len(ours) {
		t.Errorf("ffmpeg's G.722 encoding (%d bytes) equals ours (%d bytes) in only %d bytes", len(bits), len(ours), same)
	}
	dec := NewG722Decoder()
	out := make([]int16, 2*len(bits))
	if _, err := dec.Decode(out, bits); err != nil {
		t.Fatal(err)
	}
	lag := bestLag(pcm[1600:8000], out[1600:], 64)
	snr := snrDB(pcm[1600:len(pcm)-lag], out[1600+lag:len(pcm)])
	t.Logf("our decoding of ffmpeg's bitstream: lag %d, SNR %.1f dB", lag, snr)
	if snr < 20 {
		t.Errorf("our decoding of ffmpeg's G.722: SNR %.1f dB, want >= 20", snr)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func writeS16(t *testing.T, path string, pcm []int16) {
	t.Helper()
	b := make([]byte, 2*len(pcm))
	for i, v := range pcm {
		b[2*i], b[2*i+1] = byte(v), byte(uint16(v)>>8)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readS16(t *testing.T, path string) []int16 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
	}
	return out
}

func FuzzG722Decode(f *testing.F) {
	f.Add([]byte{0x00, 0xFF, 0x3F, 0xC0})
	f.Add(make([]byte, 160))
	f.Fuzz(func(t *testing.T, payload []byte) {
		dec := NewG722Decoder()
		out := make([]int16, 2*len(payload))
		n, err := dec.Decode(out, payload)
		if len(payload) == 0 {
			if err == nil {
				t.Fatal("empty payload accepted")
			}
			return
		}
		if err != nil || n != 2*len(payload) {
			t.Fatalf("n=%d err=%v", n, err)
		}
		for _, v := range out {
			if math.IsNaN(float64(v)) {
				t.Fatal("impossible")
			}
		}
	})
}

func BenchmarkG722(b *testing.B) {
	pcm := tone(16000, 1000, 10000, 320, 0) // 20 ms
	payload := make([]byte, 160)
	out := make([]int16, 320)
	b.Run("Encode/20ms", func(b *testing.B) {
		enc := NewG722Encoder()
		benchLoop(b, func() {
			if _, err := enc.Encode(payload, pcm); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Decode/20ms", func(b *testing.B) {
		dec := NewG722Decoder()
		benchLoop(b, func() {
			if _, err := dec.Decode(out, payload); err != nil {
				b.Fatal(err)
			}
		})
	})
}
