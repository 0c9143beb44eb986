package sip

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
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
)

// Server is Parley's SIP endpoint: it listens on UDP and TCP (and TLS when a certificate is
// configured), answers inbound calls through the Router, places outbound calls with Dial, and
// drains on shutdown.
//
// Build it with New, serve with Run, stop with Drain (graceful) and Close (immediate). All
// methods are safe for concurrent use.
type Server struct {
	o     Options
	log   *slog.Logger
	ua    *sipgo.UserAgent
	srv   *sipgo.Server
	cli   *sipgo.Client
	alloc *media.PortAllocator
	auth  *digestAuth
	// dialed hands the trunks' TLS connections to sipgo (issue 21, tls.go).
	dialed *dialedTLS
	// hooks widen race windows in tests (export_test.go); nil in use.
	hooks *raceHooks
	// regs are the registrations by trunk name, instance this node's +sip.instance (issue 21,
	// register.go); guarded by mu.
	regs     map[string]*registration
	instance string

	udpConn  net.PacketConn
	tcpLn    net.Listener
	tlsLn    net.Listener
	tlsPeers *tlsPeers // issue 21: the TLS listener's connections and their client certificates
	udpLaddr sip.Addr
	portUDP  int
	portTCP  int
	portTLS  int
	listenIP netip.Addr // the listeners' address when it is not a wildcard

	mu       sync.Mutex
	legs     map[string]*leg                  // by Call-ID
	pending  map[string]sip.ServerTransaction // new INVITEs not yet answered, by inviteKey
	calls    map[*Call]struct{}
	convs    map[*Call]struct{} // calls whose conversation may still be running (callMonitor)
	draining bool
	closed   bool
	waiting  bool          // Close is waiting for the goroutines: no new ones may start
	idle     chan struct{} // closed and replaced whenever the call set becomes empty

	ctx     context.Context // ends when the server closes
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	bg      sync.WaitGroup // the background tasks (BYEs): Close lets them finish first
	running atomic.Bool
	stopped chan struct{}
	once    sync.Once
}

// New validates o, binds the listeners and the RTP port range, and returns a server that
// serves once Run is called.
func New(o Options) (*Server, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		o: o, log: o.Logger.With("component", "sip"),
		legs: map[string]*leg{}, calls: map[*Call]struct{}{}, pending: map[string]sip.ServerTransaction{},
		convs: map[*Call]struct{}{},
		idle:  make(chan struct{}), stopped: make(chan struct{}),
	}
	close(s.idle)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.auth, err = newDigestAuth(); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		s.closeListeners()
		return nil, err
	}
	s.alloc, err = media.NewPortAllocator(o.RTPIP, o.RTPPorts)
	if err != nil {
		s.closeListeners()
		return nil, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	sipLog := o.SIPLogger
	if sipLog == nil {
		sipLog = slog.New(levelFilter{h: o.Logger.Handler(), min: slog.LevelError + 4}) // silent: parse errors of junk would flood the log
	}
	ua, err := sipgo.NewUA(
		sipgo.WithUserAgent(o.UserAgent),
		sipgo.WithUserAgentHostname(s.advertise(netip.Addr{}).String()),
		sipgo.WithUserAgenTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(sipLog)),
		sipgo.WithUserAgentTransactionLayerOptions(
			sip.WithTransactionLayerLogger(sipLog),
			sip.WithTransactionLayerUnhandledResponseHandler(s.onStrayResponse),
		),
	)
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	s.ua = ua
	// Register the UDP listener for sending before serving starts, so that requests sent at
	// once already leave from it (symmetric signalling, RFC 3581).
	ua.TransportLayer().Pool("udp").Add(s.udpConn.LocalAddr().String(),
		&sip.UDPConnection{PacketConn: s.udpConn, PacketAddr: s.udpConn.LocalAddr().String(), Listener: true})
	if s.srv, err = sipgo.NewServer(ua, sipgo.WithServerLogger(sipLog)); err != nil {
		s.closeListeners()
		return nil, err
	}
	if s.cli, err = sipgo.NewClient(ua, sipgo.WithClientLogger(sipLog)); err != nil {
		s.closeListeners()
		return nil, err
	}
	s.routes()
	return s, nil
}

