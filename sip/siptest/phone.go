// Package siptest is a SIP and RTP test phone for in-process tests of Parley's SIP endpoint, in
// the manner of net/http/httptest: a real user agent (emiago/sipgo) on 127.0.0.1 that places
// and answers calls, sends audio from a generator and records what it hears, sends and receives
// DTMF (RFC 4733 and SIP INFO), re-INVITEs (hold, codec change, late offer), REFERs and answers
// REFERs, and can challenge with digest authentication like a carrier.
//
// It is a test helper: it must never be imported by non-test code, and it trades the
// thoroughness of a production stack for inspectability (every request it receives is kept).
package siptest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"

	"github.com/parley-voice/parley/codec"
)

// PhoneOptions configure a Phone.
type PhoneOptions struct {
	// Transport is "udp" (default), "tcp" or "tls".
	Transport string
	// TLSConfig is the client TLS configuration for "tls".
	TLSConfig *tls.Config
	// User is the user part of the phone's address (default "phone").
	User string
	// Codecs are offered (and accepted) in this order; default PCMU, PCMA, G722, opus.
	Codecs []codec.Info
	// NoDTMF leaves telephone-event out of the phone's SDP (so DTMF must go by SIP INFO).
	NoDTMF bool

	// Answering: how the phone answers INVITEs it receives.
	//
	// RingFor delays the final answer after 180 Ringing; AnswerStatus is that answer (0: 200).
	// EarlyMedia sends 183 with SDP before ringing. Challenge answers the first INVITE of each
	// call 401 (407 with ProxyChallenge) and requires Username/Password digest credentials.
	// NoAnswer never answers (for ring timeouts). AnswerSessionExpires adds a session timer to
	// the 200 with the phone as refresher when AnswerRefresher is "uas".
	RingFor              time.Duration
	AnswerStatus         int
	EarlyMedia           bool
	Challenge            bool
	ProxyChallenge       bool
	Username, Password   string
	NoAnswer             bool
	AnswerSessionExpires time.Duration
	AnswerRefresher      string
	// RefuseReason is the RFC 3326 Reason header sent with an AnswerStatus of 300 or more
	// (`Q.850;cause=17;text="user busy"`); empty sends none.
	RefuseReason string

	// Refer decides how the phone answers a REFER: "accept" (default: 202, NOTIFY 100 then
	// NOTIFY ReferResult), "reject" (603), "silent" (202 and no NOTIFY).
	Refer       string
	ReferResult string // sipfrag of the final NOTIFY, default "SIP/2.0 200 OK"
	// ReferBye makes the phone hang up after the final 2xx NOTIFY, as a transferee does.
	ReferBye bool

	Logger *slog.Logger
}

