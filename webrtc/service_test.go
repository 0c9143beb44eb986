package webrtc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/webrtc/webrtctest"
	"github.com/pion/rtcp"
)

var bookingAgent = session.Agent{SystemPrompt: "You book tables.", FirstMessage: "Hello, how can I help?"}

// toneIn returns how loud freq is in the last d of pcm (16 kHz), in dBFS.
func toneIn(pcm []int16, d time.Duration, freq float64) float64 {
	n := int(d.Seconds() * media.PipelineRate)
	if len(pcm) > n {
		pcm = pcm[len(pcm)-n:]
	}
	if len(pcm) < 320 {
		return -200
	}
	return mediatest.DetectTone(pcm, media.PipelineRate, freq)
}

// hasLine reports whether the page got a line of role containing text.
func hasLine(c *webrtctest.Client, role, text string) bool {
	for _, l := range c.Lines() {
		if l.Role == role && strings.Contains(strings.ToLower(l.Text), strings.ToLower(text)) {
			return true
		}
	}
	return false
}

func dial(t *testing.T, url, token string, o webrtctest.Options) *webrtctest.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o.URL, o.Token = url, token
	c, err := webrtctest.Dial(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// A Pion peer joins a web call like a browser: the agent's greeting (the fake TTS's 440 Hz
// tone) reaches it; its 1 kHz Opus tone reaches the fake STT through decode, resampling and
// the engine; the fake STT's line and the agent's answer come back on the data channel;
// hanging up ends the conversation as caller_hung_up; nothing is left running.
func TestWebCallPionToPion(t *testing.T) {
	e := newEngine(t, engineOptions{
		DGScript: []string{"i would like to book a table"},
		Turns:    []fakes.ScriptTurn{{Text: "Sure, for what time?"}},
	})
	s := newTestService(t, Options{})
	ctx := context.Background()
	wc, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "conv-1", ParticipantName: "Ada", Start: e.Start("conv-1", bookingAgent)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wc.URL, s.srv.URL+"/call/") || wc.Token == "" || time.Until(wc.ExpiresAt) < 14*time.Minute {
		t.Fatalf("web call %+v", wc)
	}
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	if w := c.Welcome(); w.Role != "caller" || w.ParticipantName != "Ada" || w.ConversationID != "conv-1" || !w.Send {
		t.Fatalf("welcome %+v", w)
	}
	waitFor(t, 5*time.Second, "conversation started", func() bool { return e.Started() == 1 })

	// The greeting: the fake TTS's 440 Hz tone, Opus-encoded by the service.
	waitFor(t, 10*time.Second, "the agent's 440 Hz tone at the page", func() bool {
		return toneIn(c.Received(0), 500*time.Millisecond, 440) > -40
	})
	waitFor(t, 10*time.Second, "greeting line", func() bool { return hasLine(c, "agent", "Hello, how can I help?") })
	pcm := c.Received(0)
	if l440, l1k := toneIn(pcm, time.Second, 440), toneIn(pcm, time.Second, 1000); l440-l1k < 20 {
		t.Fatalf("the agent's audio is not a clean 440 Hz tone: 440 Hz %.1f dBFS, 1 kHz %.1f dBFS", l440, l1k)
	}

	// The caller speaks: one second of a 1 kHz tone, then quiet.
	before := e.AudioBytes()
	c.SendPCM(mediatest.Sine(media.PipelineRate, media.PipelineRate, 1000, -20))
	waitFor(t, 10*time.Second, "the fake STT to hear an utterance", func() bool {
		for _, cn := range e.DG.Connections() {
			if cn.Utterances > 0 {
				return true
			}
		}
		return false
	})
	// A second of 16 kHz 16-bit audio is 32000 bytes: the whole tone reached the recognizer.
	waitFor(t, 5*time.Second, "a second of audio at the fake STT", func() bool { return e.AudioBytes()-before >= 32000 })
	waitFor(t, 10*time.Second, "the fake STT's line on the page", func() bool { return hasLine(c, "user", "i would like to book a table") })
	waitFor(t, 10*time.Second, "the agent's answer on the page", func() bool { return hasLine(c, "agent", "Sure, for what time?") })

	// Typed text and DTMF reach the engine.
	c.SendText("table for two please")
	waitFor(t, 5*time.Second, "the typed text as a caller line", func() bool { return hasLine(c, "user", "table for two please") })
	c.SendDTMF("5")
	waitFor(t, 5*time.Second, "the DTMF line", func() bool { return hasLine(c, "user", "DTMF 5") })

	c.Hangup()
	conv := e.Conv(0)
	select {
	case <-conv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end after the hang-up")
	}
	if r := conv.EndReason(); r != session.EndCallerHungUp {
		t.Fatalf("end reason %q, want caller_hung_up", r)
	}
	waitFor(t, 5*time.Second, "the page told the call ended", func() bool { return c.Ended() == "caller_hung_up" })
	waitFor(t, 5*time.Second, "nothing kept for the call", func() bool { return s.held() == 0 })
	c.Close()
	s.Close()
	checkNoLeaks(t)
}