// levelFilter drops records below min: sipgo logs every stray retransmission at Info.
type levelFilter struct {
	h   slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.h.Enabled(ctx, l)
}
func (f levelFilter) Handle(ctx context.Context, r slog.Record) error { return f.h.Handle(ctx, r) }
func (f levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFilter{h: f.h.WithAttrs(a), min: f.min}
}
func (f levelFilter) WithGroup(n string) slog.Handler {
	return levelFilter{h: f.h.WithGroup(n), min: f.min}
}

// listen binds UDP and TCP on o.Addr (same port) and TLS when configured.
func (s *Server) listen() error {
	udp, err := net.ListenPacket("udp", s.o.Addr)
	if err != nil {
		return fmt.Errorf("sip: listen udp %s: %w", s.o.Addr, err)
	}
	s.udpConn = udp
	ua := udp.LocalAddr().(*net.UDPAddr)
	s.udpLaddr = sip.Addr{IP: ua.IP, Port: ua.Port}
	s.portUDP = ua.Port
	if a, ok := netip.AddrFromSlice(ua.IP); ok && !a.Unmap().IsUnspecified() {
		s.listenIP = a.Unmap()
	}
	host, portStr, err := net.SplitHostPort(s.o.Addr)
	if err != nil {
		return fmt.Errorf("%w: SIP address %q: %v", ErrBadOptions, s.o.Addr, err)
	}
	tcpAddr := net.JoinHostPort(host, strconv.Itoa(ua.Port))
	tcp, err := net.Listen("tcp", tcpAddr)
	if err != nil && portStr == "0" {
		tcp, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return fmt.Errorf("sip: listen tcp %s: %w", tcpAddr, err)
	}
	s.tcpLn = tcp
	s.portTCP = tcp.Addr().(*net.TCPAddr).Port
	conf := s.o.TLSConfig
	if conf == nil && s.o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.o.TLSCertFile, s.o.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("sip: load TLS certificate: %w", err)
		}
		conf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if conf != nil {
		addr := s.o.TLSAddr
		if addr == "" {
			addr = net.JoinHostPort(host, "5061")
		}
		ln, err := tls.Listen("tcp", addr, withClientAuth(conf, s.o.TLSClientAuth))
		if err != nil {
			return fmt.Errorf("sip: listen tls %s: %w", addr, err)
		}
		s.tlsLn = ln
		if s.o.TLSClientAuth == ClientAuthRequest || s.o.TLSClientAuth == ClientAuthRequire {
			s.tlsPeers = newTLSPeers(ln) // issue 21: client certificates by connection (mtls.go)
			s.tlsLn = s.tlsPeers
		}
		s.portTLS = ln.Addr().(*net.TCPAddr).Port
		s.dialed = newDialedTLS(ln.Addr())
	} else {
		s.dialed = newDialedTLS(tcp.Addr())
	}
	return nil
}

func (s *Server) closeListeners() {
	if s.dialed != nil {
		s.dialed.Close()
	}
	for _, c := range []io.Closer{s.udpConn, s.tcpLn, s.tlsLn} {
		if c != nil && !isNilCloser(c) {
			c.Close()
		}
	}
}

func isNilCloser(c io.Closer) bool {
	switch v := c.(type) {
	case net.PacketConn:
		return v == nil
	case net.Listener:
		return v == nil
	}
	return false
}

