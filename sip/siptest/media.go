package siptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// openMedia binds the call's RTP and RTCP sockets on 127.0.0.1.
func (c *Call) openMedia() error {
	rtp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	rtcp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		rtp.Close()
		return err
	}
	c.ports = media.NewPortPair(rtp, rtcp)
	a := rtp.LocalAddr().(*net.UDPAddr).AddrPort()
	c.rtpAddr = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	return nil
}

// rtcpPort is advertised with a=rtcp so the peer sends RTCP to the right socket.
func (c *Call) rtcpPort() int { return c.ports.RTCPPort() }

// startRTP starts sending and receiving once the media is negotiated.
func (c *Call) startRTP() {
	if c.rtpOn.Swap(true) {
		return
	}
	c.mu.Lock()
	remote := c.remoteRTP
	audio := c.audio
	c.mu.Unlock()
	ep, err := media.NewRTPEndpoint(context.Background(), media.RTPConfig{
		Ports: c.ports, Remote: remote, PayloadType: audio.PayloadType, ClockRate: audio.ClockRate,
		InactivityTimeout: -1, RTCPInterval: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		c.rtpOn.Store(false)
		return
	}
	c.mu.Lock()
	c.ep = ep
	c.mu.Unlock()
	c.mediaWG.Add(1)
	go c.runMedia()
}

// stopMedia stops the RTP loop and releases the sockets.
func (c *Call) stopMedia() {
	c.mu.Lock()
	select {
	case <-c.mediaStop:
	default:
		close(c.mediaStop)
	}
	ep := c.ep
	c.mu.Unlock()
	c.mediaWG.Wait()
	if ep != nil {
		ep.Close()
	} else if c.ports != nil {
		c.ports.Close()
	}
}

type codecState struct {
	info codec.Info
	enc  codec.Encoder
	dec  codec.Decoder
	up   *codec.Resampler // 16 kHz → codec
	down *codec.Resampler // codec → 16 kHz
}

func newCodecState(info codec.Info) (*codecState, error) {
	enc, err := codec.NewEncoder(info)
	if err != nil {
		return nil, err
	}
	dec, err := codec.NewDecoder(info)
	if err != nil {
		return nil, err
	}
	s := &codecState{info: info, enc: enc, dec: dec}
	if enc.SampleRate() != 16000 {
		s.up, _ = codec.NewResampler(16000, enc.SampleRate())
		s.down, _ = codec.NewResampler(dec.SampleRate(), 16000)
	}
	return s, nil
}

func (s *codecState) close() {
	for _, x := range []any{s.enc, s.dec} {
		if cl, ok := x.(io.Closer); ok {
			cl.Close()
		}
	}
}

// runMedia sends a frame every 20 ms and records what arrives.
func (c *Call) runMedia() {
	defer c.mediaWG.Done()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	var (
		cs     *codecState
		frame  [960]int16
		tmp    [960]int16
		out    [960]int16
		pay    [1500]byte
		pkt    media.RTPPacket
		dtmfRx codec.DTMFReceiver
		ts     uint32 = 1000
		first         = true
	)
	defer func() {
		if cs != nil {
			cs.close()
		}
	}()
	for {
		select {
		case <-c.mediaStop:
			return
		case <-c.p.ctx.Done():
			return
		case <-tk.C:
		}
		c.mu.Lock()
		audio, src, ep, dtmfPT := c.audio, c.source, c.ep, c.dtmfPT
		c.mu.Unlock()
		if cs == nil || !strings.EqualFold(cs.info.Name, audio.Name) || cs.info.PayloadType != audio.PayloadType {
			if cs != nil {
				cs.close()
			}
			ns, err := newCodecState(audio)
			if err != nil {
				continue
			}
			cs = ns
		}
		// Receive.
		for ep.TryReadPacket(&pkt) {
			c.rxPackets.Add(1)
			c.ptRecv.Store(int32(pkt.PayloadType))
			if int(pkt.PayloadType) == dtmfPT {
				if d, _, ok := dtmfRx.Push(pkt.Timestamp, pkt.Payload); ok {
					c.mu.Lock()
					c.dtmf = append(c.dtmf, d)
					c.mu.Unlock()
				}
				continue
			}
			if pkt.PayloadType != cs.info.PayloadType {
				continue
			}
			n, err := cs.dec.Decode(tmp[:], pkt.Payload)
			if err != nil {
				continue
			}
			pcm := tmp[:n]
			if cs.down != nil {
				m := cs.down.Process(out[:], pcm)
				pcm = out[:m]
			}
			c.mu.Lock()
			if len(c.heard)+len(pcm) <= maxHeard {
				c.heard = append(c.heard, pcm...)
			}
			c.mu.Unlock()
		}
		// Send.
		if c.muteTx.Load() {
			continue
		}
		pcm := frame[:320]
		if src != nil {
			src(pcm)
		} else {
			clear(pcm)
		}
		if cs.up != nil {
			m := cs.up.Process(tmp[:], pcm)
			pcm = tmp[:m]
		}
		n, err := cs.enc.Encode(pay[:], pcm)
		if err != nil {
			continue
		}
		if err := ep.WriteRTP(cs.info.PayloadType, first, ts, pay[:n]); err == nil {
			c.txPackets.Add(1)
			first = false
		}
		ts += cs.info.ClockRate / 50
	}
}

// SendDTMF sends digits as RFC 4733 telephone-events.
func (c *Call) SendDTMF(ctx context.Context, digits string) error {
	c.mu.Lock()
	ep, pt := c.ep, c.dtmfPT
	c.mu.Unlock()
	if ep == nil || pt < 0 {
		return errors.New("siptest: no telephone-event negotiated")
	}
	gen, err := codec.NewDTMFGenerator(8000, digits, 100, 100)
	if err != nil {
		return err
	}
	// Each event needs a timestamp of its own (RFC 4733 §2.5.1.3: a receiver tells events
	// apart by it): digits of a later call start after the last one sent.
	base := ep.TimestampNow() + 100000
	c.mu.Lock()
	if c.dtmfSent && int32(base-c.dtmfNext) < 0 {
		base = c.dtmfNext
	}
	c.mu.Unlock()
	var buf [4]byte
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		n, marker, off, ok := gen.Next(buf[:])
		c.mu.Lock()
		if next := base + off + 8000; !c.dtmfSent || int32(next-c.dtmfNext) > 0 {
			c.dtmfNext, c.dtmfSent = next, true
		}
		c.mu.Unlock()
		if !ok {
			return nil
		}
		if n > 0 {
			ep.WriteRTP(uint8(pt), marker, base+off, buf[:n])
		}
		select {
		case <-tk.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
