package webrtc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/parley-voice/parley/session"
)

// Defaults.
const (
	DefaultTokenTTL          = 15 * time.Minute
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultGracePeriod       = 10 * time.Second
	// DefaultOpusComplexity is the Opus encoder's complexity for the agent's voice when
	// Options.OpusComplexity is zero: the cheapest whose segmental SNR stays within 0.5 dB of
	// libopus's default (5) on every sample of TestOpusEncodeQuality (complexity 1 falls 0.8 dB
	// short on one).
	DefaultOpusComplexity = 2
	// DefaultReadPeriod is Options.ReadPeriod's default.
	DefaultReadPeriod = 20 * time.Millisecond
	// DefaultOpusApplication is the Opus encoder's mode for the agent's voice when
	// Options.OpusApplication is empty.
	DefaultOpusApplication = OpusLowDelay
	joinWait               = 10 * time.Second
)

// Opus encoder modes for the agent's voice (libopus's "applications").
const (
	// OpusLowDelay is OPUS_APPLICATION_RESTRICTED_LOWDELAY: CELT only (RFC 6716 §2). For the
	// agent's 16 kHz speech at 32 kbit/s it costs about a quarter of the SILK mode's CPU
	// (BenchmarkOpusEncodeComplexity), has a higher segmental SNR (TestOpusEncodeQuality) and
	// 4 ms less codec delay; it has no in-band FEC, so a lost packet is concealed by the
	// browser's decoder rather than rebuilt from the next one.
	OpusLowDelay = "lowdelay"
	// OpusVoIP is OPUS_APPLICATION_VOIP: SILK wideband with in-band FEC (LBRR, coded for 10 %
	// loss), for networks that lose packets.
	OpusVoIP = "voip"
)

// Options configure a Service.
type Options struct {
	// BaseURL is the public URL of the node's HTTP server (PARLEY_BASE_URL), e.g.
	// https://voice.example.com; call URLs are BaseURL + "/call/" + id. Required.
	BaseURL string
	// UDPHost is the IP address the ICE port binds; "" binds every interface. Tests use
	// 127.0.0.1 (host candidates on loopback).
	UDPHost string
	// UDPPort is the one UDP port all ICE traffic uses (PARLEY_WEBRTC_UDP_PORT); 0 picks one.
	UDPPort int
	// PublicIP, when set, is announced in host candidates instead of the local addresses (a
	// NAT 1:1 mapping, as on a cloud VM with an elastic IP).
	PublicIP string
	// ICEServers are given to browsers (STUN/TURN) for their own candidates.
	ICEServers []ICEServer
	// Secret signs tokens (HMAC-SHA256); at least 16 bytes. Derive it from the master key with
	// DeriveSecret. Required.
	Secret []byte
	// TokenTTL is how long a token may be used; default 15 minutes.
	TokenTTL time.Duration
	// HeartbeatInterval is how often pages send a heartbeat; default 2 s.
	HeartbeatInterval time.Duration
	// GracePeriod is how long a page may go unheard (no heartbeat, no message, no audio) before
	// its call ends with network_lost; default 10 s. It also bounds reconnection.
	GracePeriod time.Duration
	// ConnectTimeout bounds how long a page that joined may take to get its media connected
	// (offer, ICE, DTLS) before it is turned away; default 30 s.
	ConnectTimeout time.Duration
	// Codecs enabled, in order of preference: "opus", "pcmu". Default both, Opus first. Only
	// these are registered and offered.
	Codecs []string
	// OpusBitrate of the audio sent to browsers, bit/s; default 32000.
	OpusBitrate int
	// OpusEncodeRate is the PCM rate the Opus encoder is given: 16000 (default: the engine's
	// own rate, no resampling, Opus's wideband speech mode, about a third less CPU) or 48000
	// (the engine's frames resampled up first).
	OpusEncodeRate int
	// OpusComplexity is the Opus encoder's complexity for audio sent to pages, 1–10 (libopus:
	// CPU against quality); 0 means DefaultOpusComplexity (2). The encoder is the largest
	// single CPU cost of a call: for speech at 16 kHz with FEC, complexity 2 costs about 0.7
	// and complexity 1 about 0.45 of complexity 5 (BenchmarkOpusEncodeComplexity, CPU time);
	// TestOpusEncodeQuality holds the default within 0.5 dB of complexity 5's segmental SNR.
	OpusComplexity int
	// ReadPeriod is how often the shared UDP socket is read while calls are up: every packet
	// queued is taken in one recvmmsg and handled in one burst, so the process wakes once per
	// period rather than once per packet of every call (the largest cost of a call after the
	// codecs), at the price of up to one period of delay on incoming audio and handshakes
	// (10 ms on average at 20 ms). 0 means DefaultReadPeriod (20 ms: the browsers' packet
	// period, so each call's packet of a period comes in one read; 10 ms measured dearer; the
	// playout's slack of three frames covers either, no frame more is concealed in the
	// simulation of TestAudioReceiverPlayoutBatchedReads); negative reads each packet as it
	// arrives.
	ReadPeriod time.Duration
	// OpusApplication is the Opus encoder's mode for audio sent to pages: OpusLowDelay
	// (default, DefaultOpusApplication) or OpusVoIP (with in-band FEC, at about four times the
	// CPU).
	OpusApplication string
	// Log receives the service's logs; default slog.Default().
	Log *slog.Logger
}

