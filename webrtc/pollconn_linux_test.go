//go:build linux

package webrtc

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// openPollConn opens a pollConn on a loopback port of network.
func openPollConn(t testing.TB, network string, period time.Duration, active func() bool) *pollConn {
	t.Helper()
	ip := net.IPv4(127, 0, 0, 1)
	if network == "udp6" {
		ip = net.IPv6loopback
	}
	p, err := listenPollConn(network, &net.UDPAddr{IP: ip}, 1<<20, period, active)
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func listenLoopback(t testing.TB, network string) *net.UDPConn {
	t.Helper()
	ip := net.IPv4(127, 0, 0, 1)
	if network == "udp6" {
		ip = net.IPv6loopback
	}
	c, err := net.ListenUDP(network, &net.UDPAddr{IP: ip})
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// While active, the datagrams queued on the socket come out of one recvmmsg, in order, each
// with its sender's address and its own bytes; for IPv4 and IPv6.
func TestPollConnBatches(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			p := openPollConn(t, network, 5*time.Millisecond, func() bool { return true })
			dst := p.local.AddrPort()
			senders := []*net.UDPConn{listenLoopback(t, network), listenLoopback(t, network), listenLoopback(t, network)}
			type sent struct {
				from netip.AddrPort
				body string
			}
			var want []sent
			for i := range 12 {
				s := senders[i%len(senders)]
				body := string(rune('a'+i)) + "-datagram"
				if _, err := s.WriteToUDPAddrPort([]byte(body), dst); err != nil {
					t.Fatal(err)
				}
				want = append(want, sent{s.LocalAddr().(*net.UDPAddr).AddrPort(), body})
			}
			time.Sleep(20 * time.Millisecond) // loopback delivers at once; leave room anyway
			buf := make([]byte, 1500)
			for i, w := range want {
				n, from, err := p.ReadFromAddrPort(buf)
				if err != nil {
					t.Fatal(err)
				}
				if got := string(buf[:n]); got != w.body || from != w.from {
					t.Fatalf("datagram %d: %q from %v, want %q from %v", i, got, from, w.body, w.from)
				}
			}
			if p.polls.Load() != 1 || p.datagrams.Load() != 12 {
				t.Fatalf("%d recvmmsg calls for %d datagrams, want 1 for 12", p.polls.Load(), p.datagrams.Load())
			}
		})
	}
}

// Reads wait a period when nothing is queued and then find what came meanwhile; without calls
// (not active) a read waits in the poller for the next datagram, as a plain socket does.
func TestPollConnWaitsAndBlocks(t *testing.T) {
	var active atomic.Bool
	p := openPollConn(t, "udp4", 5*time.Millisecond, active.Load)
	dst := p.local.AddrPort()
	peer := listenLoopback(t, "udp4")
	for _, on := range []bool{false, true} {
		active.Store(on)
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 1500)
			n, _, err := p.ReadFromAddrPort(buf)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(buf[:n])
		}()
		time.Sleep(30 * time.Millisecond)
		select {
		case g := <-got:
			t.Fatalf("active=%v: a read returned %q with nothing sent", on, g)
		default:
		}
		if _, err := peer.WriteToUDPAddrPort([]byte("hello"), dst); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-got:
			if g != "hello" {
				t.Fatalf("active=%v: read %q", on, g)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("active=%v: the datagram was never read", on)
		}
	}
	if p.polls.Load() != 2 || p.idleWaits.Load() != 1 {
		t.Fatalf("%d reads that found datagrams, %d waits in poll(2); want 2 and 1 (the idle read waited in the kernel)", p.polls.Load(), p.idleWaits.Load())
	}
}

