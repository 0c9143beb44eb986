package sip_test

import (
	"encoding/binary"
	"os"
	"time"

	"github.com/parley-voice/parley/codec"
)

// writeRTPPcap writes a pcap file (libpcap format, Ethernet link type) of an RTP stream carrying
// pcm (8 kHz) as PCMU in 20 ms packets, for sipp's play_pcap_audio. Addresses and ports are
// placeholders: sipp rewrites them to the call's.
func writeRTPPcap(path string, pcm []int16) error {
	var b []byte
	le := binary.LittleEndian
	hdr := make([]byte, 24)
	le.PutUint32(hdr[0:], 0xa1b2c3d4) // magic: microsecond timestamps
	le.PutUint16(hdr[4:], 2)
	le.PutUint16(hdr[6:], 4)
	le.PutUint32(hdr[16:], 65535) // snaplen
	le.PutUint32(hdr[20:], 1)     // LINKTYPE_ETHERNET
	b = append(b, hdr...)
	start := time.Unix(1700000000, 0)
	seq := uint16(1000)
	ts := uint32(160000)
	payload := make([]byte, 160)
	for i := 0; i+160 <= len(pcm); i += 160 {
		codec.EncodeMulaw(payload, pcm[i:i+160])
		rtp := make([]byte, 12+160)
		rtp[0] = 0x80
		rtp[1] = 0 // PCMU
		if i == 0 {
			rtp[1] |= 0x80
		}
		binary.BigEndian.PutUint16(rtp[2:], seq)
		binary.BigEndian.PutUint32(rtp[4:], ts)
		binary.BigEndian.PutUint32(rtp[8:], 0x12345678)
		copy(rtp[12:], payload)
		seq++
		ts += 160
		frame := ethIPUDP(rtp)
		at := start.Add(time.Duration(i/160) * 20 * time.Millisecond)
		rec := make([]byte, 16)
		le.PutUint32(rec[0:], uint32(at.Unix()))
		le.PutUint32(rec[4:], uint32(at.Nanosecond()/1000))
		le.PutUint32(rec[8:], uint32(len(frame)))
		le.PutUint32(rec[12:], uint32(len(frame)))
		b = append(b, rec...)
		b = append(b, frame...)
	}
	return os.WriteFile(path, b, 0o644)
}

// ethIPUDP wraps a UDP payload in Ethernet, IPv4 and UDP headers (127.0.0.1:6000 → :6002).
func ethIPUDP(payload []byte) []byte {
	be := binary.BigEndian
	udpLen := 8 + len(payload)
	ipLen := 20 + udpLen
	f := make([]byte, 14+ipLen)
	be.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	be.PutUint16(ip[2:], uint16(ipLen))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:], []byte{127, 0, 0, 1})
	copy(ip[16:], []byte{127, 0, 0, 1})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(be.Uint16(ip[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	be.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[20:]
	be.PutUint16(udp[0:], 6000)
	be.PutUint16(udp[2:], 6002)
	be.PutUint16(udp[4:], uint16(udpLen))
	copy(udp[8:], payload)
	return f
}
