package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/providers"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip"
)

// srtpParley is Parley's SIP endpoint in process, with the engine and the vendor fakes, on a
// loopback trunk in SRTP mode mode (allowed over clear UDP signalling, as the bench runs it).
func srtpParley(t *testing.T, mode sip.SRTPMode) (*sip.Server, func() []*sip.Call) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	script := fakes.NewScript()
	for i := 0; i < 10; i++ {
		script.Add(fakes.ScriptTurn{Text: "Okay. Noted."})
	}
	fk := fakes.NewServer(fakes.ServerOptions{LLMFirstToken: 50 * time.Millisecond, LLMTokensPerSec: 100,
		STTInterimEvery: 250 * time.Millisecond, TTSFirstByte: 50 * time.Millisecond, TTSSpeed: 4, Script: script})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: fk}
	go hs.Serve(ln)
	t.Cleanup(func() { fk.Close(); hs.Close() })
	reg := providers.New(providers.Config{FakesURL: "http://" + ln.Addr().String(), Log: quiet})
	llmc, err := reg.LLM(providers.OpenAI)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := reg.STT(providers.Deepgram)
	syn, _ := reg.TTS(providers.ElevenLabs)
	agent := session.Agent{Name: "bench", SystemPrompt: "Be brief.", FirstMessage: "Hello.", LLMModel: "gpt-4o-mini",
		STT: session.STTSettings{Endpointing: 300 * time.Millisecond}, Turn: session.TurnSettings{EndpointSilence: 300 * time.Millisecond}}
	var mu sync.Mutex
	var calls []*sip.Call
	router := sip.RouterFunc(func(ctx context.Context, c sip.InboundCall) (sip.Plan, error) {
		return sip.Plan{Conversation: func(ctx context.Context, call *sip.Call) (*session.Conversation, error) {
			mu.Lock()
			calls = append(calls, call)
			mu.Unlock()
			return session.New(session.Options{ID: call.ID(), Agent: agent, LLM: llmc, STT: rec, TTS: syn, Log: quiet})
		}}, nil
	})
	base := testenv.RTPBase(199)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 199}, RTPIP: netip.MustParseAddr("127.0.0.1"),
		Router: router, Logger: quiet, Trunks: sip.NewStaticTrunks(sip.Trunk{Name: "bench", URI: "sip:127.0.0.1:5099", Transport: sip.UDP,
			SRTP: mode, SRTPOverClear: true, AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	sctx, stop := context.WithCancel(context.Background())
	go func() { done <- srv.Run(sctx) }()
	t.Cleanup(func() { stop(); <-done })
	return srv, func() []*sip.Call {
		mu.Lock()
		defer mu.Unlock()
		return append([]*sip.Call(nil), calls...)
	}
}

// TestSIPCallerSRTP: the bench's SRTP caller against Parley's endpoint on an SRTP trunk hears
// the greeting and a reply through SRTP both ways (Parley reports the suite and no refused
// packet); against a trunk without SRTP its RTP/SAVP offer is refused 488, and a plain caller
// is refused by a trunk that requires SRTP.
func TestSIPCallerSRTP(t *testing.T) {
	if testing.Short() {
		t.Skip("a real call through the engine takes a few seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	pacer := NewPacer(ctx, 1, 20*time.Millisecond)
	defer pacer.Close()
	utts, _, err := MakeUtterances(ctx, []string{"I would like a table."}, 8000, SourceSynthetic)
	if err != nil {
		t.Fatal(err)
	}
	so := ScriptOptions{Utterances: utts, Turns: 1, Greeting: true, Hangover: 500 * time.Millisecond}

	srv, calls := srtpParley(t, sip.SRTPRequired)
	caller, err := NewSIPCaller(SIPCallerOptions{Server: srv.Addr(sip.UDP), Number: "+15550100", Pacer: pacer, SRTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	res := caller.Call(ctx, "+15551230001", so)
	if res.Failed() {
		t.Fatalf("SRTP call failed: %s", res.Failure)
	}
	if res.Script.Greeting <= 0 || res.PacketsReceived < 50 {
		t.Fatalf("greeting %v, %d packets received", res.Script.Greeting, res.PacketsReceived)
	}
	cs := calls()
	if len(cs) != 1 {
		t.Fatalf("%d calls at Parley", len(cs))
	}
	if st := cs[0].Stats(); st.SRTP != string(media.AESCM128HMACSHA180) || st.SRTPFailed != 0 || st.PacketsReceived < 50 {
		t.Fatalf("Parley's stats of the SRTP call: %+v", st)
	}

	// A plain caller to the SRTP trunk: 488.
	plain, err := NewSIPCaller(SIPCallerOptions{Server: srv.Addr(sip.UDP), Number: "+15550100", Pacer: pacer})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if res := plain.Call(ctx, "+15551230002", so); !res.Failed() || res.SIPStatus != 488 {
		t.Fatalf("plain offer to an SRTP trunk: status %d, failure %q", res.SIPStatus, res.Failure)
	}

	// The SRTP caller to a trunk without SRTP: 488, said clearly.
	off, _ := srtpParley(t, sip.SRTPDisabled)
	c2, err := NewSIPCaller(SIPCallerOptions{Server: off.Addr(sip.UDP), Number: "+15550100", Pacer: pacer, SRTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if res := c2.Call(ctx, "+15551230003", so); !res.Failed() || res.SIPStatus != 488 || !strings.Contains(res.Failure, "488") {
		t.Fatalf("SRTP offer to a plain trunk: status %d, failure %q", res.SIPStatus, res.Failure)
	}
}

// TestAnswerSRTPRefusesPlainAnswers: an answer in RTP/AVP, or without the offered suite's key,
// is refused with an error that never quotes a key.
func TestAnswerSRTPRefusesPlainAnswers(t *testing.T) {
	key, err := newSDESKey()
	if err != nil {
		t.Fatal(err)
	}
	offer := secureOffer(sdpOffer(netip.MustParseAddr("127.0.0.1"), 4000, 4001, 1), key)
	if !strings.Contains(string(offer), "m=audio 4000 RTP/SAVP 0 101\r\n") || !strings.Contains(string(offer), "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:") {
		t.Fatalf("offer:\n%s", offer)
	}
	// Parley's own offer is a valid answer shape: the same key both ways works.
	if _, err := answerSRTP(offer, key); err != nil {
		t.Fatalf("an SAVP answer with the suite: %v", err)
	}
	plainAns := sdpOffer(netip.MustParseAddr("127.0.0.1"), 4000, 4001, 1)
	if _, err := answerSRTP(plainAns, key); err == nil || !strings.Contains(err.Error(), "RTP/AVP") {
		t.Fatalf("plain answer: %v", err)
	}
	short := strings.Replace(string(offer), "inline:", "inline:AAAA", 1)
	_, err = answerSRTP([]byte(short), key)
	if err == nil || strings.Contains(err.Error(), "inline") {
		t.Fatalf("bad key: %v", err)
	}
	noCrypto := strings.Replace(string(offer), "a=crypto:1", "a=crypto:2", 1)
	if _, err := answerSRTP([]byte(noCrypto), key); err == nil {
		t.Fatal("an answer without tag 1 was taken")
	}
}
