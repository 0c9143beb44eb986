package media

import (
	"errors"
	"math"
	"testing"
)

// An Ogg/Opus voice note encoded here decodes back to audio of the same length and loudness,
// and a damaged page is refused.
func TestOggOpusRoundTrip(t *testing.T) {
	const rate = 16000
	pcm := make([]int16, rate) // one second of 440 Hz
	for i := range pcm {
		pcm[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	file, err := EncodeOggOpus(pcm, rate)
	if err != nil {
		t.Fatal(err)
	}
	if string(file[:4]) != "OggS" {
		t.Fatalf("not an Ogg file: %q", file[:4])
	}
	out, err := DecodeOggOpus(file, rate)
	if err != nil {
		t.Fatal(err)
	}
	if d := len(out) - len(pcm); d < -rate/50 || d > rate/50 {
		t.Fatalf("decoded %d samples, want about %d", len(out), len(pcm))
	}
	var sum float64
	for _, s := range out[rate/10:] {
		sum += float64(s) * float64(s)
	}
	if rms := math.Sqrt(sum / float64(len(out)-rate/10)); rms < 3000 || rms > 8000 {
		t.Fatalf("decoded RMS %.0f, want about 5657", rms)
	}
	bad := append([]byte(nil), file...)
	bad[len(bad)-3] ^= 0xff
	if _, err := DecodeOggOpus(bad, rate); !errors.Is(err, ErrNotOggOpus) {
		t.Fatalf("a damaged file: %v", err)
	}
	if _, err := DecodeOggOpus([]byte("not ogg at all, just text"), rate); !errors.Is(err, ErrNotOggOpus) {
		t.Fatalf("text: %v", err)
	}
}

// BenchmarkDecodeOggOpus decodes a ten-second voice note at 16 kHz (once per voice note).
func BenchmarkDecodeOggOpus(b *testing.B) {
	const rate = 16000
	pcm := make([]int16, 10*rate)
	for i := range pcm {
		pcm[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	file, err := EncodeOggOpus(pcm, rate)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		if _, err := DecodeOggOpus(file, rate); err != nil {
			b.Fatal(err)
		}
	}
}
