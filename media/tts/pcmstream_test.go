package tts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

func le(pcm []int16) []byte {
	b := make([]byte, 0, 2*len(pcm))
	for _, v := range pcm {
		b = append(b, byte(v), byte(uint16(v)>>8))
	}
	return b
}

func newTestStream(r io.Reader, format sampleFormat, inRate, outRate, readBuf int) *pcmStream {
	_, cancel := context.WithCancel(context.Background())
	return &pcmStream{provider: "test", src: &readerSource{r: r, buf: make([]byte, readBuf), hz: inRate}, format: format, outRate: outRate, cancel: cancel}
}

func drainStream(t *testing.T, s *pcmStream, n int) []int16 {
	t.Helper()
	var out []int16
	buf := make([]int16, n)
	for {
		k, err := s.Read(buf)
		out = append(out, buf[:k]...)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplitSamples: 16-bit samples split across reads (odd byte counts) decode intact.
func TestSplitSamples(t *testing.T) {
	want := []int16{0x0102, -2, 32767, -32768, 0x7f00, 1, -300}
	for _, r := range []io.Reader{
		iotest.OneByteReader(bytes.NewReader(le(want))),
		iotest.HalfReader(bytes.NewReader(le(want))),
		iotest.DataErrReader(bytes.NewReader(le(want))),
	} {
		s := newTestStream(r, formatLinear16, 16000, 16000, 3)
		if got := drainStream(t, s, 5); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}

// TestMulawTable checks the decoder at G.711 reference points and round-trip symmetry.
func TestMulawTable(t *testing.T) {
	for code, want := range map[byte]int16{0xFF: 0, 0x7F: 0, 0x80: 32124, 0x00: -32124, 0xCE: 988, 0x4E: -988, 0xFE: 8, 0xF0: 120} {
		if got := mulawTable[code]; got != want {
			t.Errorf("µ-law %#x = %d, want %d", code, got, want)
		}
	}
	for i := range 128 {
		if mulawTable[i] != -mulawTable[i|0x80] {
			t.Fatalf("asymmetric at %#x", i)
		}
	}
}

func TestPCMStreamErrors(t *testing.T) {
	boom := errors.New("boom")
	s := newTestStream(iotest.ErrReader(boom), formatLinear16, 16000, 16000, 64)
	buf := make([]int16, 10)
	_, err := s.Read(buf)
	var pe *ProviderError
	if !errors.Is(err, boom) || !errors.As(err, &pe) {
		t.Errorf("err = %v", err)
	}
	if _, err2 := s.Read(buf); !errors.Is(err2, boom) {
		t.Errorf("error not sticky: %v", err2)
	}
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Errorf("empty Read = %d, %v", n, err)
	}
	s.Close()
	if _, err := s.Read(buf); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// endless yields the same PCM forever (a provider that never ends).
type endless struct{ data []byte }

func (e *endless) Read(p []byte) (int, error) { return copy(p, e.data), nil }

// TestPCMStreamReadAllocs: reading 20 ms at a time from a resampling stream allocates nothing
// in steady state.
func TestPCMStreamReadAllocs(t *testing.T) {
	s := newTestStream(&endless{le(make([]int16, 480))}, formatLinear16, 24000, 16000, 960)
	buf := make([]int16, 320)
	for range 10 {
		s.Read(buf)
	}
	if n := testing.AllocsPerRun(500, func() { s.Read(buf) }); n != 0 {
		t.Errorf("%v allocs per Read", n)
	}
}

// BenchmarkTTSRead20ms reads 20 ms frames (320 samples at 16 kHz) from a 24 kHz PCM source,
// as the engine does from the OpenAI adapter: decode + resample, no allocation.
func BenchmarkTTSRead20ms(b *testing.B) {
	s := newTestStream(&endless{le(make([]int16, 480))}, formatLinear16, 24000, 16000, 960)
	buf := make([]int16, 320)
	b.ReportAllocs()
	for b.Loop() {
		s.Read(buf)
	}
}

// BenchmarkTTSRead20msMulaw is the ElevenLabs ulaw_8000 path (decode + 8→16 kHz).
func BenchmarkTTSRead20msMulaw(b *testing.B) {
	s := newTestStream(&endless{bytes.Repeat([]byte{0x80, 0x00}, 80)}, formatMulaw, 8000, 16000, 160)
	buf := make([]int16, 320)
	b.ReportAllocs()
	for b.Loop() {
		s.Read(buf)
	}
}
