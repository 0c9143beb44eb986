package codec

import (
	"errors"
	"testing"
)

// g711Interval is one decision interval of a G.711 quantiser, in the uniform units of the
// standard's tables (14-bit for µ-law, 13-bit for A-law): inputs lo <= |x| < hi map to the code
// whose reconstruction value is recon.
type g711Interval struct{ lo, hi, recon int }

// g711Walk builds the 128 positive-magnitude intervals by walking G.711's segments: each
// segment has 16 equal intervals of the given width, the reconstruction value being the
// interval's midpoint. first, when non-zero, replaces the width of the very first interval.
func g711Walk(widths [8]int, first int) []g711Interval {
	var out []g711Interval
	x := 0
	for seg := 0; seg < 8; seg++ {
		for i := 0; i < 16; i++ {
			w := widths[seg]
			if seg == 0 && i == 0 && first != 0 {
				w = first
			}
			iv := g711Interval{lo: x, hi: x + w, recon: x + w/2}
			x += w
			out = append(out, iv)
		}
	}
	return out
}

// µ-law (G.711 Table 2a): segment 1 has one interval of width 1 (the value 0) then widths of 2;
// each following segment doubles the width; the top decision value is 8159.
var refMulaw = g711Walk([8]int{2, 4, 8, 16, 32, 64, 128, 256}, 1)

// A-law (G.711 Table 1a): segments 1 and 2 have width 2, then each segment doubles; the top
// decision value is 4096.
var refAlaw = g711Walk([8]int{2, 2, 4, 8, 16, 32, 64, 128}, 0)

func TestG711ReferenceTablesEndWhereTheStandardSays(t *testing.T) {
	if got := refMulaw[127].hi; got != 8159 {
		t.Fatalf("µ-law top decision value %d, G.711 says 8159", got)
	}
	if got := refAlaw[127].hi; got != 4096 {
		t.Fatalf("A-law top decision value %d, G.711 says 4096", got)
	}
}

// Codes: for magnitude index k (0 = smallest), µ-law sends 0xFF-k for positive and 0x7F-k for
// negative (all bits inverted, sign bit 1 = positive); A-law sends (0x80|k)^0x55 and k^0x55
// (even bits inverted).
func mulawCode(k int, neg bool) uint8 {
	if neg {
		return uint8(0x7F - k)
	}
	return uint8(0xFF - k)
}

func alawCode(k int, neg bool) uint8 {
	if neg {
		return uint8(k) ^ 0x55
	}
	return uint8(0x80|k) ^ 0x55
}

func TestG711DecodeEveryCode(t *testing.T) {
	for k, iv := range refMulaw {
		for _, neg := range []bool{false, true} {
			c := mulawCode(k, neg)
			want := iv.recon * 4 // 14-bit units to 16-bit
			if neg {
				want = -want
			}
			var out [1]int16
			DecodeMulaw(out[:], []byte{c})
			if int(out[0]) != want {
				t.Errorf("µ-law decode %#02x = %d, want %d", c, out[0], want)
			}
		}
	}
	for k, iv := range refAlaw {
		for _, neg := range []bool{false, true} {
			c := alawCode(k, neg)
			want := iv.recon * 8 // 13-bit units to 16-bit
			if neg {
				want = -want
			}
			var out [1]int16
			DecodeAlaw(out[:], []byte{c})
			if int(out[0]) != want {
				t.Errorf("A-law decode %#02x = %d, want %d", c, out[0], want)
			}
		}
	}
}

// refEncode finds the interval holding the magnitude of x. Negative inputs are folded with the
// one's complement, as the ITU-T G.191 reference encoder does, so the quantiser is symmetric.
func refEncode(x int16, table []g711Interval, shift uint, code func(int, bool) uint8) uint8 {
	neg := x < 0
	v := int(x)
	if neg {
		v = ^v
	}
	mag := v >> shift
	for k, iv := range table {
		if mag >= iv.lo && mag < iv.hi {
			return code(k, neg)
		}
	}
	return code(127, neg) // beyond the top decision value: clip
}

func TestG711EncodeEveryInput(t *testing.T) {
	var src [1]int16
	var dst [1]byte
	for v := -32768; v <= 32767; v++ {
		src[0] = int16(v)
		EncodeMulaw(dst[:], src[:])
		if want := refEncode(int16(v), refMulaw, 2, mulawCode); dst[0] != want {
			t.Fatalf("µ-law encode %d = %#02x, want %#02x", v, dst[0], want)
		}
		EncodeAlaw(dst[:], src[:])
		if want := refEncode(int16(v), refAlaw, 3, alawCode); dst[0] != want {
			t.Fatalf("A-law encode %d = %#02x, want %#02x", v, dst[0], want)
		}
	}
}

