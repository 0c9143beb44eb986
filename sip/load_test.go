package sip_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/sip/siptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
	"github.com/parley-voice/parley/sip"
)

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSippLoad: sipp places calls at 50 per second up to 200 at once, each playing a pcap as
// the caller's voice for 4 s against a full conversation (fake STT, LLM and TTS behind the real
// adapters); every call must succeed with RTP both ways. It reports the CPU Parley (with the
// fakes, in this process) spent per call.
func TestSippLoad(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	rate, limit, calls := 50, 200, 400
	const hold = 4000 // ms
	if raceEnabled {
		// The race build checks the concurrency of the SIP and media path, not capacity: it
		// costs several times the CPU per call and shares CI's two cores with the other
		// packages' tests, so it carries half the load.
		rate, limit, calls = 25, 100, 200
	}
	// The full engine with the vendor fakes; in race builds (several times the CPU per call, on
	// CI's two cores) the in-process stubs, so that the SIP and media path is what is loaded.
	// PARLEY_LOAD_LITE=1 uses the stubs in a normal build too, to measure the SIP and media
	// path alone.
	lite := raceEnabled || os.Getenv("PARLEY_LOAD_LITE") == "1"
	factory := liteFactory()
	if !lite {
		factory = newEngine(t, engineOptions{}).factory()
	}
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: factory})
	srv := newServer(t, sip.Options{Router: rt, RTPPorts: media.PortRange{Min: 30000, Max: 31999}})
	dir := t.TempDir()
	if err := writeRTPPcap(filepath.Join(dir, "caller.pcap"), callerSpeechPCM(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{Pcap: "caller.pcap", Hold: time.Duration(hold) * time.Millisecond}))
	ctx := ctxTimeout(t, 90*time.Second)
	cpu0, wall0 := cpuTime(), time.Now()
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550100",
			"-r", fmt.Sprint(rate), "-l", fmt.Sprint(limit), "-m", fmt.Sprint(calls),
			"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "60s", "-timeout_error", "-max_socket", "1000", "-trace_err"}
	})
	if err != nil {
		errs, _ := filepath.Glob(filepath.Join(dir, "*_errors.log"))
		var detail string
		for _, e := range errs {
			b, _ := os.ReadFile(e)
			detail += string(b[:min(len(b), 6000)])
		}
		t.Fatalf("sipp reported failed calls: %v\n%s\n%s", err, lastLines(out, 45), detail)
	}
	ended := func() int {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		n := 0
		for _, e := range rt.events {
			if e.Kind == sip.EventEnded {
				n++
			}
		}
		return n
	}
	t.Log(lastLines(out, 40))
	waitFor(t, 20*time.Second, "every call's end", func() bool { return ended() == calls })
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	// Each call lasted over 4 s: 200 packets each way in real time. A race build on two shared
	// cores cannot keep 200 media clocks in real time (the steps it misses are skipped, as
	// after any stall), so there only RTP both ways is required.
	minPackets := uint64(100)
	if raceEnabled {
		minPackets = 25
	}
	rt.mu.Lock()
	bad := 0
	for _, e := range rt.events {
		if e.Kind != sip.EventEnded {
			continue
		}
		if e.EndReason != session.EndCallerHungUp || e.Stats.PacketsReceived < minPackets || e.Stats.PacketsSent < minPackets {
			bad++
			if bad < 5 {
				t.Logf("call ended %s with %+v", e.EndReason, e.Stats)
			}
		}
	}
	rt.mu.Unlock()
	// sipp's own verdict above (0 failed calls) is the bar and holds in every build. The
	// stricter RTP count is exact in a normal build; under the race detector a call starved of
	// CPU at the wrong moment may fall short, so at most 1% may.
	allowed := 0
	if raceEnabled {
		allowed = calls / 100
	}
	if bad > allowed {
		t.Fatalf("%d of %d calls were not clean (at most %d allowed)", bad, calls, allowed)
	}
	perCall := cpu / time.Duration(calls)
	what := "Parley with the full engine and the vendor fakes"
	if lite {
		what = "Parley with in-process engine stubs"
	}
	if raceEnabled {
		what += ", race build"
	}
	t.Logf("load: %d calls at %d/s, up to %d at once, %d ms each: %v wall, %v CPU in this process "+
		"(%s): %.1f ms CPU per call, %.2f%% of a core per concurrent call",
		calls, rate, limit, hold, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), what,
		float64(perCall)/float64(time.Millisecond), 100*cpu.Seconds()/(float64(calls)*float64(hold)/1000))
}

// liteFactory builds conversations whose recognizer, synthesizer and model are in-process
// stubs: the load then measures the SIP and media path (and the engine's per-frame VAD) without
// the cost of the vendor fakes' HTTP and WebSocket servers.
func liteFactory() sip.ConversationFactory {
	return func(ctx context.Context, c *sip.Call) (*session.Conversation, error) {
		return session.New(session.Options{ID: c.ID(), Agent: session.Agent{}, LLM: nullLLM{}, STT: nullSTT{}, TTS: nullTTS{}, Log: quiet()})
	}
}

type nullLLM struct{}

func (nullLLM) Stream(ctx context.Context, r llm.Request) (llm.Stream, error) {
	return nil, errors.New("no model in the load test")
}

type nullTTS struct{}

func (nullTTS) Synthesize(ctx context.Context, r tts.Request) (tts.Stream, error) {
	return nil, errors.New("no voice in the load test")
}

type nullSTT struct{}

func (nullSTT) Open(ctx context.Context, o stt.StreamOptions) (stt.Stream, error) {
	s := &nullStream{ev: make(chan stt.Event)}
	s.stop = context.AfterFunc(ctx, s.close)
	return s, nil
}

// nullStream takes audio and never recognizes anything.
type nullStream struct {
	ev      chan stt.Event
	once    sync.Once
	stop    func() bool
	samples atomic.Int64
}

func (s *nullStream) Write(pcm []int16, voiced bool) error {
	s.samples.Add(int64(len(pcm)))
	return nil
}
func (s *nullStream) Events() <-chan stt.Event { return s.ev }
func (s *nullStream) close()                   { s.once.Do(func() { close(s.ev) }) }
func (s *nullStream) Close() error {
	s.stop()
	s.close()
	return nil
}
func (s *nullStream) Stats() stt.Stats {
	return stt.Stats{AudioSent: time.Duration(s.samples.Load()) * time.Second / 16000}
}
