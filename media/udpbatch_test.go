package media

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// The benchmarks in this file answer one question for the RTP endpoint: with one UDP socket per
// call, does recvmmsg/sendmmsg (golang.org/x/net/ipv4 ReadBatch/WriteBatch) move more packets per
// core than plain recvfrom/sendto (ReadFromUDPAddrPort/WriteToUDPAddrPort)?
//
// Setup: 500 flows on 127.0.0.1, each a pair of sockets (the peer's and Parley's), 172-byte
// packets (12-byte RTP header + 160 bytes of G.711 = 20 ms). One round sends `depth` packets on
// every flow and then reads them all back. depth=1 is the steady state of a call (one packet per
// socket every 20 ms, so the receive queue rarely holds more than one); depth=4 models a burst
// after a scheduling stall, the only case where a batched read can collect several packets.
//
// Reported metrics: pkts/s (wall clock, one goroutine), pkts/cpu-s (packets per second of process
// CPU time, user+system, i.e. per core), send-ns/pkt and recv-ns/pkt. The benchmark is bounded: 500
// flows, b.N rounds, rtpLoopback only.

const (
	udpBenchFlows   = 500
	udpBenchPktSize = 172
)

type udpBenchFlow struct {
	peer    *net.UDPConn // sends
	parley  *net.UDPConn // receives
	dst     netip.AddrPort
	dstAddr *net.UDPAddr
	peerPC  *ipv4.PacketConn
	recvPC  *ipv4.PacketConn
}

func openUDPBenchFlows(b *testing.B) []udpBenchFlow {
	b.Helper()
	flows := make([]udpBenchFlow, udpBenchFlows)
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	for i := range flows {
		peer, err := net.ListenUDP("udp4", lo)
		if err != nil {
			b.Fatalf("listen: %v", err)
		}
		parley, err := net.ListenUDP("udp4", lo)
		if err != nil {
			b.Fatalf("listen: %v", err)
		}
		b.Cleanup(func() { peer.Close(); parley.Close() })
		ua := parley.LocalAddr().(*net.UDPAddr)
		flows[i] = udpBenchFlow{
			peer: peer, parley: parley,
			dst:     ua.AddrPort(),
			dstAddr: ua,
			peerPC:  ipv4.NewPacketConn(peer),
			recvPC:  ipv4.NewPacketConn(parley),
		}
	}
	return flows
}

func udpCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportUDPBench(b *testing.B, pkts int, send, recv, cpu time.Duration) {
	b.Helper()
	if pkts == 0 {
		return
	}
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "pkts/s")
	if cpu > 0 {
		b.ReportMetric(float64(pkts)/cpu.Seconds(), "pkts/cpu-s")
	}
	b.ReportMetric(float64(send.Nanoseconds())/float64(pkts), "send-ns/pkt")
	b.ReportMetric(float64(recv.Nanoseconds())/float64(pkts), "recv-ns/pkt")
}

func BenchmarkUDPFlows500(b *testing.B) {
	for _, depth := range []int{1, 4} {
		b.Run(fmt.Sprintf("plain/depth=%d", depth), func(b *testing.B) { benchUDPPlain(b, depth) })
		b.Run(fmt.Sprintf("batch/depth=%d", depth), func(b *testing.B) { benchUDPBatch(b, depth) })
	}
}

func benchUDPPlain(b *testing.B, depth int) {
	flows := openUDPBenchFlows(b)
	pkt := make([]byte, udpBenchPktSize)
	pkt[0] = 0x80
	buf := make([]byte, 1500)
	var send, recv time.Duration
	pkts := 0
	b.ReportAllocs()
	cpu0 := udpCPUTime()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		for i := range flows {
			for range depth {
				if _, err := flows[i].peer.WriteToUDPAddrPort(pkt, flows[i].dst); err != nil {
					b.Fatal(err)
				}
			}
		}
		t1 := time.Now()
		for i := range flows {
			for range depth {
				n, _, err := flows[i].parley.ReadFromUDPAddrPort(buf)
				if err != nil || n != udpBenchPktSize {
					b.Fatalf("read %d, %v", n, err)
				}
			}
		}
		t2 := time.Now()
		send += t1.Sub(t0)
		recv += t2.Sub(t1)
		pkts += depth * len(flows)
	}
	b.StopTimer()
	reportUDPBench(b, pkts, send, recv, udpCPUTime()-cpu0)
}

func benchUDPBatch(b *testing.B, depth int) {
	flows := openUDPBenchFlows(b)
	pkt := make([]byte, udpBenchPktSize)
	pkt[0] = 0x80
	const maxBatch = 8
	wms := make([]ipv4.Message, depth)
	rms := make([]ipv4.Message, maxBatch)
	for i := range rms {
		rms[i].Buffers = [][]byte{make([]byte, 1500)}
	}
	for i := range wms {
		wms[i].Buffers = [][]byte{pkt}
	}
	var send, recv time.Duration
	pkts := 0
	b.ReportAllocs()
	cpu0 := udpCPUTime()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		for i := range flows {
			for j := range wms {
				wms[j].Addr = flows[i].dstAddr
			}
			for sent := 0; sent < depth; {
				n, err := flows[i].peerPC.WriteBatch(wms[sent:], 0)
				if err != nil {
					b.Fatal(err)
				}
				sent += n
			}
		}
		t1 := time.Now()
		for i := range flows {
			for got := 0; got < depth; {
				n, err := flows[i].recvPC.ReadBatch(rms[:depth-got], 0)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
		}
		t2 := time.Now()
		send += t1.Sub(t0)
		recv += t2.Sub(t1)
		pkts += depth * len(flows)
	}
	b.StopTimer()
	reportUDPBench(b, pkts, send, recv, udpCPUTime()-cpu0)
}
