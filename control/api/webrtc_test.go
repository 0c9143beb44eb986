package api

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	voicechannels "github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/webrtc"
	"github.com/parley-voice/parley/webrtc/webrtctest"
)

// TestWebCallToBrowser starts a browser call through the API on the real WebRTC service and
// joins it with a Pion client as the page: the conversation goes in progress when the media is
// up, the page gets the greeting, a supervisor listens in with a listen token, the page hangs
// up, and the recording is there.
func TestWebCallToBrowser(t *testing.T) {
	t.Parallel()
	page := httptest.NewUnstartedServer(nil)
	page.Start()
	defer page.Close()
	secret := make([]byte, 32)
	rand.Read(secret)
	svc, err := webrtc.NewService(webrtc.Options{BaseURL: page.URL, UDPHost: "127.0.0.1", UDPPort: 0, Secret: secret, Log: quietLog(),
		HeartbeatInterval: 200 * time.Millisecond, GracePeriod: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	page.Config.Handler = svc.Handler()
	w := newWorld(t, migrate(t, storeOptions(t)), worldOpts{conv: &convOpts{webCalls: voicechannels.WebCalls(svc)}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Web", "inbound", channels("voice"))
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/web-calls", key: kLive,
		body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}, "participant_name": "Ada"}})
	id := r.Str("conversation_id")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caller, err := webrtctest.Dial(ctx, webrtctest.Options{URL: r.Str("url"), Token: r.Str("token")})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	if err := caller.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	if wl := caller.Welcome(); wl.ConversationID != id || wl.ParticipantName != "Ada" {
		t.Fatalf("welcome %+v", wl)
	}
	w.waitStatus(t, kLive, id, "in_progress")
	waitFor(t, 15*time.Second, "the greeting on the page", func() bool {
		for _, l := range caller.Lines() {
			if l.Text == "Hello Ada, how can I help?" {
				return true
			}
		}
		return false
	})
	li := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/conversations/" + id + "/listen", key: kLive})
	listener, err := webrtctest.Dial(ctx, webrtctest.Options{URL: li.Str("url"), Token: li.Str("token")})
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	if err := listener.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	caller.Hangup()
	if c := w.waitStatus(t, kLive, id, "ended"); c.Str("end_reason") != "caller_hung_up" {
		t.Fatalf("ended %s", c)
	}
	waitFor(t, 10*time.Second, "the recording", func() bool { return w.conv(t, kLive, id).JSON["has_recording"] == true })
	if rec := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kLive}); string(rec.Body[:4]) != "RIFF" {
		t.Fatalf("recording %q", rec.Body[:12])
	}
}
