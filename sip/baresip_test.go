package sip_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// baresip is a baresip instance with its own configuration directory: its microphone is a WAV
// file (aufile), its speaker is recorded by the sndfile filter (dump-…-dec.wav).
type baresip struct {
	dir    string
	port   int
	live   atomic.Int64 // port, for goroutines other than run's
	cfg    string       // the configuration with %d for the SIP port and the RTP range
	answer bool
	codec  string
	// acctExtra is appended to the account line (";mediaenc=srtp-mand", issue 21); host is
	// the address baresip listens on and names itself by ("" is 127.0.0.1, "[::1]" for IPv6).
	acctExtra string
	host      string
}

// newBaresip writes a configuration for codec ("pcmu/8000/1", "g722/8000/1",
// "opus/48000/2") with mic as the microphone; answer makes it answer calls at once.
func newBaresip(t testing.TB, codec string, mic []int16, answer bool) *baresip {
	t.Helper()
	testenv.NeedCommand(t, "baresip")
	b := &baresip{dir: t.TempDir()}
	if err := mediatest.WriteWAV(filepath.Join(b.dir, "mic.wav"), 16000, 1, mic); err != nil {
		t.Fatal(err)
	}
	mod := map[string]string{"pcmu": "g711.so", "g722": "g722.so", "opus": "opus.so"}[strings.Split(codec, "/")[0]]
	b.cfg = fmt.Sprintf(`module_path /usr/lib/baresip/modules
sip_listen 127.0.0.1:%%d
audio_source aufile,%s
audio_player aubridge,spk
audio_alert aubridge,spk
ausrc_srate 16000
auplay_srate 16000
ausrc_channels 1
auplay_channels 1
rtp_ports %%d-%%d
module %s
module aufile.so
module aubridge.so
module sndfile.so
module_app account.so
module_app menu.so
snd_path %s
`, filepath.Join(b.dir, "mic.wav"), mod, b.dir)
	b.answer, b.codec = answer, codec
	b.reconfigure(t)
	writeFile(t, b.dir, "contacts", "")
	return b
}

// reconfigure picks a SIP port and an RTP range (40000–59999, apart from Parley's test ranges)
// and writes the configuration.
func (b *baresip) reconfigure(t testing.TB) {
	t.Helper()
	b.port = testenv.FreeUDPPort(t, false)
	b.live.Store(int64(b.port))
	rtp := 40000 + 2*rand.IntN(9980)
	writeFile(t, b.dir, "config", fmt.Sprintf(b.cfg, b.port, rtp, rtp+19))
	host := b.host
	if host == "" {
		host = "127.0.0.1"
	}
	acct := fmt.Sprintf("<sip:baresip@%s:%d>;regint=0;audio_codecs=%s", host, b.port, b.codec)
	if b.answer {
		acct += ";answermode=auto"
	}
	acct += b.acctExtra
	writeFile(t, b.dir, "accounts", acct+"\n")
}

// run runs baresip for secs seconds, executing cmd (e.g. "/dial sip:…") when given. When a
// port it was given turned out taken (exit 98, EADDRINUSE: other tests bind ports too), it is
// given others and run again.
func (b *baresip) run(t testing.TB, ctx context.Context, secs int, cmd string, retry bool) (string, error) {
	for attempt := 0; ; attempt++ {
		args := []string{"-f", b.dir, "-t", fmt.Sprint(secs)}
		if cmd != "" {
			args = append(args, "-e", cmd)
		}
		c := exec.CommandContext(ctx, "baresip", args...)
		c.WaitDelay = 5 * time.Second
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 98 && retry && attempt < 3 {
			b.reconfigure(t)
			continue
		}
		return string(out), err
	}
}

// heard returns what baresip's speaker played (16 kHz).
func (b *baresip) heard(t testing.TB) []int16 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(b.dir, "dump-*-dec.wav"))
	if len(files) == 0 {
		t.Fatal("baresip recorded nothing")
	}
	w, err := mediatest.ReadWAV(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return mediatest.Resample(w.Channel(0), w.Rate, 16000)
}