// The service reports on the page's microphone about once a second (RFC 3550 §6.4.2): the
// highest sequence number advances, nothing is lost on loopback, the jitter is small, and LSR
// and DLSR answer the page's own sender reports (the browser derives the round trip from them).
// The page also gets sender reports for the agent's track.
func TestRTCPReports(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{})
	wc, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-rtcp", Start: e.Start("conv-rtcp", bookingAgent)})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	c.SendTone(1000, -30)
	var first rtcp.ReceptionReport
	waitFor(t, 10*time.Second, "a receiver report about the microphone", func() bool {
		var ok bool
		first, ok = c.MicReport()
		return ok
	})
	var last rtcp.ReceptionReport
	waitFor(t, 10*time.Second, "a later report with LSR", func() bool {
		last, _ = c.MicReport()
		return last.LastSequenceNumber >= first.LastSequenceNumber+25 && last.LastSenderReport != 0
	})
	t.Logf("first %+v, last %+v", first, last)
	if last.FractionLost != 0 || last.TotalLost != 0 {
		t.Fatalf("loss reported on loopback: %+v", last)
	}
	if last.Jitter > 48000/50 { // 20 ms at Opus's 48 kHz clock
		t.Fatalf("jitter %d (%.1f ms)", last.Jitter, float64(last.Jitter)/48)
	}
	if d := time.Duration(last.Delay) * time.Second / 65536; d > 5*time.Second {
		t.Fatalf("DLSR %v", d)
	}
	waitFor(t, 10*time.Second, "sender reports for the agent's track", func() bool { return c.SenderReports() > 0 })
}

// A page that vanishes (no hang-up, no heartbeat, no audio) ends the call as network_lost once
// the grace period has passed, not before.
func TestNetworkLostAfterGrace(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{GracePeriod: 800 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond})
	wc, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-lost", Start: e.Start("conv-lost", bookingAgent)})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	c.SendTone(1000, -30)
	waitFor(t, 5*time.Second, "conversation started", func() bool { return e.Started() == 1 })
	conv := e.Conv(0)
	gone := time.Now()
	c.Close()
	select {
	case <-conv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end")
	}
	if waited := time.Since(gone); waited < 700*time.Millisecond {
		t.Fatalf("ended %v after the page vanished, before the 800 ms grace period", waited)
	}
	if r := conv.EndReason(); r != session.EndNetworkLost {
		t.Fatalf("end reason %q, want network_lost", r)
	}
	if r := e.Sink(0).EndedWith(); r != session.EndNetworkLost {
		t.Fatalf("sink end reason %q", r)
	}
	s.Close()
	checkNoLeaks(t)
}

// Heartbeats alone keep a silent page in the call past the grace period.
func TestHeartbeatKeepsCall(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{GracePeriod: 500 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond})
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-hb", Start: e.Start("conv-hb", session.Agent{SystemPrompt: "x"})})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	c.SetSource(nil) // no audio at all
	waitFor(t, 5*time.Second, "conversation started", func() bool { return e.Started() == 1 })
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if c.Ended() != "" || e.Conv(0).EndReason() != "" {
			t.Fatalf("the call ended (%q) although heartbeats arrived", e.Conv(0).EndReason())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// When the engine ends the call (here: its maximum duration), the page is told why.
func TestEngineEndsCall(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{})
	agent := session.Agent{SystemPrompt: "x", MaxDuration: 700 * time.Millisecond}
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-max", Start: e.Start("conv-max", agent)})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	waitFor(t, 5*time.Second, "the page told the call ended", func() bool { return c.Ended() != "" })
	if got := c.Ended(); got != string(session.EndMaxDuration) {
		t.Fatalf("page told %q, want max_duration", got)
	}
	waitFor(t, 5*time.Second, "the peer gone", func() bool { return s.ActiveCalls() == 0 })
}

