// Package webrtctest is a browser stand-in for tests and benchmarks: a Pion peer that speaks
// Parley's WebRTC signalling protocol (join with a token, offer/answer, trickle ICE,
// heartbeats, ICE restart), sends audio from Go (tones, speech, silence) as Opus or PCMU,
// decodes what it receives to 16 kHz PCM, and records the data channel's transcript and events.
// It is for tests: it favours clarity over speed and must never be used by production code.
package webrtctest

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
	"time"

	"github.com/gorilla/websocket"
	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/report"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	pion "github.com/pion/webrtc/v4"
)

// Options configure a Client.
type Options struct {
	// URL is the call or listen URL (http://host/call/{id}); Token the join token.
	URL   string
	Token string
	// Tracks asks listeners for "mixed" (default) or "split" audio.
	Tracks string
	// Codecs the client offers, in order: "opus", "pcmu". Default both.
	Codecs []string
	// NoHeartbeat turns the heartbeat off (the client then goes unheard unless it sends audio).
	NoHeartbeat bool
}

// Welcome is the service's welcome message.
type Welcome struct {
	Session         string `json:"session"`
	Secret          string `json:"secret"`
	Role            string `json:"role"`
	CallID          string `json:"call_id"`
	ConversationID  string `json:"conversation_id"`
	ParticipantName string `json:"participant_name"`
	HeartbeatMS     int64  `json:"heartbeat_ms"`
	GraceMS         int64  `json:"grace_ms"`
	Receive         int    `json:"receive"`
	Send            bool   `json:"send"`
}

// Line is a transcript line as the page receives it.
type Line struct {
	Seq         int64          `json:"seq"`
	Role        string         `json:"role"`
	Text        string         `json:"text"`
	Interrupted bool           `json:"interrupted"`
	Meta        map[string]any `json:"meta"`
}

