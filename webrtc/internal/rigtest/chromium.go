package rigtest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/cdp"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media/mediatest"
)

// SpeechWAV writes what a fake microphone says: espeak-ng's speech of text at 48 kHz, then
// three seconds of silence so a turn ends before Chromium loops the file.
func SpeechWAV(t testing.TB, text string) string {
	t.Helper()
	const rate = 48000
	pcm := mediatest.Speech(t, text, rate)
	pcm = append(pcm, make([]int16, 3*rate)...)
	path := filepath.Join(t.TempDir(), "mic.wav")
	if err := mediatest.WriteWAV(path, rate, 1, pcm); err != nil {
		t.Fatal(err)
	}
	return path
}

// LaunchChromium starts headless Chromium (skipping the test when it is not installed, failing
// it under PARLEY_REQUIRE_PEERS=1) with a fake microphone playing wav, auto-accepted media
// permissions and autoplay, and opens a tab. The page's console is logged if the test fails.
func LaunchChromium(t testing.TB, wav string) *cdp.Page {
	t.Helper()
	bin := testenv.NeedCommand(t, "chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := cdp.Launch(ctx, bin,
		"--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
		"--use-file-for-fake-audio-capture="+wav,
		"--autoplay-policy=no-user-gesture-required",
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("page console:\n%s", strings.Join(p.Logs(), "\n"))
		}
	})
	return p
}

// OpenPage loads a join page with its token in the fragment and presses Start.
func OpenPage(t testing.TB, p *cdp.Page, url, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.Navigate(ctx, url+"#token="+token); err != nil {
		t.Fatal(err)
	}
	if err := p.Eval(ctx, `document.getElementById("start").click()`, nil); err != nil {
		t.Fatal(err)
	}
}

// Click clicks the element with id.
func Click(t testing.TB, p *cdp.Page, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Eval(ctx, `document.getElementById(`+quote(id)+`).click()`, nil); err != nil {
		t.Fatal(err)
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// PageStats is what the join page reports about itself: the client's state, the peer
// connection's own getStats() for the audio it receives and for what the service reported
// about the microphone (remote-inbound-rtp, from the service's RTCP receiver reports), the
// WebAudio analyser's view of what it hears (level, and the peaks at 440 Hz and 1 kHz in dB),
// and the transcript as shown.
type PageStats struct {
	State      string  `json:"state"`
	Conn       string  `json:"conn"`
	Role       string  `json:"role"`
	Packets    int     `json:"packets"`
	Energy     float64 `json:"energy"`
	AudioLevel float64 `json:"audioLevel"`
	Out        float64 `json:"out"`
	Hz440      float64 `json:"hz440"`
	Hz1000     float64 `json:"hz1000"`
	Transcript string  `json:"transcript"`
	Error      string  `json:"error"`
	// RemoteRTTs counts the round trips Chrome measured from the service's receiver reports on
	// the microphone (their LSR/DLSR); RemoteLost and RemoteRTT (seconds) are the latest.
	RemoteRTTs int     `json:"remoteRTTs"`
	RemoteLost int     `json:"remoteLost"`
	RemoteRTT  float64 `json:"remoteRTT"`
}

const statsJS = `(async () => {
  const c = window.parley;
  const out = {hz440: -200, hz1000: -200, state: c ? c.state : "none",
               transcript: document.getElementById("transcript").innerText,
               error: document.getElementById("error").textContent};
  if (!c || !c.pc) return out;
  out.conn = c.pc.connectionState;
  out.role = c.role;
  const st = await c.pc.getStats();
  out.packets = 0; out.energy = 0; out.audioLevel = 0;
  st.forEach((r) => {
    if (r.type === "inbound-rtp" && r.kind === "audio") {
      out.packets += r.packetsReceived || 0;
      out.energy += r.totalAudioEnergy || 0;
      out.audioLevel = Math.max(out.audioLevel, r.audioLevel || 0);
    }
    if (r.type === "remote-inbound-rtp" && r.kind === "audio") {
      out.remoteRTTs = r.roundTripTimeMeasurements || 0;
      out.remoteLost = r.packetsLost || 0;
      out.remoteRTT = r.roundTripTime || 0;
    }
  });
  out.out = c.outputLevel();
  const an = c.outputAnalyser();
  if (an) {
    const bins = new Float32Array(an.frequencyBinCount);
    an.getFloatFrequencyData(bins);
    const hz = an.context.sampleRate / an.fftSize;
    const peak = (f) => {
      const i = Math.round(f / hz);
      const v = Math.max(bins[i - 1], bins[i], bins[i + 1]);
      return Number.isFinite(v) ? v : -200; // -Infinity (silence) does not survive JSON
    };
    out.hz440 = peak(440);
    out.hz1000 = peak(1000);
  }
  return out;
})()`

// ReadStats asks the page for its PageStats.
func ReadStats(t testing.TB, p *cdp.Page) PageStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s PageStats
	if err := p.Eval(ctx, statsJS, &s); err != nil {
		t.Fatal(err)
	}
	return s
}
