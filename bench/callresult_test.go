package bench

import (
	"testing"
	"time"
)

func TestCallResult(t *testing.T) {
	t0 := time.Unix(10, 0)
	r := CallResult{Answered: t0, Ended: t0.Add(3 * time.Second), PacketsReceived: 99, PacketsLost: 1}
	if r.Failed() || r.Duration() != 3*time.Second || r.LossFraction() != 0.01 {
		t.Errorf("%+v: duration %v loss %v", r, r.Duration(), r.LossFraction())
	}
	r.fail("sip 503", "answered 503\nService   Unavailable")
	r.fail("later", "ignored")
	if !r.Failed() || r.Reason != "sip 503" || r.Failure != "answered 503 Service Unavailable" {
		t.Errorf("fail: %q %q", r.Reason, r.Failure)
	}
	if (CallResult{}).Duration() != 0 || (CallResult{}).LossFraction() != 0 {
		t.Error("an unanswered call has a duration or a loss")
	}
	cases := map[string]string{
		"no greeting within 15s":                  "no greeting",
		"no reply to turn 2 within 15s":           "no reply",
		"the agent talked for more than 30s":      "the agent talked",
		"the agent hung up while the caller":      "the agent hung up",
		"cancelled while the caller was speaking": "other",
	}
	for in, want := range cases {
		if got := reasonOf(in); got != want {
			t.Errorf("reasonOf(%q) = %q, want %q", in, got, want)
		}
	}
}
