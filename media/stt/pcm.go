package stt

import (
	"encoding/binary"
	"fmt"
)

// appendLinear16 appends pcm as 16-bit little-endian bytes.
func appendLinear16(dst []byte, pcm []int16) []byte {
	for _, v := range pcm {
		dst = append(dst, byte(v), byte(uint16(v)>>8))
	}
	return dst
}

// appendMulaw appends pcm encoded as G.711 µ-law (ITU-T G.711 §2, the segment/bias formula;
// Parley's codec package has the table version, which this package must not depend on).
func appendMulaw(dst []byte, pcm []int16) []byte {
	for _, v := range pcm {
		dst = append(dst, linearToMulaw(v))
	}
	return dst
}

const (
	mulawBias = 0x84
	mulawClip = 32635
)

// linearToMulaw encodes one 16-bit sample to µ-law.
func linearToMulaw(s int16) byte {
	v := int(s)
	sign := 0
	if v < 0 {
		v = -v
		sign = 0x80
	}
	if v > mulawClip {
		v = mulawClip
	}
	v += mulawBias
	exp := 7
	for mask := 0x4000; v&mask == 0 && exp > 0; mask >>= 1 {
		exp--
	}
	mant := (v >> (exp + 3)) & 0x0F
	return ^byte(sign | exp<<4 | mant)
}

// wavHeaderSize is the size of the canonical 44-byte RIFF/WAVE header written by appendWAV.
const wavHeaderSize = 44

// appendWAV appends a canonical RIFF/WAVE file (PCM format 1, mono, 16-bit) holding pcm.
func appendWAV(dst []byte, pcm []int16, rate int) ([]byte, error) {
	if rate <= 0 {
		return dst, fmt.Errorf("stt: wav: bad sample rate %d", rate)
	}
	data := uint32(len(pcm) * 2)
	var h [wavHeaderSize]byte
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], 36+data)
	copy(h[8:], "WAVE")
	copy(h[12:], "fmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)             // fmt chunk size
	binary.LittleEndian.PutUint16(h[20:], 1)              // PCM
	binary.LittleEndian.PutUint16(h[22:], 1)              // mono
	binary.LittleEndian.PutUint32(h[24:], uint32(rate))   // sample rate
	binary.LittleEndian.PutUint32(h[28:], uint32(rate*2)) // byte rate
	binary.LittleEndian.PutUint16(h[32:], 2)              // block align
	binary.LittleEndian.PutUint16(h[34:], 16)             // bits per sample
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], data)
	dst = append(dst, h[:]...)
	return appendLinear16(dst, pcm), nil
}
