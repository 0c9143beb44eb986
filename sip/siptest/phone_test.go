package siptest

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media/mediatest"
)

func tone(freq float64) func([]int16) {
	g := mediatest.NewTone(freq, -12, 16000)
	return func(dst []int16) { g.Fill(dst) }
}

func level(pcm []int16, freq float64) float64 {
	if len(pcm) < 3200 {
		return -200
	}
	return mediatest.DetectTone(pcm[len(pcm)-3200:], 16000, freq)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPhoneToPhone: two test phones call each other: audio both ways, DTMF both ways (RFC 4733
// and INFO), a codec change by re-INVITE, REFER answered with NOTIFYs, BYE.
func TestPhoneToPhone(t *testing.T) {
	for _, tp := range []string{"udp", "tcp"} {
		t.Run(tp, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			b := NewPhone(t, PhoneOptions{Transport: tp, User: "bob", RingFor: 100 * time.Millisecond})
			a := NewPhone(t, PhoneOptions{Transport: tp, User: "alice"})
			ca, err := a.Call(ctx, b.URI(), CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cb, err := b.Incoming(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ca.SetSource(tone(700))
			cb.SetSource(tone(1100))
			waitUntil(t, "alice at bob", func() bool { return level(cb.Heard(), 700) > -20 })
			waitUntil(t, "bob at alice", func() bool { return level(ca.Heard(), 1100) > -20 })
			if err := ca.SendDTMF(ctx, "12#"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "RFC 4733 digits", func() bool { return cb.DTMF() == "12#" })
			if st, err := cb.SendInfoDTMF(ctx, "application/dtmf-relay", '5'); err != nil || st != 200 {
				t.Fatalf("INFO %d %v", st, err)
			}
			waitUntil(t, "INFO digit", func() bool { return ca.DTMF() == "5" })
			if res, err := ca.Reinvite(ctx, ReinviteOptions{Codecs: []codec.Info{codec.PCMA}}); err != nil || res.StatusCode != 200 {
				t.Fatalf("re-INVITE %v %v", res, err)
			}
			waitUntil(t, "PCMA", func() bool { return cb.LastPayloadType() == 8 && ca.LastPayloadType() == 8 })
			if st, err := ca.Refer(ctx, "sip:carol@127.0.0.1"); err != nil || st != 202 {
				t.Fatalf("REFER %d %v", st, err)
			}
			if f, err := ca.WaitNotify(ctx); err != nil || f != "SIP/2.0 100 Trying" {
				t.Fatalf("NOTIFY %q %v", f, err)
			}
			if err := ca.Bye(ctx); err != nil {
				t.Fatal(err)
			}
			<-cb.Done()
			if cb.EndedBy() != "bye received" {
				t.Errorf("bob's call ended by %q", cb.EndedBy())
			}
		})
	}
}
