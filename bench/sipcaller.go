package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// SIPCallerOptions configure a SIPCaller.
type SIPCallerOptions struct {
	// Server is Parley's SIP address (UDP), such as 127.0.0.1:5060; Number the number dialled
	// (the inbound agent's, E.164).
	Server netip.AddrPort
	Number string
	// Pacer sends every call's audio; required.
	Pacer *Pacer
	// AnswerTimeout bounds INVITE to final answer (default 15 s).
	AnswerTimeout time.Duration
	// SRTP makes every call offer RTP/SAVP with an SDES key and protect its media (sipsrtp.go;
	// the trunk must be in SRTP mode).
	SRTP bool
	Log  *slog.Logger
}

// SIPCaller places calls to Parley from one SIP user agent on 127.0.0.1 (one UDP socket for
// the signalling of every call; RTP on a socket pair per call). Each call offers G.711 µ-law
// (RFC 3551) at 20 ms, sends its CallScript's audio on the pacer's clock, and feeds what it
// receives, stamped with its arrival time, to the script's ear.
type SIPCaller struct {
	o       SIPCallerOptions
	log     *slog.Logger
	ua      *sipgo.UserAgent
	srv     *sipgo.Server
	cli     *sipgo.Client
	conn    net.PacketConn
	addr    netip.AddrPort
	dialogs *sipgo.DialogClientCache

	wg   sync.WaitGroup
	once sync.Once
}

// NewSIPCaller starts the user agent on a UDP port of 127.0.0.1 chosen by the OS.
func NewSIPCaller(o SIPCallerOptions) (*SIPCaller, error) {
	if !o.Server.IsValid() || o.Number == "" || o.Pacer == nil {
		return nil, errors.New("bench: SIPCaller needs Server, Number and Pacer")
	}
	if !o.Server.Addr().IsLoopback() {
		return nil, fmt.Errorf("bench: %v is not a loopback address: the harness only calls 127.0.0.1", o.Server)
	}
	if o.AnswerTimeout <= 0 {
		o.AnswerTimeout = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &SIPCaller{o: o, log: o.Log}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.conn = conn
	a := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	c.addr = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c.ua, err = sipgo.NewUA(sipgo.WithUserAgent("parley-bench"), sipgo.WithUserAgentHostname("127.0.0.1"),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(quiet)),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerLogger(quiet)))
	if err != nil {
		conn.Close()
		return nil, err
	}
	// Requests leave from the listening socket (symmetric signalling, RFC 3581).
	c.ua.TransportLayer().Pool("udp").Add(conn.LocalAddr().String(),
		&sip.UDPConnection{PacketConn: conn, PacketAddr: conn.LocalAddr().String(), Listener: true})
	if c.srv, err = sipgo.NewServer(c.ua, sipgo.WithServerLogger(quiet)); err != nil {
		c.closeUA()
		return nil, err
	}
	if c.cli, err = sipgo.NewClient(c.ua, sipgo.WithClientLogger(quiet), sipgo.WithClientHostname("127.0.0.1"),
		sipgo.WithClientConnectionAddr(c.addr.String())); err != nil {
		c.closeUA()
		return nil, err
	}
	contact := sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "bench", Host: "127.0.0.1", Port: int(c.addr.Port())}}
	c.dialogs = sipgo.NewDialogClientCache(c.cli, contact)
	c.srv.OnBye(func(req *sip.Request, tx sip.ServerTransaction) {
		if err := c.dialogs.ReadBye(req, tx); err != nil {
			tx.Respond(sip.NewResponseFromRequest(req, 481, "Call/Transaction Does Not Exist", nil))
		}
	})
	c.srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	c.srv.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		// The harness only calls out; a re-INVITE or a new call is declined (RFC 3261 §21.4.26).
		tx.Respond(sip.NewResponseFromRequest(req, 488, "Not Acceptable Here", nil))
	})
	c.srv.OnAck(func(req *sip.Request, tx sip.ServerTransaction) {})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.srv.ServeUDP(conn); err != nil && !errors.Is(err, net.ErrClosed) {
			c.log.Debug("sip serve ended", "err", err)
		}
	}()
	return c, nil
}

