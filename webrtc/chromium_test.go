package webrtc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/webrtc/internal/rigtest"
)

// A real browser joins a web call through the join page: its fake microphone plays espeak-ng
// speech; the page's own getStats() shows the connection up and the agent's audio arriving
// with energy, and its transcript shows the fake STT's line for what was said.
func TestBrowserCall(t *testing.T) {
	wav := rigtest.SpeechWAV(t, "I would like to book a table for two")
	p := rigtest.LaunchChromium(t, wav)
	e := newEngine(t, engineOptions{
		DGScript: []string{"i would like to book a table for two"},
		Turns:    []fakes.ScriptTurn{{Text: "Sure, for what time?"}},
	})
	s := newTestService(t, Options{})
	wc, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-browser", ParticipantName: "Ada", Start: e.Start("conv-browser", bookingAgent)})
	if err != nil {
		t.Fatal(err)
	}
	rigtest.OpenPage(t, p, wc.URL, wc.Token)

	var st rigtest.PageStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = rigtest.ReadStats(t, p)
		if st.Conn == "connected" && st.Packets > 20 && st.Energy > 1e-4 &&
			strings.Contains(st.Transcript, "i would like to book a table for two") {
			break
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(st)
			t.Fatalf("the browser call did not come up: %s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("page: state %s, %d packets received, total audio energy %.4f, analyser %.3f, transcript %q",
		st.State, st.Packets, st.Energy, st.Out, st.Transcript)
	if st.State != "connected" || st.Role != "caller" {
		t.Fatalf("client state %q role %q", st.State, st.Role)
	}
	if !strings.Contains(st.Transcript, "Ada") {
		t.Fatalf("the transcript does not name the participant: %q", st.Transcript)
	}
	// The service reports on the microphone (RTCP receiver reports): Chrome shows them with a
	// round trip computed from their LSR/DLSR.
	waitFor(t, 10*time.Second, "the service's receiver reports in the page's getStats()", func() bool {
		st = rigtest.ReadStats(t, p)
		return st.RemoteRTTs >= 2 && st.RemoteRTT > 0
	})
	t.Logf("page: %d round trips from the service's receiver reports, %d lost, round trip %.1f ms", st.RemoteRTTs, st.RemoteLost, st.RemoteRTT*1000)
	if st.RemoteLost != 0 || st.RemoteRTT > 1 {
		t.Fatalf("receiver reports: %d lost, round trip %.3f s", st.RemoteLost, st.RemoteRTT)
	}
	// The browser's audio keeps flowing to the recognizer: a second of it (32000 bytes at
	// 16 kHz) and more, silences included (Chrome uses DTX; the playout clock fills them).
	waitFor(t, 10*time.Second, "a second of the browser's audio at the fake STT", func() bool { return e.AudioBytes() >= 32000 })

	// Typed text goes through the page's form to the engine and back as a caller line.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Eval(ctx, `document.getElementById("text").value = "a table by the window please";
		document.getElementById("text-form").requestSubmit()`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the typed text in the page's transcript", func() bool {
		return strings.Contains(rigtest.ReadStats(t, p).Transcript, "a table by the window please")
	})

	// The keypad sends DTMF; the engine records the digit.
	if err := p.Eval(ctx, `[...document.querySelectorAll("#keypad button")].find((b) => b.textContent === "5").click()`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the keypad digit in the page's transcript", func() bool {
		return strings.Contains(rigtest.ReadStats(t, p).Transcript, "DTMF 5")
	})

	// The page restarts ICE (as on a network change): new credentials, still connected, audio
	// still arriving.
	var ufrag string
	getUfrag := `(() => (window.parley.pc.remoteDescription.sdp.match(/a=ice-ufrag:(\S+)/) || [])[1])()`
	if err := p.Eval(ctx, getUfrag, &ufrag); err != nil {
		t.Fatal(err)
	}
	received := func() uint64 { // packets from the browser that reached the service
		for _, pr := range s.peerList() {
			if r := pr.recv.Load(); r != nil {
				return r.Stats().Packets
			}
		}
		return 0
	}
	if err := p.Eval(ctx, `window.parley.restartIce()`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "new ICE credentials from the service", func() bool {
		var now string
		return p.Eval(ctx, getUfrag, &now) == nil && now != "" && now != ufrag
	})
	before := received()
	waitFor(t, 30*time.Second, "the browser's audio after the ICE restart", func() bool {
		return received() > before+5 && rigtest.ReadStats(t, p).Conn == "connected"
	})

	// Issue 22 item 11: the call's RTP figures for /metrics, both ways: the browser's stream
	// as counted here, the agent's as Chrome's RTCP receiver reports say (Chrome reports about
	// once a second).
	var port *callPort
	for _, pr := range s.peerList() {
		port = pr.port
	}
	waitFor(t, 10*time.Second, "Chrome's receiver reports on the agent's audio", func() bool {
		return port.MediaStats().RemoteReports >= 2
	})

	rigtest.Click(t, p, "hangup")
	conv := e.Conv(0)
	select {
	case <-conv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end after the page hung up")
	}
	if r := conv.EndReason(); r != session.EndCallerHungUp {
		t.Fatalf("end reason %q", r)
	}
	waitFor(t, 5*time.Second, "the page shows the end", func() bool { return rigtest.ReadStats(t, p).State == "ended" })
	ms := port.MediaStats()
	t.Logf("media stats: %+v", ms)
	// The agent's side is counted, not timed: how much of its speech goes out before the fake
	// microphone barges in and the page hangs up varies (34–49 packets seen in CI), so 20
	// packets (0.4 s of speech) is the floor.
	if ms.PacketsReceived < 50 || ms.PacketsSent < 20 || ms.RemoteReports < 2 {
		t.Errorf("media stats %+v: want the browser's packets, the agent's packets and Chrome's reports counted", ms)
	}
	if ms.PacketsLost > ms.PacketsReceived/10 || ms.Jitter <= 0 || ms.Jitter > time.Second || ms.RemoteJitter > time.Second || ms.Concealed > ms.PacketsReceived/10 {
		t.Errorf("media stats %+v: loss or jitter out of range for a call on loopback", ms)
	}
}

// A real browser listens to a live call that is not a WebRTC call (its audio is pushed from Go,
// as a phone leg's is) and hears both sides: the caller's 1 kHz and the agent's 440 Hz tone,
// seen by the page's WebAudio analyser; its transcript fills in.
func TestBrowserListener(t *testing.T) {
	wav := rigtest.SpeechWAV(t, "hello")
	p := rigtest.LaunchChromium(t, wav)
	e := newEngine(t, engineOptions{DGScript: []string{"hello there"}})
	s := newTestService(t, Options{})
	phoneCall(t, s, e, "phone-browser")
	lt, err := s.CreateListenToken(context.Background(), "phone-browser", ModeListen)
	if err != nil {
		t.Fatal(err)
	}
	rigtest.OpenPage(t, p, lt.URL, lt.Token)
	caller, agent := -200.0, -200.0
	var st rigtest.PageStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = rigtest.ReadStats(t, p)
		caller, agent = max(caller, st.Hz1000), max(agent, st.Hz440)
		if st.Conn == "connected" && caller > -50 && agent > -50 && strings.Contains(st.Transcript, "hello there") {
			break
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(st)
			t.Fatalf("the listener did not hear both sides (1 kHz peak %.1f dB, 440 Hz peak %.1f dB): %s", caller, agent, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("listener: role %s, %d packets, 1 kHz peak %.1f dB, 440 Hz peak %.1f dB", st.Role, st.Packets, caller, agent)
	if st.Role != "listener" {
		t.Fatalf("role %q", st.Role)
	}
}