// Addr returns the local address of the listener for transport t (invalid when there is none).
func (s *Server) Addr(t Transport) netip.AddrPort {
	var a net.Addr
	switch t {
	case UDP:
		a = s.udpConn.LocalAddr()
	case TCP:
		a = s.tcpLn.Addr()
	case TLS:
		if s.tlsLn == nil {
			return netip.AddrPort{}
		}
		a = s.tlsLn.Addr()
	default:
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func (s *Server) listenPort(t Transport) int {
	switch t {
	case TCP:
		return s.portTCP
	case TLS:
		return s.portTLS
	}
	return s.portUDP
}

// Run serves until ctx is done or the server is closed; then it closes the server (ending the
// calls still up) and returns nil. It returns an error if it is already running.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("sip: server already running")
	}
	s.serve(func() error { return s.srv.ServeUDP(s.udpConn) }, "udp")
	s.serve(func() error { return s.srv.ServeTCP(s.tcpLn) }, "tcp")
	if s.tlsLn != nil {
		s.serve(func() error { return s.srv.ServeTLS(s.tlsLn) }, "tls")
	}
	s.serve(func() error { return s.srv.ServeTLS(s.dialed) }, "tls-out") // issue 21
	attrs := []any{"udp", s.Addr(UDP).String(), "tcp", s.Addr(TCP).String()}
	if s.tlsLn != nil { // no TLS: no tls attribute (it printed "invalid AddrPort")
		attrs = append(attrs, "tls", s.Addr(TLS).String())
	}
	attrs = append(attrs, "advertise", s.advertise(netip.Addr{}).String())
	s.log.Info("sip: serving", attrs...)
	select {
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	return s.Close()
}

func (s *Server) serve(f func() error, name string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := f(); err != nil && !errors.Is(err, net.ErrClosed) {
			select {
			case <-s.ctx.Done():
			default:
				s.log.Error("sip: listener stopped", "transport", name, "err", err)
			}
		}
	}()
}

// Drain stops taking calls (new INVITEs are answered 503 with Retry-After, Dial fails with
// ErrDraining) and waits for the calls in progress to end. When ctx ends first, it hangs up the
// calls left (end reason shutdown) and returns ctx's error.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	n := len(s.calls)
	s.mu.Unlock()
	s.log.Info("sip: draining", "calls", n)
	for {
		s.mu.Lock()
		idle := s.idle
		left := len(s.calls)
		s.mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			s.endAll(session.EndShutdown, "node shutting down")
			return ctx.Err()
		}
	}
}

// Draining reports whether the server refuses new calls.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining || s.closed
}

// ActiveCalls returns the calls in progress (ringing or answered).
func (s *Server) ActiveCalls() []*Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Call, 0, len(s.calls))
	for c := range s.calls {
		out = append(out, c)
	}
	return out
}

// endAll hangs up every call.
func (s *Server) endAll(reason session.EndReason, text string) {
	for _, c := range s.ActiveCalls() {
		c.hangup(reason, text)
	}
}

// Close hangs up every call (end reason shutdown), gives the BYEs up to closeGrace to be
// answered, cancels the conversations still finishing, closes the listeners and waits for the
// server's goroutines. It is idempotent. It returns within a few seconds whatever state the
// calls are in, so that a node's shutdown fits in its drain timeout plus 5 s.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.endAll(session.EndShutdown, "node shutting down")
		s.unregisterAll() // issue 21: remove the bindings while the transports are up
		// Give the BYEs a moment to be answered before the transports go away.
		bgDone := make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.bg.Wait()
			close(bgDone)
		}()
		grace := time.NewTimer(closeGrace)
		select {
		case <-bgDone:
		case <-grace.C:
		}
		grace.Stop()
		// The conversations of ended calls would get convGrace to finish on their own: no
		// longer.
		s.mu.Lock()
		convs := make([]*Call, 0, len(s.convs))
		for c := range s.convs {
			convs = append(convs, c)
		}
		s.mu.Unlock()
		for _, c := range convs {
			c.cancel()
		}
		s.cancel()
		s.closeListeners()
		if s.ua != nil {
			s.ua.Close()
		}
		s.mu.Lock()
		s.waiting = true
		s.mu.Unlock()
		s.wg.Wait()
		close(s.stopped)
	})
	return nil
}