// Addr returns the user agent's SIP address.
func (c *SIPCaller) Addr() netip.AddrPort { return c.addr }

func (c *SIPCaller) closeUA() {
	c.ua.Close()
	c.conn.Close()
}

// Close stops the user agent. Calls in progress should have ended first. It is idempotent.
func (c *SIPCaller) Close() error {
	c.once.Do(func() {
		c.srv.Close()
		c.closeUA()
	})
	c.wg.Wait()
	return nil
}

// Call places one call from the number from (E.164), runs the script, hangs up and returns
// what was measured. It returns when the call is over (ctx ending hangs up early).
func (c *SIPCaller) Call(ctx context.Context, from string, so ScriptOptions) CallResult {
	res := CallResult{Kind: KindSIP, From: from}
	rtpConn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		res.Started = time.Now()
		res.fail("media", "RTP socket: "+err.Error())
		return res
	}
	rtcpConn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		rtpConn.Close()
		res.Started = time.Now()
		res.fail("media", "RTCP socket: "+err.Error())
		return res
	}
	ports := media.NewPortPair(rtpConn, rtcpConn)
	owned := true
	defer func() {
		if owned {
			ports.Close()
		}
	}()

	recipient := sip.Uri{Scheme: "sip", User: c.o.Number, Host: c.o.Server.Addr().String(), Port: int(c.o.Server.Port())}
	req := sip.NewRequest(sip.INVITE, recipient)
	fromHdr := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: from, Host: "127.0.0.1"}, Params: sip.NewParams()}
	fromHdr.Params.Add("tag", sip.GenerateTagN(16))
	req.AppendHeader(fromHdr)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: c.o.Number, Host: c.o.Server.Addr().String()}})
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS"))
	offer := sdpOffer(netip.MustParseAddr("127.0.0.1"), ports.Port(), ports.RTCPPort(), rand.Uint64()>>2)
	var sdesKey []byte
	if c.o.SRTP {
		if sdesKey, err = newSDESKey(); err != nil {
			res.Started = time.Now()
			res.fail("media", err.Error())
			return res
		}
		offer = secureOffer(offer, sdesKey)
	}
	req.SetBody(offer)

	actx, cancel := context.WithTimeout(ctx, c.o.AnswerTimeout)
	defer cancel()
	res.Started = time.Now()
	dlg, err := c.dialogs.WriteInvite(actx, req)
	if err != nil {
		res.fail("invite error", "INVITE: "+err.Error())
		return res
	}
	err = dlg.WaitAnswer(actx, sipgo.AnswerOptions{})
	answered := time.Now()
	var derr *sipgo.ErrDialogResponse
	switch {
	case errors.As(err, &derr):
		res.SIPStatus = derr.Res.StatusCode
		detail := fmt.Sprintf("answered %d %s", derr.Res.StatusCode, derr.Res.Reason)
		if h := derr.Res.GetHeader("Reason"); h != nil { // RFC 3326
			detail += " (" + h.Value() + ")"
		}
		res.fail("sip "+strconv.Itoa(derr.Res.StatusCode), detail)
		dlg.Close()
		return res
	case err != nil:
		res.fail("no answer", "waiting for the answer: "+err.Error())
		dlg.Close()
		return res
	}
	res.Answered, res.Setup, res.SIPStatus = answered, answered.Sub(res.Started), dlg.InviteResponse.StatusCode
	if err := dlg.Ack(ctx); err != nil {
		res.fail("ack error", "ACK: "+err.Error())
		c.bye(dlg, &res)
		return res
	}
	ans, err := parseSDPAnswer(dlg.InviteResponse.Body())
	if err == nil && !ans.RTP.Addr().IsLoopback() {
		err = fmt.Errorf("media address %v is not loopback", ans.RTP)
	}
	if err == nil && (len(ans.PayloadTypes) == 0 || ans.PayloadTypes[0] != 0) {
		err = fmt.Errorf("answered payload types %v, want PCMU (0)", ans.PayloadTypes)
	}
	var sec *media.SRTP
	if err == nil && c.o.SRTP {
		sec, err = answerSRTP(dlg.InviteResponse.Body(), sdesKey)
	}
	if err != nil {
		res.fail("sdp", err.Error())
		c.bye(dlg, &res)
		return res
	}
	ep, err := media.NewRTPEndpoint(context.WithoutCancel(ctx), media.RTPConfig{Ports: ports, Remote: ans.RTP, RemoteRTCP: ans.RTCP,
		PayloadType: 0, ClockRate: 8000, InactivityTimeout: -1, RTCPInterval: 2 * time.Second, QueueSize: 64, SRTP: sec,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		res.fail("media", "RTP endpoint: "+err.Error())
		c.bye(dlg, &res)
		return res
	}
	owned = false
	defer ep.Close()

	m := &sipMedia{ep: ep, script: NewCallScript(so, answered), done: make(chan struct{})}
	c.o.Pacer.Add(m)
	hungUp := false
	select {
	case <-m.done:
	case <-dlg.Context().Done():
		hungUp = true
		m.stop.Store(stopHungUp)
	case <-ctx.Done():
		m.stop.Store(stopCancelled)
	}
	if hungUp || ctx.Err() != nil {
		select { // the pacer ends the script on its next tick
		case <-m.done:
		case <-time.After(2 * time.Second):
		}
	}
	res.Ended = time.Now()
	select {
	case <-m.done:
		res.Script = m.script.Result()
	default:
		res.fail("generator", "the pacer stopped ticking the call")
	}
	if f := res.Script.Failure; f != "" {
		res.fail(reasonOf(f), f)
	}
	st := ep.Stats()
	res.PacketsReceived, res.PacketsLost, res.Jitter = st.PacketsReceived, st.PacketsLost, st.Jitter
	if !hungUp {
		c.bye(dlg, &res)
	}
	return res
}

