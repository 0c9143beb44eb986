package sip_test

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// pcmSource plays pcm (16 kHz) once, then silence.
func pcmSource(pcm []int16) func([]int16) {
	pos := 0
	return func(dst []int16) {
		n := copy(dst, pcm[min(pos, len(pcm)):])
		clear(dst[n:])
		pos += len(dst)
	}
}

func concat(parts ...[]int16) []int16 {
	var out []int16
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func quietFor(d time.Duration) []int16 { return make([]int16, int(d.Seconds()*16000)) }

// TestDialAMD: answering-machine detection on outbound calls, end to end: a voicemail greeting
// with a beep is a machine (hang up, or leave the message after the beep); "Hello?" is a human
// and the conversation starts.
func TestDialAMD(t *testing.T) {
	greeting := concat(quietFor(300*time.Millisecond), mediatest.Speech(t, "Hi, you have reached the voicemail of John Smith. "+
		"I am not available right now. Please leave your name and number after the tone.", 16000),
		quietFor(400*time.Millisecond), mediatest.Sine(8000, 16000, 1000, -10), quietFor(10*time.Second))
	hello := concat(quietFor(400*time.Millisecond), mediatest.Speech(t, "Hello?", 16000), quietFor(10*time.Second))
	cases := []struct {
		name   string
		audio  []int16
		action sip.AMDAction
		class  sip.AMDClass
	}{
		{"machine hang up", greeting, sip.AMDHangup, sip.AMDMachine},
		{"machine leave message", greeting, sip.AMDLeaveMessage, sip.AMDMachine},
		{"human", hello, sip.AMDHangup, sip.AMDHuman},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := newEngine(t, engineOptions{noGreeting: true})
			srv := newServer(t, sip.Options{})
			ph := siptest.NewPhone(t, siptest.PhoneOptions{})
			ctx := ctxTimeout(t, 40*time.Second)
			var evs events
			callee := make(chan *siptest.Call, 1)
			go func() {
				if pc, err := ph.Incoming(ctx); err == nil {
					pc.SetSource(pcmSource(tc.audio))
					callee <- pc
				}
			}()
			call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: phoneTrunk(ph, sip.UDP),
				Conversation: eng.factory(), OnEvent: evs.add,
				AMD: sip.AMDOptions{Enabled: true, OnMachine: tc.action, Message: "Please call us back at your convenience."}})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 15*time.Second, "the AMD result", func() bool { _, ok := evs.last(sip.EventAMD); return ok })
			ev, _ := evs.last(sip.EventAMD)
			if ev.AMD.Class != tc.class {
				t.Fatalf("AMD %+v, want %s", ev.AMD, tc.class)
			}
			switch {
			case tc.class == sip.AMDMachine && tc.action == sip.AMDHangup:
				select {
				case <-call.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("the call was not hung up")
				}
				if call.EndReason() != session.EndVoicemail {
					t.Errorf("end reason %q", call.EndReason())
				}
			case tc.class == sip.AMDMachine:
				waitFor(t, 20*time.Second, "the message left and the call ended", func() bool {
					select {
					case <-call.Done():
						return true
					default:
						return false
					}
				})
				if !call.AMD().Beep {
					t.Errorf("no beep recorded: %+v", call.AMD())
				}
				if call.EndReason() != session.EndVoicemail {
					t.Errorf("end reason %q", call.EndReason())
				}
				if _, ok := evs.last(sip.EventInProgress); !ok {
					t.Error("the conversation never started to leave the message")
				}
				if pc := <-callee; toneLevel(pc.Heard(), 440) < -30 {
					t.Error("the machine did not record the agent's message")
				}
			default:
				waitFor(t, 10*time.Second, "the conversation", func() bool { _, ok := evs.last(sip.EventInProgress); return ok })
				call.Hangup(ctx, session.EndAPI)
			}
		})
	}
}
