package media

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// ErrPortsExhausted is returned by PortAllocator.Allocate when every RTP/RTCP port pair of the
// range is either held by Parley or bound by another program.
var ErrPortsExhausted = errors.New("media: no free RTP port pair in range")

// ErrInvalidPortRange is returned for a PortRange that cannot hold one RTP/RTCP pair.
var ErrInvalidPortRange = errors.New("media: invalid RTP port range")

// DefaultPortRange is the range used when PARLEY_RTP_PORTS is not set.
var DefaultPortRange = PortRange{Min: 10000, Max: 20000}

// PortRange is an inclusive range of UDP ports for RTP and RTCP (PARLEY_RTP_PORTS, "Min-Max").
type PortRange struct {
	Min, Max int
}

// Validate reports whether r holds at least one even RTP port p with p+1 (RTCP) also in r.
func (r PortRange) Validate() error {
	if r.Min < 1 || r.Max > 65535 || r.Min > r.Max {
		return fmt.Errorf("%w: %d-%d (want 1 <= min <= max <= 65535)", ErrInvalidPortRange, r.Min, r.Max)
	}
	if r.pairs() == 0 {
		return fmt.Errorf("%w: %d-%d holds no even port p with p+1 in range", ErrInvalidPortRange, r.Min, r.Max)
	}
	return nil
}

// base is the first even port of r.
func (r PortRange) base() int { return r.Min + r.Min%2 }

// pairs is the number of (even, even+1) port pairs inside r.
func (r PortRange) pairs() int {
	b := r.base()
	if r.Max-1 < b {
		return 0
	}
	return (r.Max-1-b)/2 + 1
}

// PortAllocator hands out RTP/RTCP port pairs from a PortRange: an even port for RTP and the next
// odd port for RTCP (RFC 3550 §11, RFC 3551 §8), each bound as a real UDP socket. Ports another
// program holds are skipped. A released pair can be handed out again; the allocator walks the
// range round-robin so that a port just released is reused last, which keeps late packets of an
// ended call away from a new one while the range has room. It is safe for concurrent use.
type PortAllocator struct {
	ip    netip.Addr
	r     PortRange
	mu    sync.Mutex
	inUse []bool // index i is the pair (base+2i, base+2i+1)
	held  int
	next  int
}

// NewPortAllocator returns an allocator binding pairs from r on ip. An invalid (zero) ip binds the
// wildcard address of both families.
func NewPortAllocator(ip netip.Addr, r PortRange) (*PortAllocator, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &PortAllocator{ip: ip.Unmap(), r: r, inUse: make([]bool, r.pairs())}, nil
}

// Range returns the allocator's port range.
func (a *PortAllocator) Range() PortRange { return a.r }

// InUse returns the number of pairs currently held by Parley.
func (a *PortAllocator) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// Allocate binds the next free pair. The caller owns the returned pair and must Close it, which
// closes both sockets and returns the pair to the allocator.
func (a *PortAllocator) Allocate() (*PortPair, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.inUse)
	var lastErr error
	for k := range n {
		i := (a.next + k) % n
		if a.inUse[i] {
			continue
		}
		port := a.r.base() + 2*i
		rtpConn, rtcpConn, err := a.bindPair(port)
		if err != nil {
			lastErr = err // taken by another program: skip it
			continue
		}
		a.inUse[i] = true
		a.held++
		a.next = (i + 1) % n
		pp := NewPortPair(rtpConn, rtcpConn)
		pp.release = func() { a.release(i) }
		return pp, nil
	}
	if lastErr != nil {
		return nil, fmt.Errorf("%w %d-%d (%d held by Parley; last bind error: %v)",
			ErrPortsExhausted, a.r.Min, a.r.Max, a.held, lastErr)
	}
	return nil, fmt.Errorf("%w %d-%d (all %d held by Parley)", ErrPortsExhausted, a.r.Min, a.r.Max, a.held)
}

func (a *PortAllocator) release(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inUse[i] {
		a.inUse[i] = false
		a.held--
	}
}

func (a *PortAllocator) bindPair(port int) (*net.UDPConn, *net.UDPConn, error) {
	network, ip := "udp", net.IP(nil)
	if a.ip.IsValid() {
		ip = a.ip.AsSlice()
		network = "udp6"
		if a.ip.Is4() {
			network = "udp4"
		}
	}
	rtpConn, err := net.ListenUDP(network, &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, nil, err
	}
	rtcpConn, err := net.ListenUDP(network, &net.UDPAddr{IP: ip, Port: port + 1})
	if err != nil {
		rtpConn.Close()
		return nil, nil, err
	}
	return rtpConn, rtcpConn, nil
}

// PortPair is a bound RTP socket and its RTCP socket. Pairs from a PortAllocator have adjacent
// ports (even, odd); pairs made with NewPortPair may have any ports, or share one socket for
// RTP/RTCP multiplexing (RFC 5761) when RTCP is nil.
type PortPair struct {
	RTP  *net.UDPConn
	RTCP *net.UDPConn // nil: RTCP is multiplexed on RTP

	closeOnce sync.Once
	closeErr  error
	release   func()
}

// NewPortPair wraps sockets the caller bound itself (for example on 127.0.0.1:0 in tests).
// rtcp may be nil when RTCP is multiplexed on the RTP socket.
func NewPortPair(rtp, rtcp *net.UDPConn) *PortPair {
	return &PortPair{RTP: rtp, RTCP: rtcp}
}

// Port returns the local RTP port (the port to put in the SDP m= line).
func (p *PortPair) Port() int { return p.RTP.LocalAddr().(*net.UDPAddr).Port }

// RTCPPort returns the local RTCP port (equal to Port when RTCP is multiplexed).
func (p *PortPair) RTCPPort() int {
	if p.RTCP == nil {
		return p.Port()
	}
	return p.RTCP.LocalAddr().(*net.UDPAddr).Port
}

// Close closes both sockets and returns the pair to its allocator. It is idempotent.
func (p *PortPair) Close() error {
	p.closeOnce.Do(func() {
		err := p.RTP.Close()
		if p.RTCP != nil {
			err = errors.Join(err, p.RTCP.Close())
		}
		p.closeErr = err
		if p.release != nil {
			p.release()
		}
	})
	return p.closeErr
}
