package webrtc

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	pion "github.com/pion/webrtc/v4"
)

// role is what a page is in a conversation.
type role string

const (
	roleCaller   role = "caller"   // the web caller
	roleListener role = "listener" // hears the call
	roleTakeover role = "takeover" // hears the call and may speak instead of the agent
)

// dataChannelLabel is the data channel the page opens for transcript and events (RFC 8831).
const dataChannelLabel = "parley"

type peerConfig struct {
	role   role
	call   *webCall  // caller
	conv   *liveConv // listeners
	tracks string    // listeners: "mixed" or "split"
}

type endRequest struct {
	reason     session.EndReason
	fromEngine bool // the engine decided (it is ending itself): do not report the end to it
}

// peer is one page in a call: its signalling socket (replaceable: the page reconnects with the
// session id and secret), its peer connection, its data channel, and the watchdog that ends
// the call when the page goes unheard for the grace period. Its run goroutine owns the
// teardown; the service waits for it.
type peer struct {
	svc    *Service
	id     string
	secret string
	target string // what the page's URL names: the web call's id or the conversation's id
	role   role
	call   *webCall
	lc     *liveConv
	feed   *liveFeed
	log    *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	goMu   sync.Mutex
	stop   bool
	wg     sync.WaitGroup

	wsMu sync.Mutex
	ws   *wsConn

	pc     *pion.PeerConnection
	sigMu  sync.Mutex // serializes offers (a resumed socket may overlap the old one)
	first  bool       // the first offer has been answered; guarded by sigMu
	candMu sync.Mutex
	hold   bool // candidates wait until the answer is sent
	held   []message

	dcMu sync.Mutex
	dc   *pion.DataChannel

	heardAt    atomic.Int64
	rrSSRC     atomic.Uint32 // the SSRC receiver reports come from (reportSSRC)
	restarting atomic.Bool
	connected  atomic.Bool // media connected at least once

	// Caller.
	port       *callPort
	codec      Codec
	agentTrack atomic.Pointer[pion.TrackLocalStaticRTP]
	sender     atomic.Pointer[audioSender]
	remote     remoteReports // the page's receiver reports on the agent's track (mediastats.go)
	recv       atomic.Pointer[audioReceiver]
	conv       atomic.Pointer[session.Conversation]
	convCh     chan *session.Conversation
	callerFwd  atomic.Pointer[pion.TrackLocalStaticRTP]
	fwdMu      sync.Mutex
	rxCodec    Codec      // the caller's codec; guarded by fwdMu
	fwdPkt     rtp.Packet // the reader goroutine's forwarding scratch

	// Listeners.
	lis *listener

	endCh chan endRequest
	done  chan struct{}
}

func newPeer(s *Service, cfg peerConfig) (*peer, error) {
	p := &peer{
		svc: s, id: newID(), secret: newNonce(), role: cfg.role, call: cfg.call, lc: cfg.conv,
		convCh: make(chan *session.Conversation, 1), endCh: make(chan endRequest, 1), done: make(chan struct{}),
	}
	if cfg.call != nil {
		p.target = cfg.call.ID
		p.feed = s.Sink(cfg.call.req.ConversationID, cfg.call.req.Sink).(*liveFeed)
		p.port = &callPort{p: p}
	} else {
		p.target = cfg.conv.conv.ID()
		p.feed = cfg.conv.feed
	}
	p.log = s.log.With("webrtc_session", p.id, "role", string(p.role), "target", p.target)
	p.ctx, p.cancel = context.WithCancel(s.ctx)
	p.heard()
	pc, err := s.rtc.newPeerConnection()
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("%w: %v", ErrMedia, err)
	}
	p.pc = pc
	if p.role != roleCaller {
		p.lis = newListener(p, cfg.conv, cfg.tracks == "split")
	}
	if err := s.addPeer(p); err != nil {
		_ = pc.Close()
		p.cancel()
		return nil, err
	}
	pc.OnICECandidate(p.onCandidate)
	pc.OnConnectionStateChange(p.onState)
	pc.OnTrack(p.onTrack)
	pc.OnDataChannel(p.onDataChannel)
	go p.run()
	p.log.Info("page joined")
	return p, nil
}

