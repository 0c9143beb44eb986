package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// testUAS is an in-process SIP user agent server standing in for Parley: it answers every
// INVITE with PCMU, plays a greeting tone greetAfter after its 200 OK, and answers each of the
// caller's utterances (heard by energy) with a tone replyAfter[i] after the arrival of the last
// loud packet, played for replyLen.
type testUAS struct {
	t          *testing.T
	srv        *sipgo.Server
	ua         *sipgo.UserAgent
	conn       net.PacketConn
	addr       netip.AddrPort
	dialogs    *sipgo.DialogServerCache
	greetAfter time.Duration
	replyAfter []time.Duration
	replyLen   time.Duration

	mu     sync.Mutex
	byes   int
	calls  map[string]*uasCall // by the caller's number
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newTestUAS(t *testing.T, greetAfter time.Duration, replyAfter []time.Duration) *testUAS {
	t.Helper()
	u := &testUAS{t: t, greetAfter: greetAfter, replyAfter: replyAfter, replyLen: 300 * time.Millisecond, calls: map[string]*uasCall{}}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.conn = conn
	a := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	u.addr = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	u.ua, _ = sipgo.NewUA(sipgo.WithUserAgent("test-uas"), sipgo.WithUserAgentHostname("127.0.0.1"),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(quiet)),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerLogger(quiet)))
	u.ua.TransportLayer().Pool("udp").Add(conn.LocalAddr().String(),
		&sip.UDPConnection{PacketConn: conn, PacketAddr: conn.LocalAddr().String(), Listener: true})
	u.srv, _ = sipgo.NewServer(u.ua, sipgo.WithServerLogger(quiet))
	cli, _ := sipgo.NewClient(u.ua, sipgo.WithClientLogger(quiet), sipgo.WithClientHostname("127.0.0.1"),
		sipgo.WithClientConnectionAddr(u.addr.String()))
	u.dialogs = sipgo.NewDialogServerCache(cli, sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "uas", Host: "127.0.0.1", Port: int(u.addr.Port())}})
	u.srv.OnInvite(u.onInvite)
	u.srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	u.srv.OnAck(func(req *sip.Request, tx sip.ServerTransaction) { u.dialogs.ReadAck(req, tx) })
	u.srv.OnBye(func(req *sip.Request, tx sip.ServerTransaction) {
		u.mu.Lock()
		u.byes++
		if c := u.calls[req.From().Address.User]; c != nil {
			c.ended = true
		}
		u.mu.Unlock()
		if err := u.dialogs.ReadBye(req, tx); err != nil {
			tx.Respond(sip.NewResponseFromRequest(req, 481, "Call/Transaction Does Not Exist", nil))
		}
	})
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		u.srv.ServeUDP(conn)
	}()
	t.Cleanup(u.close)
	return u
}

func (u *testUAS) close() {
	u.cancel()
	u.srv.Close()
	u.ua.Close()
	u.conn.Close()
	u.wg.Wait()
}

func (u *testUAS) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	offer, err := parseSDPAnswer(req.Body())
	if err != nil {
		tx.Respond(sip.NewResponseFromRequest(req, 488, "Not Acceptable Here", nil))
		return
	}
	dlg, err := u.dialogs.ReadInvite(req, tx)
	if err != nil {
		tx.Respond(sip.NewResponseFromRequest(req, 500, "Server Error", nil))
		return
	}
	rtp, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	rtcp, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	ports := media.NewPortPair(rtp, rtcp)
	ep, err := media.NewRTPEndpoint(u.ctx, media.RTPConfig{Ports: ports, Remote: offer.RTP, RemoteRTCP: offer.RTCP,
		PayloadType: 0, ClockRate: 8000, InactivityTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		ports.Close()
		tx.Respond(sip.NewResponseFromRequest(req, 500, "Server Error", nil))
		return
	}
	answer := sdpOffer(netip.MustParseAddr("127.0.0.1"), ports.Port(), ports.RTCPPort(), 1)
	if err := dlg.RespondSDP(answer); err != nil {
		ep.Close()
		return
	}
	answered := time.Now()
	call := &uasCall{}
	u.mu.Lock()
	u.calls[req.From().Address.User] = call
	u.mu.Unlock()
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer ep.Close()
		u.serveMedia(dlg.Context(), ep, answered, call)
	}()
}

// uasCall is what the UAS reports of a call, as Parley's API would.
type uasCall struct {
	greeted time.Time // the greeting's first packet left
	turns   []APITurn
	ended   bool
}

// conversations returns the calls as the API's conversations.
func (u *testUAS) conversations() []Conversation {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Conversation
	for from, c := range u.calls {
		status := "in_progress"
		if c.ended {
			status = "ended"
		}
		f := from
		out = append(out, Conversation{ID: "conv-" + from, Status: status, FromNumber: &f, Turns: append([]APITurn(nil), c.turns...)})
	}
	return out
}

