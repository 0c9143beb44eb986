package media

import (
	"encoding/binary"
	"errors"
	"io"
)

// oggCRCTable is the lookup table of the Ogg CRC-32 (RFC 3533 §6: polynomial 0x04c11db7,
// initial value 0, no reflection, no final XOR).
var oggCRCTable = func() (t [256]uint32) {
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04c11db7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return t
}()

func oggCRC(crc uint32, b []byte) uint32 {
	for _, v := range b {
		crc = crc<<8 ^ oggCRCTable[byte(crc>>24)^v]
	}
	return crc
}

// Ogg page header flags (RFC 3533 §6).
const (
	oggContinued = 0x01
	oggBOS       = 0x02
	oggEOS       = 0x04
)

const (
	oggMaxSegments = 255
	oggMaxBody     = 16 << 10 // this writer never builds bigger pages
)

var errOggPacketTooLarge = errors.New("media: Ogg packet too large for a page")

// oggWriter writes one logical Ogg bitstream (RFC 3533) as whole packets. Packets gather into a
// page until it is full or flushed; every page is complete (header, lacing, CRC) when written,
// so a file cut after any page is valid up to it. It allocates nothing after construction.
type oggWriter struct {
	w       io.Writer
	serial  uint32
	seq     uint32
	granule int64 // granule position after the last packet added
	bos     bool  // the next page is the first
	nseg    int
	segs    [oggMaxSegments]byte
	body    []byte
	hdr     [27 + oggMaxSegments]byte
	packets int // packets on the pending page
}

func newOggWriter(w io.Writer, serial uint32) *oggWriter {
	return &oggWriter{w: w, serial: serial, bos: true, body: make([]byte, 0, oggMaxBody)}
}

// writePacket adds one packet that ends at granule position granule, flushing the pending page
// first when the packet does not fit in it.
func (o *oggWriter) writePacket(p []byte, granule int64) error {
	lacing := len(p)/255 + 1
	if lacing > oggMaxSegments || len(p) > oggMaxBody {
		return errOggPacketTooLarge
	}
	if o.nseg+lacing > oggMaxSegments || len(o.body)+len(p) > oggMaxBody {
		if err := o.flush(0); err != nil {
			return err
		}
	}
	for n := len(p); ; n -= 255 {
		if n >= 255 {
			o.segs[o.nseg] = 255
			o.nseg++
			continue
		}
		o.segs[o.nseg] = byte(n)
		o.nseg++
		break
	}
	o.body = append(o.body, p...)
	o.granule = granule
	o.packets++
	return nil
}

// flush writes the pending page (with extra flags such as oggEOS) if it holds any packet, or
// an empty page when flags ask for one (an EOS with nothing pending).
func (o *oggWriter) flush(flags byte) error {
	if o.packets == 0 && flags == 0 {
		return nil
	}
	if o.bos {
		flags |= oggBOS
		o.bos = false
	}
	h := o.hdr[:27+o.nseg]
	copy(h, "OggS")
	h[4] = 0 // version
	h[5] = flags
	binary.LittleEndian.PutUint64(h[6:], uint64(o.granule))
	binary.LittleEndian.PutUint32(h[14:], o.serial)
	binary.LittleEndian.PutUint32(h[18:], o.seq)
	binary.LittleEndian.PutUint32(h[22:], 0)
	h[26] = byte(o.nseg)
	copy(h[27:], o.segs[:o.nseg])
	crc := oggCRC(oggCRC(0, h), o.body)
	binary.LittleEndian.PutUint32(h[22:], crc)
	o.seq++
	o.nseg, o.packets = 0, 0
	body := o.body
	o.body = o.body[:0]
	if _, err := o.w.Write(h); err != nil {
		return err
	}
	_, err := o.w.Write(body)
	return err
}