// spawn runs f on a goroutine the peer waits for; it does nothing once teardown began.
func (p *peer) spawn(f func()) {
	p.goMu.Lock()
	defer p.goMu.Unlock()
	if p.stop {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

func (p *peer) checkSecret(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), []byte(p.secret)) == 1
}

// heard notes that the page is alive.
func (p *peer) heard() { p.heardAt.Store(time.Now().UnixNano()) }

// attach makes ws the peer's signalling socket and sends the welcome (a resumed socket gets it
// again, so the page carries on the same way), and a restart request if ICE is down.
func (p *peer) attach(ws *wsConn) {
	p.wsMu.Lock()
	old := p.ws
	p.ws = ws
	p.wsMu.Unlock()
	if old != nil && old != ws {
		old.CloseWith(4000, "replaced by a newer connection")
	}
	p.heard()
	w := &welcome{
		Session: p.id, Secret: p.secret, Role: string(p.role),
		HeartbeatMS: p.svc.opts.HeartbeatInterval.Milliseconds(), GraceMS: p.svc.opts.GracePeriod.Milliseconds(),
		ICEServers: p.svc.iceServers(), Receive: 1, Send: p.role != roleListener,
	}
	if p.call != nil {
		w.CallID, w.ConversationID, w.ParticipantName, w.AgentName = p.call.ID, p.call.req.ConversationID, p.call.req.ParticipantName, p.call.req.AgentName
	} else {
		w.ConversationID = p.target
		w.Receive = p.lis.receive()
	}
	ws.Send(message{Type: "welcome", Welcome: w})
	if st := p.pc.ConnectionState(); st == pion.PeerConnectionStateDisconnected || st == pion.PeerConnectionStateFailed {
		ws.Send(message{Type: "restart"})
	}
}

// detach forgets ws when it closes; the peer lives on until the grace period runs out.
func (p *peer) detach(ws *wsConn) {
	p.wsMu.Lock()
	if p.ws == ws {
		p.ws = nil
	}
	p.wsMu.Unlock()
}

// send queues m on the current signalling socket, if any.
func (p *peer) send(m message) {
	p.wsMu.Lock()
	ws := p.ws
	p.wsMu.Unlock()
	if ws != nil {
		ws.Send(m)
	}
}

// handle runs one message from the signalling socket.
func (p *peer) handle(m message, ws *wsConn) {
	switch m.Type {
	case "offer":
		if err := p.onOffer(m.SDP); err != nil {
			p.log.Warn("offer refused", "err", err)
			ws.Send(errorMessage(err))
			if !p.negotiated() {
				p.end(session.EndFailed, false) // no media can ever start
			}
		}
	case "candidate":
		if err := p.addCandidate(m.Candidate); err != nil {
			p.log.Debug("remote candidate refused", "err", err)
		}
	case "ping":
		ws.Send(message{Type: "pong", Seq: m.Seq})
	case "join", "resume":
		ws.Send(errorMessage(fmt.Errorf("%w: already joined", ErrBadMessage)))
	default:
		p.onApp(m)
	}
}

// onApp runs what a page asks for, over the socket or the data channel.
func (p *peer) onApp(m message) {
	switch m.Type {
	case "hangup":
		p.end(session.EndCallerHungUp, false)
	case "text":
		if conv := p.conv.Load(); conv != nil && p.role == roleCaller {
			conv.PushText(m.Text)
		}
	case "dtmf":
		if conv := p.conv.Load(); conv != nil && p.role == roleCaller {
			for _, d := range m.Digits {
				conv.PushDTMF(d)
			}
		}
	case "takeover":
		if p.role != roleTakeover {
			p.notify(errorMessage(fmt.Errorf("%w: this page may only listen", ErrTakeover)))
			return
		}
		if err := p.lis.setTakeover(*m.On); err != nil {
			p.log.Warn("takeover failed", "err", err)
			p.notify(errorMessage(fmt.Errorf("%w: %v", ErrTakeover, err)))
			return
		}
		p.notify(message{Type: "takeover", On: m.On})
	}
}

