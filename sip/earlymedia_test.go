package sip_test

// issue 21: early media on the reliable 183 (prack.go).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// TestSippPrackEarlyMedia: sipp requires 100rel and names an RTP recorder as its media address;
// the agent's number rings for 3 s. After sipp's PRACK of the reliable 183, the recorder hears
// the ring-back tone (440 + 480 Hz; the agent's own tone is 440 Hz only) before the 200, and
// no ring-back once the call is answered, when the agent is heard.
func TestSippPrackEarlyMedia(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory(), RingFor: 3 * time.Second})
	srv := newServer(t, sip.Options{Router: rt})
	rec := newRTPRecorder(t)
	dir := t.TempDir()
	sc := sippUAC100rel(true)
	sc = strings.Replace(sc, "m=audio [media_port] RTP/AVP 0", fmt.Sprintf("m=audio %d RTP/AVP 0", rec.port()), 1)
	sc = strings.Replace(sc, `<pause milliseconds="1500"/>`, `<pause milliseconds="2500"/>`, 1)
	writeFile(t, dir, "uac.xml", sc)
	ctx := ctxTimeout(t, 60*time.Second)
	start := time.Now()
	out, err := runSippCaller(t, ctx, dir, func() []string {
		return []string{srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
			"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
			"-nostdin", "-timeout", "30s", "-timeout_error"}
	})
	if err != nil {
		t.Fatalf("sipp failed: %v\n%s", err, lastLines(out, 40))
	}
	if d := time.Since(start); d < 5*time.Second {
		t.Fatalf("the call took %v: it did not ring for 3 s", d)
	}
	waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
	if ev, _ := rt.lastEnded(); ev.EndReason != session.EndCallerHungUp {
		t.Fatalf("end reason %q", ev.EndReason)
	}
	pcm := rec.pcm()
	const sec = 16000
	if len(pcm) < 4*sec {
		t.Fatalf("the recorder got %.1f s of audio, want the early media and the answered call (≥ 4 s)", float64(len(pcm))/sec)
	}
	early, late := pcm[:2*sec], pcm[len(pcm)-sec:]
	e480, e440, l480, l440 := toneLevel(early, 480), toneLevel(early, 440), toneLevel(late, 480), toneLevel(late, 440)
	t.Logf("first 2 s: 480 Hz %.1f dBFS, 440 Hz %.1f dBFS; last 1 s: 480 Hz %.1f dBFS, 440 Hz %.1f dBFS (of %.1f s)",
		e480, e440, l480, l440, float64(len(pcm))/sec)
	if e480 < -35 || e440 < -35 {
		t.Errorf("no ring-back in the early media: 480 Hz at %.1f dBFS, 440 Hz at %.1f dBFS", e480, e440)
	}
	if l440 < -35 || l480 > l440-20 { // ring-back has 480 Hz as loud as 440 Hz; the agent's tone only leaks into it
		t.Errorf("after the answer: the agent's 440 Hz at %.1f dBFS, ring-back's 480 Hz at %.1f dBFS", l440, l480)
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
}
