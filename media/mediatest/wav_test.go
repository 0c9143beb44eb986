package mediatest

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
)

func TestWAVRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.wav")
	st := []int16{1, -1, 2, -2, 32767, -32768}
	if err := WriteWAV(path, 16000, 2, st); err != nil {
		t.Fatal(err)
	}
	w, err := ReadWAV(path)
	if err != nil {
		t.Fatal(err)
	}
	if w.Rate != 16000 || w.Channels != 2 || !slices.Equal(w.Samples, st) {
		t.Fatalf("got %+v", w)
	}
	if l, r := w.Channel(0), w.Channel(1); !slices.Equal(l, []int16{1, 2, 32767}) || !slices.Equal(r, []int16{-1, -2, -32768}) {
		t.Errorf("channels %v %v", l, r)
	}
}

func TestDecodeWAVChunksAndTruncation(t *testing.T) {
	base := EncodeWAV(8000, 1, []int16{5, 6, 7, 8})
	// Insert a LIST chunk (odd size, padded) between fmt and data.
	list := []byte("LIST\x03\x00\x00\x00abc\x00")
	withList := slices.Concat(base[:36], list, base[36:])
	w, err := DecodeWAV(withList)
	if err != nil || !slices.Equal(w.Samples, []int16{5, 6, 7, 8}) {
		t.Fatalf("with LIST: %v %+v", err, w)
	}
	// A data size larger than the file (streamed writer): read what is there.
	big := slices.Clone(base)
	binary.LittleEndian.PutUint32(big[40:], 0x7ffff000)
	w, err = DecodeWAV(big)
	if err != nil || !slices.Equal(w.Samples, []int16{5, 6, 7, 8}) {
		t.Fatalf("oversized data chunk: %v %+v", err, w)
	}
	for name, b := range map[string][]byte{
		"empty":   nil,
		"not wav": []byte("RIFF\x00\x00\x00\x00AVI LIST"),
		"no data": base[:36],
		"8-bit":   func() []byte { b := slices.Clone(base); b[34] = 8; return b }(),
	} {
		if _, err := DecodeWAV(b); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func FuzzDecodeWAV(f *testing.F) {
	f.Add(EncodeWAV(16000, 1, []int16{1, 2, 3}))
	f.Add([]byte("RIFF\x10\x00\x00\x00WAVEdata\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := DecodeWAV(b)
		if err == nil && (w.Channels < 1 || len(w.Samples)*2 > len(b)) {
			t.Fatalf("implausible result %d channels %d samples from %d bytes", w.Channels, len(w.Samples), len(b))
		}
	})
}