// notify sends m to the page on the data channel when it is open, else on the socket.
func (p *peer) notify(m message) {
	p.dcMu.Lock()
	dc := p.dc
	p.dcMu.Unlock()
	if dc != nil && dc.ReadyState() == pion.DataChannelStateOpen {
		if b, err := json.Marshal(m); err == nil && dc.SendText(string(b)) == nil {
			return
		}
	}
	p.send(m)
}

// offeredCodecs lists the enabled codecs an SDP offer carries for audio.
func offeredCodecs(offer string) ([]Codec, error) {
	var sd sdp.SessionDescription
	if err := sd.UnmarshalString(offer); err != nil {
		return nil, err
	}
	var out []Codec
	for _, md := range sd.MediaDescriptions {
		if md.MediaName.Media != "audio" {
			continue
		}
		for _, a := range md.Attributes {
			if a.Key != "rtpmap" {
				continue
			}
			_, enc, ok := strings.Cut(a.Value, " ")
			if !ok {
				continue
			}
			name, _, _ := strings.Cut(enc, "/")
			if c, ok := codecOf("audio/" + name); ok {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// withOpusFmtp makes the answer state the service's own Opus receive preferences (pion copies
// the offer's): in-band FEC, which the receive path decodes, and DTX, which its playout clock
// turns into silence for the engine (RFC 7587 §6.1: the answerer's fmtp says what it wants to
// receive).
func withOpusFmtp(s string) string {
	lines := strings.Split(s, "\r\n")
	var pts []string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "a=rtpmap:"); ok {
			if pt, enc, ok := strings.Cut(v, " "); ok && strings.HasPrefix(strings.ToLower(enc), "opus/") {
				pts = append(pts, pt)
			}
		}
	}
	out := make([]string, 0, len(lines)+len(pts))
	for _, l := range lines {
		drop := false
		for _, pt := range pts {
			if strings.HasPrefix(l, "a=fmtp:"+pt+" ") {
				drop = true
			}
		}
		if drop {
			continue
		}
		out = append(out, l)
		if v, ok := strings.CutPrefix(l, "a=rtpmap:"); ok {
			for _, pt := range pts {
				if strings.HasPrefix(v, pt+" ") {
					out = append(out, "a=fmtp:"+pt+" "+opusFmtp)
				}
			}
		}
	}
	return strings.Join(out, "\r\n")
}

// onOffer answers an offer: the first sets up the media; later ones renegotiate or restart ICE
// (new ice-ufrag/ice-pwd, RFC 8445 §9, RFC 8839 §4.4.1.1.1), which pion applies.
func (p *peer) onOffer(offer string) error {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if !p.first {
		offered, err := offeredCodecs(offer)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMedia, err)
		}
		c, ok := p.svc.rtc.pick(offered)
		if !ok {
			return fmt.Errorf("%w: the offer has none of the enabled codecs %v", ErrMedia, p.svc.rtc.codecs)
		}
		p.codec = c
	}
	if err := p.pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeOffer, SDP: offer}); err != nil {
		return fmt.Errorf("%w: %v", ErrMedia, err)
	}
	if !p.first {
		var err error
		if p.role == roleCaller {
			err = p.addAgentTrack()
		} else {
			err = p.lis.addTracks(p.pc)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMedia, err)
		}
		p.first = true
	}
	answer, err := p.pc.CreateAnswer(nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMedia, err)
	}
	p.candMu.Lock()
	p.hold = true
	p.candMu.Unlock()
	if err := p.pc.SetLocalDescription(answer); err != nil {
		return fmt.Errorf("%w: %v", ErrMedia, err)
	}
	// Pion keeps its own copy; the page gets the service's Opus preferences.
	p.send(message{Type: "answer", SDP: withOpusFmtp(answer.SDP)})
	p.candMu.Lock()
	for _, m := range p.held {
		p.send(m)
	}
	p.held, p.hold = nil, false
	p.candMu.Unlock()
	return nil
}