// closeGrace is how long Close lets the BYEs of the calls it hangs up be answered.
const closeGrace = 2 * time.Second

// track counts a goroutine (or request handler) the server must wait for; it reports false
// once Close waits, when nothing new may start.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting {
		return false
	}
	s.wg.Add(1)
	return true
}

// goBackground runs f on a goroutine the server waits for; f's ctx ends when the server closes.
func (s *Server) goBackground(f func(ctx context.Context)) {
	if !s.track() {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.bg.Done()
		f(s.ctx)
	}()
}

// addLeg registers a leg for in-dialog routing by Call-ID.
func (s *Server) addLeg(l *leg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.legs[l.d.callID]; dup {
		return fmt.Errorf("sip: Call-ID %q already in use", l.d.callID)
	}
	s.legs[l.d.callID] = l
	return nil
}

func (s *Server) removeLeg(l *leg) {
	s.mu.Lock()
	if s.legs[l.d.callID] == l {
		delete(s.legs, l.d.callID)
	}
	s.mu.Unlock()
}

func (s *Server) findLeg(id string) *leg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.legs[id]
}

// addCall and removeCall keep the call set for Drain, MaxCalls and Close.
func (s *Server) addCall(c *Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.draining:
		return ErrDraining
	case s.o.MaxCalls > 0 && len(s.calls) >= s.o.MaxCalls:
		return ErrAtCapacity
	}
	if len(s.calls) == 0 {
		s.idle = make(chan struct{})
	}
	s.calls[c] = struct{}{}
	if s.o.Observer != nil {
		s.o.Observer.CallStarted(c.dir)
	}
	return nil
}

// removeCall reports whether c was in the set (a call refused over the limit never was).
func (s *Server) removeCall(c *Call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.calls[c]; !ok {
		return false
	}
	delete(s.calls, c)
	if len(s.calls) == 0 {
		close(s.idle)
	}
	return true
}

// advertise returns the address to put in Via, Contact and SDP toward remote: PublicIP when
// set, else the listeners' address, else the local address of the route to remote.
func (s *Server) advertise(remote netip.Addr) netip.Addr {
	if s.o.PublicIP.IsValid() {
		return s.o.PublicIP
	}
	if s.listenIP.IsValid() {
		return s.listenIP
	}
	if remote.IsValid() {
		if a := localAddrFor(remote); a.IsValid() {
			return a
		}
	}
	if a := localAddrFor(netip.MustParseAddr("192.0.2.1")); a.IsValid() {
		return a // the address of the default route (TEST-NET-1: nothing is sent)
	}
	return netip.MustParseAddr("127.0.0.1")
}

// localAddrFor asks the kernel which local address routes to remote; no packet is sent.
func localAddrFor(remote netip.Addr) netip.Addr {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote.Unmap(), 9)))
	if err != nil {
		return netip.Addr{}
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
}

// newMedia allocates an RTP port pair for a leg toward remote.
func (s *Server) newMedia(remote netip.Addr, log *slog.Logger) (*legMedia, error) {
	pp, err := s.alloc.Allocate()
	if err != nil {
		return nil, err
	}
	local := netip.AddrPortFrom(s.advertise(remote), uint16(pp.Port()))
	return newLegMedia(log, pp, local, s.o.MediaTimeout, &s.wg, s.track), nil
}

// preferCurrent returns the codec list with the leg's current codec first.
func (s *Server) preferCurrent(l *leg) []codec.Info {
	l.mu.Lock()
	cur, have := l.neg.Audio, l.haveNeg
	l.mu.Unlock()
	if !have {
		return s.o.Codecs
	}
	out := make([]codec.Info, 0, len(s.o.Codecs))
	for _, c := range s.o.Codecs {
		if strings.EqualFold(c.Name, cur.Name) {
			c.PayloadType = cur.PayloadType
			out = append([]codec.Info{c}, out...)
			continue
		}
		out = append(out, c)
	}
	return out
}