type msg struct {
	Type      string          `json:"type"`
	Token     string          `json:"token,omitempty"`
	Tracks    string          `json:"tracks,omitempty"`
	Session   string          `json:"session,omitempty"`
	Secret    string          `json:"secret,omitempty"`
	SDP       string          `json:"sdp,omitempty"`
	Candidate json.RawMessage `json:"candidate,omitempty"`
	Seq       int64           `json:"seq,omitempty"`
	Text      string          `json:"text,omitempty"`
	Digits    string          `json:"digits,omitempty"`
	On        *bool           `json:"on,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
	Welcome   *Welcome        `json:"welcome,omitempty"`
	Line      *Line           `json:"line,omitempty"`
	State     string          `json:"state,omitempty"`
}

// JoinError is a refusal from the service.
type JoinError struct {
	Code      string // token_expired, token_used, token_wrong_call, ...
	Message   string
	CloseCode int
}

func (e *JoinError) Error() string { return fmt.Sprintf("join refused: %s (%s)", e.Code, e.Message) }

// Client is one fake browser.
type Client struct {
	opts    Options
	welcome Welcome
	pc      *pion.PeerConnection
	dc      *pion.DataChannel
	local   *pion.TrackLocalStaticRTP
	enc     codec.Encoder
	encRS   *codec.Resampler
	sendPT  uint8
	ticks   uint32

	wsMu sync.Mutex
	ws   *websocket.Conn

	mu        sync.Mutex
	source    func(dst []int16) // fills each 16 kHz frame sent; nil: nothing sent
	recv      [][]int16         // decoded 16 kHz audio per remote track, in arrival order
	trackIDs  []string
	lines     []Line
	interims  []string
	states    []string
	events    []msg
	ended     string
	errs      []msg
	connected bool
	pending   []pion.ICECandidateInit
	remote    []string
	haveAns   bool
	answers   int
	micReport *rtcp.ReceptionReport // the service's last report on the microphone
	srs       int                   // sender reports received for the tracks heard

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Join opens the signalling socket and sends the join; it returns the welcome, or the
// service's refusal as a *JoinError. The socket is closed afterwards (for token tests).
func Join(ctx context.Context, callURL, token string) (Welcome, error) {
	ws, err := dialWS(ctx, callURL)
	if err != nil {
		return Welcome{}, err
	}
	defer ws.Close()
	if err := ws.WriteJSON(msg{Type: "join", Token: token}); err != nil {
		return Welcome{}, err
	}
	return readWelcome(ctx, ws)
}

func dialWS(ctx context.Context, callURL string) (*websocket.Conn, error) {
	u, err := url.Parse(strings.TrimRight(callURL, "/"))
	if err != nil {
		return nil, err
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	u.Path += "/signal"
	u.Fragment, u.RawQuery = "", ""
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, u.String(), http.Header{"Origin": {"http://" + u.Host}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %d)", u, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	return ws, nil
}

func readWelcome(ctx context.Context, ws *websocket.Conn) (Welcome, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = ws.SetReadDeadline(d)
	}
	defer ws.SetReadDeadline(time.Time{})
	var m msg
	if err := ws.ReadJSON(&m); err != nil {
		return Welcome{}, err
	}
	switch m.Type {
	case "welcome":
		if m.Welcome == nil {
			return Welcome{}, errors.New("welcome without content")
		}
		return *m.Welcome, nil
	case "error":
		je := &JoinError{Code: m.Code, Message: m.Message}
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			je.CloseCode = ce.Code
		}
		return Welcome{}, je
	}
	return Welcome{}, fmt.Errorf("unexpected first message %q", m.Type)
}

// newAPI builds a Pion API for the client: loopback host candidates only.
func newAPI(codecs []string) (*pion.API, error) {
	m := &pion.MediaEngine{}
	for _, c := range codecs {
		var p pion.RTPCodecParameters
		switch strings.ToLower(c) {
		case "opus":
			p = pion.RTPCodecParameters{RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"}, PayloadType: 111}
		case "pcmu":
			p = pion.RTPCodecParameters{RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypePCMU, ClockRate: 8000}, PayloadType: 0}
		default:
			return nil, fmt.Errorf("unknown codec %q", c)
		}
		if err := m.RegisterCodec(p, pion.RTPCodecTypeAudio); err != nil {
			return nil, err
		}
	}
	var se pion.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	// Sender reports, as browsers send them: the service's receiver reports answer with
	// LSR/DLSR (RFC 3550 §6.4).
	ir := &interceptor.Registry{}
	sr, err := report.NewSenderInterceptor()
	if err != nil {
		return nil, err
	}
	ir.Add(sr)
	return pion.NewAPI(pion.WithMediaEngine(m), pion.WithSettingEngine(se), pion.WithInterceptorRegistry(ir)), nil
}

// Dial joins like a browser: signalling, then a peer connection with a microphone track (when
// the service wants one), receive transceivers and the "parley" data channel. It returns once
// the answer is applied; use WaitConnected for media.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if len(o.Codecs) == 0 {
		o.Codecs = []string{"opus", "pcmu"}
	}
	ws, err := dialWS(ctx, o.URL)
	if err != nil {
		return nil, err
	}
	if err := ws.WriteJSON(msg{Type: "join", Token: o.Token, Tracks: o.Tracks}); err != nil {
		ws.Close()
		return nil, err
	}
	w, err := readWelcome(ctx, ws)
	if err != nil {
		ws.Close()
		return nil, err
	}
	api, err := newAPI(o.Codecs)
	if err != nil {
		ws.Close()
		return nil, err
	}
	pc, err := api.NewPeerConnection(pion.Configuration{})
	if err != nil {
		ws.Close()
		return nil, err
	}
	c := &Client{opts: o, welcome: w, pc: pc, ws: ws}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	recv := max(w.Receive, 1)
	if w.Send {
		first := strings.ToLower(o.Codecs[0])
		cap := pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}
		if first == "pcmu" {
			cap = pion.RTPCodecCapability{MimeType: pion.MimeTypePCMU, ClockRate: 8000}
		}
		c.local, err = pion.NewTrackLocalStaticRTP(cap, "mic", "page")
		var rs *pion.RTPSender
		if err == nil {
			rs, err = pc.AddTrack(c.local)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		c.wg.Add(1)
		go c.readMicRTCP(rs)
		recv--
	}
	for i := 0; i < recv; i++ {
		if _, err := pc.AddTransceiverFromKind(pion.RTPCodecTypeAudio, pion.RTPTransceiverInit{Direction: pion.RTPTransceiverDirectionRecvonly}); err != nil {
			c.Close()
			return nil, err
		}
	}
	ordered := true
	c.dc, err = pc.CreateDataChannel("parley", &pion.DataChannelInit{Ordered: &ordered})
	if err != nil {
		c.Close()
		return nil, err
	}
	c.dc.OnMessage(func(m pion.DataChannelMessage) {
		var x msg
		if json.Unmarshal(m.Data, &x) == nil {
			c.onEvent(x)
		}
	})
	pc.OnICECandidate(func(cand *pion.ICECandidate) {
		m := msg{Type: "candidate", Candidate: json.RawMessage("null")}
		if cand != nil {
			b, _ := json.Marshal(cand.ToJSON())
			m.Candidate = b
		}
		c.send(m)
	})
	pc.OnConnectionStateChange(func(s pion.PeerConnectionState) {
		c.mu.Lock()
		c.states = append(c.states, s.String())
		if s == pion.PeerConnectionStateConnected {
			c.connected = true
		}
		c.mu.Unlock()
	})
	pc.OnTrack(c.onTrack)
	c.wg.Add(1)
	go c.readLoop(ws)
	if err := c.offer(false); err != nil {
		c.Close()
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for !c.hasAnswer() {
		if e := c.firstError(); e != nil {
			c.Close()
			return nil, e
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.Close()
			return nil, errors.New("no answer from the service")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !o.NoHeartbeat {
		c.wg.Add(1)
		go c.heartbeat(time.Duration(max(w.HeartbeatMS, 50)) * time.Millisecond)
	}
	if c.local != nil {
		c.wg.Add(1)
		go c.sendLoop()
	}
	return c, nil
}

func (c *Client) firstError() *JoinError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	return &JoinError{Code: c.errs[0].Code, Message: c.errs[0].Message}
}

func (c *Client) hasAnswer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.haveAns
}

// Welcome returns the service's welcome.
func (c *Client) Welcome() Welcome { return c.welcome }

// PeerConnection returns the client's peer connection.
func (c *Client) PeerConnection() *pion.PeerConnection { return c.pc }

func (c *Client) send(m msg) {
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	if c.ws != nil {
		_ = c.ws.WriteJSON(m)
	}
}

func (c *Client) offer(restart bool) error {
	o, err := c.pc.CreateOffer(&pion.OfferOptions{ICERestart: restart})
	if err != nil {
		return err
	}
	if err := c.pc.SetLocalDescription(o); err != nil {
		return err
	}
	c.mu.Lock()
	c.haveAns = false
	c.mu.Unlock()
	c.send(msg{Type: "offer", SDP: o.SDP})
	return nil
}

// RestartICE renegotiates with new ICE credentials and waits for the answer.
func (c *Client) RestartICE(ctx context.Context) error {
	c.mu.Lock()
	before := c.answers
	c.mu.Unlock()
	if err := c.offer(true); err != nil {
		return err
	}
	for {
		c.mu.Lock()
		n := c.answers
		c.mu.Unlock()
		if n > before {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Answers returns how many answers the client has applied.
func (c *Client) Answers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers
}

func (c *Client) readLoop(ws *websocket.Conn) {
	defer c.wg.Done()
	for {
		var m msg
		if err := ws.ReadJSON(&m); err != nil {
			return
		}
		switch m.Type {
		case "answer":
			if err := c.pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeAnswer, SDP: m.SDP}); err != nil {
				c.mu.Lock()
				c.errs = append(c.errs, msg{Type: "error", Code: "answer", Message: err.Error()})
				c.mu.Unlock()
				continue
			}
			c.mu.Lock()
			c.haveAns = true
			c.answers++
			pend := c.pending
			c.pending = nil
			c.mu.Unlock()
			for _, p := range pend {
				_ = c.pc.AddICECandidate(p)
			}
		case "candidate":
			if string(m.Candidate) == "null" || len(m.Candidate) == 0 {
				continue
			}
			var ci pion.ICECandidateInit
			if json.Unmarshal(m.Candidate, &ci) != nil {
				continue
			}
			c.mu.Lock()
			c.remote = append(c.remote, ci.Candidate)
			if !c.haveAns {
				c.pending = append(c.pending, ci)
				c.mu.Unlock()
				continue
			}
			c.mu.Unlock()
			_ = c.pc.AddICECandidate(ci)
		case "restart":
			_ = c.offer(true)
		case "pong":
		default:
			c.onEvent(m)
		}
	}
}

func (c *Client) onEvent(m msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, m)
	switch m.Type {
	case "line":
		if m.Line != nil {
			for _, l := range c.lines {
				if l.Seq == m.Line.Seq {
					return
				}
			}
			c.lines = append(c.lines, *m.Line)
		}
	case "interim":
		c.interims = append(c.interims, m.Text)
	case "ended", "bye":
		if c.ended == "" {
			c.ended = m.Reason
		}
	case "error":
		c.errs = append(c.errs, m)
	}
}

func (c *Client) heartbeat(every time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	var seq int64
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		seq++
		c.send(msg{Type: "ping", Seq: seq})
	}
}

// SetSource sets what the microphone sends: fill writes each 20 ms frame at 16 kHz. nil sends
// nothing (a muted, DTX-silent microphone).
func (c *Client) SetSource(fill func(dst []int16)) {
	c.mu.Lock()
	c.source = fill
	c.mu.Unlock()
}

// SendTone makes the microphone send a continuous tone.
func (c *Client) SendTone(freq, dBFS float64) {
	c.SetSource(newToneFill(freq, dBFS))
}

// SendPCM makes the microphone send pcm (16 kHz) once, then low noise.
func (c *Client) SendPCM(pcm []int16) {
	pcm = append([]int16(nil), pcm...)
	c.SetSource(func(dst []int16) {
		n := copy(dst, pcm)
		pcm = pcm[n:]
		clear(dst[n:])
	})
}

func (c *Client) sendLoop() {
	defer c.wg.Done()
	var err error
	first := strings.ToLower(c.opts.Codecs[0])
	rate := 48000
	if first == "pcmu" {
		c.enc, c.sendPT, c.ticks, rate = codec.NewG711Encoder(codec.MuLaw), 0, 160, 8000
	} else {
		c.enc, err = codec.NewOpusEncoder(codec.OpusOptions{SampleRate: 48000, Bitrate: 32000})
		c.sendPT, c.ticks = 111, 960
	}
	if err != nil {
		return
	}
	c.encRS, _ = codec.NewResampler(media.PipelineRate, rate)
	frame := make([]int16, media.SamplesPerFrame(media.PipelineRate))
	pcm := make([]int16, media.SamplesPerFrame(rate))
	payload := make([]byte, 1500)
	pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: c.sendPT, SequenceNumber: 1000, Timestamp: 5000, SSRC: 1}}
	t := time.NewTicker(media.FrameDuration)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		fill := c.source
		c.mu.Unlock()
		pkt.Timestamp += c.ticks
		if fill == nil {
			continue
		}
		fill(frame)
		n := c.encRS.Process(pcm, frame)
		size, err := c.enc.Encode(payload, pcm[:n])
		if err != nil {
			continue
		}
		pkt.SequenceNumber++
		pkt.Payload = payload[:size]
		_ = c.local.WriteRTP(&pkt)
	}
}

func (c *Client) onTrack(t *pion.TrackRemote, r *pion.RTPReceiver) {
	c.mu.Lock()
	idx := len(c.recv)
	c.recv = append(c.recv, nil)
	c.trackIDs = append(c.trackIDs, t.ID())
	c.mu.Unlock()
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, _, err := r.Read(buf)
			if err != nil {
				return
			}
			pkts, err := rtcp.Unmarshal(buf[:n])
			if err != nil {
				continue
			}
			for _, p := range pkts {
				if _, ok := p.(*rtcp.SenderReport); ok {
					c.mu.Lock()
					c.srs++
					c.mu.Unlock()
				}
			}
		}
	}()
	go func() {
		defer c.wg.Done()
		var dec codec.Decoder
		var err error
		if strings.EqualFold(t.Codec().MimeType, pion.MimeTypePCMU) {
			dec = codec.NewG711Decoder(codec.MuLaw)
		} else {
			dec, err = codec.NewOpusDecoder(media.PipelineRate)
		}
		if err != nil {
			return
		}
		var rs *codec.Resampler
		if dec.SampleRate() != media.PipelineRate {
			rs, _ = codec.NewResampler(dec.SampleRate(), media.PipelineRate)
		}
		pcm := make([]int16, 5760)
		out := make([]int16, 5760)
		for {
			p, _, err := t.ReadRTP()
			if err != nil {
				return
			}
			n, err := dec.Decode(pcm, p.Payload)
			if err != nil {
				continue
			}
			got := pcm[:n]
			if rs != nil {
				got = out[:rs.Process(out, pcm[:n])]
			}
			c.mu.Lock()
			c.recv[idx] = append(c.recv[idx], got...)
			c.mu.Unlock()
		}
	}()
}

// readMicRTCP reads the RTCP the service sends about the microphone and keeps its last
// reception report block (RFC 3550 §6.4).
func (c *Client) readMicRTCP(rs *pion.RTPSender) {
	defer c.wg.Done()
	var ssrc uint32
	if enc := rs.GetParameters().Encodings; len(enc) > 0 {
		ssrc = uint32(enc[0].SSRC)
	}
	buf := make([]byte, 1500)
	for {
		n, _, err := rs.Read(buf)
		if err != nil {
			return
		}
		pkts, err := rtcp.Unmarshal(buf[:n])
		if err != nil {
			continue
		}
		for _, p := range pkts {
			var blocks []rtcp.ReceptionReport
			switch p := p.(type) {
			case *rtcp.ReceiverReport:
				blocks = p.Reports
			case *rtcp.SenderReport:
				blocks = p.Reports
			}
			for _, b := range blocks {
				if b.SSRC == ssrc {
					c.mu.Lock()
					c.micReport = &b
					c.mu.Unlock()
				}
			}
		}
	}
}

// MicReport returns the last reception report the service sent about the microphone (loss,
// jitter, highest sequence number, LSR/DLSR); false before any.
func (c *Client) MicReport() (rtcp.ReceptionReport, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.micReport == nil {
		return rtcp.ReceptionReport{}, false
	}
	return *c.micReport, true
}

// SenderReports returns how many RTCP sender reports arrived for the tracks the page hears.
func (c *Client) SenderReports() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srs
}

// Received returns a copy of the 16 kHz audio received on remote track i (arrival order).
func (c *Client) Received(i int) []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.recv) {
		return nil
	}
	return append([]int16(nil), c.recv[i]...)
}

// TrackIDs returns the ids of the remote tracks, in arrival order.
func (c *Client) TrackIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.trackIDs...)
}

// RemoteCandidates returns the candidates the service trickled.
func (c *Client) RemoteCandidates() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.remote...)
}

// SelectedPair returns the ICE candidate pair in use.
func (c *Client) SelectedPair() (*pion.ICECandidatePair, error) {
	sctp := c.pc.SCTP()
	if sctp == nil {
		return nil, errors.New("no transport")
	}
	p, err := sctp.Transport().ICETransport().GetSelectedCandidatePair()
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errors.New("no selected pair")
	}
	return p, nil
}

// Connected reports whether the peer connection has been connected.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// WaitConnected waits for the peer connection to connect.
func (c *Client) WaitConnected(ctx context.Context) error {
	for !c.Connected() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("not connected: %w (states %v)", err, c.States())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// States returns the connection states seen.
func (c *Client) States() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.states...)
}

// Lines returns the transcript lines received.
func (c *Client) Lines() []Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Line(nil), c.lines...)
}

// Events returns every event message received (data channel and socket).
func (c *Client) Events() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.events {
		out = append(out, m.Type)
	}
	return out
}

// Errors returns the error messages received.
func (c *Client) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.errs {
		out = append(out, m.Code+": "+m.Message)
	}
	return out
}

// Ended returns the end reason the service sent ("" while the call goes on).
func (c *Client) Ended() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// app sends a page request on the data channel when it is open, else on the socket.
func (c *Client) app(m msg) {
	if c.dc != nil && c.dc.ReadyState() == pion.DataChannelStateOpen {
		b, _ := json.Marshal(m)
		if c.dc.SendText(string(b)) == nil {
			return
		}
	}
	c.send(m)
}

// SendText types text. SendDTMF presses keys. Hangup hangs up. Takeover starts or ends a
// takeover.
func (c *Client) SendText(text string) { c.app(msg{Type: "text", Text: text}) }
func (c *Client) SendDTMF(d string)    { c.app(msg{Type: "dtmf", Digits: d}) }
func (c *Client) Hangup()              { c.app(msg{Type: "hangup"}) }
func (c *Client) Takeover(on bool)     { c.app(msg{Type: "takeover", On: &on}) }
func (c *Client) SendRaw(m json.RawMessage) {
	c.wsMu.Lock()
	_ = c.ws.WriteMessage(websocket.TextMessage, m)
	c.wsMu.Unlock()
}

// DropSignalling closes the socket without a close frame (a network change), keeping media.
func (c *Client) DropSignalling() {
	c.wsMu.Lock()
	if c.ws != nil {
		_ = c.ws.NetConn().Close()
	}
	c.wsMu.Unlock()
}

// Resume reconnects the signalling socket with the session's secret.
func (c *Client) Resume(ctx context.Context) error {
	ws, err := dialWS(ctx, c.opts.URL)
	if err != nil {
		return err
	}
	if err := ws.WriteJSON(msg{Type: "resume", Session: c.welcome.Session, Secret: c.welcome.Secret}); err != nil {
		ws.Close()
		return err
	}
	if _, err := readWelcome(ctx, ws); err != nil {
		ws.Close()
		return err
	}
	c.wsMu.Lock()
	c.ws = ws
	c.wsMu.Unlock()
	c.wg.Add(1)
	go c.readLoop(ws)
	return nil
}

// Close tears the client down at once, without hanging up (like a tab that vanished).
func (c *Client) Close() {
	c.once.Do(func() {
		c.cancel()
		c.wsMu.Lock()
		if c.ws != nil {
			_ = c.ws.NetConn().Close()
		}
		c.wsMu.Unlock()
		_ = c.pc.Close()
		c.wg.Wait()
		if cl, ok := c.enc.(interface{ Close() error }); ok {
			_ = cl.Close()
		}
	})
}

func newToneFill(freq, dBFS float64) func(dst []int16) {
	g := mediatest.NewTone(freq, dBFS, media.PipelineRate)
	return g.Fill
}
