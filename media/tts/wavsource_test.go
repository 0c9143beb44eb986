package tts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// streamedWAV builds a WAV as espeak-ng streams it: placeholder sizes, an extra chunk.
func streamedWAV(rate int, pcm []int16, extra bool) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(0x7ffff024))
	b.WriteString("WAVEfmt ")
	binary.Write(&b, binary.LittleEndian, uint32(16))
	binary.Write(&b, binary.LittleEndian, []uint16{1, 1})
	binary.Write(&b, binary.LittleEndian, []uint32{uint32(rate), uint32(2 * rate)})
	binary.Write(&b, binary.LittleEndian, []uint16{2, 16})
	if extra {
		b.WriteString("LIST")
		binary.Write(&b, binary.LittleEndian, uint32(3))
		b.Write([]byte{1, 2, 3, 0}) // odd size + pad byte
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(0x7ffff000))
	b.Write(le(pcm))
	return b.Bytes()
}

func TestWAVSourceIncremental(t *testing.T) {
	pcm := []int16{1, 2, 3, -4, 5}
	for _, extra := range []bool{false, true} {
		src := &wavSource{r: iotest.OneByteReader(bytes.NewReader(streamedWAV(22050, pcm, extra))), buf: make([]byte, 16)}
		s := &pcmStream{provider: "test", src: src, format: formatLinear16, outRate: 22050, cancel: func() {}}
		if got := drainStream(t, s, 2); !slices.Equal(got, pcm) {
			t.Errorf("extra=%v: got %v", extra, got)
		}
		if src.rate() != 22050 {
			t.Errorf("rate %d", src.rate())
		}
	}
}

func TestParseWAVHeaderRejects(t *testing.T) {
	good := streamedWAV(16000, nil, false)
	stereo := slices.Clone(good)
	stereo[22] = 2
	float := slices.Clone(good)
	float[20] = 3
	for name, b := range map[string][]byte{
		"not riff": []byte("RIFX0000WAVE"), "not wave": []byte("RIFF0000AVI "),
		"stereo": stereo, "float": float,
		"data first": append([]byte("RIFF\x00\x00\x00\x00WAVE"), []byte("data\x00\x00\x00\x00")...),
		"huge chunk": append([]byte("RIFF\x00\x00\x00\x00WAVE"), []byte("junk\xff\xff\xff\x7f")...),
	} {
		if _, _, err := parseWAVHeader(b); !errors.Is(err, errBadWAV) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for n := range len(good) {
		if _, ok, err := parseWAVHeader(good[:n]); ok || err != nil {
			t.Fatalf("prefix %d: ok=%v err=%v", n, ok, err)
		}
	}
	// No data chunk within the limit.
	junk := append([]byte("RIFF\x00\x00\x00\x00WAVE"), bytes.Repeat([]byte("pad \x00\x10\x00\x00"+string(make([]byte, 4096))), 3)...)
	src := &wavSource{r: bytes.NewReader(junk), buf: make([]byte, 4096)}
	var err error
	for err == nil {
		_, err = src.next()
	}
	if !errors.Is(err, errBadWAV) && !errors.Is(err, io.EOF) {
		t.Errorf("junk header: %v", err)
	}
}

func FuzzParseWAVHeader(f *testing.F) {
	f.Add(streamedWAV(22050, []int16{1, 2}, true))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, ok, err := parseWAVHeader(b)
		if ok && (err != nil || info.offset > len(b) || info.rate < 4000) {
			t.Fatalf("ok with %+v %v", info, err)
		}
	})
}