// negotiated reports whether a first offer was answered.
func (p *peer) negotiated() bool {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	return p.first
}

// addAgentTrack adds the track the agent speaks on (the caller's page receives it).
func (p *peer) addAgentTrack() error {
	t, err := pion.NewTrackLocalStaticRTP(p.codec.parameters().RTPCodecCapability, "agent", "parley")
	if err != nil {
		return err
	}
	rs, err := p.pc.AddTrack(t)
	if err != nil {
		return err
	}
	s, err := newAudioSender(audioSenderOptions{Codec: p.codec, Track: t, OpusBitrate: p.svc.opts.OpusBitrate, OpusRate: p.svc.opts.OpusEncodeRate, OpusComplexity: p.svc.opts.OpusComplexity, OpusApplication: p.svc.opts.OpusApplication})
	if err != nil {
		return err
	}
	p.agentTrack.Store(t)
	p.sender.Store(s)
	p.spawn(func() {
		p.readSenderRTCP(rs, func() uint32 {
			if enc := rs.GetParameters().Encodings; len(enc) > 0 {
				return uint32(enc[0].SSRC)
			}
			return 0
		})
	})
	return nil
}

// drainRTCP reads a sender's incoming RTCP (receiver reports) so the interceptors see it; it
// returns when the connection closes.
func drainRTCP(r interface {
	Read([]byte) (int, interceptor.Attributes, error)
}) {
	buf := make([]byte, 1500)
	for {
		if _, _, err := r.Read(buf); err != nil {
			return
		}
	}
}

// addCandidate adds a trickled remote candidate; null ends the remote candidates.
func (p *peer) addCandidate(raw json.RawMessage) error {
	if string(raw) == "null" {
		return nil
	}
	var c pion.ICECandidateInit
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c.Candidate == "" {
		return nil // an empty candidate also marks the end (RFC 8838 §4.1)
	}
	return p.pc.AddICECandidate(c)
}

// onCandidate trickles a local candidate to the page (nil: gathering is complete).
func (p *peer) onCandidate(c *pion.ICECandidate) {
	m := message{Type: "candidate", Candidate: json.RawMessage("null")}
	if c != nil {
		b, err := json.Marshal(c.ToJSON())
		if err != nil {
			return
		}
		m.Candidate = b
	}
	p.candMu.Lock()
	defer p.candMu.Unlock()
	if p.hold {
		p.held = append(p.held, m)
		return
	}
	p.send(m)
}

// onState follows the connection: the conversation starts when media first connects; a lost
// connection asks the page to restart ICE (the watchdog ends the call if that never works).
func (p *peer) onState(st pion.PeerConnectionState) {
	p.log.Debug("peer connection state", "state", st.String())
	switch st {
	case pion.PeerConnectionStateConnected:
		p.connected.Store(true)
		p.restarting.Store(false)
		if p.role == roleCaller {
			p.startOnce()
		}
	case pion.PeerConnectionStateDisconnected, pion.PeerConnectionStateFailed:
		if p.restarting.CompareAndSwap(false, true) {
			p.send(message{Type: "restart"})
		}
	}
}

// startOnce starts the conversation the first time media is up.
func (p *peer) startOnce() {
	p.goMu.Lock()
	started := p.port.started
	p.port.started = true
	p.goMu.Unlock()
	if started {
		return
	}
	p.spawn(p.startConversation)
}

func (p *peer) startConversation() {
	req := p.call.req
	conv, err := req.Start(p.ctx, p.port, p.feed)
	if err != nil || conv == nil {
		if err == nil {
			err = errors.New("Start returned no conversation")
		}
		p.log.Error("the conversation could not start", "err", err)
		p.notify(message{Type: "error", Code: "start_failed", Message: "the agent could not be started"})
		p.end(session.EndFailed, true)
		return
	}
	p.conv.Store(conv)
	p.svc.register(conv, p)
	p.convCh <- conv
}

