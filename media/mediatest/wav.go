package mediatest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// WAV is 16-bit PCM audio read from or written to a RIFF/WAVE file. Samples are interleaved
// when Channels > 1.
type WAV struct {
	Rate     int
	Channels int
	Samples  []int16
}

// Channel returns the samples of channel ch (0 = left) of an interleaved WAV.
func (w *WAV) Channel(ch int) []int16 {
	if w.Channels <= 0 || ch < 0 || ch >= w.Channels {
		return nil
	}
	out := make([]int16, 0, len(w.Samples)/w.Channels)
	for i := ch; i < len(w.Samples); i += w.Channels {
		out = append(out, w.Samples[i])
	}
	return out
}

// EncodeWAV returns a canonical 44-byte-header WAV file of 16-bit PCM.
func EncodeWAV(rate, channels int, samples []int16) []byte {
	var b bytes.Buffer
	data := uint32(2 * len(samples))
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, 36+data)
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(channels), uint32(rate),
		uint32(rate * channels * 2), uint16(channels * 2), uint16(16)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, data)
	binary.Write(&b, binary.LittleEndian, samples)
	return b.Bytes()
}

// WriteWAV writes samples (interleaved if channels > 1) to path as a 16-bit PCM WAV file.
func WriteWAV(path string, rate, channels int, samples []int16) error {
	return os.WriteFile(path, EncodeWAV(rate, channels, samples), 0o644)
}

// ReadWAV reads a 16-bit PCM WAV file.
func ReadWAV(path string) (*WAV, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeWAV(b)
}

// DecodeWAV parses a RIFF/WAVE file of 16-bit PCM, walking its chunks (so extra chunks such as
// LIST are skipped). A data chunk whose declared size runs past the end of the file (as written
// by programs streaming to a pipe) is read up to the end of the file.
func DecodeWAV(b []byte) (*WAV, error) {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, errors.New("mediatest: not a RIFF/WAVE file")
	}
	w := &WAV{}
	haveFmt := false
	for p := 12; p+8 <= len(b); {
		id := string(b[p : p+4])
		size := int(binary.LittleEndian.Uint32(b[p+4 : p+8]))
		body := b[p+8:]
		if size < 0 || size > len(body) {
			if id != "data" {
				return nil, fmt.Errorf("mediatest: WAV chunk %q runs past the end", id)
			}
			size = len(body) &^ 1
		}
		body = body[:size]
		switch id {
		case "fmt ":
			if size < 16 {
				return nil, errors.New("mediatest: short WAV fmt chunk")
			}
			format := binary.LittleEndian.Uint16(body[0:2])
			w.Channels = int(binary.LittleEndian.Uint16(body[2:4]))
			w.Rate = int(binary.LittleEndian.Uint32(body[4:8]))
			bits := binary.LittleEndian.Uint16(body[14:16])
			if (format != 1 && format != 0xfffe) || bits != 16 || w.Channels < 1 {
				return nil, fmt.Errorf("mediatest: WAV format %d with %d bits and %d channels is not 16-bit PCM", format, bits, w.Channels)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, errors.New("mediatest: WAV data before fmt")
			}
			w.Samples = make([]int16, size/2)
			if err := binary.Read(bytes.NewReader(body[:size&^1]), binary.LittleEndian, w.Samples); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return w, nil
		}
		p += 8 + size + size&1
	}
	return nil, errors.New("mediatest: WAV has no data chunk")
}