func TestG711ReconstructionValuesEncodeToTheirCode(t *testing.T) {
	for c := 0; c < 256; c++ {
		var pcm [1]int16
		var back [1]byte
		DecodeMulaw(pcm[:], []byte{byte(c)})
		EncodeMulaw(back[:], pcm[:])
		want := byte(c)
		if c == 0x7F { // "negative zero" decodes to 0, which encodes as positive zero
			want = 0xFF
		}
		if back[0] != want {
			t.Errorf("µ-law %#02x -> %d -> %#02x", c, pcm[0], back[0])
		}
		DecodeAlaw(pcm[:], []byte{byte(c)})
		EncodeAlaw(back[:], pcm[:])
		if back[0] != byte(c) {
			t.Errorf("A-law %#02x -> %d -> %#02x", c, pcm[0], back[0])
		}
	}
}

// Literal values every G.711 implementation agrees on (ITU-T G.191 g711.c, Sun g711.c).
func TestG711KnownValues(t *testing.T) {
	decodes := []struct {
		law  G711Law
		code byte
		want int16
	}{
		{MuLaw, 0xFF, 0}, {MuLaw, 0x7F, 0}, {MuLaw, 0x00, -32124}, {MuLaw, 0x80, 32124},
		{MuLaw, 0xFE, 8}, {MuLaw, 0xEF, 132}, {MuLaw, 0x7E, -8},
		{ALaw, 0xD5, 8}, {ALaw, 0x55, -8}, {ALaw, 0xAA, 32256}, {ALaw, 0x2A, -32256},
		{ALaw, 0xD4, 24}, {ALaw, 0xC5, 264}, {ALaw, 0xF5, 528},
	}
	for _, tc := range decodes {
		var out [1]int16
		if tc.law == MuLaw {
			DecodeMulaw(out[:], []byte{tc.code})
		} else {
			DecodeAlaw(out[:], []byte{tc.code})
		}
		if out[0] != tc.want {
			t.Errorf("law %d decode %#02x = %d, want %d", tc.law, tc.code, out[0], tc.want)
		}
	}
	// Segment boundaries, worked by hand from G.711 Tables 1a and 2a.
	encodes := []struct {
		law  G711Law
		in   int16
		want byte
	}{
		{MuLaw, 0, 0xFF}, {MuLaw, 3, 0xFF}, {MuLaw, 4, 0xFE}, {MuLaw, -1, 0x7F}, {MuLaw, -4, 0x7F},
		{MuLaw, -5, 0x7E}, {MuLaw, 123, 0xF0}, {MuLaw, 124, 0xEF}, {MuLaw, 379, 0xE0},
		{MuLaw, 380, 0xDF}, {MuLaw, 32635, 0x80}, {MuLaw, 32767, 0x80}, {MuLaw, -32768, 0x00},
		{ALaw, 0, 0xD5}, {ALaw, 15, 0xD5}, {ALaw, 16, 0xD4}, {ALaw, -1, 0x55}, {ALaw, -16, 0x55},
		{ALaw, -17, 0x54}, {ALaw, 255, 0xDA}, {ALaw, 256, 0xC5}, {ALaw, 511, 0xCA},
		{ALaw, 512, 0xF5}, {ALaw, 32767, 0xAA}, {ALaw, -32768, 0x2A},
	}
	for _, tc := range encodes {
		var out [1]byte
		if tc.law == MuLaw {
			EncodeMulaw(out[:], []int16{tc.in})
		} else {
			EncodeAlaw(out[:], []int16{tc.in})
		}
		if out[0] != tc.want {
			t.Errorf("law %d encode %d = %#02x, want %#02x", tc.law, tc.in, out[0], tc.want)
		}
	}
}

func TestG711FunctionsWriteMinLength(t *testing.T) {
	pcm := make([]int16, 10)
	buf := make([]byte, 4)
	if n := EncodeMulaw(buf, pcm); n != 4 {
		t.Fatalf("EncodeMulaw wrote %d, want 4", n)
	}
	if n := DecodeAlaw(pcm, buf); n != 4 {
		t.Fatalf("DecodeAlaw wrote %d, want 4", n)
	}
	if n := EncodeAlaw(nil, pcm); n != 0 {
		t.Fatalf("EncodeAlaw into nil wrote %d", n)
	}
}

