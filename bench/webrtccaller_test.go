package bench

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	pion "github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	"github.com/parley-voice/parley/codec"
)

// testWebService stands in for Parley's WebRTC service: it speaks the signalling protocol over
// a WebSocket, answers with a Pion peer, greets with a tone greetAfter after the media connects,
// and answers each utterance it hears with a tone replyAfter[i] after its last loud packet.
type testWebService struct {
	t          *testing.T
	srv        *httptest.Server
	api        *pion.API
	greetAfter time.Duration
	replyAfter []time.Duration
	wg         sync.WaitGroup
	ctx        context.Context
	cancel     context.CancelFunc
	mu         sync.Mutex
	pings      int
	hangups    int
	sent       []time.Time // when each of the agent's talks really started: greeting, replies
}

func newTestWebService(t *testing.T, greetAfter time.Duration, replyAfter []time.Duration) *testWebService {
	s := &testWebService{t: t, greetAfter: greetAfter, replyAfter: replyAfter}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	m := &pion.MediaEngine{}
	if err := m.RegisterCodec(pion.RTPCodecParameters{RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}, PayloadType: 111}, pion.RTPCodecTypeAudio); err != nil {
		t.Fatal(err)
	}
	var se pion.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	s.api = pion.NewAPI(pion.WithMediaEngine(m), pion.WithSettingEngine(se))
	s.srv = httptest.NewServer(http.HandlerFunc(s.signal))
	t.Cleanup(func() {
		s.cancel()
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.wg.Wait()
	})
	return s
}

func (s *testWebService) signal(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/call/c1/signal") {
		http.NotFound(w, r)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	var wsMu sync.Mutex
	send := func(v any) {
		wsMu.Lock()
		defer wsMu.Unlock()
		ws.WriteJSON(v)
	}
	var join signal
	if ws.ReadJSON(&join) != nil || join.Type != "join" || join.Token != "tok" {
		send(map[string]any{"type": "error", "code": "token_invalid", "message": "bad token"})
		return
	}
	send(map[string]any{"type": "welcome", "welcome": map[string]any{"session": "s", "secret": "x", "role": "caller",
		"conversation_id": "conv-1", "heartbeat_ms": 100, "grace_ms": 2000, "receive": 1, "send": true}})
	pc, err := s.api.NewPeerConnection(pion.Configuration{})
	if err != nil {
		return
	}
	defer pc.Close()
	out, _ := pion.NewTrackLocalStaticSample(pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "agent", "parley")
	pc.AddTrack(out)
	connected := make(chan time.Time, 1)
	pc.OnConnectionStateChange(func(st pion.PeerConnectionState) {
		if st == pion.PeerConnectionStateConnected {
			select {
			case connected <- time.Now():
			default:
			}
		}
	})
	pc.OnICECandidate(func(c *pion.ICECandidate) {
		if c != nil {
			b, _ := json.Marshal(c.ToJSON())
			send(map[string]any{"type": "candidate", "candidate": json.RawMessage(b)})
		}
	})
	play := make(chan time.Time, 8)
	pc.OnTrack(func(tr *pion.TrackRemote, _ *pion.RTPReceiver) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			dec, _ := codec.NewOpusDecoder(16000)
			defer dec.Close()
			ear := NewEnergyDetector(0, 150*time.Millisecond)
			var pcm [5760]int16
			turn := 0
			for {
				pkt, _, err := tr.ReadRTP()
				if err != nil {
					return
				}
				arrived := time.Now()
				n, err := dec.Decode(pcm[:], pkt.Payload)
				if err != nil {
					continue
				}
				start := arrived.Add(-time.Duration(n) * time.Second / 16000)
				if ev, at := ear.Push(start, pcm[:n], 16000); ev == EnergyOffset && turn < len(s.replyAfter) {
					play <- at.Add(s.replyAfter[turn])
					turn++
				}
			}
		}()
	})
	s.wg.Add(1)
	go func() { // the agent's voice
		defer s.wg.Done()
		enc, _ := codec.NewOpusEncoder(codec.OpusOptions{SampleRate: 16000})
		defer enc.Close()
		var pay [1500]byte
		speak := func(at time.Time) {
			pcm := tone(16000*3/10, 16000, 440, 0.3)
			for i := 0; i+320 <= len(pcm); i += 320 {
				select {
				case <-s.ctx.Done():
					return
				case <-time.After(time.Until(at.Add(time.Duration(i/320) * 20 * time.Millisecond))):
				}
				n, _ := enc.Encode(pay[:], pcm[i:i+320])
				if i == 0 {
					s.mu.Lock()
					s.sent = append(s.sent, time.Now())
					s.mu.Unlock()
				}
				out.WriteSample(pionmedia.Sample{Data: pay[:n], Duration: 20 * time.Millisecond})
			}
		}
		select {
		case at := <-connected:
			speak(at.Add(s.greetAfter))
		case <-s.ctx.Done():
			return
		}
		for {
			select {
			case at := <-play:
				speak(at)
			case <-s.ctx.Done():
				return
			}
		}
	}()
	for {
		var m signal
		if err := ws.ReadJSON(&m); err != nil {
			return
		}
		switch m.Type {
		case "offer":
			pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeOffer, SDP: m.SDP})
			ans, err := pc.CreateAnswer(nil)
			if err != nil {
				return
			}
			pc.SetLocalDescription(ans)
			send(map[string]any{"type": "answer", "sdp": ans.SDP})
		case "candidate":
			var ci pion.ICECandidateInit
			if string(m.Candidate) != "null" && json.Unmarshal(m.Candidate, &ci) == nil {
				pc.AddICECandidate(ci)
			}
		case "ping":
			s.mu.Lock()
			s.pings++
			s.mu.Unlock()
			send(map[string]any{"type": "pong", "seq": m.Seq})
		case "hangup":
			s.mu.Lock()
			s.hangups++
			s.mu.Unlock()
			send(map[string]any{"type": "bye", "reason": "completed"})
			return
		}
	}
}

