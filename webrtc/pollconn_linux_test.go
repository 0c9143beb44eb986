//go:build linux

package webrtc

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

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
			sock := listenLoopback(t, network)
			p, err := newPollConn(sock, 5*time.Millisecond, func() bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			dst := sock.LocalAddr().(*net.UDPAddr).AddrPort()
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
	sock := listenLoopback(t, "udp4")
	var active atomic.Bool
	p, err := newPollConn(sock, 5*time.Millisecond, active.Load)
	if err != nil {
		t.Fatal(err)
	}
	dst := sock.LocalAddr().(*net.UDPAddr).AddrPort()
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
	if p.polls.Load() != 1 {
		t.Fatalf("%d batched reads, want 1 (the active one)", p.polls.Load())
	}
}

// Close ends a read that is waiting a period.
func TestPollConnClose(t *testing.T) {
	sock := listenLoopback(t, "udp4")
	p, err := newPollConn(sock, 5*time.Millisecond, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := p.ReadFromAddrPort(make([]byte, 1500))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read outlived Close")
	}
}

// BenchmarkPollConnRead is the mux's read of one datagram through a batch of 32 (the
// recvmmsg is shared by the batch): nothing allocates.
func BenchmarkPollConnRead(b *testing.B) {
	sock := listenLoopback(b, "udp4")
	_ = sock.SetReadBuffer(1 << 20)
	p, err := newPollConn(sock, time.Millisecond, func() bool { return true })
	if err != nil {
		b.Fatal(err)
	}
	peer := listenLoopback(b, "udp4")
	dst := sock.LocalAddr().(*net.UDPAddr).AddrPort()
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
	sock := listenLoopback(t, "udp4")
	p, err := newPollConn(sock, 5*time.Millisecond, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	peer := listenLoopback(t, "udp4")
	dst := sock.LocalAddr().(*net.UDPAddr).AddrPort()
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
