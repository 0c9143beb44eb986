package tts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

var errBadWAV = errors.New("tts: bad WAV stream")

// wavMaxHeader bounds how much is read looking for the data chunk.
const wavMaxHeader = 8192

// wavSource reads a streamed RIFF/WAVE file (as espeak-ng --stdout writes it: the sizes in the
// header are placeholders because the length is not known in advance). It parses the header
// incrementally, then yields the PCM bytes of the data chunk one read at a time.
type wavSource struct {
	r       io.Reader
	buf     []byte
	hdr     []byte
	hz      int
	started bool
}

func (s *wavSource) rate() int { return s.hz }

func (s *wavSource) next() ([]byte, error) {
	n, err := s.r.Read(s.buf)
	b := s.buf[:n]
	if s.started {
		return b, err
	}
	s.hdr = append(s.hdr, b...)
	data, ok, perr := parseWAVHeader(s.hdr)
	if perr != nil {
		return nil, perr
	}
	if !ok {
		if len(s.hdr) > wavMaxHeader {
			return nil, fmt.Errorf("%w: no data chunk in the first %d bytes", errBadWAV, wavMaxHeader)
		}
		return nil, err
	}
	s.hz = data.rate
	s.started = true
	return s.hdr[data.offset:], err
}

type wavInfo struct {
	rate   int
	offset int // where the PCM starts
}

// parseWAVHeader parses as much of a RIFF/WAVE header as b holds. ok is false while more bytes
// are needed. It accepts only PCM (format 1), mono, 16-bit, and a data size that may be a
// placeholder (streaming).
func parseWAVHeader(b []byte) (info wavInfo, ok bool, err error) {
	if len(b) < 12 {
		if len(b) >= 4 && string(b[:4]) != "RIFF" {
			return info, false, fmt.Errorf("%w: no RIFF signature", errBadWAV)
		}
		return info, false, nil
	}
	if string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return info, false, fmt.Errorf("%w: not RIFF/WAVE", errBadWAV)
	}
	p := 12
	haveFmt := false
	for {
		if len(b) < p+8 {
			return info, false, nil
		}
		id := string(b[p : p+4])
		size := int64(binary.LittleEndian.Uint32(b[p+4 : p+8]))
		body := p + 8
		if id == "data" {
			if !haveFmt {
				return info, false, fmt.Errorf("%w: data chunk before fmt chunk", errBadWAV)
			}
			info.offset = body
			return info, true, nil
		}
		if size > wavMaxHeader {
			return info, false, fmt.Errorf("%w: %q chunk of %d bytes in the header", errBadWAV, id, size)
		}
		end := body + int(size) + int(size&1)
		if len(b) < end {
			return info, false, nil
		}
		if id == "fmt " {
			if size < 16 {
				return info, false, fmt.Errorf("%w: fmt chunk of %d bytes", errBadWAV, size)
			}
			format := binary.LittleEndian.Uint16(b[body:])
			channels := binary.LittleEndian.Uint16(b[body+2:])
			rate := binary.LittleEndian.Uint32(b[body+4:])
			bits := binary.LittleEndian.Uint16(b[body+14:])
			if format != 1 || channels != 1 || bits != 16 {
				return info, false, fmt.Errorf("%w: format %d, %d channels, %d bits (want PCM mono 16-bit)", errBadWAV, format, channels, bits)
			}
			if rate < 4000 || rate > 192000 {
				return info, false, fmt.Errorf("%w: sample rate %d", errBadWAV, rate)
			}
			info.rate = int(rate)
			haveFmt = true
		}
		p = end
	}
}