func TestG711CodecRoundTripAndErrors(t *testing.T) {
	for _, law := range []G711Law{MuLaw, ALaw} {
		enc, dec := NewG711Encoder(law), NewG711Decoder(law)
		pcm := tone(8000, 1000, 8000, 160, 0)
		payload := make([]byte, 160)
		n, err := enc.Encode(payload, pcm)
		if err != nil || n != 160 {
			t.Fatalf("encode: %d, %v", n, err)
		}
		out := make([]int16, 160)
		if n, err := dec.Decode(out, payload); err != nil || n != 160 {
			t.Fatalf("decode: %d, %v", n, err)
		}
		if snr := snrDB(pcm, out); snr < 35 {
			t.Errorf("law %d: round-trip SNR %.1f dB, want >= 35 (G.711 gives ~38)", law, snr)
		}
		if _, err := enc.Encode(payload[:10], pcm); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("short encode buffer: %v", err)
		}
		if _, err := dec.Decode(out[:10], payload); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("short decode buffer: %v", err)
		}
		if _, err := dec.Decode(out, nil); !errors.Is(err, ErrInvalidPacket) {
			t.Errorf("empty payload: %v", err)
		}
		if enc.SampleRate() != 8000 || dec.SampleRate() != 8000 {
			t.Errorf("sample rates %d/%d", enc.SampleRate(), dec.SampleRate())
		}
	}
}

func TestG711ConcealFadesOut(t *testing.T) {
	dec := NewG711Decoder(MuLaw)
	out := make([]int16, 160)
	// Before any packet: 20 ms of silence.
	if n, err := dec.Conceal(out, nil); err != nil || n != 160 || energy(out) != 0 {
		t.Fatalf("conceal before any packet: n=%d err=%v energy=%g", n, err, energy(out))
	}
	payload := make([]byte, 160)
	EncodeMulaw(payload, tone(8000, 500, 16000, 160, 0))
	if _, err := dec.Decode(out, payload); err != nil {
		t.Fatal(err)
	}
	prev := energy(out)
	for i := 0; i < fadeFrames; i++ {
		n, err := dec.Conceal(out, nil)
		if err != nil || n != 160 {
			t.Fatalf("conceal %d: n=%d err=%v", i, n, err)
		}
		e := energy(out)
		if !(e < prev) || e == 0 && i < fadeFrames-1 {
			t.Fatalf("conceal %d: energy %g, previous %g: want a fade", i, e, prev)
		}
		prev = e
	}
	if _, err := dec.Conceal(out, nil); err != nil || energy(out) != 0 {
		t.Fatalf("after %d lost frames the output should be silent (energy %g)", fadeFrames, energy(out))
	}
	// A good packet restarts normal decoding.
	if _, err := dec.Decode(out, payload); err != nil || energy(out) == 0 {
		t.Fatal("decode after loss failed")
	}
	if _, err := dec.Conceal(nil, nil); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("conceal into nil: %v", err)
	}
}

func BenchmarkG711(b *testing.B) {
	pcm := tone(8000, 1000, 12000, 160, 0) // one 20 ms frame
	payload := make([]byte, 160)
	out := make([]int16, 160)
	b.Run("EncodeMulaw/20ms", func(b *testing.B) {
		benchLoop(b, func() {
			EncodeMulaw(payload, pcm)
		})
	})
	b.Run("DecodeMulaw/20ms", func(b *testing.B) {
		benchLoop(b, func() {
			DecodeMulaw(out, payload)
		})
	})
	b.Run("EncodeAlaw/20ms", func(b *testing.B) {
		benchLoop(b, func() {
			EncodeAlaw(payload, pcm)
		})
	})
	b.Run("DecodeAlaw/20ms", func(b *testing.B) {
		benchLoop(b, func() {
			DecodeAlaw(out, payload)
		})
	})
	b.Run("Encoder.Encode/PCMU/20ms", func(b *testing.B) {
		var enc Encoder = NewG711Encoder(MuLaw)
		benchLoop(b, func() {
			if _, err := enc.Encode(payload, pcm); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Decoder.Decode/PCMA/20ms", func(b *testing.B) {
		var dec Decoder = NewG711Decoder(ALaw)
		benchLoop(b, func() {
			if _, err := dec.Decode(out, payload); err != nil {
				b.Fatal(err)
			}
		})
	})
}
