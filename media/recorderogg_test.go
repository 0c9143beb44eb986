package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// oggPage is one parsed Ogg page.
type oggPage struct {
	flags   byte
	granule int64
	serial  uint32
	seq     uint32
	packets [][]byte
}

// parseOgg splits an Ogg stream into pages, checking every CRC. A truncated last page is
// ignored (as after a crash).
func parseOgg(t testing.TB, b []byte) []oggPage {
	t.Helper()
	var pages []oggPage
	var partial []byte
	for len(b) >= 27 {
		if string(b[:4]) != "OggS" {
			t.Fatalf("page %d: no capture pattern", len(pages))
		}
		nseg := int(b[26])
		if len(b) < 27+nseg {
			break
		}
		size := 0
		for _, l := range b[27 : 27+nseg] {
			size += int(l)
		}
		total := 27 + nseg + size
		if len(b) < total {
			break
		}
		page := bytes.Clone(b[:total])
		want := binary.LittleEndian.Uint32(page[22:])
		binary.LittleEndian.PutUint32(page[22:], 0)
		if got := oggCRC(0, page); got != want {
			t.Fatalf("page %d: CRC %08x, header says %08x", len(pages), got, want)
		}
		p := oggPage{
			flags:   b[5],
			granule: int64(binary.LittleEndian.Uint64(b[6:])),
			serial:  binary.LittleEndian.Uint32(b[14:]),
			seq:     binary.LittleEndian.Uint32(b[18:]),
		}
		body := b[27+nseg : total]
		for _, l := range b[27 : 27+nseg] {
			partial = append(partial, body[:l]...)
			body = body[l:]
			if l < 255 {
				p.packets = append(p.packets, partial)
				partial = nil
			}
		}
		pages = append(pages, p)
		b = b[total:]
	}
	return pages
}

func TestOggCRCKnownAnswer(t *testing.T) {
	// CRC-32 with polynomial 04c11db7, no reflection, init 0; with a final XOR it is
	// CRC-32/CKSUM, whose check value for "123456789" is 0x765e7680.
	if got := ^oggCRC(0, []byte("123456789")); got != 0x765e7680 {
		t.Fatalf("CRC %08x", got)
	}
}

func TestOggLacing(t *testing.T) {
	var out bytes.Buffer
	o := newOggWriter(&out, 7)
	sizes := []int{0, 1, 254, 255, 256, 510, 1000}
	for i, n := range sizes {
		if err := o.writePacket(bytes.Repeat([]byte{byte(i)}, n), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.flush(oggEOS); err != nil {
		t.Fatal(err)
	}
	if err := o.writePacket(make([]byte, 70000), 0); !errors.Is(err, errOggPacketTooLarge) {
		t.Errorf("huge packet: %v", err)
	}
	pages := parseOgg(t, out.Bytes())
	if len(pages) != 1 || pages[0].flags != oggBOS|oggEOS || pages[0].granule != int64(len(sizes)-1) {
		t.Fatalf("pages %+v", pages)
	}
	for i, p := range pages[0].packets {
		if len(p) != sizes[i] {
			t.Errorf("packet %d: %d bytes, want %d", i, len(p), sizes[i])
		}
	}
	// Many packets spill over pages, each page at most 255 segments.
	out.Reset()
	o = newOggWriter(&out, 8)
	for i := range 600 {
		o.writePacket([]byte{1, 2, 3}, int64(i+1))
	}
	o.flush(0)
	pages = parseOgg(t, out.Bytes())
	n := 0
	for _, p := range pages {
		n += len(p.packets)
		if p.granule != int64(n) {
			t.Errorf("page granule %d after %d packets", p.granule, n)
		}
	}
	if n != 600 || len(pages) != 3 {
		t.Errorf("%d packets on %d pages", n, len(pages))
	}
}
