package webrtc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/webrtc/internal/rigtest"
	"github.com/parley-voice/parley/webrtc/webrtctest"
)

func TestCallPortRefusesWhatBrowsersCannotDo(t *testing.T) {
	p := &peer{endCh: make(chan endRequest, 1)}
	c := &callPort{p: p}
	if err := c.SendDTMF(context.Background(), "1"); !errors.Is(err, session.ErrNotSupported) {
		t.Fatalf("SendDTMF: %v", err)
	}
	if err := c.Transfer(context.Background(), session.TransferRequest{Destination: "+14155550100"}); !errors.Is(err, session.ErrNotSupported) {
		t.Fatalf("Transfer: %v", err)
	}
	c.SendFrame(toneFrame(mediatest.NewTone(440, -20, media.PipelineRate))) // no track yet: dropped
	if err := c.Hangup(context.Background(), session.EndAgentEnded); err != nil {
		t.Fatal(err)
	}
	if r := <-p.endCh; r.reason != session.EndAgentEnded || !r.fromEngine {
		t.Fatalf("end request %+v", r)
	}
}

// threadCPU returns the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nullSTT is a recognizer that takes audio and says nothing: it isolates Parley's own share of
// the media path from the in-process fake vendor (whose server-side allocations would otherwise
// be counted).
type nullSTT struct{}

type nullStream struct{ ev chan stt.Event }

func (nullSTT) Open(ctx context.Context, o stt.StreamOptions) (stt.Stream, error) {
	return &nullStream{ev: make(chan stt.Event)}, nil
}
func (s *nullStream) Write(pcm []int16, voiced bool) error { return nil }
func (s *nullStream) Events() <-chan stt.Event             { return s.ev }
func (s *nullStream) Close() error                         { return nil }
func (s *nullStream) Stats() stt.Stats                     { return stt.Stats{} }

// BenchmarkMediaPath is one web call's media path for one 20 ms frame each way, on one thread,
// with speech both ways (speechLike: a steady tone would be coded as DTX and cost less): an
// Opus packet from the browser through the jitter buffer, Opus decode at 48 kHz and resampling
// to 16 kHz into a live engine (its VAD and streaming STT adapter), and an engine frame
// Opus-encoded (FEC, DTX; at 16 kHz, or resampled to 48 kHz first) and stamped as RTP.
// cores/call is the thread's CPU time per frame over the frame's 20 ms. "deepgram" runs the real Deepgram adapter
// against the fake vendor in this process (the fake's allocations show in allocs/op); "engine"
// has a recognizer that drops the audio, so allocs/op is Parley's path alone.
func BenchmarkMediaPath(b *testing.B) {
	for _, rate := range []int{16000, 48000} {
		b.Run("deepgram/encode"+strconv.Itoa(rate/1000)+"k", func(b *testing.B) {
			e := newEngine(b, engineOptions{})
			benchMediaPath(b, e.Conversation("bench", session.Agent{SystemPrompt: "x"}, nil), rate)
		})
		b.Run("engine/encode"+strconv.Itoa(rate/1000)+"k", func(b *testing.B) {
			e := newEngine(b, engineOptions{})
			conv, err := session.New(session.Options{ID: "bench", Agent: session.Agent{SystemPrompt: "x"}, LLM: e.LLM, STT: nullSTT{}, TTS: e.TTS, Log: quietLog()})
			if err != nil {
				b.Fatal(err)
			}
			benchMediaPath(b, conv, rate)
		})
	}
}

func benchMediaPath(b *testing.B, conv *session.Conversation, encodeRate int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := conv.StartVoice(ctx, &goPort{}); err != nil {
		b.Fatal(err)
	}
	defer conv.End(session.EndCompleted)
	speech := speechFrames()
	pkts := encodeFrames(b, speech)
	var at time.Duration
	r, err := newAudioReceiverClock(CodecOpus, 111, conv.PushFrame, func() time.Duration { return at })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s, err := newAudioSender(audioSenderOptions{Codec: CodecOpus, Track: &packetLog{}, OpusRate: encodeRate})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var seq uint16
	var ts uint32
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	start := threadCPU()
	for i := 0; b.Loop(); i++ {
		p := pkts[i%len(pkts)]
		p.SequenceNumber, p.Timestamp = seq, ts
		seq++
		ts += 960
		at += media.FrameDuration
		r.Receive(&p, at)
		if err := s.Write(&speech[i%len(speech)]); err != nil {
			b.Fatal(err)
		}
	}
	cpu := float64(threadCPU()-start) / float64(b.N)
	b.ReportMetric(cpu, "cpu-ns/op")
	b.ReportMetric(cpu/float64(media.FrameDuration), "cores/call")
}