// ICEServer is a STUN or TURN server for browsers.
type ICEServer struct {
	URLs       []string
	Username   string
	Credential string
}

// Service runs browser calls and listen-ins on one node. Create it with NewService, mount
// Handler on the node's HTTP server, and Close it on shutdown.
type Service struct {
	opts    Options
	log     *slog.Logger
	rtc     *rtcAPI
	tokens  *tokenSigner
	used    *replayGuard
	playout *playoutClock                    // the receive paths' fallback clock
	now     atomic.Pointer[func() time.Time] // the clock; tests move it
	up      websocket.Upgrader
	mux     *http.ServeMux

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	calls  map[string]*webCall  // web calls by id, waiting or live
	convs  map[string]*liveConv // live conversations by id
	peers  map[*peer]struct{}
	feeds  map[string]*liveFeed // live-transcript feeds by conversation id
	closed bool

	peersCreated atomic.Int64 // peer connections ever created (token refusals must not add)
}

// liveConv is a live conversation that pages may listen to.
type liveConv struct {
	conv *session.Conversation
	feed *liveFeed
	call *peer // the web caller's peer; nil for phone calls
}

// NewService opens the ICE UDP port and returns a running service.
func NewService(o Options) (*Service, error) {
	if o.BaseURL == "" {
		return nil, errors.New("webrtc: BaseURL is required")
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.TokenTTL <= 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.GracePeriod < o.HeartbeatInterval {
		return nil, fmt.Errorf("webrtc: grace period %v is shorter than the heartbeat interval %v", o.GracePeriod, o.HeartbeatInterval)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.OpusEncodeRate != 0 && o.OpusEncodeRate != 16000 && o.OpusEncodeRate != 48000 {
		return nil, fmt.Errorf("webrtc: OpusEncodeRate %d (want 16000 or 48000)", o.OpusEncodeRate)
	}
	if o.OpusComplexity < 0 || o.OpusComplexity > 10 {
		return nil, fmt.Errorf("webrtc: OpusComplexity %d (want 1 to 10, or 0 for the default)", o.OpusComplexity)
	}
	if o.ReadPeriod == 0 {
		o.ReadPeriod = DefaultReadPeriod
	}
	app, err := opusApplication(o.OpusApplication)
	if err != nil {
		return nil, err
	}
	o.OpusApplication = app
	if o.OpusComplexity == 0 {
		o.OpusComplexity = DefaultOpusComplexity
	}
	codecs, err := parseCodecs(o.Codecs)
	if err != nil {
		return nil, err
	}
	s := &Service{
		opts: o, log: o.Log,
		calls: map[string]*webCall{}, convs: map[string]*liveConv{}, peers: map[*peer]struct{}{}, feeds: map[string]*liveFeed{},
		// The token authenticates the page; it is not a cookie, so any origin may embed a call.
		up: websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }, ReadBufferSize: 4096, WriteBufferSize: 4096},
	}
	now := time.Now
	s.now.Store(&now)
	if s.tokens, err = newTokenSigner(o.Secret, s.clock); err != nil {
		return nil, err
	}
	s.used = newReplayGuard(s.clock)
	s.rtc, err = newRTCAPI(rtcAPIOptions{Host: o.UDPHost, Port: o.UDPPort, PublicIP: o.PublicIP, Codecs: codecs, Log: o.Log,
		ReadPeriod: o.ReadPeriod, Active: func() bool { return s.ActiveCalls() > 0 }})
	if err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /client/parley.js", serveClient)
	s.mux.HandleFunc("GET /client/call.js", servePageScript)
	s.mux.HandleFunc("GET /call/{id}", s.servePage)
	s.mux.HandleFunc("GET /listen/{id}", s.servePage)
	s.mux.HandleFunc("GET /call/{id}/signal", func(w http.ResponseWriter, r *http.Request) { s.serveSignal(w, r, false) })
	s.mux.HandleFunc("GET /listen/{id}/signal", func(w http.ResponseWriter, r *http.Request) { s.serveSignal(w, r, true) })
	s.playout = newPlayoutClock()
	s.wg.Add(1)
	go s.janitor()
	s.log.Info("webrtc service listening", "udp", s.rtc.LocalAddr().String(), "public_ip", o.PublicIP, "codecs", codecs)
	return s, nil
}