// The page restarts ICE (a network change): it gets a new answer and audio keeps flowing; a
// dropped signalling socket is resumed with the session secret.
func TestICERestartAndResume(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{})
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-ice", Start: e.Start("conv-ice", session.Agent{SystemPrompt: "x"})})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	c.SendTone(1000, -25)
	waitFor(t, 5*time.Second, "conversation started", func() bool { return e.Started() == 1 })
	waitFor(t, 5*time.Second, "audio at the fake STT", func() bool { return e.AudioBytes() > 16000 })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.RestartICE(ctx); err != nil {
		t.Fatal(err)
	}
	before := e.AudioBytes()
	waitFor(t, 5*time.Second, "audio after the ICE restart", func() bool { return e.AudioBytes() > before+16000 })

	c.DropSignalling()
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartICE(ctx); err != nil {
		t.Fatal(err)
	}
	before = e.AudioBytes()
	waitFor(t, 5*time.Second, "audio after resuming", func() bool { return e.AudioBytes() > before+16000 })
	if r := e.Conv(0).EndReason(); r != "" {
		t.Fatalf("the call ended: %q", r)
	}
	// A wrong secret does not resume.
	ws, err := webrtctest.Join(ctx, wc.URL, "not-a-token")
	var je *webrtctest.JoinError
	if err == nil || !errors.As(err, &je) || je.Code != "token_invalid" {
		t.Fatalf("join with a bad token: %+v %v", ws, err)
	}
}

// With PCMU as the page's only codec, the call still works (the fallback), both ways.
func TestPCMUFallback(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{})
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-pcmu", Start: e.Start("conv-pcmu", bookingAgent)})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{Codecs: []string{"pcmu"}})
	c.SendTone(1000, -25)
	waitFor(t, 10*time.Second, "the agent's 440 Hz tone over PCMU", func() bool {
		return toneIn(c.Received(0), 500*time.Millisecond, 440) > -40
	})
	waitFor(t, 5*time.Second, "audio at the fake STT", func() bool { return e.AudioBytes() > 16000 })
	if !strings.Contains(strings.ToLower(c.PeerConnection().RemoteDescription().SDP), "pcmu/8000") {
		t.Fatal("the answer does not carry PCMU")
	}
}

// Only the enabled codecs are registered: the answer lists Opus with FEC and DTX and nothing
// else when only Opus is on; a page offering only PCMU is then refused without media.
func TestOnlyEnabledCodecs(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{Codecs: []string{"opus"}})
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-opus", Start: e.Start("conv-opus", session.Agent{SystemPrompt: "x"})})
	c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
	// The page counts itself connected when its side of DTLS is; the service starts the
	// conversation when its own side is, a moment later.
	waitFor(t, 5*time.Second, "the conversation started", func() bool { return e.Started() == 1 })
	answer := c.PeerConnection().RemoteDescription().SDP
	if !strings.Contains(answer, "opus/48000/2") || !strings.Contains(answer, "useinbandfec=1") || !strings.Contains(answer, "usedtx=1") {
		t.Fatalf("answer lacks Opus with FEC and DTX:\n%s", answer)
	}
	if strings.Contains(strings.ToUpper(answer), "PCMU") {
		t.Fatalf("answer carries PCMU although it is disabled:\n%s", answer)
	}

	wc2, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-opus2", Start: e.Start("conv-opus2", session.Agent{SystemPrompt: "x"})})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := webrtctest.Dial(ctx, webrtctest.Options{URL: wc2.URL, Token: wc2.Token, Codecs: []string{"pcmu"}})
	var je *webrtctest.JoinError
	if !errors.As(err, &je) || je.Code != "media_failed" {
		t.Fatalf("a PCMU-only offer to an Opus-only service: %v, want media_failed", err)
	}
	waitFor(t, 3*time.Second, "the refused peer gone", func() bool { return s.ActiveCalls() == 1 })
	if e.Started() != 1 {
		t.Fatalf("%d conversations started, want only the Opus one", e.Started())
	}
}