// BenchmarkCallCPU's knobs (go test ./webrtc/ -run '^$' -bench CallCPU -args -callcpu.calls=8).
var (
	callCPUCalls = flag.Int("callcpu.calls", 4, "BenchmarkCallCPU: live calls at once")
	callCPUAudio = flag.String("callcpu.audio", "both", "BenchmarkCallCPU: who talks: both, in (the pages only) or out (the agent only)")
	callCPUOpus  = flag.Int("callcpu.complexity", 0, "BenchmarkCallCPU: Options.OpusComplexity (0: the default)")
	callCPUApp   = flag.String("callcpu.application", "", "BenchmarkCallCPU: Options.OpusApplication (empty: the default)")
	callCPURead  = flag.Duration("callcpu.readperiod", 0, "BenchmarkCallCPU and BenchmarkCallSetup: Options.ReadPeriod (0: the default; negative: each packet as it comes)")
)

// BenchmarkCallCPU runs real calls end to end with audio both ways all the time (the page sends
// a quiet tone, the agent reads a greeting longer than the measurement, spoken by espeak-ng
// when it is installed) and reports the CPU the service's process used per call over every
// measured window: pion (ICE, DTLS, SRTP, RTCP), the media path, the engine and its provider
// adapters. The pages and the fake providers run in a child process (this test binary, as
// TestPageRunner), so their work is not counted. Each b.Loop iteration is one window of live
// calls; the metrics cover all of them. allocs/frame is the process's heap allocations per call
// per 20 ms; out- and in-pkts/s/call are the RTP packets sent (Opus DTX leaves out the agent's
// pauses) and received; clock-frames/s/call are the frames the playout clock had to produce
// because no packet came in time. -callcpu.audio=in or out measures one direction alone,
// -callcpu.calls sets how many calls run at once, -callcpu.complexity the Opus complexity.
func BenchmarkCallCPU(b *testing.B) {
	calls, audio := *callCPUCalls, *callCPUAudio
	if calls < 1 || (audio != "both" && audio != "in" && audio != "out") {
		b.Fatalf("-callcpu.calls=%d -callcpu.audio=%q: want a positive count and both, in or out", calls, audio)
	}
	const window = 4 * time.Second
	pr := startPageRunner(b)
	e := pr.engine
	s := newTestService(b, Options{HeartbeatInterval: DefaultHeartbeatInterval, GracePeriod: DefaultGracePeriod, OpusComplexity: *callCPUOpus,
		OpusApplication: *callCPUApp, ReadPeriod: *callCPURead})
	// The fake voice speaks (espeak-ng; a tone of 40 ms per character without it) 60 sentences
	// of about 2.5 s: more than any sensible -benchtime asks for.
	greeting := strings.Repeat("This is a long greeting that keeps the agent talking. ", 60)
	if audio == "in" {
		greeting = "Hi."
	}
	agent := session.Agent{SystemPrompt: "x", FirstMessage: greeting}
	agent.Turn.BargeInMin = time.Hour // the page's tone must not interrupt the greeting
	for i := 0; i < calls; i++ {
		id := "cpu-" + strconv.Itoa(i)
		wc, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: id, Start: e.Start(id, agent)})
		if err != nil {
			b.Fatal(err)
		}
		pr.send("JOIN %s %s %s", wc.URL, wc.Token, audio)
	}
	for i := 0; i < calls; i++ {
		pr.next("READY")
	}
	// flow counts the engine's frames encoded (packets sent and Opus DTX frames not sent), the
	// packets sent, the packets received and the frames played to the engine, over all calls.
	type counts struct{ encoded, sent, received, played, clock uint64 }
	flow := func() (c counts) {
		for _, p := range s.peerList() {
			if snd := p.sender.Load(); snd != nil {
				sent, skipped, _ := snd.Stats()
				c.encoded += sent + skipped
				c.sent += sent
			}
			if r := p.recv.Load(); r != nil {
				st := r.Stats()
				c.received += st.Packets
				c.played += st.Frames
				c.clock += st.ClockFrames
			}
		}
		return c
	}
	var cpu, sys, measured time.Duration
	var ctxsw int64
	var allocs uint64
	var m0, m1 runtime.MemStats
	c0 := flow()
	for b.Loop() {
		var r0, r1 syscall.Rusage
		runtime.ReadMemStats(&m0)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		t0 := time.Now()
		time.Sleep(window) // measuring a fixed window of live calls
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		measured += time.Since(t0)
		runtime.ReadMemStats(&m1)
		cpu += time.Duration(r1.Utime.Nano() - r0.Utime.Nano() + r1.Stime.Nano() - r0.Stime.Nano())
		sys += time.Duration(r1.Stime.Nano() - r0.Stime.Nano())
		ctxsw += r1.Nvcsw - r0.Nvcsw + r1.Nivcsw - r0.Nivcsw
		allocs += m1.Mallocs - m0.Mallocs
	}
	c1 := flow()
	if s.ActiveCalls() != calls {
		b.Fatalf("%d calls live after the measurement, want %d", s.ActiveCalls(), calls)
	}
	perCall := measured.Seconds() * float64(calls)
	frames := perCall / media.FrameDuration.Seconds()
	b.ReportMetric(cpu.Seconds()/perCall, "service-cores/call")
	b.ReportMetric(sys.Seconds()/perCall, "sys-cores/call")
	b.ReportMetric(float64(ctxsw)/perCall, "ctxsw/s/call")
	b.ReportMetric(float64(allocs)/frames, "allocs/frame")
	rate := func(a, b uint64) float64 { return float64(b-a) / perCall }
	b.ReportMetric(rate(c0.sent, c1.sent), "out-pkts/s/call")
	b.ReportMetric(rate(c0.received, c1.received), "in-pkts/s/call")
	b.ReportMetric(rate(c0.clock, c1.clock), "clock-frames/s/call")
	// The agent must have talked and the page must have been heard all through the windows (45
	// of the 50 frames a second leave room for scheduling delays on a busy machine).
	if got := rate(c0.encoded, c1.encoded); got < 45 && audio != "in" {
		b.Errorf("the agent's voice reached the encoder at %.1f frames/s per call, want about 50", got)
	}
	if got := rate(c0.played, c1.played); got < 45 && audio != "out" {
		b.Errorf("the pages' audio reached the engine at %.1f frames/s per call, want about 50", got)
	}
	s.Close() // before the pages and the fake providers go away
}

