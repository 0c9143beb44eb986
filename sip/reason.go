package sip

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// Q.850 causes Parley names (ITU-T Q.850 table 1).
const (
	Q850NormalClearing = 16
	Q850NoAnswer       = 19 // no answer from user (user alerted)
)

// reasonQ850 returns the Q.850 cause a message's Reason headers carry (RFC 3326 §2:
// `Reason: Q.850;cause=17;text="user busy"`), or 0 when none does. Several values may share
// a header, separated by commas, or come in several headers.
func reasonQ850(m sip.Message) int {
	for _, h := range m.GetHeaders("Reason") {
		for _, v := range strings.Split(h.Value(), ",") {
			proto, params, _ := strings.Cut(strings.TrimSpace(v), ";")
			if !strings.EqualFold(strings.TrimSpace(proto), "Q.850") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(strings.TrimSpace(k), "cause") {
					if n, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && n > 0 && n < 128 {
						return n
					}
				}
			}
		}
	}
	return 0
}

// Summary is the failure written for a person: what the trunk answered, or what happened
// instead ("the trunk answered 486 Busy Here (Q.850 cause 17)", "no answer within the ring
// timeout"). It carries no internal cause.
func (e *DialError) Summary() string {
	var s string
	switch {
	case e.Status != 0:
		s = fmt.Sprintf("the trunk answered %d %s", e.Status, strings.TrimSpace(e.Reason))
	case e.Detail == DetailUpstreamUnreachable:
		s = "the trunk did not answer the INVITE (unreachable or no response)"
	case e.Outcome == OutcomeNoAnswer:
		s = "no answer within the ring timeout"
	case e.Outcome == OutcomeCanceled:
		s = "the call was cancelled before it was answered"
	case e.Reason != "":
		s = e.Reason
	default:
		s = string(e.Outcome)
	}
	if e.Q850 != 0 {
		s += fmt.Sprintf(" (Q.850 cause %d)", e.Q850)
	}
	return s
}
