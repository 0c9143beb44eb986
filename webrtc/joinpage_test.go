package webrtc

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/webrtc/internal/rigtest"
)

// TestJoinPageDetails (issue 22 item 13) loads the join page in a real browser: its title
// names the agent; the agent's reply shows as a line while it is spoken (agent_saying), then
// as its complete line; a disabled button looks disabled; the end is written for a person
// ("You hung up."); and no favicon is asked for (no 404 in the console).
func TestJoinPageDetails(t *testing.T) {
	silence := filepath.Join(t.TempDir(), "silence.wav") // a caller who listens
	if err := mediatest.WriteWAV(silence, 48000, 1, make([]int16, 3*48000)); err != nil {
		t.Fatal(err)
	}
	p := rigtest.LaunchChromium(t, silence)
	e := newEngine(t, engineOptions{})
	s := newTestService(t, Options{})
	patient := bookingAgent // the fake microphone's noise must not cut the agent off
	patient.Turn.BargeInMin = time.Hour
	var favicons atomic.Int64
	h := s.Handler()
	s.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "favicon") {
			favicons.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	wc, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: "conv-page", ParticipantName: "Ada", AgentName: "Ava",
		Start: e.Start("conv-page", patient)})
	if err != nil {
		t.Fatal(err)
	}
	rigtest.OpenPage(t, p, wc.URL, wc.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eval := func(js string) string {
		var out string
		if err := p.Eval(ctx, js, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitFor(t, 30*time.Second, "the call up", func() bool { return rigtest.ReadStats(t, p).State == "connected" })
	// The service starts the conversation when its own side of the media is up, a moment
	// after the page's.
	waitFor(t, 10*time.Second, "the conversation started", func() bool { return e.Started() == 1 })
	if got := eval(`document.title + "|" + document.getElementById("title").textContent`); got != "Call with Ava|Call with Ava" {
		t.Errorf("title %q", got)
	}
	defer func() {
		if t.Failed() {
			t.Logf("page transcript: %q; html %s", rigtest.ReadStats(t, p).Transcript, eval(`document.getElementById("transcript").innerHTML`))
		}
	}()
	// A long reply: while it plays, the page shows it growing in a line of its own.
	res := e.Conv(0).Execute(session.Command{Kind: session.CommandSay, Text: "Our tables by the window are free tonight. The terrace opens at six. We also have a quiet room upstairs for groups."})
	go func() { t.Logf("say: %+v (state %s)", <-res, e.Conv(0).State()) }()
	waitFor(t, 15*time.Second, "the reply shown while it is spoken", func() bool {
		return strings.Contains(eval(`(document.querySelector("#transcript li.speaking") || {}).textContent || ""`), "Our tables by the window are free tonight.")
	})
	waitFor(t, 30*time.Second, "the reply's complete line in its place", func() bool {
		return eval(`String(document.querySelectorAll("#transcript li.speaking").length)`) == "0" &&
			strings.Contains(rigtest.ReadStats(t, p).Transcript, "a quiet room upstairs for groups")
	})
	if got := eval(`String([...document.querySelectorAll("#transcript li.agent")].filter(li => li.textContent.includes("terrace")).length)`); got != "1" {
		t.Errorf("%s agent lines carry the reply, want 1", got)
	}
	if got := eval(`document.querySelector("#transcript li.agent .who").textContent`); got != "Ava" {
		t.Errorf("the agent's lines are headed %q", got)
	}
	rigtest.Click(t, p, "hangup")
	waitFor(t, 10*time.Second, "the page shows the end", func() bool { return rigtest.ReadStats(t, p).State == "ended" })
	if got := eval(`document.getElementById("state").textContent`); got != "You hung up." {
		t.Errorf("end shown as %q", got)
	}
	if got := eval(`(() => { const s = getComputedStyle(document.getElementById("hangup")); return s.cursor + "|" + s.opacity + "|" + s.backgroundColor })()`); got != "not-allowed|0.55|rgb(227, 230, 238)" {
		t.Errorf("a disabled button is styled %q", got)
	}
	if n := favicons.Load(); n != 0 || eval(`String(!!document.querySelector("link[rel=icon]"))`) != "true" {
		t.Errorf("%d favicon requests", n)
	}
}
