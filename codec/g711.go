package codec

// G.711 (ITU-T G.711, 11/1988) companding, table-driven.
//
// Encoding follows the ITU-T G.191 software tool library's reading of G.711 for 16-bit input:
// µ-law looks at the 14 most significant bits and A-law at the 13 most significant bits, and a
// negative sample is folded with the one's complement (~x) so that the quantiser is symmetric
// around zero. Decoding returns each code's reconstruction value (the middle of its decision
// interval, G.711 Tables 1a/2a) scaled to 16 bits: A-law values are multiples of 8, µ-law values
// multiples of 4 (extremes ±32256 and ±32124).

// G711Law selects µ-law or A-law.
type G711Law uint8

const (
	// MuLaw is G.711 µ-law (PCMU), used in North America and Japan.
	MuLaw G711Law = iota
	// ALaw is G.711 A-law (PCMA), used elsewhere.
	ALaw
)

var (
	mulawToLinear [256]int16
	alawToLinear  [256]int16
	// linearToMulaw is indexed by the top 14 bits of the sample, uint16(x)>>2.
	linearToMulaw [1 << 14]uint8
	// linearToAlaw is indexed by the top 12 bits of the sample, uint16(x)>>4: the A-law
	// quantiser's finest step (segments 0 and 1) is 16 in 16-bit units.
	linearToAlaw [1 << 12]uint8
)

func init() {
	for c := 0; c < 256; c++ {
		mulawToLinear[c] = mulawExpand(uint8(c))
		alawToLinear[c] = alawExpand(uint8(c))
	}
	for i := range linearToMulaw {
		linearToMulaw[i] = mulawCompress(int16(uint16(i << 2)))
	}
	for i := range linearToAlaw {
		linearToAlaw[i] = alawCompress(int16(uint16(i << 4)))
	}
}

// mulawCompress is the G.711 µ-law encoding rule, used once to fill linearToMulaw.
func mulawCompress(x int16) uint8 {
	var sign uint8 = 0x80 // transmitted sign bit 1 = positive
	mag := int32(x) >> 2  // 14-bit value
	if x < 0 {
		sign = 0
		mag = ^mag // one's complement: -1..-4 fold onto 0
	}
	mag += 33 // bias so that segment s starts at 32<<s
	if mag > 0x1FFF {
		mag = 0x1FFF
	}
	seg := uint8(0)
	for v := mag >> 6; v != 0; v >>= 1 {
		seg++
	}
	mant := uint8(mag>>(seg+1)) & 0x0F
	// Segment and mantissa bits are transmitted inverted.
	return sign | ^(seg<<4|mant)&0x7F
}

// mulawExpand is the G.711 µ-law decoding rule: reconstruction value ((2m+33)<<s)-33 in 14-bit
// units, times 4.
func mulawExpand(c uint8) int16 {
	c = ^c
	seg := (c >> 4) & 7
	mant := int32(c & 0x0F)
	v := ((mant<<3 + 0x84) << seg) - 0x84
	if c&0x80 != 0 {
		return int16(-v)
	}
	return int16(v)
}

// alawCompress is the G.711 A-law encoding rule, used once to fill linearToAlaw.
func alawCompress(x int16) uint8 {
	var sign uint8 = 0x80 // sign bit 1 = positive (before even-bit inversion)
	mag := int32(x) >> 4  // 12-bit magnitude, 0..2047
	if x < 0 {
		sign = 0
		mag = ^mag
	}
	var code uint8
	if mag < 16 {
		code = uint8(mag) // segment 0: step 16, no leading one
	} else {
		seg := uint8(1)
		for mag > 31 {
			mag >>= 1
			seg++
		}
		code = seg<<4 | uint8(mag-16)
	}
	return (sign | code) ^ 0x55 // even bits are inverted on the line
}

// alawExpand is the G.711 A-law decoding rule: reconstruction value 2m+1 (segment 0) or
// (2m+33)<<(s-1) in 13-bit units, times 8.
func alawExpand(c uint8) int16 {
	c ^= 0x55
	seg := (c >> 4) & 7
	mant := int32(c & 0x0F)
	var v int32
	if seg == 0 {
		v = mant<<4 + 8
	} else {
		v = (mant<<4 + 0x108) << (seg - 1)
	}
	if c&0x80 == 0 {
		return int16(-v)
	}
	return int16(v)
}

// EncodeMulaw encodes src into dst with G.711 µ-law and returns min(len(dst), len(src)), the
// number of bytes written.
func EncodeMulaw(dst []byte, src []int16) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, x := range src {
		dst[i] = linearToMulaw[uint16(x)>>2]
	}
	return n
}

// DecodeMulaw decodes G.711 µ-law src into dst and returns min(len(dst), len(src)).
func DecodeMulaw(dst []int16, src []byte) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, c := range src {
		dst[i] = mulawToLinear[c]
	}
	return n
}

// EncodeAlaw encodes src into dst with G.711 A-law and returns min(len(dst), len(src)).
func EncodeAlaw(dst []byte, src []int16) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, x := range src {
		dst[i] = linearToAlaw[uint16(x)>>4]
	}
	return n
}

// DecodeAlaw decodes G.711 A-law src into dst and returns min(len(dst), len(src)).
func DecodeAlaw(dst []int16, src []byte) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, c := range src {
		dst[i] = alawToLinear[c]
	}
	return n
}

// G711Encoder is the Encoder for PCMU and PCMA: 8 kHz, one byte per sample, any frame length.
type G711Encoder struct{ law G711Law }

// NewG711Encoder returns an encoder for law.
func NewG711Encoder(law G711Law) *G711Encoder { return &G711Encoder{law: law} }

// Encode encodes all of pcm; dst must hold len(pcm) bytes.
func (e *G711Encoder) Encode(dst []byte, pcm []int16) (int, error) {
	if len(dst) < len(pcm) {
		return 0, shortBuffer(len(dst), len(pcm))
	}
	if e.law == ALaw {
		return EncodeAlaw(dst, pcm), nil
	}
	return EncodeMulaw(dst, pcm), nil
}

// SampleRate returns 8000.
func (e *G711Encoder) SampleRate() int { return 8000 }

// G711Decoder is the Decoder (and Concealer) for PCMU and PCMA.
type G711Decoder struct {
	law G711Law
	plc fadeConcealer
}

// NewG711Decoder returns a decoder for law.
func NewG711Decoder(law G711Law) *G711Decoder {
	return &G711Decoder{law: law, plc: newFadeConcealer(8000)}
}

// Decode decodes all of payload; dst must hold len(payload) samples.
func (d *G711Decoder) Decode(dst []int16, payload []byte) (int, error) {
	if len(payload) == 0 {
		return 0, ErrInvalidPacket
	}
	if len(dst) < len(payload) {
		return 0, shortBuffer(len(dst), len(payload))
	}
	var n int
	if d.law == ALaw {
		n = DecodeAlaw(dst, payload)
	} else {
		n = DecodeMulaw(dst, payload)
	}
	d.plc.remember(dst[:n])
	return n, nil
}

// Conceal repeats the last decoded frame, fading it out (next is ignored).
func (d *G711Decoder) Conceal(dst []int16, next []byte) (int, error) {
	return d.plc.conceal(dst)
}

// SampleRate returns 8000.
func (d *G711Decoder) SampleRate() int { return 8000 }