// onTrack starts the receive path of a page's microphone: its reader and its RTCP reader, and
// it registers it with the service's playout clock until the peer ends.
func (p *peer) onTrack(track *pion.TrackRemote, recv *pion.RTPReceiver) {
	r := p.newReceiver(track)
	if r == nil {
		p.spawn(func() { drainRTCP(recv) })
		return
	}
	p.spawn(func() { r.readRTCP(recv) })
	p.spawn(func() { r.readLoop(track) })
	context.AfterFunc(p.ctx, p.svc.playout.add(r))
}

// newReceiver returns the receive path for track, or nil when the page's audio is not wanted
// (a listener's page, a codec the service does not speak, a second microphone).
func (p *peer) newReceiver(track *pion.TrackRemote) *audioReceiver {
	if track.Kind() != pion.RTPCodecTypeAudio {
		return nil
	}
	c, ok := codecOf(track.Codec().MimeType)
	if !ok {
		p.log.Warn("track with an unknown codec", "codec", track.Codec().MimeType)
		return nil
	}
	var deliver func(*media.Frame)
	switch p.role {
	case roleCaller:
		deliver = p.deliverCaller
	case roleTakeover:
		deliver = p.lis.humanFrame
	default:
		return nil // a listener's page sends nothing
	}
	r, err := newAudioReceiver(c, uint8(track.PayloadType()), deliver)
	if err != nil {
		p.log.Error("receive path", "err", err)
		return nil
	}
	if p.svc.rtc.poll != nil {
		r.batchedReads(p.svc.opts.ReadPeriod)
	}
	if p.role == roleCaller {
		r.forward = p.forwardCaller
		p.fwdMu.Lock()
		p.rxCodec = c
		p.fwdMu.Unlock()
	}
	if !p.recv.CompareAndSwap(nil, r) {
		_ = r.Close()
		return nil
	}
	return r
}

// deliverCaller hands the caller's 16 kHz frames to the engine (the track's reader, or the
// playout clock).
func (p *peer) deliverCaller(f *media.Frame) {
	if conv := p.conv.Load(); conv != nil {
		conv.PushFrame(f)
	}
}

// forwardCaller passes the caller's packets, as they came, to split listeners (no transcoding).
// Header extensions are left out: their ids belong to the caller's negotiation.
func (p *peer) forwardCaller(in *rtp.Packet) {
	t := p.callerFwd.Load()
	if t == nil {
		return
	}
	f := &p.fwdPkt
	f.Header = rtp.Header{Version: 2, Marker: in.Marker, PayloadType: in.PayloadType, SequenceNumber: in.SequenceNumber, Timestamp: in.Timestamp}
	f.Payload = in.Payload
	_ = t.WriteRTP(f)
	f.Payload = nil
}

// callerForwardTrack returns the track that carries the caller's packets to split listeners,
// creating it on first use; nil while the caller's codec is unknown.
func (p *peer) callerForwardTrack() *pion.TrackLocalStaticRTP {
	if t := p.callerFwd.Load(); t != nil {
		return t
	}
	p.fwdMu.Lock()
	defer p.fwdMu.Unlock()
	if t := p.callerFwd.Load(); t != nil {
		return t
	}
	if p.recv.Load() == nil || !p.svc.rtc.has(p.rxCodec) {
		return nil
	}
	t, err := pion.NewTrackLocalStaticRTP(p.rxCodec.parameters().RTPCodecCapability, "caller", "parley")
	if err != nil {
		return nil
	}
	p.callerFwd.Store(t)
	return t
}