// play sends replyLen of tone from at on, one packet per 20 ms on an absolute schedule, and
// returns when its first packet really left.
func (u *testUAS) play(ctx context.Context, ep *media.RTPEndpoint, at time.Time) time.Time {
	pcm := tone(int(u.replyLen/time.Millisecond)*8, 8000, 440, 0.3)
	var pay [160]byte
	var first time.Time
	for i := 0; i+160 <= len(pcm); i += 160 {
		next := at.Add(time.Duration(i/160) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			return first
		case <-time.After(time.Until(next)):
		}
		codec.EncodeMulaw(pay[:], pcm[i:i+160])
		if first.IsZero() {
			first = time.Now()
		}
		ep.WriteSample(pay[:], 160)
	}
	return first
}

func (u *testUAS) serveMedia(ctx context.Context, ep *media.RTPEndpoint, answered time.Time, call *uasCall) {
	g := u.play(ctx, ep, answered.Add(u.greetAfter))
	u.mu.Lock()
	call.greeted = g
	u.mu.Unlock()
	ear := NewEnergyDetector(0, 150*time.Millisecond)
	var pkt media.RTPPacket
	var pcm [1024]int16
	turn := 0
	for {
		if err := ep.ReadPacket(ctx, &pkt); err != nil {
			return
		}
		n := codec.DecodeMulaw(pcm[:], pkt.Payload)
		// Time a packet by its arrival as the end of its audio, so the offset is the arrival of
		// the last loud packet.
		start := pkt.ReceivedAt.Add(-time.Duration(n) * time.Second / 8000)
		if ev, at := ear.Push(start, pcm[:n], 8000); ev == EnergyOffset && turn < len(u.replyAfter) {
			sent := u.play(ctx, ep, at.Add(u.replyAfter[turn]))
			share := 0.5
			at := at
			u.mu.Lock()
			call.turns = append(call.turns, APITurn{Turn: turn + 1, SpeechEnd: &at, EndOfTurn: &at, LLMRequestSent: &at, LLMFirstToken: &at,
				TTSFirstRequest: &at, TTSFirstByte: &sent, FirstAudioOut: &sent})
			call.turns[len(call.turns)-1].LatencyMS.ParleyShare = &share
			u.mu.Unlock()
			turn++
		}
	}
}

// TestSIPCallerMeasuresKnownDelays places a real SIP call (sipgo signalling, RTP over
// loopback) to an in-process UAS that answers with tones after known delays, and checks that
// the caller measures them within a frame.
func TestSIPCallerMeasuresKnownDelays(t *testing.T) {
	greet := 180 * time.Millisecond
	replies := []time.Duration{250 * time.Millisecond, 470 * time.Millisecond}
	uas := newTestUAS(t, greet, replies)
	pacer := NewPacer(context.Background(), 2, 20*time.Millisecond)
	defer pacer.Close()
	c, err := NewSIPCaller(SIPCallerOptions{Server: uas.addr, Number: "+15550100", Pacer: pacer})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, err := NewUtterance("hi", tone(2400, 8000, 300, 0.3), 8000)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := c.Call(ctx, "+15551234567", ScriptOptions{Utterances: []Utterance{u}, Turns: 2, Greeting: true,
		Hangover: 300 * time.Millisecond, ReplyTimeout: 5 * time.Second})
	if res.Failed() {
		t.Fatalf("call failed: %s (%s)", res.Failure, res.Reason)
	}
	if res.SIPStatus != 200 || res.Setup <= 0 || res.Setup > time.Second {
		t.Errorf("status %d, setup %v", res.SIPStatus, res.Setup)
	}
	// The caller's measures are checked against when the UAS really sent its audio (a loaded
	// machine may send late; the measure must still be right), and loosely against the plan.
	const frame = 20 * time.Millisecond
	uas.mu.Lock()
	call := uas.calls["+15551234567"]
	greeted, turns := call.greeted, append([]APITurn(nil), call.turns...)
	uas.mu.Unlock()
	if d := res.Script.Greeting - greeted.Sub(res.Answered); d < -frame || d > frame {
		t.Errorf("greeting latency %v, but the greeting left %v after the answer", res.Script.Greeting, greeted.Sub(res.Answered))
	}
	if d := res.Script.Greeting - greet; d < -frame || d > 10*frame {
		t.Errorf("greeting latency %v for a planned %v", res.Script.Greeting, greet)
	}
	if len(res.Script.Turns) != 2 || len(turns) != 2 {
		t.Fatalf("%d turns measured, %d answered", len(res.Script.Turns), len(turns))
	}
	for i, tu := range res.Script.Turns {
		sent := turns[i].FirstAudioOut.Sub(tu.SpeechEnd)
		t.Logf("turn %d: measured %v; the reply left %v after the speech end (planned %v)", i+1, tu.Latency, sent, replies[i])
		if d := tu.Latency - sent; d < -frame || d > frame {
			t.Errorf("turn %d latency %v, but the reply left %v after the speech end", i+1, tu.Latency, sent)
		}
		if d := tu.Latency - replies[i]; d < -frame || d > 10*frame {
			t.Errorf("turn %d latency %v for a planned %v", i+1, tu.Latency, replies[i])
		}
	}
	if res.PacketsReceived < 40 || res.PacketsLost != 0 || res.LossFraction() != 0 {
		t.Errorf("received %d packets, lost %d", res.PacketsReceived, res.PacketsLost)
	}
	// The caller hung up with a BYE the UAS answered.
	uas.mu.Lock()
	byes := uas.byes
	uas.mu.Unlock()
	if byes != 1 {
		t.Errorf("the UAS got %d BYEs", byes)
	}
}

