package sipcall

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
	"github.com/parley-voice/parley/webrtc"
	"github.com/parley-voice/parley/webrtc/internal/rigtest"
)

// A real browser listens to a live phone call: the SIP test phone calls Parley's SIP server,
// which answers with the agent; the conversation is registered with the WebRTC service, a
// listen token is issued, and headless Chromium opens the listen page and hears both sides on
// its mixed track: the phone's 1 kHz tone and the agent's 440 Hz (fake TTS) voice, as the
// page's WebAudio analyser sees them, with the transcript filling in.
func TestBrowserListensToSIPCall(t *testing.T) {
	wav := rigtest.SpeechWAV(t, "hello")
	p := rigtest.LaunchChromium(t, wav)
	e := rigtest.NewEngine(t, rigtest.EngineOptions{DGScript: []string{"hello there"}})

	httpSrv := httptest.NewServer(nil)
	defer httpSrv.Close()
	svc, err := webrtc.NewService(webrtc.Options{BaseURL: httpSrv.URL, UDPHost: "127.0.0.1",
		Secret: webrtc.DeriveSecret([]byte("test master key")), Log: rigtest.QuietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	httpSrv.Config.Handler = svc.Handler()

	const convID = "sip-conv-1"
	agent := session.Agent{SystemPrompt: "You book tables.", FirstMessage: "Hello, how can I help?"}
	agent.STT.Endpointing = 300 * time.Millisecond
	router := sip.RouterFunc(func(ctx context.Context, c sip.InboundCall) (sip.Plan, error) {
		return sip.Plan{ID: convID, Conversation: func(ctx context.Context, call *sip.Call) (*session.Conversation, error) {
			conv := e.Conversation(convID, agent, svc.Sink(convID, nil))
			svc.Register(conv)
			return conv, nil
		}}, nil
	})
	base := testenv.RTPBase(99)
	sipSrv, err := sip.New(sip.Options{
		Addr: "127.0.0.1:0", RTPIP: netip.MustParseAddr("127.0.0.1"), RTPPorts: media.PortRange{Min: base, Max: base + 99},
		Router: router, Logger: rigtest.QuietLog(),
		Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "loop", URI: "sip:127.0.0.1:5060", Transport: sip.UDP,
			AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sipSrv.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	phone := siptest.NewPhone(t, siptest.PhoneOptions{})
	callCtx, callCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer callCancel()
	call, err := phone.Call(callCtx, "sip:+14155550100@"+sipSrv.Addr(sip.UDP).String(), siptest.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tone := mediatest.NewTone(1000, -20, media.PipelineRate)
	start := time.Now()
	call.SetSource(func(dst []int16) { // the phone's caller: a tone that comes and goes
		if time.Since(start)%(1600*time.Millisecond) < 700*time.Millisecond {
			tone.Fill(dst)
		} else {
			clear(dst)
		}
	})

	var lt webrtc.ListenToken
	rigtest.WaitFor(t, 5*time.Second, "the phone call registered", func() bool {
		lt, err = svc.CreateListenToken(context.Background(), convID, webrtc.ModeListen)
		return err == nil
	})
	rigtest.OpenPage(t, p, lt.URL, lt.Token)
	caller, agentLevel := -200.0, -200.0
	var st rigtest.PageStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = rigtest.ReadStats(t, p)
		caller, agentLevel = max(caller, st.Hz1000), max(agentLevel, st.Hz440)
		if st.Conn == "connected" && caller > -50 && agentLevel > -50 && strings.Contains(st.Transcript, "hello there") {
			break
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(st)
			t.Fatalf("the listener did not hear both sides of the SIP call (1 kHz peak %.1f dB, 440 Hz peak %.1f dB): %s", caller, agentLevel, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("listener of a SIP call: role %s, %d packets, phone's 1 kHz peak %.1f dB, agent's 440 Hz peak %.1f dB", st.Role, st.Packets, caller, agentLevel)
	if st.Role != "listener" {
		t.Fatalf("role %q", st.Role)
	}
	// The phone hears the agent too: the listener changed nothing for the call.
	if l := mediatest.DetectTone(call.Heard(), media.PipelineRate, 440); l < -40 {
		t.Fatalf("the phone did not hear the agent (%.1f dBFS)", l)
	}
}