// clock reads the service's clock.
func (s *Service) clock() time.Time { return (*s.now.Load())() }

// Handler serves the browser client (/client/parley.js), the join page (/call/{id}), the
// listen page (/listen/{id}) and their signalling WebSockets (/call/{id}/signal,
// /listen/{id}/signal). Mount it at the root of the node's HTTP server.
func (s *Service) Handler() http.Handler { return s.mux }

// UDPAddr returns the address of the ICE UDP port.
func (s *Service) UDPAddr() *net.UDPAddr { return s.rtc.LocalAddr() }

// ActiveCalls returns how many pages are connected (callers and listeners).
func (s *Service) ActiveCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}

// Register makes a live conversation (a phone call) available to listen-in and takeover until
// it ends or unregister is called. Web calls register themselves.
func (s *Service) Register(conv *session.Conversation) (unregister func()) {
	return s.register(conv, nil)
}

func (s *Service) register(conv *session.Conversation, call *peer) func() {
	id := conv.ID()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return func() {}
	}
	lc := &liveConv{conv: conv, call: call, feed: s.feedLocked(id, nil)}
	s.convs[id] = lc
	s.wg.Add(1)
	s.mu.Unlock()
	unregister := func() {
		s.mu.Lock()
		if s.convs[id] == lc {
			delete(s.convs, id)
		}
		s.mu.Unlock()
	}
	// Watch for the end without a goroutine per conversation: whichever comes first, the
	// conversation's end or the service's, cleans up once and cancels the other.
	var (
		once              sync.Once
		stopConv, stopSvc func() bool
		stopMu            sync.Mutex
	)
	cleanup := func(ended bool) {
		once.Do(func() {
			if ended {
				s.dropFeed(id, lc.feed) // also when the engine never reported its end
			}
			unregister()
			stopMu.Lock()
			stopConv()
			stopSvc()
			stopMu.Unlock()
			s.wg.Done()
		})
	}
	stopMu.Lock()
	stopConv = conv.AfterDone(func() { cleanup(true) })
	stopSvc = context.AfterFunc(s.ctx, func() { cleanup(false) })
	stopMu.Unlock()
	return unregister
}

// feedLocked returns the live feed of conversation id, creating it (passing to next) when
// there is none. A feed lives from its first use until the conversation ends. Callers hold mu.
func (s *Service) feedLocked(id string, next session.Sink) *liveFeed {
	if f, ok := s.feeds[id]; ok {
		return f
	}
	var f *liveFeed
	f = newLiveFeed(id, next, func() { s.dropFeed(id, f) })
	s.feeds[id] = f
	return f
}

// dropFeed forgets the feed f of conversation id (the conversation is over, or never began).
func (s *Service) dropFeed(id string, f *liveFeed) {
	s.mu.Lock()
	if s.feeds[id] == f {
		delete(s.feeds, id)
	}
	s.mu.Unlock()
}

// Sink returns a sink for conversation id that passes everything to next and sends the live
// transcript to the pages listening to it. Build phone conversations with it (before Register)
// so listeners see the transcript; web calls get theirs in WebCallRequest.Start.
func (s *Service) Sink(conversationID string, next session.Sink) session.Sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.feedLocked(conversationID, next)
}

// Close ends every call (network_lost is not right for a shutdown: the engine records
// ended_by_api), closes the UDP port and waits for every goroutine. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	for _, p := range s.peerList() {
		p.end(session.EndAPI, false)
	}
	s.cancel()
	s.wg.Wait()
	return s.rtc.Close()
}

// janitor forgets expired web calls and used-token nonces.
func (s *Service) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// sweep removes web calls nobody joined before their token expired.
func (s *Service) sweep() {
	now := s.clock()
	var expired []func()
	s.mu.Lock()
	for id, wc := range s.calls {
		if !wc.joined && !now.Before(wc.ExpiresAt) {
			delete(s.calls, id)
			if wc.req.Expired != nil {
				expired = append(expired, wc.req.Expired)
			}
		}
	}
	s.mu.Unlock()
	s.used.Prune()
	for _, f := range expired {
		f()
	}
}

// servePage serves the join page (and the listen page: the same page, the token decides).
func (s *Service) servePage(w http.ResponseWriter, r *http.Request) {
	if !validID(r.PathValue("id")) {
		http.NotFound(w, r)
		return
	}
	servePage(w, r)
}

