package sip

import (
	"testing"

	"github.com/parley-voice/parley/session"
)

// TestOutcomeOf is the one table of dial outcomes.
func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		status  int
		fail    dialFailure
		outcome Outcome
		detail  string
		reason  session.EndReason
	}{
		{200, failNone, OutcomeAnswered, "", session.EndCompleted},
		{486, failNone, OutcomeBusy, "", session.EndBusy},
		{600, failNone, OutcomeBusy, "", session.EndBusy},
		{603, failNone, OutcomeBusy, "", session.EndBusy},
		{408, failNone, OutcomeNoAnswer, "", session.EndNoAnswer},
		{480, failNone, OutcomeNoAnswer, "", session.EndNoAnswer},
		{487, failNone, OutcomeNoAnswer, "", session.EndNoAnswer},
		{0, failRingTimeout, OutcomeNoAnswer, "", session.EndNoAnswer},
		{487, failRingTimeout, OutcomeNoAnswer, "", session.EndNoAnswer},
		{404, failNone, OutcomeInvalidNumber, "", session.EndInvalidNumber},
		{410, failNone, OutcomeInvalidNumber, "", session.EndInvalidNumber},
		{484, failNone, OutcomeInvalidNumber, "", session.EndInvalidNumber},
		{485, failNone, OutcomeInvalidNumber, "", session.EndInvalidNumber},
		{604, failNone, OutcomeInvalidNumber, "", session.EndInvalidNumber},
		{403, failNone, OutcomeFailed, "", session.EndFailed},
		{488, failNone, OutcomeFailed, "", session.EndFailed},
		{500, failNone, OutcomeFailed, "", session.EndFailed},
		{502, failNone, OutcomeFailed, "", session.EndFailed},
		{503, failNone, OutcomeFailed, "", session.EndFailed},
		{0, failUnreachable, OutcomeFailed, DetailUpstreamUnreachable, session.EndFailed},
		{487, failCanceled, OutcomeCanceled, "", session.EndAPI},
	}
	for _, tc := range cases {
		o, d := outcomeOf(tc.status, tc.fail)
		if o != tc.outcome || d != tc.detail || o.EndReason() != tc.reason {
			t.Errorf("outcomeOf(%d, %d) = %s %q (%s), want %s %q (%s)", tc.status, tc.fail, o, d, o.EndReason(), tc.outcome, tc.detail, tc.reason)
		}
	}
}
