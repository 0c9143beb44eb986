package sip

import (
	"errors"
	"testing"
	"time"
)

func TestRefusals(t *testing.T) {
	cases := []struct {
		r      *Refusal
		status int
		reason string
	}{
		{RefuseUnknownNumber("+1"), 404, `SIP;cause=404;text="unknown number +1", Q.850;cause=1`},
		{RefuseNoAgent(), 480, `SIP;cause=480;text="no published agent", Q.850;cause=18`},
		{RefuseProjectFrozen(), 480, `SIP;cause=480;text="project frozen", Q.850;cause=18`},
		{RefuseOrgNoCredit(), 403, `SIP;cause=403;text="organization out of credit", Q.850;cause=21`},
		{RefuseOrgFrozen(), 403, `SIP;cause=403;text="organization frozen", Q.850;cause=21`},
		{RefuseOverLimit(time.Second), 503, `SIP;cause=503;text="over the concurrent-call limit", Q.850;cause=41`},
		{RefuseDraining(time.Second), 503, `SIP;cause=503;text="draining", Q.850;cause=41`},
		{RefuseNoCodec(), 488, `SIP;cause=488;text="no common codec", Q.850;cause=88`},
		{RefuseMalformed(`x"y`), 400, `SIP;cause=400;text="malformed request: xy", Q.850;cause=95`},
		{RefuseSource(), 403, `SIP;cause=403;text="source not allowed", Q.850;cause=21`},
	}
	for _, tc := range cases {
		if tc.r.Status != tc.status {
			t.Errorf("%s: status %d", tc.r.Reason, tc.r.Status)
		}
		if got := reasonHeader(tc.r.Status, tc.r.Reason); got != tc.reason {
			t.Errorf("Reason %s, want %s", got, tc.reason)
		}
	}
	cause := errors.New("db down")
	r := &Refusal{Status: 500, Reason: "routing failed", Cause: cause}
	if !errors.Is(r, cause) {
		t.Error("Refusal does not unwrap its cause")
	}
	for d, want := range map[time.Duration]string{0: "1", 500 * time.Millisecond: "1", 30 * time.Second: "30", 1500 * time.Millisecond: "2"} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %s", d, got)
		}
	}
}
