package media

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
)

var rtpLoopback = netip.MustParseAddr("127.0.0.1")

func TestPortRangeValidate(t *testing.T) {
	tests := []struct {
		r     PortRange
		pairs int
		ok    bool
	}{
		{PortRange{10000, 20000}, 5000, true},
		{PortRange{10000, 10001}, 1, true},
		{PortRange{10001, 10004}, 1, true}, // 10002/10003
		{PortRange{10001, 10005}, 2, true}, // 10002/10003, 10004/10005
		{PortRange{10000, 10000}, 0, false},
		{PortRange{10001, 10002}, 0, false},
		{PortRange{0, 100}, 0, false},
		{PortRange{200, 100}, 0, false},
		{PortRange{65534, 65536}, 0, false},
		{PortRange{65534, 65535}, 1, true},
	}
	for _, tt := range tests {
		err := tt.r.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%v.Validate() = %v, want ok=%v", tt.r, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPortRange) {
			t.Errorf("%v.Validate() = %v, want ErrInvalidPortRange", tt.r, err)
		}
		if tt.ok && tt.r.pairs() != tt.pairs {
			t.Errorf("%v.pairs() = %d, want %d", tt.r, tt.r.pairs(), tt.pairs)
		}
	}
	if _, err := NewPortAllocator(rtpLoopback, PortRange{5, 4}); !errors.Is(err, ErrInvalidPortRange) {
		t.Fatalf("NewPortAllocator(bad range) = %v", err)
	}
}

// rtpFreePortRange finds a range of 2*pairs ports on 127.0.0.1 that are all free right now. Ports can be
// taken by others at any time, so tests using it tolerate that by retrying.
func rtpFreePortRange(t *testing.T, pairs int) PortRange {
	t.Helper()
	for range 50 {
		base := 20000 + 2*rand.IntN(20000)
		ok := true
		var conns []*net.UDPConn
		for p := base; p < base+2*pairs; p++ {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
			if err != nil {
				ok = false
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		if ok {
			return PortRange{Min: base, Max: base + 2*pairs - 1}
		}
	}
	t.Fatal("no free port range found on 127.0.0.1")
	return PortRange{}
}

func TestPortAllocatorExhaustReleaseReuse(t *testing.T) {
	r := rtpFreePortRange(t, 2)
	a, err := NewPortAllocator(rtpLoopback, r)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := a.Allocate()
	if err != nil {
		t.Fatal(err)
	}
	p2, err := a.Allocate()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*PortPair{p1, p2} {
		if p.Port()%2 != 0 || p.RTCPPort() != p.Port()+1 || p.Port() < r.Min || p.RTCPPort() > r.Max {
			t.Fatalf("pair %d/%d not an even/odd pair inside %v", p.Port(), p.RTCPPort(), r)
		}
	}
	if p1.Port() == p2.Port() {
		t.Fatalf("same port handed out twice: %d", p1.Port())
	}
	if got := a.InUse(); got != 2 {
		t.Fatalf("InUse = %d, want 2", got)
	}
	if _, err := a.Allocate(); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("Allocate on exhausted range = %v, want ErrPortsExhausted", err)
	}
	released := p1.Port()
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p1.Close(); err != nil { // idempotent, must not release twice
		t.Fatal(err)
	}
	if got := a.InUse(); got != 1 {
		t.Fatalf("InUse after release = %d, want 1", got)
	}
	p3, err := a.Allocate()
	if err != nil {
		t.Fatalf("re-acquire after release: %v", err)
	}
	if p3.Port() != released {
		t.Fatalf("re-acquired port %d, want released %d", p3.Port(), released)
	}
	p2.Close()
	p3.Close()
	if got := a.InUse(); got != 0 {
		t.Fatalf("InUse after closing all = %d, want 0", got)
	}
}

func TestPortAllocatorSkipsPortsTakenByOthers(t *testing.T) {
	r := rtpFreePortRange(t, 2)
	// Another program holds the RTCP port of the first pair: the whole pair must be skipped.
	other, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: r.Min + 1})
	if err != nil {
		t.Skipf("port %d taken meanwhile: %v", r.Min+1, err)
	}
	defer other.Close()
	a, err := NewPortAllocator(rtpLoopback, r)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Allocate()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Port() != r.Min+2 {
		t.Fatalf("got port %d, want %d (first pair is taken)", p.Port(), r.Min+2)
	}
	if _, err := a.Allocate(); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("Allocate = %v, want ErrPortsExhausted", err)
	}
}

func TestPortAllocatorConcurrent(t *testing.T) {
	r := rtpFreePortRange(t, 8)
	a, err := NewPortAllocator(rtpLoopback, r)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held = map[int]bool{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for range 50 {
				p, err := a.Allocate()
				if errors.Is(err, ErrPortsExhausted) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if held[p.Port()] {
					t.Errorf("port %d handed out while held", p.Port())
				}
				held[p.Port()] = true
				mu.Unlock()

				mu.Lock()
				delete(held, p.Port())
				mu.Unlock()
				p.Close()
			}
		})
	}
	wg.Wait()
	if got := a.InUse(); got != 0 {
		t.Fatalf("InUse = %d after all released", got)
	}
}

func TestNewPortPairMux(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPortPair(c, nil)
	if p.RTCPPort() != p.Port() {
		t.Fatalf("muxed RTCP port %d != RTP port %d", p.RTCPPort(), p.Port())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
