package sip

import (
	"fmt"

	"github.com/parley-voice/parley/session"
)

// Outcome is how an outbound call attempt ended before (or at) the answer.
type Outcome string

// Dial outcomes.
const (
	OutcomeAnswered      Outcome = "answered"
	OutcomeBusy          Outcome = "busy"
	OutcomeNoAnswer      Outcome = "no_answer"
	OutcomeInvalidNumber Outcome = "invalid_number"
	OutcomeFailed        Outcome = "failed"
	OutcomeCanceled      Outcome = "canceled"
)

// DetailUpstreamUnreachable is the failure detail when the trunk never answered at all.
const DetailUpstreamUnreachable = "upstream_unreachable"

// DialError is a failed outbound call: its outcome, the SIP status that decided it (0 for a
// timeout or an unreachable trunk) and a detail such as DetailUpstreamUnreachable.
type DialError struct {
	Outcome Outcome
	Status  int
	Reason  string // the response's reason phrase, or what happened
	Detail  string
	Cause   error
	// Redirects are the 3xx steps the dial took (issue 21).
	Redirects []Redirect
	// Q850 is the ITU-T Q.850 cause: the one the final response's Reason header carried
	// (RFC 3326), or the one Parley sent in its CANCEL (19 after the ring timeout); 0 none.
	Q850 int
}

func (e *DialError) Error() string {
	s := "sip: dial " + string(e.Outcome)
	if e.Status != 0 {
		s += fmt.Sprintf(" (%d %s)", e.Status, e.Reason)
	} else if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *DialError) Unwrap() error { return e.Cause }

// EndReason maps the outcome to the conversation end reason the control plane records.
func (o Outcome) EndReason() session.EndReason {
	switch o {
	case OutcomeBusy:
		return session.EndBusy
	case OutcomeNoAnswer:
		return session.EndNoAnswer
	case OutcomeInvalidNumber:
		return session.EndInvalidNumber
	case OutcomeCanceled:
		return session.EndAPI
	case OutcomeAnswered:
		return session.EndCompleted
	}
	return session.EndFailed
}

// dialFailure is what ended an attempt without a final status of its own.
type dialFailure int

const (
	failNone        dialFailure = iota
	failRingTimeout             // Parley's ring timeout fired (and CANCEL was sent)
	failCanceled                // the dialler cancelled
	failUnreachable             // no response at all: timeout (Timer B) or transport error
)

// outcomeOf maps the final status of an outbound INVITE to its outcome, in one place:
//
//	486, 600, 603            busy
//	408, 480, ring timeout   no answer
//	404, 410, 484, 485, 604  invalid number
//	403, 5xx, other          failed
//	no response at all       failed, upstream_unreachable
//	2xx                      answered
//
// A 487 is the answer to our CANCEL: no answer when the ring timeout sent it, cancelled when the
// dialler did.
func outcomeOf(status int, f dialFailure) (Outcome, string) {
	switch f {
	case failRingTimeout:
		return OutcomeNoAnswer, ""
	case failCanceled:
		return OutcomeCanceled, ""
	case failUnreachable:
		return OutcomeFailed, DetailUpstreamUnreachable
	}
	switch {
	case status >= 200 && status < 300:
		return OutcomeAnswered, ""
	case status == 486 || status == 600 || status == 603:
		return OutcomeBusy, ""
	case status == 408 || status == 480 || status == 487:
		return OutcomeNoAnswer, ""
	case status == 404 || status == 410 || status == 484 || status == 485 || status == 604:
		return OutcomeInvalidNumber, ""
	}
	return OutcomeFailed, ""
}
