package fakes

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestAudioMulawRoundTrip(t *testing.T) {
	for v := -32768; v <= 32767; v += 7 {
		got := int(audioMulawToLinear(audioLinearToMulaw(int16(v))))
		// µ-law keeps about 1/16 of the value's segment: error ≤ ~3 % + the bias step.
		if diff := math.Abs(float64(got - v)); diff > math.Abs(float64(v))/16+16 {
			t.Fatalf("%d → %d", v, got)
		}
	}
	if audioMulawToLinear(0xFF) != 0 || audioLinearToMulaw(0) != 0xFF {
		t.Error("zero")
	}
}

func TestAudioToneAndRMS(t *testing.T) {
	tone := audioTone(440, 0.5, 16000, 0, 16000)
	if r := audioRMS(tone); math.Abs(r-0.5/math.Sqrt2) > 0.01 {
		t.Errorf("RMS %v", r)
	}
	if audioRMS(nil) != 0 {
		t.Error("empty RMS")
	}
	// Phase-continuous across calls.
	a, b := audioTone(440, 0.5, 16000, 0, 100), audioTone(440, 0.5, 16000, 100, 1)
	if c := audioTone(440, 0.5, 16000, 0, 101); c[100] != b[0] || c[99] != a[99] {
		t.Error("not phase-continuous")
	}
	if n := len(audioResampleLinear(tone, 16000, 24000)); n != 24000 {
		t.Errorf("resampled length %d", n)
	}
}

func TestAudioParseWAV(t *testing.T) {
	pcm := []int16{1, -1, 300}
	b := audioLE(oaiAudioWAVHeader(nil, len(pcm), 24000), pcm)
	w, err := audioParseWAV(b)
	if err != nil || w.Rate != 24000 || w.Channels != 1 || w.Bits != 16 || len(audioSamplesLE(w.Data)) != 3 {
		t.Fatalf("%+v %v", w, err)
	}
	for _, bad := range [][]byte{nil, []byte("RIFF0000WAVX"), b[:20], append(append([]byte{}, b[:12]...), "data\x00\x00\x00\x00"...)} {
		if _, err := audioParseWAV(bad); err == nil {
			t.Errorf("accepted % x", bad)
		}
	}
}

func FuzzAudioParseWAV(f *testing.F) {
	f.Add(audioLE(oaiAudioWAVHeader(nil, 2, 8000), []int16{1, 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := audioParseWAV(b)
		if err == nil && len(w.Data) > len(b) {
			t.Fatal("data beyond input")
		}
	})
}

func TestAudioSendPacing(t *testing.T) {
	data := make([]byte, 3200) // 100 ms at 16 kHz
	var chunks []time.Duration
	start := time.Now()
	ok := audioSend(context.Background(), nil, start, data, 32000, 2, audioPacing{FirstByte: 30 * time.Millisecond, Speed: 2, Chunk: 20 * time.Millisecond},
		func(c []byte, from, to int) error {
			chunks = append(chunks, time.Since(start))
			if len(c) != 640 || to-from != 640 {
				t.Errorf("chunk %d..%d", from, to)
			}
			return nil
		})
	if !ok || len(chunks) != 5 {
		t.Fatalf("ok=%v chunks=%v", ok, chunks)
	}
	// First at 30 ms, then every 10 ms (20 ms of audio at 2× real time).
	if chunks[0] < 30*time.Millisecond || chunks[4] < 70*time.Millisecond {
		t.Errorf("too early: %v", chunks)
	}
	var sent int
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // ends the stall
	defer cancel()
	ok = audioSend(ctx, nil, time.Now(), data, 32000, 2, audioPacing{Speed: -1, Chunk: 20 * time.Millisecond, StallAfterBytes: 1000},
		func(c []byte, _, _ int) error { sent += len(c); return nil })
	if ok || sent != 1000 {
		t.Errorf("stall: ok=%v sent=%d", ok, sent)
	}
}