// Close ends a read that is waiting a period (calls up) or waiting in poll(2) (no calls), and
// then reads and writes answer net.ErrClosed; a second Close does nothing.
func TestPollConnClose(t *testing.T) {
	for _, active := range []bool{true, false} {
		p := openPollConn(t, "udp4", 5*time.Millisecond, func() bool { return active })
		done := make(chan error, 1)
		go func() {
			_, _, err := p.ReadFromAddrPort(make([]byte, 1500))
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("active=%v: read after close: %v", active, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("active=%v: a read outlived Close", active)
		}
		if _, _, err := p.ReadFromAddrPort(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed conn: %v", err)
		}
		if _, err := p.WriteToAddrPort([]byte("x"), netip.MustParseAddrPort("127.0.0.1:9")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write on a closed conn: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// Writes reach their peer from the conn's own address, for IPv4 (also given as an IPv4-mapped
// IPv6 address) and IPv6, from many goroutines at once; an IPv6 destination on an IPv4 socket,
// and a port already taken, are errors.
func TestPollConnWrites(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			p := openPollConn(t, network, 5*time.Millisecond, func() bool { return true })
			peer := listenLoopback(t, network)
			dst := peer.LocalAddr().(*net.UDPAddr).AddrPort()
			dsts := []netip.AddrPort{dst}
			if network == "udp4" {
				dsts = append(dsts, netip.AddrPortFrom(netip.AddrFrom16(dst.Addr().As16()), dst.Port()))
			}
			const each = 50
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range each {
						d := dsts[i%len(dsts)]
						var err error
						if g%2 == 0 {
							_, err = p.WriteToAddrPort([]byte("datagram"), d)
						} else {
							_, err = p.WriteTo([]byte("datagram"), net.UDPAddrFromAddrPort(d))
						}
						if err != nil {
							t.Errorf("write to %v: %v", d, err)
						}
					}
				})
			}
			wg.Wait()
			buf := make([]byte, 100)
			_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			for i := range 4 * each {
				n, from, err := peer.ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if string(buf[:n]) != "datagram" || from != p.local.AddrPort() {
					t.Fatalf("datagram %d: %q from %v, want from %v", i, buf[:n], from, p.local.AddrPort())
				}
			}
			if network == "udp4" {
				if _, err := p.WriteToAddrPort([]byte("x"), netip.MustParseAddrPort("[::1]:9")); err == nil {
					t.Fatal("an IPv6 destination on an IPv4 socket was accepted")
				}
			}
			if _, err := listenPollConn(network, p.local, 1<<16, time.Millisecond, func() bool { return true }); err == nil {
				t.Fatalf("a second socket bound %v", p.local)
			}
		})
	}
}

// BenchmarkPollConnRead is the mux's read of one datagram through a batch of 32 (the
// recvmmsg is shared by the batch): nothing allocates.
func BenchmarkPollConnRead(b *testing.B) {
	p := openPollConn(b, "udp4", time.Millisecond, func() bool { return true })
	peer := listenLoopback(b, "udp4")
	dst := p.local.AddrPort()
	pkt := make([]byte, 172)
	buf := make([]byte, 1500)
	const batch = 32
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%batch == 0 {
			b.StopTimer()
			for range batch {
				_, _ = peer.WriteToUDPAddrPort(pkt, dst)
			}
			b.StartTimer()
		}
		if _, _, err := p.ReadFromAddrPort(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// A datagram larger than WebRTC takes is dropped whole, not handed on cut; the next one comes.
func TestPollConnDropsOversized(t *testing.T) {
	p := openPollConn(t, "udp4", 5*time.Millisecond, func() bool { return true })
	peer := listenLoopback(t, "udp4")
	dst := p.local.AddrPort()
	if _, err := peer.WriteToUDPAddrPort(make([]byte, receiveMTU+1), dst); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.WriteToUDPAddrPort([]byte("small"), dst); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	buf := make([]byte, 2*receiveMTU)
	n, _, err := p.ReadFromAddrPort(buf)
	if err != nil || string(buf[:n]) != "small" {
		t.Fatalf("read %d bytes %q, %v; want the small datagram", n, buf[:min(n, 8)], err)
	}
}

// BenchmarkPollConnWrite is one datagram sent (the agent's RTP to a page): nothing allocates.
func BenchmarkPollConnWrite(b *testing.B) {
	p := openPollConn(b, "udp4", time.Millisecond, func() bool { return true })
	peer := listenLoopback(b, "udp4")
	_ = peer.SetReadBuffer(1 << 20)
	dst := peer.LocalAddr().(*net.UDPAddr).AddrPort()
	pkt := make([]byte, 172)
	buf := make([]byte, 1500)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := p.WriteToAddrPort(pkt, dst); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 { // keep the peer's buffer from filling
			b.StopTimer()
			_ = peer.SetReadDeadline(time.Now().Add(time.Millisecond))
			for {
				if _, _, err := peer.ReadFromUDPAddrPort(buf); err != nil {
					break
				}
			}
			b.StartTimer()
		}
	}
}
