package stt

import (
	"encoding/binary"
	"testing"
)

// TestLinearToMulaw checks the encoder against G.711 reference points.
func TestLinearToMulaw(t *testing.T) {
	tests := []struct {
		in   int16
		want byte
	}{
		{0, 0xFF}, {-1, 0x7F}, {8, 0xFE}, {-8, 0x7E}, {32767, 0x80}, {-32768, 0x00}, {1000, 0xCE}, {-1000, 0x4E},
	}
	for _, tt := range tests {
		if got := linearToMulaw(tt.in); got != tt.want {
			t.Errorf("linearToMulaw(%d) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
	// Monotonic in magnitude over the positive range.
	prev := 0xFF
	for v := 0; v <= 32767; v += 64 {
		got := int(^linearToMulaw(int16(v)) & 0x7F)
		if got < prev&0x7F && v > 0 {
			t.Fatalf("not monotonic at %d", v)
		}
		prev = got
	}
}

func TestAppendWAV(t *testing.T) {
	pcm := []int16{1, -2, 3}
	b, err := appendWAV(nil, pcm, 16000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != wavHeaderSize+6 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("header % x", b[:44])
	}
	if binary.LittleEndian.Uint32(b[24:]) != 16000 || binary.LittleEndian.Uint32(b[40:]) != 6 || binary.LittleEndian.Uint32(b[4:]) != 42 {
		t.Error("bad sizes or rate")
	}
	if int16(binary.LittleEndian.Uint16(b[46:])) != -2 {
		t.Error("bad sample")
	}
	if _, err := appendWAV(nil, pcm, 0); err == nil {
		t.Error("rate 0 accepted")
	}
}