// callerBursts is 16 kHz audio of 700 Hz bursts: speech-like energy for the fake recognizer.
func callerBursts(d time.Duration) []int16 {
	n := int(d.Seconds() * 16000)
	tone := mediatest.Sine(n, 16000, 700, -12)
	pcm := make([]int16, n)
	for i := range pcm {
		if (i/16000)%2 == 0 && i%16000 < 12800 {
			pcm[i] = tone[i]
		}
	}
	return pcm
}

// TestBaresipCallsParley: baresip calls Parley with a WAV file as its microphone; the agent's
// fake-TTS tone is in baresip's recording, the caller's audio reaches the fake recognizer (a
// caller turn), and baresip hangs up when its file ends. Each codec Parley speaks is used once.
func TestBaresipCallsParley(t *testing.T) {
	testenv.NeedCommand(t, "baresip")
	for _, codec := range []string{"pcmu/8000/1", "g722/8000/1", "opus/48000/2"} {
		t.Run(strings.Split(codec, "/")[0], func(t *testing.T) {
			t.Parallel()
			eng := newEngine(t, engineOptions{})
			rt := newRouter()
			rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
			srv := newServer(t, sip.Options{Router: rt})
			b := newBaresip(t, codec, callerBursts(6*time.Second), false)
			ctx := ctxTimeout(t, 40*time.Second)
			out, err := b.run(t, ctx, 9, "/dial sip:+14155550100@"+srv.Addr(sip.UDP).String(), true)
			if err != nil {
				t.Fatalf("baresip: %v\n%s", err, lastLines(out, 30))
			}
			waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
			ev, _ := rt.lastEnded()
			if ev.EndReason != session.EndCallerHungUp {
				t.Errorf("end reason %q\n%s", ev.EndReason, lastLines(out, 20))
			}
			if want := strings.ToUpper(strings.Split(codec, "/")[0]); !strings.EqualFold(ev.Stats.Codec, want) {
				t.Errorf("codec %q, want %s", ev.Stats.Codec, want)
			}
			if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
				t.Errorf("the agent's 440 Hz tone is at %.1f dBFS in baresip's recording", lvl)
			}
			if eng.utterances() < 1 {
				t.Errorf("the recognizer heard no utterance from baresip's microphone")
			}
			if ev.Stats.PacketsReceived < 200 || ev.Stats.PacketsSent < 200 {
				t.Errorf("RTP %+v", ev.Stats)
			}
		})
	}
}

// TestParleyCallsBaresip: Parley dials baresip (auto-answer) through a trunk; baresip hears the
// agent and the agent hears baresip.
func TestParleyCallsBaresip(t *testing.T) {
	testenv.NeedCommand(t, "baresip")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	b := newBaresip(t, "pcmu/8000/1", callerBursts(20*time.Second), true)
	ctx := ctxTimeout(t, 40*time.Second)
	done := make(chan string, 1)
	go func() {
		// A port taken meanwhile by another test (exit 98) gets baresip new ones; the dialling
		// below follows them.
		out, _ := b.run(t, ctx, 10, "", true)
		done <- out
	}()
	trunk := loopbackTrunk("baresip")
	var call *sip.Call
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		trunk.URI = fmt.Sprintf("sip:127.0.0.1:%d", b.live.Load())
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		call, err = srv.Dial(dctx, sip.DialRequest{From: "+15550001111", To: "baresip", Trunk: trunk, Conversation: eng.factory()})
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "baresip's audio at the recognizer", func() bool { return eng.utterances() > 0 })
	waitFor(t, 10*time.Second, "RTP to baresip", func() bool { return call.Stats().PacketsSent > 150 })
	call.Hangup(ctx, session.EndAPI)
	out := <-done
	if lvl := toneLevel(b.heard(t), 440); lvl < -30 {
		t.Errorf("the agent's tone is at %.1f dBFS in baresip's recording\n%s", lvl, lastLines(out, 20))
	}
}