// bye hangs up (RFC 3261 §15.1.1), recording a BYE that is not answered 200 as a failure.
func (c *SIPCaller) bye(dlg *sipgo.DialogClientSession, res *CallResult) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := dlg.Bye(ctx); err != nil {
		res.fail("bye error", "BYE: "+err.Error())
	}
	dlg.Close()
}

const (
	stopNone int32 = iota
	stopHungUp
	stopCancelled
)

// sipMedia is one call's audio on the pacer: each tick drains what arrived (timed by its arrival
// at the socket), then sends the script's next frame.
type sipMedia struct {
	ep     *media.RTPEndpoint
	script *CallScript
	stop   atomic.Int32
	done   chan struct{}
	pkt    media.RTPPacket
	pcm    [160]int16
	in     [1024]int16
	pay    [160]byte
}

func (m *sipMedia) Tick(at time.Time) bool {
	for m.ep.TryReadPacket(&m.pkt) {
		if m.pkt.PayloadType != 0 || m.pkt.ComfortNoise {
			continue
		}
		n := codec.DecodeMulaw(m.in[:], m.pkt.Payload)
		m.script.Hear(m.pkt.ReceivedAt, m.in[:n], 8000)
	}
	switch m.stop.Load() {
	case stopHungUp:
		m.script.Fail(at, "the agent hung up while the caller was "+m.script.State())
	case stopCancelled:
		m.script.Fail(at, "cancelled while the caller was "+m.script.State())
	}
	if m.script.Done() {
		close(m.done)
		return false
	}
	m.script.Fill(at, m.pcm[:])
	n := codec.EncodeMulaw(m.pay[:], m.pcm[:])
	_ = m.ep.WriteSample(m.pay[:n], 160) // a refused datagram is a lost packet, as on a network
	return true
}

// Ping sends an OPTIONS to the server (RFC 3261 §11) and returns its status code: the harness's
// check that Parley's SIP endpoint is up before calls start.
func (c *SIPCaller) Ping(ctx context.Context) (int, error) {
	req := sip.NewRequest(sip.OPTIONS, sip.Uri{Scheme: "sip", Host: c.o.Server.Addr().String(), Port: int(c.o.Server.Port())})
	req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "bench", Host: "127.0.0.1"}, Params: sip.NewParams()})
	req.From().Params.Add("tag", sip.GenerateTagN(16))
	tx, err := c.cli.TransactionRequest(ctx, req)
	if err != nil {
		return 0, err
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			return res.StatusCode, nil
		case <-tx.Done():
			return 0, fmt.Errorf("bench: OPTIONS: %v", tx.Err())
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