// The NAT 1:1 public IP is what the service's candidates announce.
func TestPublicIPCandidates(t *testing.T) {
	s := newTestService(t, Options{PublicIP: "203.0.113.7"})
	e := newEngine(t, engineOptions{})
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-nat", Start: e.Start("conv-nat", session.Agent{SystemPrompt: "x"})})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := webrtctest.Dial(ctx, webrtctest.Options{URL: wc.URL, Token: wc.Token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := s.UDPAddr().Port
	waitFor(t, 3*time.Second, "a candidate with the public IP", func() bool {
		for _, cand := range c.RemoteCandidates() {
			if strings.Contains(cand, "203.0.113.7") && strings.Contains(cand, " "+strconv.Itoa(port)+" ") {
				return true
			}
		}
		return false
	})
	for _, cand := range c.RemoteCandidates() {
		if strings.Contains(cand, "127.0.0.1") {
			t.Fatalf("the private address leaked: %s", cand)
		}
	}
}

// Every peer connection uses the one UDP port: two calls at once, both on it.
func TestOneUDPPort(t *testing.T) {
	s := newTestService(t, Options{})
	e := newEngine(t, engineOptions{})
	port := s.UDPAddr().Port
	for i, id := range []string{"conv-a", "conv-b"} {
		wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: id, Start: e.Start(id, session.Agent{SystemPrompt: "x"})})
		c := dial(t, wc.URL, wc.Token, webrtctest.Options{})
		pair, err := c.SelectedPair()
		if err != nil {
			t.Fatal(err)
		}
		if pair.Remote.Port != uint16(port) {
			t.Fatalf("call %d uses remote port %d, want the service's port %d", i, pair.Remote.Port, port)
		}
	}
	if s.ActiveCalls() != 2 {
		t.Fatalf("%d calls", s.ActiveCalls())
	}
}

// The client module and the join page are served; an id that cannot be one is 404.
func TestStaticFiles(t *testing.T) {
	s := newTestService(t, Options{})
	for _, tc := range []struct {
		path, ctype, contains string
		status                int
	}{
		{"/client/parley.js", "text/javascript", "export async function join", 200},
		{"/client/call.js", "text/javascript", "ParleyCall", 200},
		{"/call/0190a0c2-7d0e-7b3e-8f5e-1a2b3c4d5e6f", "text/html", `id="start"`, 200},
		{"/listen/conv-1", "text/html", `id="transcript"`, 200},
		{"/call/bad%20id", "", "", 404},
	} {
		resp, err := http.Get(s.srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		if tc.status != 200 {
			continue
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(b), tc.contains) {
			t.Fatalf("%s: %s, body lacks %q", tc.path, resp.Header.Get("Content-Type"), tc.contains)
		}
	}
}

// Token rules: an expired token, a reused one, one for another call, a listen token on a call
// and a forged one are each refused with a clear code and a 44xx close, and start no media.
func TestTokenRules(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mk := func(id string) WebCall {
		wc, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: id, Start: e.Start(id, session.Agent{SystemPrompt: "x"})})
		if err != nil {
			t.Fatal(err)
		}
		return wc
	}
	refused := func(name, url, token, code string) {
		t.Helper()
		created := s.peersCreated.Load()
		_, err := webrtctest.Join(ctx, url, token)
		var je *webrtctest.JoinError
		if !errors.As(err, &je) {
			t.Fatalf("%s: %v, want a refusal", name, err)
		}
		if je.Code != code || je.CloseCode < 4400 || je.CloseCode > 4499 {
			t.Fatalf("%s: refused with %q (close %d), want %q and a 44xx close", name, je.Code, je.CloseCode, code)
		}
		if s.peersCreated.Load() != created {
			t.Fatalf("%s: a peer connection was created", name)
		}
	}

	a, b := mk("conv-a"), mk("conv-b")
	refused("another call's token", b.URL, a.Token, "token_wrong_call")
	refused("forged", a.URL, a.Token[:len(a.Token)-4]+"AAAA", "token_invalid")
	// A listen token for a live conversation is not a call token.
	listenTok := s.tokens.sign(KindListen, a.ID)
	refused("listen token on the call path", a.URL, listenTok, "token_wrong_call")

	// Used once: the second join is refused, also after the call ended.
	c := dial(t, a.URL, a.Token, webrtctest.Options{})
	waitFor(t, 5*time.Second, "the conversation started", func() bool { return e.Started() == 1 })
	refused("reused while live", a.URL, a.Token, "token_used")
	c.Hangup()
	waitFor(t, 5*time.Second, "the call over", func() bool { return s.ActiveCalls() == 0 })
	refused("reused after the call", a.URL, a.Token, "token_used")

	// Expired: 15 minutes later b's token no longer joins.
	later := func() time.Time { return time.Now().Add(DefaultTokenTTL + time.Second) }
	s.now.Store(&later)
	refused("expired", b.URL, b.Token, "token_expired")
	if n := e.Started(); n != 1 {
		t.Fatalf("%d conversations started, want 1 (the one valid join)", n)
	}

	if _, err := s.CreateListenToken(ctx, "no-such-conversation", ModeListen); !errors.Is(err, ErrNotLive) {
		t.Fatalf("listen token for a conversation that is not live: %v", err)
	}
}

