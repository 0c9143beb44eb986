package sip_test

import (
	"context"
	"fmt"
	"github.com/parley-voice/parley/sip/siptest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// runSipp runs sipp with args in dir and returns its combined output; it fails the test on a
// non-zero exit (sipp exits 1 when a call failed).
func runSipp(t testing.TB, ctx context.Context, dir string, args ...string) (string, error) {
	t.Helper()
	bin := testenv.NeedCommand(t, "sipp")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TERM=dumb")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runSippCaller runs sipp as a caller with args from mk (called again with fresh ports when
// the ones chosen turned out taken: other tests bind ports too).
func runSippCaller(t testing.TB, ctx context.Context, dir string, mk func() []string) (string, error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		out, err := runSipp(t, ctx, dir, mk()...)
		if err != nil && attempt < 3 && (strings.Contains(out, "Address already in use") || strings.Contains(out, "Unable to bind")) {
			continue
		}
		return out, err
	}
}

// callerSpeechPCM returns 8 kHz audio of bursts of a 700 Hz tone: energy the fake recognizer
// takes for speech.
func callerSpeechPCM(d time.Duration) []int16 {
	n := int(d.Seconds() * 8000)
	pcm := make([]int16, n)
	tone := mediatest.Sine(n, 8000, 700, -12)
	for i := range pcm {
		if (i/8000)%2 == 0 && i%8000 < 6400 { // 800 ms on, 200 ms off
			pcm[i] = tone[i]
		}
	}
	return pcm
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestSippInbound: sipp calls Parley and plays a generated pcap as the caller's voice: 200,
// RTP both ways, the caller's audio reaches the recognizer (a caller turn), sipp's BYE ends the
// call as caller_hung_up.
func TestSippInbound(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	srv := newServer(t, sip.Options{Router: rt})
	dir := t.TempDir()
	if err := writeRTPPcap(filepath.Join(dir, "caller.pcap"), callerSpeechPCM(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{Pcap: "caller.pcap", Hold: 4 * time.Second}))
	ctx := ctxTimeout(t, 60*time.Second)
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp failed: %v\n%s", err, lastLines(out, 40))
	}
	waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
	ev, _ := rt.lastEnded()
	if ev.EndReason != session.EndCallerHungUp {
		t.Errorf("end reason %q", ev.EndReason)
	}
	st := ev.Stats
	if st.PacketsReceived < 140 || st.PacketsSent < 100 {
		t.Errorf("RTP not two-way: %+v", st)
	}
	if st.Codec != "PCMU" || st.Latched == "" {
		t.Errorf("stats %+v", st)
	}
	if n := eng.utterances(); n < 1 {
		t.Errorf("the recognizer heard %d utterances of the pcap", n)
	}
}

// TestSippInboundAgentAudio: sipp calls Parley with an SDP naming a port this test records;
// the agent's greeting (the fake TTS's 440 Hz tone) arrives there as PCMU.
func TestSippInboundAgentAudio(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	srv := newServer(t, sip.Options{Router: rt})
	rec := newRTPRecorder(t)
	dir := t.TempDir()
	writeFile(t, dir, "uac.xml", siptest.SippCaller(siptest.SippCall{MediaPort: fmt.Sprint(rec.port()), Hold: 3 * time.Second}))
	ctx := ctxTimeout(t, 60*time.Second)
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp failed: %v\n%s", err, lastLines(out, 40))
	}
	pcm := rec.pcm()
	if lvl := toneLevel(pcm, 440); lvl < -30 {
		t.Fatalf("the agent's 440 Hz tone reached the caller's media address at %.1f dBFS (%d samples)", lvl, len(pcm))
	}
}

// TestSippCallee: Parley dials sipp's UAS through a trunk; the INVITE's SDP offers the default
// codec order with telephone-event; the call is answered and Parley's BYE ends it.
func TestSippCallee(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	dir := t.TempDir()
	writeFile(t, dir, "uas.xml", siptest.SippCallee(""))
	port := testenv.FreeUDPPort(t, false)
	ctx := ctxTimeout(t, 60*time.Second)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runSipp(t, ctx, dir, "-sf", "uas.xml", "-m", "1", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
			"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "30s", "-timeout_error", "-trace_msg",
			"-message_file", "msgs.log")
		done <- result{out, err}
	}()
	trunk := loopbackTrunk("sipp")
	trunk.URI = fmt.Sprintf("sip:127.0.0.1:%d", port)
	var call *sip.Call
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		// sipp needs a moment to bind; a refused attempt is answered by ICMP, not SIP, so the
		// dial times out quickly with a short ring timeout and is retried.
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		call, err = srv.Dial(dctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: trunk,
			Conversation: eng.factory(), RingTimeout: 10 * time.Second})
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "RTP to sipp", func() bool { return call.Stats().PacketsSent > 20 })
	if err := call.Hangup(ctx, session.EndAPI); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("sipp failed: %v\n%s", r.err, lastLines(r.out, 40))
	}
	b, err := os.ReadFile(filepath.Join(dir, "msgs.log"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := string(b)
	inv := msgs[strings.Index(msgs, "INVITE sip:"):]
	for _, want := range []string{
		"INVITE sip:+14155550123@127.0.0.1:",
		"m=audio ", " RTP/AVP 0 8 9 111 110 101",
		"a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000", "a=rtpmap:9 G722/8000", "a=rtpmap:111 opus/48000/2",
		"a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-16", "a=ptime:20", "a=sendrecv",
		"Session-Expires: 1800", "Supported: timer",
	} {
		if !strings.Contains(inv, want) {
			t.Errorf("the INVITE lacks %q:\n%s", want, inv[:min(len(inv), 2000)])
		}
	}
}

// rtpRecorder is a UDP socket that records the PCMU audio sent to it, at 16 kHz.
type rtpRecorder struct {
	c    *net.UDPConn
	mu   sync.Mutex
	data []int16
	done chan struct{}
}

func newRTPRecorder(t testing.TB) *rtpRecorder {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rtpRecorder{c: c, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 2048)
		pcm := make([]int16, 160)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if n != 12+160 || buf[1]&0x7f != 0 {
				continue
			}
			codec.DecodeMulaw(pcm, buf[12:n])
			up := mediatest.Resample(pcm, 8000, 16000)
			r.mu.Lock()
			r.data = append(r.data, up...)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-r.done })
	return r
}

func (r *rtpRecorder) port() int { return r.c.LocalAddr().(*net.UDPAddr).Port }

func (r *rtpRecorder) pcm() []int16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int16(nil), r.data...)
}
