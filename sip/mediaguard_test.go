package sip_test

import (
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestNoRTPBeforeAck is issue 22 item 7: an INVITE's SDP may name any address (the report
// used c=8.8.8.8), so nothing is sent there until the ACK shows the caller takes the call.
// The SDP here names a 127.0.0.1 socket that counts what reaches it: nothing while the 200
// waits for its ACK, the agent's audio (or silence) once it came.
func TestNoRTPBeforeAck(t *testing.T) {
	e := newEngine(t, engineOptions{})
	r := &lifeRouter{e: e, calls: map[string]*lifeCall{}}
	srv := newServer(t, sip.Options{Router: r})
	rtp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rtp.Close()
	var got atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := rtp.ReadFrom(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	u := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", rtp.LocalAddr().(*net.UDPAddr).AddrPort())
	if !u.WaitStatus(200, 200, 5*time.Second) {
		t.Fatalf("no 200: %v", u)
	}
	time.Sleep(600 * time.Millisecond) // the greeting and the filler would be flowing by now
	if n := got.Load(); n != 0 {
		t.Fatalf("%d packets sent to the SDP address before the ACK", n)
	}
	u.Ack()
	waitFor(t, 3*time.Second, "RTP after the ACK", func() bool { return got.Load() > 5 })
	u.Bye()
	waitFor(t, 3*time.Second, "the call's end", func() bool { return len(srv.ActiveCalls()) == 0 })
}

// TestTrunkMediaCIDRs (issue 22 item 7): a trunk that lists its media networks has INVITEs
// whose SDP puts media elsewhere refused 488 with Warning 305, and nothing sent there; an
// address inside them is taken.
func TestTrunkMediaCIDRs(t *testing.T) {
	e := newEngine(t, engineOptions{})
	r := &lifeRouter{e: e, calls: map[string]*lifeCall{}}
	tr := loopbackTrunk("carrier")
	tr.MediaCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	srv := newServer(t, sip.Options{Router: r, Trunks: sip.NewStaticTrunks(tr)})
	u := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	u.Invite("+15550100", netip.MustParseAddrPort("127.0.0.1:40000"))
	if !u.WaitStatus(488, 488, 5*time.Second) || !strings.Contains(u.FinalReason(), "media address") {
		t.Fatalf("want 488 media address: %v", u)
	}
	ok := siptest.NewRawUA(t, srv.Addr(sip.UDP), "udp")
	ok.Invite("+15550100", netip.MustParseAddrPort("127.0.0.2:40000"))
	if !ok.WaitStatus(200, 200, 5*time.Second) {
		t.Fatalf("no 200 for media inside the trunk's networks: %v", ok)
	}
	ok.Ack()
	ok.Bye()
	waitFor(t, 3*time.Second, "the calls' end", func() bool { return len(srv.ActiveCalls()) == 0 })
}
