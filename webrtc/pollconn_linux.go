//go:build linux

package webrtc

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/parley-voice/parley/media"
)

// pollBatch is how many datagrams one recvmmsg call may take off the shared socket.
const pollBatch = 64

// pollConn is the shared ICE socket (ice.UDPMuxDefault's one reader goroutine calls
// ReadFromAddrPort). While the service has calls (active), the reader does not wait for each
// datagram: every period it takes all the datagrams queued on the socket with one non-blocking
// recvmmsg(2) and hands them to the mux one by one. Every call's packets of a period are then
// handled in one burst, so the process wakes once per period instead of once per packet of
// every call, and a burst of N datagrams costs one system call instead of N. The price is up to
// one period of added delay on the way in (Options.ReadPeriod; the page's audio is played out
// by the packets' own schedule, see the receive chain (media.Playout), whose slack of three
// frames covers it).
//
// The socket is Parley's own file descriptor, not a net.UDPConn: a socket in the Go runtime's
// poller (epoll, edge-triggered) wakes a thread for every datagram that arrives, even when no
// goroutine waits to read it, and at 5 web calls those were ~250 of the process's ~600 wake-ups
// a second (strace: an epoll_pwait returning the socket every ~5 ms between the ticks).
// Without calls the reader waits in poll(2) (a blocking system call on its own thread), so an
// idle node costs nothing and the first packets of a call are read as they come.
//
// Writes are non-blocking sendto(2) calls from any goroutine; a full send buffer is waited on
// for at most sendWait, then the datagram is refused (UDP: a lost packet, as on the wire). Close
// wakes a waiting read (an eventfd) and closes the descriptor once no call is using it.
type pollConn struct {
	fd     int
	family int // unix.AF_INET or unix.AF_INET6
	local  *net.UDPAddr
	wakeFd int // eventfd written by Close: ends a read waiting in poll(2)

	mu     sync.RWMutex // read-held around each system call on fd; Close write-holds it to close fd
	closed atomic.Bool
	active func() bool
	period time.Duration
	tk     *time.Ticker // the reads' schedule while active (a ticker: the reads keep their phase)

	// The batch: msgs[i] describes bufs[i] and names[i]; next..n are not handed out yet.
	msgs  [pollBatch]mmsghdr
	iovs  [pollBatch]unix.Iovec
	names [pollBatch]unix.RawSockaddrAny
	bufs  [pollBatch][receiveMTU]byte
	next  int
	n     int

	polls, datagrams atomic.Uint64 // recvmmsg calls that returned datagrams, datagrams read
	idleWaits        atomic.Uint64 // reads that waited in poll(2) (no calls)
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

// sendWait bounds how long a write waits for room in a full send buffer.
const sendWait = 10 * time.Millisecond

// listenPollConn opens the shared socket on laddr ("udp4" or "udp6"), with kernel buffers of
// bufSize bytes asked for.
func listenPollConn(network string, laddr *net.UDPAddr, bufSize int, period time.Duration, active func() bool) (*pollConn, error) {
	family := unix.AF_INET
	var sa unix.Sockaddr
	switch network {
	case "udp4":
		ip4 := laddr.IP.To4()
		if ip4 == nil {
			return nil, fmt.Errorf("webrtc: %v is not an IPv4 address", laddr.IP)
		}
		sa = &unix.SockaddrInet4{Port: laddr.Port, Addr: [4]byte(ip4)}
	case "udp6":
		family = unix.AF_INET6
		ip6 := laddr.IP.To16()
		if ip6 == nil {
			return nil, fmt.Errorf("webrtc: %v is not an IP address", laddr.IP)
		}
		sa = &unix.SockaddrInet6{Port: laddr.Port, Addr: [16]byte(ip6)}
	default:
		return nil, fmt.Errorf("webrtc: network %q", network)
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(op string, err error) (*pollConn, error) {
		unix.Close(fd)
		return nil, &net.OpError{Op: "listen", Net: network, Addr: laddr, Err: os.NewSyscallError(op, err)}
	}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fail("setsockopt", err)
		}
	}
	// Best effort, as net.UDPConn.SetReadBuffer: the kernel caps the sizes at rmem_max/wmem_max.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, bufSize)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, bufSize)
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	wakeFd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail("eventfd", err)
	}
	p := &pollConn{fd: fd, family: family, wakeFd: wakeFd, active: active, period: period}
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		p.local = &net.UDPAddr{IP: net.IP(b.Addr[:]), Port: b.Port}
	case *unix.SockaddrInet6:
		p.local = &net.UDPAddr{IP: net.IP(b.Addr[:]), Port: b.Port}
	}
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
// from a new recvmmsg, else after waiting a period (or, without calls, in poll(2)).
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
		n, err := p.recv()
		if err != nil {
			return 0, netip.AddrPort{}, err
		}
		if n > 0 {
			p.next, p.n = 0, n
			continue
		}
		if !p.active() {
			// No calls: wait in the kernel for the next datagram (or Close).
			if p.tk != nil {
				p.tk.Stop()
				p.tk = nil
			}
			if err := p.waitReadable(); err != nil {
				return 0, netip.AddrPort{}, err
			}
			continue
		}
		// Nothing queued: the next batch is at the next tick. A ticker rather than a sleep
		// after each batch, so that handling a batch (or a late wake-up) does not push the
		// reads later and later.
		if p.tk == nil {
			p.tk = media.NewGridTicker(p.period) // in phase with the media clock's ticks
		}
		<-p.tk.C
	}
}

