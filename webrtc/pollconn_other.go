//go:build !linux

package webrtc

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// pollConn batches the shared socket's reads with recvmmsg(2), which only Linux has; elsewhere
// the UDP mux reads a net.UDPConn itself.
type pollConn struct {
	*net.UDPConn
	polls, datagrams atomic.Uint64
}

func listenPollConn(network string, laddr *net.UDPAddr, bufSize int, period time.Duration, active func() bool) (*pollConn, error) {
	return nil, errPollUnsupported
}

func (p *pollConn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	return p.UDPConn.ReadFromUDPAddrPort(b)
}

func (p *pollConn) WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return p.UDPConn.WriteToUDPAddrPort(b, addr)
}