// errNoAck says the 2xx to an INVITE was never acknowledged (RFC 3261 §13.3.1.4).
var errNoAck = errors.New("sip: no ACK for the 2xx")

// sendFinal sends the 2xx to an INVITE and, over UDP, retransmits it (T1 doubling to T2) until
// the ACK with CSeq seq arrives, for at most 64×T1 (RFC 3261 §13.3.1.4, RFC 6026). It returns
// the ACK.
func (s *Server) sendFinal(tx sip.ServerTransaction, res *sip.Response, seq uint32, acks <-chan *sip.Request, done <-chan struct{}) (*sip.Request, error) {
	s.observeResponse(true, res.StatusCode)
	if err := tx.Respond(res); err != nil {
		return nil, err
	}
	reliable := sip.IsReliable(res.Transport())
	interval := sip.T1
	retrans := time.NewTimer(interval)
	defer retrans.Stop()
	giveUp := time.NewTimer(s.o.AckTimeout)
	defer giveUp.Stop()
	for {
		select {
		case ack := <-acks:
			if cs := ack.CSeq(); cs != nil && cs.SeqNo == seq {
				return ack, nil
			}
		case ack := <-tx.Acks():
			if ack != nil {
				return ack, nil
			}
		case <-retrans.C:
			if !reliable {
				if err := tx.Respond(res); err != nil {
					s.log.Debug("sip: 2xx retransmission failed", "err", err)
				}
				interval = min(2*interval, sip.T2)
			}
			retrans.Reset(interval)
		case <-giveUp.C:
			return nil, errNoAck
		case <-done:
			return nil, ErrClosed
		case <-s.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// newTag returns a random tag (RFC 3261 §19.3: at least 32 bits of randomness).
func newTag() string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x", b[:])
}

// onStrayResponse handles responses with no transaction: a retransmitted 2xx to an INVITE of
// ours whose transaction ended gets its ACK again (RFC 3261 §13.2.2.4); a 2xx from another
// branch of a forked INVITE (another To tag) is acknowledged and hung up at once, as only one
// dialog can carry the call.
func (s *Server) onStrayResponse(res *sip.Response) {
	cs := res.CSeq()
	if cs == nil || cs.MethodName != sip.INVITE || !res.IsSuccess() {
		return
	}
	l := s.findLeg(callID(res))
	if l == nil || !l.outbound {
		return
	}
	l.mu.Lock()
	if l.inviteSeq != cs.SeqNo {
		l.mu.Unlock()
		return
	}
	if l.d.remoteTag == toTag(res) {
		l.mu.Unlock()
		l.sendAck(cs.SeqNo, nil)
		return
	}
	d := l.d
	l.mu.Unlock()
	d.remoteTag = toTag(res)
	if ct := res.Contact(); ct != nil {
		d.remoteTarget = *ct.Address.Clone()
	}
	d.routes = recordRoutes(res, true)
	ack := s.newRequest(&d, sip.ACK, cs.SeqNo)
	bye := s.newRequest(&d, sip.BYE, 0)
	bye.AppendHeader(sip.NewHeader("Reason", reasonHeader(200, "call answered elsewhere")))
	s.log.Info("sip: extra 2xx from a forked INVITE hung up", "call_id", d.callID, "to_tag", d.remoteTag)
	s.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		// issue 21: over TLS, a connection with the trunk's configuration (a dial: not on
		// the transport's goroutine).
		if err := s.tlsFor(ctx, ack); err != nil {
			s.log.Debug("sip: ACK of a forked 2xx not sent", "err", err)
		} else if err := s.cli.WriteRequest(ack, noBuild); err != nil {
			s.log.Debug("sip: ACK of a forked 2xx not sent", "err", err)
		}
		s.do(ctx, bye)
	})
}
