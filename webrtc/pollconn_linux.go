//go:build linux

package webrtc

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/parley-voice/parley/media"
)

// pollBatch is how many datagrams one recvmmsg call may take off the shared socket.
const pollBatch = 64

// pollConn is the shared ICE socket as the UDP mux reads it (ice.UDPMuxDefault's one reader
// goroutine calls ReadFromAddrPort). While the service has calls (active), the reader does not
// wait in the poller for each datagram: every period it takes all the datagrams queued on the
// socket with one non-blocking recvmmsg(2) and hands them to the mux one by one. Every call's
// packets of a period are then handled in one burst, so the process wakes once per period
// instead of once per packet of every call, and a burst of N datagrams costs one system call
// instead of N (plus the poller's). The price is up to one period of added delay on the way in
// (Options.ReadPeriod; the page's audio is played out by the packets' own schedule, see
// the receive chain (media.Playout), whose slack of three frames covers it).
// Without calls it blocks in the poller as a plain socket does, so an idle node costs nothing.
//
// Writes go straight to the socket (embedded *net.UDPConn). Not safe for concurrent reads: the
// mux has one reader.
type pollConn struct {
	*net.UDPConn
	rc     syscall.RawConn
	active func() bool
	period time.Duration
	closed atomic.Bool
	tk     *time.Ticker // the reads' schedule while active (a ticker: the reads keep their phase)

	// The batch: msgs[i] describes bufs[i] and names[i]; next..n are not handed out yet.
	msgs  [pollBatch]mmsghdr
	iovs  [pollBatch]unix.Iovec
	names [pollBatch]unix.RawSockaddrAny
	bufs  [pollBatch][receiveMTU]byte
	next  int
	n     int
	// recvFn is p.recvmmsg, bound once (a closure per read would allocate); it leaves its
	// answer in got and errno.
	recvFn func(fd uintptr) bool
	got    int
	errno  syscall.Errno

	polls, datagrams atomic.Uint64 // recvmmsg calls that returned datagrams, datagrams read
}

// mmsghdr is struct mmsghdr of recvmmsg(2): a msghdr and the length received.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// receiveMTU is the largest datagram taken (pion/webrtc reads the ICE connection with buffers of
// this size); a larger one is dropped whole rather than handed on cut.
const receiveMTU = 1500

func newPollConn(c *net.UDPConn, period time.Duration, active func() bool) (*pollConn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	p := &pollConn{UDPConn: c, rc: rc, active: active, period: period}
	p.recvFn = p.recvmmsg
	for i := range p.msgs {
		p.iovs[i].Base = &p.bufs[i][0]
		p.iovs[i].SetLen(receiveMTU)
		p.msgs[i].hdr.Iov = &p.iovs[i]
		p.msgs[i].hdr.SetIovlen(1)
		p.msgs[i].hdr.Name = (*byte)(unsafe.Pointer(&p.names[i]))
	}
	return p, nil
}

// ReadFromAddrPort returns the next datagram (ice.AddrPortReaderWriter): from the batch, else
// from a new recvmmsg, else after waiting a period (or, without calls, in the poller).
func (p *pollConn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		for p.next < p.n {
			i := p.next
			p.next++
			from, ok := sockaddrAddrPort(&p.names[i])
			if !ok || p.msgs[i].hdr.Flags&unix.MSG_TRUNC != 0 {
				continue // not an IP datagram, or larger than WebRTC takes: cannot be ICE media
			}
			return copy(b, p.bufs[i][:p.msgs[i].len]), from, nil
		}
		if p.closed.Load() {
			return 0, netip.AddrPort{}, net.ErrClosed
		}
		if !p.active() {
			if p.tk != nil {
				p.tk.Stop()
				p.tk = nil
			}
			return p.UDPConn.ReadFromUDPAddrPort(b)
		}
		n, err := p.recv()
		if err != nil {
			return 0, netip.AddrPort{}, err
		}
		if n == 0 {
			// Nothing queued: the next batch is at the next tick. A ticker rather than a sleep
			// after each batch, so that handling a batch (or a late wake-up) does not push
			// the reads later and later.
			if p.tk == nil {
				p.tk = media.NewGridTicker(p.period) // in phase with the media clock's ticks
			}
			<-p.tk.C
			continue
		}
		p.next, p.n = 0, n
	}
}

// recv takes the datagrams queued on the socket, up to pollBatch, without waiting.
func (p *pollConn) recv() (int, error) {
	for i := range p.msgs {
		p.msgs[i].hdr.Namelen = uint32(unsafe.Sizeof(p.names[i]))
		p.msgs[i].hdr.Flags = 0
		p.msgs[i].len = 0
	}
	if err := p.rc.Read(p.recvFn); err != nil {
		return 0, err // closed
	}
	n, errno := p.got, p.errno
	switch {
	case errno == 0:
		p.polls.Add(1)
		p.datagrams.Add(uint64(n))
		return n, nil
	case errno == unix.EAGAIN:
		return 0, nil
	case errno == unix.ECONNREFUSED || errno == unix.EHOSTUNREACH || errno == unix.ENETUNREACH:
		return 0, nil // an ICMP error for an earlier send: nothing to read
	}
	return 0, errno
}

// recvmmsg is one non-blocking recvmmsg(2) on the socket, run by rc.Read.
func (p *pollConn) recvmmsg(fd uintptr) bool {
	for {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&p.msgs[0])), pollBatch, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		p.got, p.errno = int(r), e
		return true // never wait in the poller: an empty socket is an answer
	}
}

// ReadFrom is net.PacketConn's read, for completeness (the mux uses ReadFromAddrPort).
func (p *pollConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := p.ReadFromAddrPort(b)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// WriteToAddrPort writes one datagram (ice.AddrPortReaderWriter).
func (p *pollConn) WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return p.UDPConn.WriteToUDPAddrPort(b, addr)
}

// Close closes the socket; a read waiting for its tick returns net.ErrClosed after it.
func (p *pollConn) Close() error {
	p.closed.Store(true)
	return p.UDPConn.Close()
}

// sockaddrAddrPort converts a received IPv4 or IPv6 address.
func sockaddrAddrPort(sa *unix.RawSockaddrAny) (netip.AddrPort, bool) {
	switch sa.Addr.Family {
	case unix.AF_INET:
		in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&in.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), port), true
	case unix.AF_INET6:
		in := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&in.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(in.Addr), port), true
	}
	return netip.AddrPort{}, false
}