func TestSIPCallerRefusal(t *testing.T) {
	// A UAS that refuses: the call fails with the status as its reason.
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ua, _ := sipgo.NewUA()
	ua.TransportLayer().Pool("udp").Add(conn.LocalAddr().String(), &sip.UDPConnection{PacketConn: conn, PacketAddr: conn.LocalAddr().String(), Listener: true})
	srv, _ := sipgo.NewServer(ua)
	srv.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		tx.Respond(sip.NewResponseFromRequest(req, 480, "Temporarily Unavailable", nil))
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.ServeUDP(conn) }()
	defer func() { srv.Close(); ua.Close(); conn.Close(); wg.Wait() }()

	pacer := NewPacer(context.Background(), 1, 20*time.Millisecond)
	defer pacer.Close()
	a := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	c, err := NewSIPCaller(SIPCallerOptions{Server: netip.AddrPortFrom(a.Addr().Unmap(), a.Port()), Number: "+1555", Pacer: pacer})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := c.Call(context.Background(), "+1666", ScriptOptions{Turns: 1})
	if res.Reason != "sip 480" || res.SIPStatus != 480 {
		t.Fatalf("reason %q status %d failure %q", res.Reason, res.SIPStatus, res.Failure)
	}
	if _, err := NewSIPCaller(SIPCallerOptions{Server: netip.MustParseAddrPort("192.0.2.1:5060"), Number: "1", Pacer: pacer}); err == nil {
		t.Error("a non-loopback target was accepted")
	}
}

func TestSIPCallerPing(t *testing.T) {
	uas := newTestUAS(t, 0, nil)
	pacer := NewPacer(context.Background(), 1, 20*time.Millisecond)
	defer pacer.Close()
	c, err := NewSIPCaller(SIPCallerOptions{Server: uas.addr, Number: "+1", Pacer: pacer})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if code, err := c.Ping(ctx); err != nil || code != 200 {
		t.Fatalf("ping: %d %v", code, err)
	}
}

// BenchmarkSIPMediaTick is one call's work per 20 ms frame on the pacer: drain and decode what
// arrived, feed the ear, fill and encode the next frame, send it. It must not allocate.
func BenchmarkSIPMediaTick(b *testing.B) {
	open := func() *media.PortPair {
		rtp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		rtcp, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return media.NewPortPair(rtp, rtcp)
	}
	pa, pb := open(), open()
	addr := func(p *media.PortPair) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p.Port()))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ea, err := media.NewRTPEndpoint(context.Background(), media.RTPConfig{Ports: pa, Remote: addr(pb), InactivityTimeout: -1, RTCPInterval: -1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer ea.Close()
	eb, err := media.NewRTPEndpoint(context.Background(), media.RTPConfig{Ports: pb, Remote: addr(pa), InactivityTimeout: -1, RTCPInterval: -1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer eb.Close()
	u, _ := NewUtterance("x", tone(8000, 8000, 300, 0.3), 8000)
	so := ScriptOptions{Utterances: []Utterance{u}, Turns: 1 << 30, AgentMaxTalk: 1 << 62, ReplyTimeout: 1 << 62}
	m := &sipMedia{ep: ea, script: NewCallScript(so, time.Now()), done: make(chan struct{})}
	var pay [160]byte
	codec.EncodeMulaw(pay[:], tone(160, 8000, 440, 0.2))
	at := time.Now()
	// Warm up: the receive ring's payload buffers grow once.
	for i := 0; i < 50; i++ {
		eb.WriteSample(pay[:], 160)
		m.Tick(at)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		at = at.Add(20 * time.Millisecond)
		eb.WriteSample(pay[:], 160) // the far end's frame for this tick
		m.Tick(at)
	}
}