// serveSignal upgrades to the signalling WebSocket and runs it: the first message must be a
// join (with the token) or a resume; nothing else happens until it is accepted.
func (s *Service) serveSignal(w http.ResponseWriter, r *http.Request, listen bool) {
	id := r.PathValue("id")
	if !validID(id) {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closed {
		http.Error(w, ErrClosed.Detail, http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	c, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered the client
	}
	ws := newWSConn(c)
	defer ws.Close()
	stop := context.AfterFunc(s.ctx, func() { ws.CloseWith(websocket.CloseGoingAway, "shutting down") })
	defer stop()

	_ = c.SetReadDeadline(time.Now().Add(joinWait))
	_, b, err := c.ReadMessage()
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			refuse(ws, ErrJoinTimeout)
		}
		return
	}
	m, err := parseMessage(b)
	if err == nil && m.Type != "join" && m.Type != "resume" {
		err = fmt.Errorf("%w: the first message must be join or resume", ErrBadMessage)
	}
	var p *peer
	if err == nil {
		if m.Type == "join" {
			p, err = s.join(id, listen, m)
		} else {
			p, err = s.resume(id, m)
		}
	}
	if err != nil {
		s.log.Info("webrtc join refused", "id", id, "err", err, "remote", r.RemoteAddr)
		refuse(ws, err)
		return
	}
	p.attach(ws)
	defer p.detach(ws)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.opts.GracePeriod + s.opts.HeartbeatInterval))
		_, b, err := c.ReadMessage()
		if err != nil {
			if !errors.Is(err, io.EOF) && !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				p.log.Debug("signalling socket closed", "err", err)
			}
			return
		}
		p.heard()
		m, err := parseMessage(b)
		if err != nil {
			ws.Send(errorMessage(err))
			continue
		}
		p.handle(m, ws)
	}
}

// refuse tells the page why it cannot join and closes the socket.
func refuse(ws *wsConn, err error) {
	e := asError(err)
	ws.Send(errorMessage(err))
	ws.CloseWith(e.Close, e.Code)
}

func errorMessage(err error) message {
	e := asError(err)
	return message{Type: "error", Code: e.Code, Message: e.Detail}
}

// join checks the token and creates the page's peer. Every check comes before any media is set
// up: a refused token starts nothing.
func (s *Service) join(id string, listen bool, m message) (*peer, error) {
	kinds := []TokenKind{KindCall}
	if listen {
		kinds = []TokenKind{KindListen, KindTakeover}
	}
	claims, err := s.tokens.Verify(m.Token, id, kinds...)
	if err != nil {
		return nil, err
	}
	if s.used.Seen(claims) {
		return nil, ErrTokenUsed // said before "not found": the call may be over by now
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	var (
		wc *webCall
		lc *liveConv
	)
	if listen {
		lc = s.convs[id]
		if lc == nil {
			s.mu.Unlock()
			return nil, ErrNotLive
		}
	} else {
		wc = s.calls[id]
		if wc == nil {
			s.mu.Unlock()
			return nil, ErrCallNotFound
		}
		if wc.joined {
			s.mu.Unlock()
			return nil, ErrTokenUsed
		}
	}
	if err := s.used.Use(claims); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if wc != nil {
		wc.joined = true
	}
	s.mu.Unlock()

	r := roleCaller
	switch claims.Kind {
	case KindListen:
		r = roleListener
	case KindTakeover:
		r = roleTakeover
	}
	p, err := newPeer(s, peerConfig{role: r, call: wc, conv: lc, tracks: m.Tracks})
	if err != nil {
		if wc != nil {
			s.mu.Lock()
			delete(s.calls, id)
			s.mu.Unlock()
		}
		return nil, err
	}
	return p, nil
}

// resume reattaches a reconnected WebSocket to its peer.
func (s *Service) resume(id string, m message) (*peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.peers {
		if p.id == m.Session && p.target == id {
			if !p.checkSecret(m.Secret) {
				return nil, ErrTokenInvalid
			}
			return p, nil
		}
	}
	return nil, ErrCallNotFound
}

// addPeer records a live peer; it fails once the service is closing.
func (s *Service) addPeer(p *peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.peers[p] = struct{}{}
	s.peersCreated.Add(1)
	s.wg.Add(1)
	return nil
}

// removePeer forgets a peer that has ended (and its web call).
func (s *Service) removePeer(p *peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.peers, p)
	if p.call != nil && s.calls[p.call.ID] == p.call {
		delete(s.calls, p.call.ID)
	}
}

// peerList returns the live peers.
func (s *Service) peerList() []*peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*peer, 0, len(s.peers))
	for p := range s.peers {
		out = append(out, p)
	}
	return out
}

// iceServers converts the configured servers for the page.
func (s *Service) iceServers() []iceServer {
	out := make([]iceServer, 0, len(s.opts.ICEServers))
	for _, x := range s.opts.ICEServers {
		out = append(out, iceServer{URLs: x.URLs, Username: x.Username, Credential: x.Credential})
	}
	return out
}