// TestWebRTCCallerMeasuresKnownDelays joins a Pion-answered call through the signalling
// protocol and checks the caller measures the greeting and the replies within a frame or two
// (Opus adds its own few milliseconds of look-ahead on both sides).
func TestWebRTCCallerMeasuresKnownDelays(t *testing.T) {
	greet := 200 * time.Millisecond
	replies := []time.Duration{300 * time.Millisecond}
	svc := newTestWebService(t, greet, replies)
	pacer := NewPacer(context.Background(), 1, 20*time.Millisecond)
	defer pacer.Close()
	c, err := NewWebRTCCaller(WebRTCCallerOptions{Pacer: pacer})
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUtterance("hi", tone(16000*3/10, 16000, 300, 0.3), 16000)
	if err != nil {
		t.Fatal(err)
	}
	callURL := svc.srv.URL + "/call/c1"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := c.Call(ctx, "bench-1", callURL, "tok", ScriptOptions{Utterances: []Utterance{u}, Turns: 1, Greeting: true,
		Hangover: 300 * time.Millisecond, ReplyTimeout: 5 * time.Second})
	if res.Failed() {
		t.Fatalf("call failed: %s", res.Failure)
	}
	if res.ConversationID != "conv-1" {
		t.Errorf("conversation id %q", res.ConversationID)
	}
	// Checked against when the service really sent (Opus adds a few ms of look-ahead and
	// decoding delay on top), and loosely against the plan.
	const tol = 40 * time.Millisecond
	svc.mu.Lock()
	sent := append([]time.Time(nil), svc.sent...)
	svc.mu.Unlock()
	if len(sent) != 2 || len(res.Script.Turns) != 1 {
		t.Fatalf("%d talks sent, %d turns measured", len(sent), len(res.Script.Turns))
	}
	t.Logf("greeting %v (left %v after the caller's connect; planned %v), setup %v", res.Script.Greeting, sent[0].Sub(res.Answered), greet, res.Setup)
	if d := res.Script.Greeting - sent[0].Sub(res.Answered); d < -tol || d > tol {
		t.Errorf("greeting %v, but it left %v after the connect", res.Script.Greeting, sent[0].Sub(res.Answered))
	}
	lat := res.Script.Turns[0].Latency
	left := sent[1].Sub(res.Script.Turns[0].SpeechEnd)
	t.Logf("turn latency %v; the reply left %v after the speech end (planned %v)", lat, left, replies[0])
	if d := lat - left; d < -tol || d > tol {
		t.Errorf("turn latency %v, but the reply left %v after the speech end", lat, left)
	}
	if d := lat - replies[0]; d < -tol || d > 10*tol {
		t.Errorf("turn latency %v for a planned %v", lat, replies[0])
	}
	if res.Setup < res.Script.Greeting || res.PacketsReceived == 0 || res.PacketsLost != 0 {
		t.Errorf("setup %v, received %d lost %d", res.Setup, res.PacketsReceived, res.PacketsLost)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		svc.mu.Lock()
		pings, hangups := svc.pings, svc.hangups
		svc.mu.Unlock()
		if hangups == 1 && pings > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service saw %d pings and %d hangups", pings, hangups)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWebRTCCallerRefusedToken(t *testing.T) {
	svc := newTestWebService(t, 0, nil)
	pacer := NewPacer(context.Background(), 1, 20*time.Millisecond)
	defer pacer.Close()
	c, _ := NewWebRTCCaller(WebRTCCallerOptions{Pacer: pacer, ConnectTimeout: 3 * time.Second})
	res := c.Call(context.Background(), "x", svc.srv.URL+"/call/c1", "wrong", ScriptOptions{Turns: 1})
	if res.Reason != "join" || !strings.Contains(res.Failure, "token_invalid") {
		t.Fatalf("reason %q failure %q", res.Reason, res.Failure)
	}
	if _, err := signalURL("http://example.com/call/x"); err == nil {
		t.Error("a non-loopback call URL was accepted")
	}
	if u, err := signalURL("http://127.0.0.1:8080/call/x"); err != nil || u != "ws://127.0.0.1:8080/call/x/signal" {
		t.Errorf("signal URL %q %v", u, err)
	}
}

func TestLoopbackCandidates(t *testing.T) {
	cases := map[string]bool{
		"candidate:1 1 udp 2130706431 127.0.0.1 40737 typ host":         true,
		"candidate:1 1 udp 2130706431 192.0.2.2 40737 typ host":         false,
		"candidate:2 1 udp 1694498815 203.0.113.5 5000 typ srflx raddr": false,
		"candidate:3 1 udp 2130706431 ::1 40737 typ host":               true,
		"candidate:x": false,
		"":            false,
	}
	for c, want := range cases {
		if got := loopbackCandidate(c); got != want {
			t.Errorf("%q: %v", c, got)
		}
	}
	sdp := "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=candidate:1 1 udp 1 192.0.2.2 4 typ host\r\na=candidate:2 1 udp 1 127.0.0.1 4 typ host\r\na=end-of-candidates\r\n"
	got := loopbackCandidates(sdp)
	if strings.Contains(got, "192.0.2.2") || !strings.Contains(got, "127.0.0.1 4 typ host\r\n") || !strings.Contains(got, "a=end-of-candidates\r\n") {
		t.Errorf("filtered SDP:\n%s", got)
	}
}
