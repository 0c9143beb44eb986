package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	pion "github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	"github.com/parley-voice/parley/codec"
)

// WebRTCCallerOptions configure a WebRTCCaller.
type WebRTCCallerOptions struct {
	// Pacer sends every call's audio; required.
	Pacer *Pacer
	// ConnectTimeout bounds join to connected media (default 15 s).
	ConnectTimeout time.Duration
}

// WebRTCCaller joins browser calls like a page does: Parley's signalling over the call URL's
// WebSocket (join with the token, SDP offer/answer, trickle ICE, heartbeats), a Pion peer
// connection on loopback with an Opus microphone track (RFC 7587) and the "parley" data
// channel. The script's audio is Opus-encoded at 16 kHz on the pacer's clock; the agent's audio
// is decoded to 16 kHz and timed by the arrival of its packets.
type WebRTCCaller struct {
	o   WebRTCCallerOptions
	api *pion.API
}

// NewWebRTCCaller prepares the Pion API (Opus only, UDP over IPv4 loopback, no mDNS).
func NewWebRTCCaller(o WebRTCCallerOptions) (*WebRTCCaller, error) {
	if o.Pacer == nil {
		return nil, errors.New("bench: WebRTCCaller needs a Pacer")
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 15 * time.Second
	}
	m := &pion.MediaEngine{}
	if err := m.RegisterCodec(pion.RTPCodecParameters{RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus,
		ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"}, PayloadType: 111}, pion.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	var se pion.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	// A connectivity check from the service can arrive before its answer: the pair is then
	// peer-reflexive, and Pion would wait a second before nominating it. Browsers do not;
	// the caller must not add a delay of its own to the setup it measures.
	se.SetPrflxAcceptanceMinWait(0)
	se.SetHostAcceptanceMinWait(0)
	return &WebRTCCaller{o: o, api: pion.NewAPI(pion.WithMediaEngine(m), pion.WithSettingEngine(se))}, nil
}

// signal is one signalling message (see webrtc/README.md, "Protocol").
type signal struct {
	Type      string          `json:"type"`
	Token     string          `json:"token,omitempty"`
	SDP       string          `json:"sdp,omitempty"`
	Candidate json.RawMessage `json:"candidate,omitempty"`
	Seq       int64           `json:"seq,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
	Welcome   *struct {
		ConversationID string `json:"conversation_id"`
		HeartbeatMS    int64  `json:"heartbeat_ms"`
		Send           bool   `json:"send"`
	} `json:"welcome,omitempty"`
}

// signalURL turns a call URL (http://127.0.0.1:port/call/ID) into its WebSocket, refusing any
// host but loopback.
func signalURL(callURL string) (string, error) {
	u, err := url.Parse(strings.TrimRight(callURL, "/"))
	if err != nil {
		return "", fmt.Errorf("bench: call URL: %w", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" {
		return "", fmt.Errorf("bench: call URL host %q is not loopback", h)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("bench: call URL scheme %q", u.Scheme)
	}
	u.Path += "/signal"
	u.Fragment, u.RawQuery = "", ""
	return u.String(), nil
}

// loopbackCandidate reports whether an ICE candidate (RFC 8839 §5.1: foundation, component,
// transport, priority, address, port, "typ", type, …) is on a loopback address: the harness
// sends nothing anywhere else.
func loopbackCandidate(c string) bool {
	f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(c), "candidate:"))
	if len(f) < 6 {
		return false
	}
	ip := net.ParseIP(f[4])
	return ip != nil && ip.IsLoopback()
}

// loopbackCandidates removes the SDP's candidates that are not on loopback.
func loopbackCandidates(sdp string) string {
	lines := strings.SplitAfter(sdp, "\n")
	out := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(l, "a=candidate:") && !loopbackCandidate(strings.TrimPrefix(strings.TrimRight(l, "\r\n"), "a=")) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}

// webrtcCall is one call's state.
type webrtcCall struct {
	ws      *websocket.Conn
	wsMu    sync.Mutex
	pc      *pion.PeerConnection
	track   *pion.TrackLocalStaticSample
	enc     *codec.OpusEncoder
	mu      sync.Mutex // guards script and rx
	script  *CallScript
	rx      *receptionStats
	done    chan struct{}
	stop    atomic.Int32
	fail    atomic.Pointer[string]
	answer  chan string
	conn    chan struct{}
	connOne sync.Once
	bye     chan struct{}
	byeOne  sync.Once
	pcm     [320]int16
	pay     [1500]byte
	wg      sync.WaitGroup
}

func (w *webrtcCall) send(m signal) {
	w.wsMu.Lock()
	defer w.wsMu.Unlock()
	_ = w.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = w.ws.WriteJSON(m)
}

// Call joins the call at callURL with token as the participant name, runs the script (its
// utterances at 16 kHz), hangs up and returns what was measured. Setup is join to the first
// agent audio heard.
func (c *WebRTCCaller) Call(ctx context.Context, name, callURL, token string, so ScriptOptions) CallResult {
	res := CallResult{Kind: KindWebRTC, From: name, Started: time.Now()}
	su, err := signalURL(callURL)
	if err != nil {
		res.fail("join", err.Error())
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, c.o.ConnectTimeout)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(cctx, su, http.Header{"Origin": {strings.Replace(strings.Replace(su, "ws", "http", 1), "/signal", "", 1)}})
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
		}
		res.fail("join", "signalling: "+err.Error())
		return res
	}
	w := &webrtcCall{ws: ws, done: make(chan struct{}), answer: make(chan string, 1), conn: make(chan struct{}), bye: make(chan struct{}),
		rx: newReceptionStats(48000)}
	defer ws.Close()
	w.send(signal{Type: "join", Token: token})
	_ = ws.SetReadDeadline(time.Now().Add(c.o.ConnectTimeout))
	var first signal
	if err := ws.ReadJSON(&first); err != nil {
		res.fail("join", "no welcome: "+err.Error())
		return res
	}
	_ = ws.SetReadDeadline(time.Time{})
	if first.Type != "welcome" || first.Welcome == nil {
		res.fail("join", fmt.Sprintf("join refused: %s %s %s", first.Type, first.Code, first.Message))
		return res
	}
	res.ConversationID = first.Welcome.ConversationID
	if w.enc, err = codec.NewOpusEncoder(codec.OpusOptions{SampleRate: 16000, Bitrate: 24000, Complexity: 3}); err != nil {
		res.fail("media", "opus encoder: "+err.Error())
		return res
	}
	defer w.enc.Close()
	dec, err := codec.NewOpusDecoder(16000)
	if err != nil {
		res.fail("media", "opus decoder: "+err.Error())
		return res
	}
	defer dec.Close()
	if w.pc, err = c.api.NewPeerConnection(pion.Configuration{}); err != nil {
		res.fail("media", "peer connection: "+err.Error())
		return res
	}
	defer func() {
		w.pc.Close()
		w.wg.Wait()
	}()
	if w.track, err = pion.NewTrackLocalStaticSample(pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "bench"); err == nil {
		_, err = w.pc.AddTrack(w.track)
	}
	if err == nil {
		ordered := true
		_, err = w.pc.CreateDataChannel("parley", &pion.DataChannelInit{Ordered: &ordered})
	}
	if err != nil {
		res.fail("media", err.Error())
		return res
	}
	w.pc.OnICECandidate(func(cand *pion.ICECandidate) {
		m := signal{Type: "candidate", Candidate: json.RawMessage("null")}
		if cand != nil {
			b, _ := json.Marshal(cand.ToJSON())
			m.Candidate = b
		}
		w.send(m)
	})
	w.pc.OnConnectionStateChange(func(s pion.PeerConnectionState) {
		switch s {
		case pion.PeerConnectionStateConnected:
			w.connOne.Do(func() { close(w.conn) })
		case pion.PeerConnectionStateFailed, pion.PeerConnectionStateClosed:
			w.byeOne.Do(func() { close(w.bye) })
		}
	})
	w.pc.OnTrack(func(tr *pion.TrackRemote, _ *pion.RTPReceiver) {
		w.wg.Add(1)
		go w.receive(tr, dec)
	})
	w.wg.Add(1)
	go w.readSignals()
	offer, err := w.pc.CreateOffer(nil)
	if err == nil {
		err = w.pc.SetLocalDescription(offer)
	}
	if err != nil {
		res.fail("media", "offer: "+err.Error())
		return res
	}
	w.send(signal{Type: "offer", SDP: offer.SDP})
	select {
	case sdp := <-w.answer:
		if err := w.pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeAnswer, SDP: loopbackCandidates(sdp)}); err != nil {
			res.fail("media", "answer: "+err.Error())
			return res
		}
	case <-w.bye:
		res.fail("join", "refused: "+w.failure())
		return res
	case <-cctx.Done():
		res.fail("join", "no answer to the offer")
		return res
	}
	hb := time.Duration(max(first.Welcome.HeartbeatMS, 100)) * time.Millisecond
	w.wg.Add(1)
	go w.heartbeat(ctx, hb)
	select {
	case <-w.conn:
	case <-w.bye:
		res.fail("media", "media never connected: "+w.failure())
		return res
	case <-cctx.Done():
		res.fail("media", "media not connected within the connect timeout")
		return res
	}
	res.Answered = time.Now()
	res.Connect = res.Answered.Sub(res.Started)
	w.mu.Lock()
	w.script = NewCallScript(so, res.Answered)
	w.mu.Unlock()
	c.o.Pacer.Add(w)
	hungUp := false
	select {
	case <-w.done:
	case <-w.bye:
		hungUp = true
		w.stop.Store(stopHungUp)
	case <-ctx.Done():
		w.stop.Store(stopCancelled)
	}
	if hungUp || ctx.Err() != nil {
		select {
		case <-w.done:
		case <-time.After(2 * time.Second):
		}
	}
	res.Ended = time.Now()
	select {
	case <-w.done:
		w.mu.Lock()
		res.Script = w.script.Result()
		res.PacketsReceived, res.PacketsLost, res.Jitter = w.rx.Received(), w.rx.Lost(), w.rx.Jitter()
		w.mu.Unlock()
	default:
		res.fail("generator", "the pacer stopped ticking the call")
	}
	if g := res.Script.Greeting; g > 0 {
		res.Setup = res.Answered.Add(g).Sub(res.Started)
	}
	if f := res.Script.Failure; f != "" {
		res.fail(reasonOf(f), f)
	}
	if !hungUp {
		w.send(signal{Type: "hangup"})
	}
	return res
}

func (w *webrtcCall) failure() string {
	if p := w.fail.Load(); p != nil {
		return *p
	}
	return "the connection closed"
}

// readSignals handles the service's messages until the socket closes.
func (w *webrtcCall) readSignals() {
	defer w.wg.Done()
	for {
		var m signal
		if err := w.ws.ReadJSON(&m); err != nil {
			w.byeOne.Do(func() { close(w.bye) })
			return
		}
		switch m.Type {
		case "answer":
			select {
			case w.answer <- m.SDP:
			default:
			}
		case "candidate":
			if len(m.Candidate) == 0 || string(m.Candidate) == "null" {
				continue
			}
			var ci pion.ICECandidateInit
			if json.Unmarshal(m.Candidate, &ci) == nil && loopbackCandidate(ci.Candidate) {
				_ = w.pc.AddICECandidate(ci)
			}
		case "bye", "error":
			s := strings.TrimSpace(m.Type + " " + m.Reason + " " + m.Code + " " + m.Message)
			w.fail.Store(&s)
			w.byeOne.Do(func() { close(w.bye) })
		}
	}
}

func (w *webrtcCall) heartbeat(ctx context.Context, every time.Duration) {
	defer w.wg.Done()
	tk := time.NewTicker(every)
	defer tk.Stop()
	for seq := int64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-w.bye:
			return
		case <-w.done:
			return
		case <-tk.C:
			w.send(signal{Type: "ping", Seq: seq})
		}
	}
}

// receive decodes the agent's audio and gives it to the script, timed by arrival.
func (w *webrtcCall) receive(tr *pion.TrackRemote, dec *codec.OpusDecoder) {
	defer w.wg.Done()
	var pcm [5760]int16
	for {
		pkt, _, err := tr.ReadRTP()
		if err != nil {
			return
		}
		at := time.Now()
		n, err := dec.Decode(pcm[:], pkt.Payload)
		w.mu.Lock()
		w.rx.Push(pkt.SequenceNumber, pkt.Timestamp, at)
		if err == nil && w.script != nil && !w.script.Done() {
			w.script.Hear(at, pcm[:n], 16000)
		}
		w.mu.Unlock()
	}
}

// Tick sends the script's next frame.
func (w *webrtcCall) Tick(at time.Time) bool {
	w.mu.Lock()
	switch w.stop.Load() {
	case stopHungUp:
		w.script.Fail(at, "the agent hung up while the caller was "+w.script.State())
	case stopCancelled:
		w.script.Fail(at, "cancelled while the caller was "+w.script.State())
	}
	if w.script.Done() {
		w.mu.Unlock()
		close(w.done)
		return false
	}
	w.script.Fill(at, w.pcm[:])
	w.mu.Unlock()
	n, err := w.enc.Encode(w.pay[:], w.pcm[:])
	if err == nil {
		_ = w.track.WriteSample(pionmedia.Sample{Data: w.pay[:n], Duration: 20 * time.Millisecond})
	}
	return true
}