// onDataChannel takes the page's "parley" channel: transcript and events out, requests in.
func (p *peer) onDataChannel(dc *pion.DataChannel) {
	if dc.Label() != dataChannelLabel {
		return
	}
	p.dcMu.Lock()
	p.dc = dc
	p.dcMu.Unlock()
	dc.OnOpen(func() { p.spawn(func() { p.feedWriter(dc) }) })
	dc.OnMessage(func(msg pion.DataChannelMessage) {
		p.heard()
		m, err := parseMessage(msg.Data)
		if err != nil {
			if b, e := json.Marshal(errorMessage(err)); e == nil {
				_ = dc.SendText(string(b))
			}
			return
		}
		switch m.Type {
		case "ping":
			if b, e := json.Marshal(message{Type: "pong", Seq: m.Seq}); e == nil {
				_ = dc.SendText(string(b))
			}
		case "offer", "candidate", "join", "resume":
			// signalling belongs on the socket
		default:
			p.onApp(m)
		}
	})
}

// feedWriter sends the live transcript to the page: first the lines so far (a listener who
// joins mid-call), then live events, skipping lines it already sent.
func (p *peer) feedWriter(dc *pion.DataChannel) {
	sub, cancel := p.feed.subscribe()
	defer cancel()
	var last int64
	conv := p.conv.Load()
	if p.lc != nil {
		conv = p.lc.conv
	}
	if conv != nil {
		for _, l := range conv.Transcript() {
			b, err := json.Marshal(message{Type: "line", Line: &l})
			if err == nil && dc.SendText(string(b)) == nil {
				last = l.Seq
			}
		}
	}
	send := func(ev feedEvent) {
		if ev.seq != 0 && ev.seq <= last {
			return
		}
		_ = dc.SendText(string(ev.data))
	}
	for {
		select {
		case ev := <-sub.ch:
			send(ev)
		case <-p.ctx.Done():
			for {
				select {
				case ev := <-sub.ch:
					send(ev)
				default:
					return
				}
			}
		}
	}
}

// end asks the run goroutine to end the page's part in the call; the first reason wins.
func (p *peer) end(reason session.EndReason, fromEngine bool) {
	select {
	case p.endCh <- endRequest{reason: reason, fromEngine: fromEngine}:
	default:
	}
}

// silentFor returns how long the page has been unheard: no message and no audio.
func (p *peer) silentFor(now time.Time) time.Duration {
	last := time.Unix(0, p.heardAt.Load())
	if r := p.recv.Load(); r != nil {
		if t := r.LastPacket(); t.After(last) {
			last = t
		}
	}
	return now.Sub(last)
}