// A page that joins but never gets media connected (here: it never even offers) is turned away
// after the connect timeout, heartbeats or not, and no conversation starts.
func TestConnectTimeout(t *testing.T) {
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{ConnectTimeout: 600 * time.Millisecond})
	wc, _ := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-nomedia", Start: e.Start("conv-nomedia", session.Agent{SystemPrompt: "x"})})
	u := "ws" + strings.TrimPrefix(wc.URL, "http") + "/signal"
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "join", "token": wc.Token}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				_ = ws.WriteJSON(map[string]any{"type": "ping"})
			}
		}
	}()
	var types []string
	start := time.Now()
	for {
		var m message
		if err := ws.ReadJSON(&m); err != nil {
			break
		}
		types = append(types, m.Type+":"+m.Code)
	}
	got := strings.Join(types, " ")
	if !strings.Contains(got, "welcome") || !strings.Contains(got, "error:media_failed") || !strings.Contains(got, "bye") {
		t.Fatalf("messages %s", got)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 3*time.Second {
		t.Fatalf("turned away after %v, want about 600 ms", d)
	}
	if e.Started() != 0 {
		t.Fatal("a conversation started")
	}
	waitFor(t, 3*time.Second, "nothing kept for the call", func() bool { return s.held() == 0 })
}

// held counts what the service keeps per call: live peers, web calls, conversations, feeds.
func (s *testService) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers) + len(s.calls) + len(s.convs) + len(s.feeds)
}

// CreateWebCall checks its request; Close is idempotent and refuses new calls.
func TestCreateWebCallAndClose(t *testing.T) {
	s := newTestService(t, Options{})
	ctx := context.Background()
	start := func(context.Context, session.AudioPort, session.Sink) (*session.Conversation, error) { return nil, nil }
	if _, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "c"}); err == nil {
		t.Fatal("no Start accepted")
	}
	if _, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "bad id!", Start: start}); err == nil {
		t.Fatal("bad conversation id accepted")
	}
	if _, err := s.CreateListenToken(ctx, "c", "shout"); err == nil {
		t.Fatal("bad mode accepted")
	}
	// A call nobody joins expires: the sweep forgets it and says so.
	expired := make(chan struct{}, 1)
	wc, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "c", Start: start, Expired: func() { expired <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return wc.ExpiresAt.Add(time.Second) }
	s.now.Store(&later)
	s.sweep()
	select {
	case <-expired:
	default:
		t.Fatal("Expired not called")
	}
	if _, err := webrtctest.Join(ctx, wc.URL, wc.Token); err == nil {
		t.Fatal("an expired call joined")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWebCall(ctx, WebCallRequest{ConversationID: "c", Start: start}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	for _, o := range []Options{{}, {BaseURL: "http://x", Secret: []byte("short")}, {BaseURL: "http://x", Secret: DeriveSecret(nil), Codecs: []string{"g729"}},
		{BaseURL: "http://x", Secret: DeriveSecret(nil), OpusEncodeRate: 44100},
		{BaseURL: "http://x", Secret: DeriveSecret(nil), OpusComplexity: 11}, {BaseURL: "http://x", Secret: DeriveSecret(nil), OpusComplexity: -1},
		{BaseURL: "http://x", Secret: DeriveSecret(nil), GracePeriod: time.Second, HeartbeatInterval: 2 * time.Second}} {
		if svc, err := NewService(o); err == nil {
			svc.Close()
			t.Fatalf("options %+v accepted", o)
		}
	}
}