// Phone is a SIP user agent with audio, for tests.
type Phone struct {
	t    testing.TB
	o    PhoneOptions
	ua   *sipgo.UserAgent
	srv  *sipgo.Server
	cli  *sipgo.Client
	udp  net.PacketConn
	tcp  net.Listener
	addr netip.AddrPort
	tp   string

	mu       sync.Mutex
	calls    map[string]*Call
	incoming chan *Call
	nonces   map[string]bool
	options  []*sip.Request

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewPhone starts a phone on 127.0.0.1 (a port from the OS) and closes it at the end of the
// test.
func NewPhone(t testing.TB, o PhoneOptions) *Phone {
	t.Helper()
	if o.Transport == "" {
		o.Transport = "udp"
	}
	if o.User == "" {
		o.User = "phone"
	}
	if len(o.Codecs) == 0 {
		o.Codecs = []codec.Info{codec.PCMU, codec.PCMA, codec.G722, codec.Opus}
	}
	if o.Refer == "" {
		o.Refer = "accept"
	}
	if o.ReferResult == "" {
		o.ReferResult = "SIP/2.0 200 OK"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Phone{t: t, o: o, calls: map[string]*Call{}, incoming: make(chan *Call, 16), nonces: map[string]bool{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	tlsConf := o.TLSConfig
	if tlsConf == nil {
		tlsConf = &tls.Config{InsecureSkipVerify: true}
	}
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("siptest"), sipgo.WithUserAgenTLSConfig(tlsConf),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(log)),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerLogger(log),
			sip.WithTransactionLayerUnhandledResponseHandler(p.onStray)))
	if err != nil {
		t.Fatal(err)
	}
	p.ua = ua
	p.srv, _ = sipgo.NewServer(ua, sipgo.WithServerLogger(log))
	p.cli, _ = sipgo.NewClient(ua, sipgo.WithClientLogger(log))
	p.tp = strings.ToUpper(o.Transport)
	switch o.Transport {
	case "udp":
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p.udp = c
		p.addr = c.LocalAddr().(*net.UDPAddr).AddrPort()
		p.ua.TransportLayer().Pool("udp").Add(c.LocalAddr().String(),
			&sip.UDPConnection{PacketConn: c, PacketAddr: c.LocalAddr().String(), Listener: true})
	case "tcp", "tls":
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p.tcp = l
		p.addr = l.Addr().(*net.TCPAddr).AddrPort()
	default:
		t.Fatalf("siptest: unknown transport %q", o.Transport)
	}
	p.addr = netip.AddrPortFrom(p.addr.Addr().Unmap(), p.addr.Port())
	p.srv.OnInvite(p.onInvite)
	p.srv.OnAck(p.onAck)
	p.srv.OnBye(p.inDialog)
	p.srv.OnInfo(p.inDialog)
	p.srv.OnNotify(p.inDialog)
	p.srv.OnRefer(p.inDialog)
	p.srv.OnUpdate(p.inDialog)
	p.srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		p.mu.Lock()
		p.options = append(p.options, req)
		p.mu.Unlock()
		tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	p.srv.OnCancel(func(req *sip.Request, tx sip.ServerTransaction) {
		tx.Respond(sip.NewResponseFromRequest(req, 481, "Call/Transaction Does Not Exist", nil))
	})
	// Serve only once every handler is registered.
	switch o.Transport {
	case "udp":
		p.goServe(func() { p.srv.ServeUDP(p.udp) })
	case "tcp":
		p.goServe(func() { p.srv.ServeTCP(p.tcp) })
	}
	t.Cleanup(p.Close)
	return p
}

func (p *Phone) goServe(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// Addr returns the phone's SIP address.
func (p *Phone) Addr() netip.AddrPort { return p.addr }

// URI returns the phone's SIP URI, e.g. "sip:phone@127.0.0.1:5070;transport=tcp".
func (p *Phone) URI() string {
	u := fmt.Sprintf("sip:%s@%s", p.o.User, p.addr)
	if p.o.Transport != "udp" {
		u += ";transport=" + p.o.Transport
	}
	return u
}

// Close hangs up every call and stops the phone. It is idempotent.
func (p *Phone) Close() {
	p.once.Do(func() {
		p.mu.Lock()
		calls := make([]*Call, 0, len(p.calls))
		for _, c := range p.calls {
			calls = append(calls, c)
		}
		p.mu.Unlock()
		for _, c := range calls {
			c.stopMedia()
			c.markEnded("phone closed")
		}
		p.cancel()
		if p.udp != nil {
			p.udp.Close()
		}
		if p.tcp != nil {
			p.tcp.Close()
		}
		p.ua.Close()
		p.wg.Wait()
	})
}

// Incoming waits for the next call the phone received (answered or not, per the options).
func (p *Phone) Incoming(ctx context.Context) (*Call, error) {
	select {
	case c := <-p.incoming:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// OptionsReceived returns the out-of-dialog OPTIONS requests received.
func (p *Phone) OptionsReceived() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.options)
}

func (p *Phone) register(c *Call) {
	p.mu.Lock()
	p.calls[c.callID] = c
	p.mu.Unlock()
}

func (p *Phone) find(id string) *Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

// contact returns the phone's Contact header.
func (p *Phone) contact() *sip.ContactHeader {
	u := sip.Uri{Scheme: "sip", User: p.o.User, Host: p.addr.Addr().String(), Port: int(p.addr.Port())}
	if p.o.Transport != "udp" {
		u.UriParams = sip.NewParams()
		u.UriParams.Add("transport", p.o.Transport)
	}
	return &sip.ContactHeader{Address: u}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// CallOptions shape an outgoing call.
type CallOptions struct {
	// LateOffer sends the INVITE without SDP; the answer goes in the ACK.
	LateOffer bool
	// Codecs overrides the phone's codec order for this call.
	Codecs []codec.Info
	// SessionExpires adds Session-Expires (and Supported: timer unless NoTimerSupport);
	// Refresher sets its refresher parameter.
	SessionExpires time.Duration
	Refresher      string
	NoTimerSupport bool
	// From is the calling number (default "+15550001111"); Headers are added to the INVITE.
	From    string
	Headers map[string]string
	// Username and Password answer a 401/407.
	Username, Password string
	// CancelAfter sends CANCEL this long after the first provisional response; Call then
	// returns the final answer (487 expected).
	CancelAfter time.Duration
}

// Call places a call to target ("sip:+14155550100@127.0.0.1:5060") and waits for the final
// answer. A 2xx returns an established call (ACK sent); any other final answer returns the call
// with its Status set and an error.
func (p *Phone) Call(ctx context.Context, target string, o CallOptions) (*Call, error) {
	var ru sip.Uri
	if err := sip.ParseUri(target, &ru); err != nil {
		return nil, err
	}
	if p.o.Transport != "udp" {
		if ru.UriParams == nil {
			ru.UriParams = sip.NewParams()
		}
		ru.UriParams.Add("transport", p.o.Transport)
	}
	codecs := o.Codecs
	if len(codecs) == 0 {
		codecs = p.o.Codecs
	}
	from := o.From
	if from == "" {
		from = "+15550001111"
	}
	c := newCall(p, true, codecs)
	c.callID = randHex(12)
	c.localTag = randHex(6)
	c.local = sip.Uri{Scheme: "sip", User: from, Host: p.addr.Addr().String()}
	c.remote = sip.Uri{Scheme: ru.Scheme, User: ru.User, Host: ru.Host, Port: ru.Port}
	c.target = ru
	c.seq = 1
	if err := c.openMedia(); err != nil {
		return nil, err
	}
	p.register(c)
	var offer []byte
	if !o.LateOffer {
		offer = c.offer(SendRecv)
	}
	req := c.request(sip.INVITE)
	c.inviteSeq = c.seq
	req.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, REFER, NOTIFY, UPDATE"))
	if !o.NoTimerSupport {
		req.AppendHeader(sip.NewHeader("Supported", "timer, replaces"))
	}
	if o.SessionExpires > 0 {
		v := strconv.Itoa(int(o.SessionExpires / time.Second))
		if o.Refresher != "" {
			v += ";refresher=" + o.Refresher
		}
		req.AppendHeader(sip.NewHeader("Session-Expires", v))
	}
	for k, v := range o.Headers {
		req.AppendHeader(sip.NewHeader(k, v))
	}
	if offer != nil {
		req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	}
	req.SetBody(offer)
	auth := false
	for {
		res, err := c.runInvite(ctx, req, o.CancelAfter)
		if err != nil {
			c.markEnded("invite failed")
			return c, err
		}
		if (res.StatusCode == 401 || res.StatusCode == 407) && !auth && o.Username != "" {
			auth = true
			if err := authorize(req, res, o.Username, o.Password); err != nil {
				return c, err
			}
			c.mu.Lock()
			c.seq++
			c.inviteSeq = c.seq
			req.CSeq().SeqNo = c.seq
			c.mu.Unlock()
			req.RemoveHeader("Via")
			req.PrependHeader(p.via())
			continue
		}
		c.mu.Lock()
		c.status = res.StatusCode
		c.final = res
		c.mu.Unlock()
		if !res.IsSuccess() {
			c.stopMedia()
			c.markEnded(fmt.Sprintf("answered %d", res.StatusCode))
			return c, fmt.Errorf("siptest: call answered %d %s", res.StatusCode, res.Reason)
		}
		if err := c.established(res, o.LateOffer); err != nil {
			return c, err
		}
		return c, nil
	}
}

func authorize(req *sip.Request, res *sip.Response, user, pass string) error {
	hn, cn := "WWW-Authenticate", "Authorization"
	if res.StatusCode == 407 {
		hn, cn = "Proxy-Authenticate", "Proxy-Authorization"
	}
	hs := res.GetHeaders(hn)
	if len(hs) == 0 {
		return errors.New("siptest: challenge without " + hn)
	}
	chal, err := digest.ParseChallenge(hs[0].Value())
	if err != nil {
		return err
	}
	cred, err := digest.Digest(chal, digest.Options{Method: string(req.Method), URI: req.Recipient.Addr(), Username: user, Password: pass})
	if err != nil {
		return err
	}
	req.RemoveHeader(cn)
	req.AppendHeader(sip.NewHeader(cn, cred.String()))
	return nil
}

// via returns a fresh Via for the phone.
func (p *Phone) via() *sip.ViaHeader {
	v := &sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: p.tp,
		Host: p.addr.Addr().String(), Port: int(p.addr.Port()), Params: sip.NewParams()}
	v.Params.Add("branch", sip.GenerateBranchN(16))
	v.Params.Add("rport", "")
	return v
}

// noBuild keeps sipgo from adding headers.
func noBuild(*sipgo.Client, *sip.Request) error { return nil }

// do sends a request in a new transaction and returns its final response.
func (p *Phone) do(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	tx, err := p.cli.TransactionRequest(ctx, req, noBuild)
	if err != nil {
		return nil, err
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			return res, nil
		case <-tx.Done():
			return nil, fmt.Errorf("siptest: %s transaction ended: %v", req.Method, tx.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// onStray re-ACKs a retransmitted 2xx to an INVITE whose transaction ended.
func (p *Phone) onStray(res *sip.Response) {
	cs := res.CSeq()
	if cs == nil || cs.MethodName != sip.INVITE || !res.IsSuccess() {
		return
	}
	if c := p.find(res.CallID().Value()); c != nil {
		c.sendAck(cs.SeqNo, nil)
	}
}

// onInvite answers a new call or a re-INVITE.
func (p *Phone) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	if tag, _ := req.To().Params.Get("tag"); tag != "" {
		p.inDialog(req, tx)
		return
	}
	if p.o.Challenge || p.o.ProxyChallenge {
		if !p.checkAuth(req) {
			status, name := 401, "WWW-Authenticate"
			if p.o.ProxyChallenge {
				status, name = 407, "Proxy-Authenticate"
			}
			nonce := randHex(8)
			p.mu.Lock()
			p.nonces[nonce] = true
			p.mu.Unlock()
			res := sip.NewResponseFromRequest(req, status, "Unauthorized", nil)
			res.AppendHeader(sip.NewHeader(name, fmt.Sprintf(`Digest realm="siptest", nonce="%s", algorithm=MD5, qop="auth"`, nonce)))
			tx.Respond(res)
			return
		}
	}
	c := newCall(p, false, p.o.Codecs)
	c.invite = req
	c.callID = req.CallID().Value()
	c.localTag = randHex(6)
	c.remoteTag, _ = req.From().Params.Get("tag")
	c.local = req.To().Address
	c.remote = req.From().Address
	if ct := req.Contact(); ct != nil {
		c.target = ct.Address
	}
	c.remoteSeq = req.CSeq().SeqNo
	c.seq = 100
	c.dest = req.Source()
	if err := c.openMedia(); err != nil {
		tx.Respond(sip.NewResponseFromRequest(req, 500, "Server Error", nil))
		return
	}
	p.register(c)
	select {
	case p.incoming <- c:
	default:
	}
	respond := func(status int, reason string, body []byte, hdrs ...sip.Header) error {
		res := sip.NewResponseFromRequest(req, status, reason, nil)
		res.To().Params.Add("tag", c.localTag)
		res.AppendHeader(p.contact())
		for _, h := range hdrs {
			res.AppendHeader(h)
		}
		if body != nil {
			res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		}
		res.SetBody(body)
		return tx.Respond(res)
	}
	var answer []byte
	if len(req.Body()) > 0 {
		var err error
		answer, err = c.answer(req.Body())
		if err != nil {
			respond(488, "Not Acceptable Here", nil)
			c.markEnded("488")
			return
		}
	}
	cancelled := make(chan struct{})
	tx.OnCancel(func(r *sip.Request) {
		c.mu.Lock()
		c.requests = append(c.requests, r) // the CANCEL too, for its Reason
		c.mu.Unlock()
		close(cancelled)
	})
	if p.o.EarlyMedia && answer != nil {
		respond(183, "Session Progress", answer)
		c.startRTP()
	}
	respond(180, "Ringing", nil)
	if p.o.NoAnswer {
		select {
		case <-cancelled:
		case <-p.ctx.Done():
		case <-time.After(5 * time.Minute):
		}
		c.stopMedia()
		c.markEnded("cancelled")
		return
	}
	if p.o.RingFor > 0 {
		select {
		case <-time.After(p.o.RingFor):
		case <-cancelled:
			c.stopMedia()
			c.markEnded("cancelled")
			return
		}
	}
	status := p.o.AnswerStatus
	if status == 0 {
		status = 200
	}
	if status >= 300 {
		var hdrs []sip.Header
		if p.o.RefuseReason != "" {
			hdrs = append(hdrs, sip.NewHeader("Reason", p.o.RefuseReason))
		}
		respond(status, "Refused", nil, hdrs...)
		c.stopMedia()
		c.markEnded(fmt.Sprintf("refused %d", status))
		return
	}
	body := answer
	late := answer == nil
	if late {
		body = c.offer(SendRecv)
	}
	var hdrs []sip.Header
	if p.o.AnswerSessionExpires > 0 {
		ref := p.o.AnswerRefresher
		if ref == "" {
			ref = "uac"
		}
		hdrs = append(hdrs, sip.NewHeader("Session-Expires", strconv.Itoa(int(p.o.AnswerSessionExpires/time.Second))+";refresher="+ref),
			sip.NewHeader("Require", "timer"))
		c.mu.Lock()
		c.sessionExpires = p.o.AnswerSessionExpires
		c.weRefresh = ref == "uas"
		c.mu.Unlock()
	}
	if err := respond(status, "OK", body, hdrs...); err != nil {
		return
	}
	// Wait for the ACK (the transaction layer does not retransmit 2xx over UDP: do it here).
	deadline := time.After(32 * time.Second)
	retrans := time.NewTicker(500 * time.Millisecond)
	defer retrans.Stop()
	for {
		select {
		case ack := <-c.acks:
			if late {
				if _, err := c.takeAnswer(ack.Body()); err != nil {
					c.markEnded("bad answer in ACK")
					return
				}
			}
			c.confirm()
			if !p.o.EarlyMedia || late {
				c.startRTP()
			}
			c.maybeRefresh()
			return
		case <-tx.Acks():
			c.confirm()
			c.startRTP()
			return
		case <-retrans.C:
			if !sip.IsReliable(req.Transport()) {
				respond(status, "OK", body, hdrs...)
			}
		case <-deadline:
			c.markEnded("no ACK")
			return
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *Phone) checkAuth(req *sip.Request) bool {
	name := "Authorization"
	if p.o.ProxyChallenge {
		name = "Proxy-Authorization"
	}
	hs := req.GetHeaders(name)
	if len(hs) == 0 {
		return false
	}
	cred, err := digest.ParseCredentials(hs[0].Value())
	if err != nil || cred.Username != p.o.Username {
		return false
	}
	p.mu.Lock()
	ok := p.nonces[cred.Nonce]
	p.mu.Unlock()
	if !ok {
		return false
	}
	chal := &digest.Challenge{Realm: cred.Realm, Nonce: cred.Nonce, Algorithm: cred.Algorithm, QOP: []string{cred.QOP}}
	want, err := digest.Digest(chal, digest.Options{Method: string(req.Method), URI: cred.URI, Username: p.o.Username,
		Password: p.o.Password, Cnonce: cred.Cnonce, Count: cred.Nc})
	return err == nil && want.Response == cred.Response
}

func (p *Phone) onAck(req *sip.Request, tx sip.ServerTransaction) {
	if c := p.find(req.CallID().Value()); c != nil {
		select {
		case c.acks <- req:
		default:
		}
	}
}

// inDialog routes an in-dialog request to its call.
func (p *Phone) inDialog(req *sip.Request, tx sip.ServerTransaction) {
	c := p.find(req.CallID().Value())
	if c == nil {
		tx.Respond(sip.NewResponseFromRequest(req, 481, "Call/Transaction Does Not Exist", nil))
		return
	}
	c.handle(req, tx)
}

// Options sends an out-of-dialog OPTIONS to target and returns the final response.
func (p *Phone) Options(ctx context.Context, target string) (*sip.Response, error) {
	var ru sip.Uri
	if err := sip.ParseUri(target, &ru); err != nil {
		return nil, err
	}
	c := newCall(p, true, p.o.Codecs)
	c.callID, c.localTag, c.seq = randHex(12), randHex(6), 1
	c.local = sip.Uri{Scheme: "sip", User: p.o.User, Host: p.addr.Addr().String()}
	c.remote, c.target = ru, ru
	return p.do(ctx, c.request(sip.OPTIONS))
}