// run is the peer's watchdog and owner: it ends the call when asked, when the conversation
// ends, or when the page has been unheard for the grace period, then tears everything down.
func (p *peer) run() {
	defer p.svc.wg.Done()
	defer close(p.done)
	every := min(p.svc.opts.HeartbeatInterval/2, 250*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var convDone, lisDone <-chan struct{}
	if p.lc != nil {
		lisDone = p.lc.conv.Done()
	}
	var conv *session.Conversation
	connectBy := time.Now().Add(p.svc.opts.ConnectTimeout)
	var lastReport time.Time
	for {
		select {
		case r := <-p.endCh:
			p.teardown(r)
			return
		case <-p.ctx.Done():
			p.teardown(endRequest{reason: session.EndAPI})
			return
		case conv = <-p.convCh:
			convDone = conv.Done()
		case <-convDone:
			p.teardown(endRequest{reason: conv.EndReason(), fromEngine: true})
			return
		case <-lisDone:
			p.teardown(endRequest{reason: p.lc.conv.EndReason(), fromEngine: true})
			return
		case now := <-tick.C:
			if !p.connected.Load() && now.After(connectBy) {
				p.log.Info("media did not connect in time", "timeout", p.svc.opts.ConnectTimeout)
				p.send(errorMessage(fmt.Errorf("%w: no media connection within %v", ErrMedia, p.svc.opts.ConnectTimeout)))
				p.teardown(endRequest{reason: session.EndFailed})
				return
			}
			if d := p.silentFor(now); d > p.svc.opts.GracePeriod {
				p.log.Info("page unheard for the grace period: network lost", "silent", d.Round(time.Millisecond))
				p.teardown(endRequest{reason: session.EndNetworkLost})
				return
			}
			if now.Sub(lastReport) >= rtcpReportInterval {
				lastReport = now
				p.sendReceiverReport()
			}
		}
	}
}

// rtcpReportInterval is how often the service reports on the audio it receives (RFC 3550
// §6.2 leaves the interval to the profile; browsers report about once a second).
const rtcpReportInterval = time.Second

// sendReceiverReport sends an RTCP receiver report about the page's microphone (RFC 3550
// §6.4.2): loss, jitter and the delay since the page's last sender report, from which the
// browser computes the round trip and its Opus encoder adapts its in-band FEC. The report
// comes from the SSRC the service sends with, when it sends.
func (p *peer) sendReceiverReport() {
	r := p.recv.Load()
	if r == nil {
		return
	}
	block, ok := r.receptionReport()
	if !ok {
		return
	}
	rr := &rtcp.ReceiverReport{SSRC: p.reportSSRC(), Reports: []rtcp.ReceptionReport{block}}
	if err := p.pc.WriteRTCP([]rtcp.Packet{rr}); err != nil {
		p.log.Debug("receiver report not sent", "err", err)
	}
}

// reportSSRC returns the SSRC of the service's first sending track, or a random one that the
// peer keeps when it sends nothing.
func (p *peer) reportSSRC() uint32 {
	if v := p.rrSSRC.Load(); v != 0 {
		return v
	}
	ssrc := randUint32() | 1
	for _, s := range p.pc.GetSenders() {
		if enc := s.GetParameters().Encodings; s.Track() != nil && len(enc) > 0 && enc[0].SSRC != 0 {
			ssrc = uint32(enc[0].SSRC)
			break
		}
	}
	p.rrSSRC.CompareAndSwap(0, ssrc)
	return p.rrSSRC.Load()
}

// teardown ends the page's part: the conversation learns why (unless it decided), the page is
// told, and everything the peer started is stopped and waited for.
func (p *peer) teardown(r endRequest) {
	reason := r.reason
	if conv := p.conv.Load(); conv != nil {
		if !r.fromEngine {
			conv.ChannelEnded(r.reason)
		}
		select {
		case <-conv.Done():
			reason = conv.EndReason()
		case <-time.After(5 * time.Second):
			p.log.Warn("the conversation did not end in time")
		}
	}
	if p.lis != nil {
		p.lis.close()
	}
	if p.call != nil && p.conv.Load() == nil {
		p.svc.dropFeed(p.call.req.ConversationID, p.feed) // the conversation never began
	}
	p.log.Info("page left", "reason", reason)
	p.notifyEnded(reason)
	p.wsMu.Lock()
	ws := p.ws
	p.wsMu.Unlock()
	if ws != nil {
		ws.Send(message{Type: "bye", Reason: string(reason)})
		ws.CloseWith(1000, "call ended")
	}
	p.goMu.Lock()
	p.stop = true
	p.goMu.Unlock()
	p.cancel()
	_ = p.pc.Close()
	p.wg.Wait()
	if s := p.sender.Load(); s != nil {
		_ = s.Close()
	}
	if r := p.recv.Load(); r != nil {
		_ = r.Close()
	}
	p.svc.removePeer(p)
}

// notifyEnded tells the page on the data channel (the socket gets "bye") and gives SCTP a
// moment to deliver it before the connection closes.
func (p *peer) notifyEnded(reason session.EndReason) {
	p.dcMu.Lock()
	dc := p.dc
	p.dcMu.Unlock()
	if dc == nil || dc.ReadyState() != pion.DataChannelStateOpen {
		return
	}
	b, _ := json.Marshal(message{Type: "ended", Reason: string(reason)})
	if dc.SendText(string(b)) != nil {
		return
	}
	low := make(chan struct{}, 1)
	dc.SetBufferedAmountLowThreshold(0)
	dc.OnBufferedAmountLow(func() {
		select {
		case low <- struct{}{}:
		default:
		}
	})
	if dc.BufferedAmount() == 0 {
		return
	}
	select {
	case <-low:
	case <-time.After(300 * time.Millisecond):
	}
}
