package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/parley-voice/parley/codec"
)

// Ogg/Opus files as a whole (RFC 3533, RFC 7845): the voice notes of the messaging app
// (audio/ogg; codecs=opus). These are for files of a message, not for the frame path: they
// allocate freely.

// ErrNotOggOpus says a file is not an Ogg/Opus stream this reader takes (one logical stream,
// mono or stereo, channel mapping family 0).
var ErrNotOggOpus = errors.New("media: not an Ogg/Opus file")

// MaxOggOpusDuration bounds what DecodeOggOpus decodes: longer files are cut there.
const MaxOggOpusDuration = 10 * 60 // seconds

// DecodeOggOpus decodes a whole Ogg/Opus file to mono 16-bit PCM at rate (8000, 12000, 16000,
// 24000 or 48000 Hz). The pre-skip of the header is dropped. Pages whose CRC does not match
// are refused (ErrNotOggOpus), as is a file with no Opus header.
func DecodeOggOpus(data []byte, rate int) ([]int16, error) {
	packets, err := oggPackets(data)
	if err != nil {
		return nil, err
	}
	if len(packets) < 2 || len(packets[0]) < 19 || string(packets[0][:8]) != "OpusHead" {
		return nil, fmt.Errorf("%w: no OpusHead", ErrNotOggOpus)
	}
	head := packets[0]
	if head[9] < 1 || head[9] > 2 || head[18] != 0 {
		return nil, fmt.Errorf("%w: %d channels, mapping family %d", ErrNotOggOpus, head[9], head[18])
	}
	preSkip := int(binary.LittleEndian.Uint16(head[10:])) * rate / 48000
	if string(packets[1][:min(8, len(packets[1]))]) != "OpusTags" {
		return nil, fmt.Errorf("%w: no OpusTags", ErrNotOggOpus)
	}
	dec, err := codec.NewOpusDecoder(rate)
	if err != nil {
		return nil, err
	}
	buf := make([]int16, rate*120/1000)
	limit := MaxOggOpusDuration * rate
	out := make([]int16, 0, rate)
	for _, p := range packets[2:] {
		if len(p) == 0 {
			continue
		}
		n, err := dec.Decode(buf, p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotOggOpus, err)
		}
		out = append(out, buf[:n]...)
		if len(out) >= limit {
			out = out[:limit]
			break
		}
	}
	if preSkip < len(out) {
		out = out[preSkip:]
	}
	return out, nil
}

// oggPackets reads the packets of the first logical stream of an Ogg file, checking every
// page's CRC.
func oggPackets(data []byte) ([][]byte, error) {
	var (
		packets [][]byte
		partial []byte
		serial  uint32
		first   = true
	)
	for len(data) > 0 {
		if len(data) < 27 || string(data[:4]) != "OggS" || data[4] != 0 {
			return nil, fmt.Errorf("%w: bad page header", ErrNotOggOpus)
		}
		nseg := int(data[26])
		if len(data) < 27+nseg {
			return nil, fmt.Errorf("%w: short page", ErrNotOggOpus)
		}
		segs := data[27 : 27+nseg]
		size := 0
		for _, s := range segs {
			size += int(s)
		}
		end := 27 + nseg + size
		if len(data) < end {
			return nil, fmt.Errorf("%w: short page body", ErrNotOggOpus)
		}
		page := bytes.Clone(data[:end])
		want := binary.LittleEndian.Uint32(page[22:])
		binary.LittleEndian.PutUint32(page[22:], 0)
		if oggCRC(0, page) != want {
			return nil, fmt.Errorf("%w: page CRC mismatch", ErrNotOggOpus)
		}
		s := binary.LittleEndian.Uint32(data[14:])
		if first {
			serial, first = s, false
		}
		body := data[27+nseg : end]
		data = data[end:]
		if s != serial {
			continue // another logical stream: not ours
		}
		for _, l := range segs {
			partial = append(partial, body[:l]...)
			body = body[l:]
			if l < 255 {
				packets = append(packets, partial)
				partial = nil
			}
		}
	}
	return packets, nil
}

// EncodeOggOpus encodes mono 16-bit PCM at rate (8000, 12000, 16000, 24000 or 48000 Hz) as an
// Ogg/Opus file of 20 ms packets, as a messaging app's voice note is.
func EncodeOggOpus(pcm []int16, rate int) ([]byte, error) {
	enc, err := codec.NewOpusEncoder(codec.OpusOptions{SampleRate: rate, Application: "voip"})
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	preSkip, err := enc.Lookahead()
	if err != nil {
		return nil, err
	}
	preSkip = preSkip * 48000 / rate
	var out bytes.Buffer
	w := newOggWriter(&out, 0x50617231)
	var head [19]byte
	copy(head[0:], "OpusHead")
	head[8], head[9] = 1, 1
	binary.LittleEndian.PutUint16(head[10:], uint16(preSkip))
	binary.LittleEndian.PutUint32(head[12:], uint32(rate))
	if err := w.writePacket(head[:], 0); err != nil {
		return nil, err
	}
	if err := w.flush(0); err != nil {
		return nil, err
	}
	const vendor = "parley"
	var tags [8 + 4 + len(vendor) + 4]byte
	copy(tags[0:], "OpusTags")
	binary.LittleEndian.PutUint32(tags[8:], uint32(len(vendor)))
	copy(tags[12:], vendor)
	if err := w.writePacket(tags[:], 0); err != nil {
		return nil, err
	}
	if err := w.flush(0); err != nil {
		return nil, err
	}
	frame := rate / 50
	packet := make([]byte, 1500)
	granule := int64(preSkip)
	buf := make([]int16, frame)
	for off := 0; off < len(pcm); off += frame {
		clear(buf)
		copy(buf, pcm[off:min(off+frame, len(pcm))])
		n, err := enc.Encode(packet, buf)
		if err != nil {
			return nil, err
		}
		granule += 960
		if err := w.writePacket(packet[:n], granule); err != nil {
			return nil, err
		}
	}
	if err := w.flush(oggEOS); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
