package sip

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseDTMFInfo reads the digit of a SIP INFO body: application/dtmf-relay ("Signal=5" and
// "Duration=160" lines, the format Cisco and most gateways send) or application/dtmf (the
// digit alone, or an RFC 4733 event code 0-15). The flash hook (16) and unknown keys are errors.
func parseDTMFInfo(contentType string, body []byte) (rune, error) {
	text := strings.TrimSpace(string(body))
	if len(text) > 512 {
		return 0, errors.New("DTMF body too long")
	}
	var v string
	switch contentType {
	case "application/dtmf-relay":
		for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' }) {
			k, val, ok := strings.Cut(line, "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "signal") {
				v = strings.TrimSpace(val)
			}
		}
		if v == "" {
			return 0, errors.New("dtmf-relay body has no Signal")
		}
	case "application/dtmf":
		v = text
	default:
		return 0, fmt.Errorf("unsupported DTMF type %q", contentType)
	}
	if n, err := strconv.Atoi(v); err == nil && len(v) <= 2 {
		if n >= 0 && n <= 9 {
			return rune('0' + n), nil
		}
		if d := "0123456789*#ABCD"; n >= 10 && n <= 15 {
			return rune(d[n]), nil
		}
		return 0, fmt.Errorf("DTMF event %d is not a key", n)
	}
	if len(v) == 1 && isDTMFDigit(rune(v[0])) {
		return rune(strings.ToUpper(v)[0]), nil
	}
	return 0, fmt.Errorf("DTMF signal %q is not a key", v)
}

// formatDTMFRelay renders an application/dtmf-relay body.
func formatDTMFRelay(d rune, dur time.Duration) []byte {
	return []byte(fmt.Sprintf("Signal=%c\r\nDuration=%d\r\n", d, dur.Milliseconds()))
}

// parseSipfrag reads the status line of a message/sipfrag body (RFC 3420), e.g.
// "SIP/2.0 200 OK".
func parseSipfrag(body []byte) (sipfrag, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	line = strings.TrimSpace(line)
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 || !strings.HasPrefix(f[0], "SIP/") {
		return sipfrag{}, fmt.Errorf("sipfrag %q has no status line", line)
	}
	code, err := strconv.Atoi(f[1])
	if err != nil || code < 100 || code > 699 {
		return sipfrag{}, fmt.Errorf("sipfrag status %q", f[1])
	}
	fr := sipfrag{status: code}
	if len(f) == 3 {
		fr.reason = f[2]
	}
	return fr, nil
}

// deliverDTMFFromInfo hands a digit received by SIP INFO to the same sink as RFC 4733 digits.
func (m *legMedia) deliverDTMFFromInfo(d rune) { m.deliverDTMF(d) }