// recv takes the datagrams queued on the socket, up to pollBatch, without waiting.
func (p *pollConn) recv() (int, error) {
	for i := range p.msgs {
		p.msgs[i].hdr.Namelen = uint32(unsafe.Sizeof(p.names[i]))
		p.msgs[i].hdr.Flags = 0
		p.msgs[i].len = 0
	}
	p.mu.RLock()
	if p.closed.Load() {
		p.mu.RUnlock()
		return 0, net.ErrClosed
	}
	var r uintptr
	var errno syscall.Errno
	for {
		r, _, errno = unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.msgs[0])), pollBatch, unix.MSG_DONTWAIT, 0, 0)
		if errno != unix.EINTR {
			break
		}
	}
	p.mu.RUnlock()
	switch {
	case errno == 0:
		p.polls.Add(1)
		p.datagrams.Add(uint64(r))
		return int(r), nil
	case errno == unix.EAGAIN:
		return 0, nil
	case errno == unix.ECONNREFUSED || errno == unix.EHOSTUNREACH || errno == unix.ENETUNREACH:
		return 0, nil // an ICMP error for an earlier send: nothing to read
	}
	return 0, &net.OpError{Op: "read", Net: "udp", Addr: p.local, Err: os.NewSyscallError("recvmmsg", errno)}
}

// waitReadable blocks in poll(2) until the socket has a datagram or Close was called.
func (p *pollConn) waitReadable() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed.Load() {
		return net.ErrClosed
	}
	p.idleWaits.Add(1)
	fds := [2]unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}, {Fd: int32(p.wakeFd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &net.OpError{Op: "read", Net: "udp", Addr: p.local, Err: os.NewSyscallError("poll", err)}
		}
		if p.closed.Load() {
			return net.ErrClosed
		}
		return nil
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

// WriteToAddrPort sends one datagram (ice.AddrPortReaderWriter). Safe for concurrent use.
func (p *pollConn) WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	var sa4 unix.RawSockaddrInet4
	var sa6 unix.RawSockaddrInet6
	var sa unsafe.Pointer
	var salen uintptr
	ip := addr.Addr()
	if p.family == unix.AF_INET {
		ip = ip.Unmap()
		if !ip.Is4() {
			return 0, &net.OpError{Op: "write", Net: "udp4", Addr: net.UDPAddrFromAddrPort(addr), Err: syscall.EAFNOSUPPORT}
		}
		sa4.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:], addr.Port())
		sa4.Addr = ip.As4()
		sa, salen = unsafe.Pointer(&sa4), unsafe.Sizeof(sa4)
	} else {
		sa6.Family = unix.AF_INET6
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa6.Port))[:], addr.Port())
		sa6.Addr = ip.As16()
		sa, salen = unsafe.Pointer(&sa6), unsafe.Sizeof(sa6)
	}
	var buf unsafe.Pointer
	if len(b) > 0 {
		buf = unsafe.Pointer(&b[0])
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed.Load() {
		return 0, net.ErrClosed
	}
	waited := false
	for {
		r, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(p.fd), uintptr(buf), uintptr(len(b)), 0, uintptr(sa), salen)
		switch {
		case errno == 0:
			return int(r), nil
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN && !waited:
			// The send buffer is full (a burst to many calls): wait for room, once.
			waited = true
			fds := [1]unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLOUT}}
			_, _ = unix.Poll(fds[:], int(sendWait/time.Millisecond))
			continue
		}
		return 0, &net.OpError{Op: "write", Net: "udp", Source: p.local, Addr: net.UDPAddrFromAddrPort(addr), Err: os.NewSyscallError("sendto", errno)}
	}
}

// WriteTo is net.PacketConn's write.
func (p *pollConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, &net.OpError{Op: "write", Net: "udp", Source: p.local, Addr: addr, Err: syscall.EINVAL}
	}
	return p.WriteToAddrPort(b, ua.AddrPort())
}

// LocalAddr is the socket's bound address.
func (p *pollConn) LocalAddr() net.Addr { return p.local }

// SetDeadline, SetReadDeadline and SetWriteDeadline do nothing: a read ends with Close, and a
// write never waits longer than sendWait (the UDP mux arms a write deadline only to abort a
// blocked write).
func (p *pollConn) SetDeadline(time.Time) error      { return nil }
func (p *pollConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pollConn) SetWriteDeadline(time.Time) error { return nil }

// Close wakes a read waiting in poll(2) and closes the socket once no system call uses it; a
// read waiting for its tick returns net.ErrClosed after it. Safe to call twice.
func (p *pollConn) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(p.wakeFd, one[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	unix.Close(p.wakeFd)
	return unix.Close(p.fd)
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