// pageRunner is the child process of the benchmarks that run real calls (TestPageRunner): the
// pages and the fake providers run there, so their CPU is not counted in this process.
type pageRunner struct {
	tb     testing.TB
	stdin  io.Writer
	lines  *bufio.Scanner
	engine *rigtest.Engine // this process's engine, talking to the runner's fake providers
}

// startPageRunner starts the child process and builds the engine that uses its fakes; the
// child ends with the benchmark.
func startPageRunner(b *testing.B) *pageRunner {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPageRunner$", "-test.v")
	cmd.Env = append(os.Environ(), "PARLEY_PAGE_RUNNER=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	pr := &pageRunner{tb: b, stdin: stdin, lines: bufio.NewScanner(stdout)}
	urls := strings.Fields(pr.next("VENDORS "))
	if len(urls) != 3 {
		b.Fatalf("vendors %v", urls)
	}
	pr.engine = rigtest.EngineAt(b, urls[0], urls[1], urls[2])
	return pr
}

// send gives the runner one command line.
func (pr *pageRunner) send(format string, args ...any) {
	fmt.Fprintf(pr.stdin, format+"\n", args...)
}

// next returns the rest of the runner's next output line that starts with prefix.
func (pr *pageRunner) next(prefix string) string {
	for pr.lines.Scan() {
		if v, ok := strings.CutPrefix(pr.lines.Text(), prefix); ok {
			return v
		}
	}
	pr.tb.Fatalf("the page runner ended before %q", prefix)
	return ""
}

// BenchmarkCallSetup is the CPU a web call costs this process to set up and tear down, apart
// from its media: one op is one call, placed (POST-free: the service's CreateWebCall), joined by
// a page (signalling WebSocket, ICE, DTLS, SCTP data channel, the engine's start with its STT
// connection), connected, hung up by the page at once and torn down. The page sends no audio and
// the agent has no greeting, so almost no media flows. cpu-ms/call is the process's CPU time
// (user and system) per call; a call of T seconds then costs its mid-call cores plus
// cpu-ms/call / T.
func BenchmarkCallSetup(b *testing.B) {
	pr := startPageRunner(b)
	s := newTestService(b, Options{HeartbeatInterval: DefaultHeartbeatInterval, GracePeriod: DefaultGracePeriod, ReadPeriod: *callCPURead})
	agent := session.Agent{SystemPrompt: "x"}
	// One call first, so that one-time costs (first handshakes, pools, the runner's warm-up) are
	// not counted.
	call := func(i int) {
		id := "setup-" + strconv.Itoa(i)
		wc, err := s.CreateWebCall(context.Background(), WebCallRequest{ConversationID: id, Start: pr.engine.Start(id, agent)})
		if err != nil {
			b.Fatal(err)
		}
		pr.send("JOIN %s %s none", wc.URL, wc.Token)
		pr.next("READY")
		pr.send("LEAVE")
		waitFor(b, 10*time.Second, "the call's teardown", func() bool { return s.ActiveCalls() == 0 })
	}
	call(0)
	var cpu time.Duration
	n := 0
	for b.Loop() {
		n++
		c0 := processCPU()
		call(n)
		cpu += processCPU() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/call")
	s.Close()
}

// TestPageRunner is the child process of BenchmarkCallCPU and BenchmarkCallSetup: it serves the
// fake providers (printing "VENDORS dg chat el"), joins each call given on standard input
// ("JOIN url token audio") as a page that sends a quiet 1 kHz tone (unless audio is "out" or
// "none"), prints "READY" once connected and, when audio is "out" or "both", hearing its agent
// (speech or the fake's tone); "LEAVE" hangs up the oldest page still in its call. It leaves
// when its standard input closes.
func TestPageRunner(t *testing.T) {
	if os.Getenv("PARLEY_PAGE_RUNNER") == "" {
		t.Skip("only runs as the call benchmarks' child process")
	}
	v := rigtest.StartVendors(t, engineOptions{Speech: true})
	fmt.Printf("VENDORS %s %s %s\n", v.DGURL, v.ChatURL, v.ELURL)
	in := bufio.NewScanner(os.Stdin)
	var live []*webrtctest.Client
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 1 && f[0] == "LEAVE" && len(live) > 0 {
			c := live[0]
			live = live[1:]
			c.SendRaw(json.RawMessage(`{"type":"hangup"}`)) // on the socket: it is not lost in the close
			go func() {
				for deadline := time.Now().Add(5 * time.Second); c.Ended() == "" && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond) // polls until the service says the call ended
				}
				c.Close()
			}()
			continue
		}
		if len(f) != 4 || f[0] != "JOIN" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := webrtctest.Dial(ctx, webrtctest.Options{URL: f[1], Token: f[2]})
		if err == nil {
			err = c.WaitConnected(ctx)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		live = append(live, c)
		if f[3] == "in" || f[3] == "both" {
			c.SendTone(1000, -55)
		}
		go func(listen bool) {
			for listen && levelIn(c.Received(0), 300*time.Millisecond) < -40 {
				time.Sleep(20 * time.Millisecond) // polls the page's audio until the agent is heard
			}
			fmt.Println("READY")
		}(f[3] == "out" || f[3] == "both")
	}
}

// levelIn returns the level of the last d of pcm (16 kHz), in dBFS (RMS of a full-scale square
// wave is 0 dBFS).
func levelIn(pcm []int16, d time.Duration) float64 {
	n := int(d.Seconds() * media.PipelineRate)
	if len(pcm) < n {
		return -200
	}
	var sum float64
	for _, v := range pcm[len(pcm)-n:] {
		f := float64(v) / 32768
		sum += f * f
	}
	if sum == 0 {
		return -200
	}
	return 10 * math.Log10(sum/float64(n))
}

// processCPU returns the CPU time of the whole process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
