package control

import (
	"context"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/webrtc"
)

// gathered returns the samples of the registry as "name{label=value,…} value" lines.
func gathered(t *testing.T, m *metrics, prefix string) map[string]float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, s := range f.GetMetric() {
			var ls []string
			for _, l := range s.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
			out[f.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// TestVoiceMetrics is issue 22 item 11: the SIP server's counts land in /metrics with bounded
// labels (an unknown end reason or status code counts as "other", never as itself).
func TestVoiceMetrics(t *testing.T) {
	m := newMetrics()
	o := sipObserver{m.voice}
	o.CallStarted(sip.Inbound)
	o.CallStarted(sip.Outbound)
	o.Response(true, 180)
	o.Response(true, 200)
	o.Response(false, 486)
	o.Response(false, 9999)
	o.CallEnded(sip.Inbound, "caller_hung_up", sip.CallStats{PacketsSent: 100, PacketsReceived: 90, PacketsLost: 3, Concealed: 4, Jitter: 5 * time.Millisecond,
		RemotePacketsLost: 2, RemoteJitter: 3 * time.Millisecond, Late: 6})
	o.CallEnded(sip.Outbound, "made_up_reason", sip.CallStats{})
	got := gathered(t, m, "parley_")
	for k, want := range map[string]float64{
		"parley_calls_active{channel=phone}":                          0,
		"parley_call_starts_total{channel=phone,direction=inbound}":   1,
		"parley_call_starts_total{channel=phone,direction=outbound}":  1,
		"parley_call_ends_total{channel=phone,reason=caller_hung_up}": 1,
		"parley_call_ends_total{channel=phone,reason=other}":          1,
		"parley_sip_responses_total{code=180,direction=sent}":         1,
		"parley_sip_responses_total{code=200,direction=sent}":         1,
		"parley_sip_responses_total{code=486,direction=received}":     1,
		"parley_sip_responses_total{code=other,direction=received}":   1,
		"parley_rtp_packets_total{direction=sent}":                    100,
		"parley_rtp_packets_total{direction=received}":                90,
		"parley_rtp_lost_packets_total{direction=received}":           3,
		"parley_rtp_lost_packets_total{direction=sent}":               2,
		"parley_rtp_late_packets_total{direction=received}":           6,
		"parley_rtp_concealed_frames_total{}":                         4,
		"parley_rtp_jitter_seconds{direction=received}":               1,
		"parley_rtp_jitter_seconds{direction=sent}":                   1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	for k := range got {
		if strings.Contains(k, "made_up_reason") || strings.Contains(k, "9999") {
			t.Errorf("unbounded label value: %s", k)
		}
	}
}

// TestDashboardUsesRealMetrics: every metric docs/grafana-voice.json queries is one the node
// registers.
func TestDashboardUsesRealMetrics(t *testing.T) {
	b, err := os.ReadFile("../docs/grafana-voice.json")
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	o := sipObserver{m.voice}
	o.CallStarted(sip.Inbound)
	o.Response(true, 200)
	o.CallEnded(sip.Inbound, "completed", sip.CallStats{PacketsReceived: 1, RemotePacketsLost: 1, RemoteJitter: time.Millisecond, Late: 1})
	now := time.Now()
	sm := session.NewMetrics(m.reg)
	sm.ProviderError("tts", "elevenlabs")
	sm.Observe(session.TurnMetrics{SpeechEnd: now, STTFinal: now.Add(time.Millisecond), EndOfTurn: now.Add(time.Millisecond),
		LLMRequestSent: now, LLMFirstToken: now.Add(time.Millisecond), TTSFirstRequest: now, TTSFirstByte: now.Add(time.Millisecond),
		FirstAudioOut: now.Add(2 * time.Millisecond), Endpointing: "vad"})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range fams {
		have[f.GetName()] = true
	}
	used := regexp.MustCompile(`parley_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("the dashboard queries no metric")
	}
	for _, name := range used {
		name = strings.TrimSuffix(name, "_bucket")
		if !have[name] {
			t.Errorf("the dashboard queries %s, which the node does not export", name)
		}
	}
}

// TestProviderAndWebCallMetrics (issue 22 item 11): provider failures count by kind and a
// bounded vendor; browser calls count in the calls' metrics under channel "voice", from the
// start of their media to their end.
func TestProviderAndWebCallMetrics(t *testing.T) {
	m := newMetrics()
	sm := session.NewMetrics(m.reg)
	sm.ProviderError("tts", "elevenlabs")
	sm.ProviderError("llm", "Some Vendor!")
	sm.ProviderError("stt", "")
	var fake fakeWebCalls
	wc := webCallCounter{WebCalls: &fake, v: m.voice}
	if _, err := wc.CreateWebCall(context.Background(), runtime.BrowserCall{ConversationID: "c1",
		Start: func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error) {
			return session.New(session.Options{ID: "c1", Agent: session.Agent{SystemPrompt: "Hi."}, LLM: nopLLM{}})
		}}); err != nil {
		t.Fatal(err)
	}
	port := mediaPort{st: webrtc.MediaStats{PacketsReceived: 500, PacketsLost: 7, Jitter: 4 * time.Millisecond,
		PacketsSent: 480, RemoteReports: 9, RemotePacketsLost: 3, RemoteJitter: 6 * time.Millisecond}}
	conv, err := fake.start(context.Background(), port, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := gathered(t, m, "parley_calls_active")["parley_calls_active{channel=voice}"]; got != 1 {
		t.Errorf("active browser calls %v, want 1", got)
	}
	conv.End(session.EndCallerHungUp)
	for deadline := time.Now().Add(5 * time.Second); gathered(t, m, "parley_call_ends")["parley_call_ends_total{channel=voice,reason=caller_hung_up}"] == 0; {
		if time.Now().After(deadline) { // the end is counted on the conversation's AfterDone goroutine
			t.Fatal("the browser call's end was not counted")
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	got := gathered(t, m, "parley_")
	for k, want := range map[string]float64{
		"parley_provider_errors_total{kind=tts,vendor=elevenlabs}":    1,
		"parley_provider_errors_total{kind=llm,vendor=other}":         1,
		"parley_provider_errors_total{kind=stt,vendor=unknown}":       1,
		"parley_calls_active{channel=voice}":                          0,
		"parley_call_starts_total{channel=voice,direction=inbound}":   1,
		"parley_call_ends_total{channel=voice,reason=caller_hung_up}": 1,
		// The browser call's RTP figures (its port's MediaStats), by direction.
		"parley_rtp_packets_total{direction=received}":      500,
		"parley_rtp_packets_total{direction=sent}":          480,
		"parley_rtp_lost_packets_total{direction=received}": 7,
		"parley_rtp_lost_packets_total{direction=sent}":     3,
		"parley_rtp_jitter_seconds{direction=received}":     1,
		"parley_rtp_jitter_seconds{direction=sent}":         1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// mediaPort is a browser call's port as the WebRTC service hands it over: its RTP figures.
type mediaPort struct {
	session.AudioPort
	st webrtc.MediaStats
}

func (p mediaPort) MediaStats() webrtc.MediaStats { return p.st }

// fakeWebCalls keeps the Start of the one browser call it is asked for.
type fakeWebCalls struct {
	runtime.WebCalls
	start func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error)
}

func (f *fakeWebCalls) CreateWebCall(_ context.Context, r runtime.BrowserCall) (runtime.WebCall, error) {
	f.start = r.Start
	return runtime.WebCall{ID: "w1"}, nil
}

// nopLLM is an LLM client never asked anything (the conversation never starts).
type nopLLM struct{ llm.Client }
