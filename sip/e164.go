package sip

import "strings"

// NormalizeE164 turns the user part of a SIP or tel URI into an E.164 number ("+14155550100")
// and reports whether it is one. It drops visual separators (RFC 3966 §5.1.1: "-", ".", "(",
// ")", spaces) and URI parameters; reads "+CC…" and the international prefix "00"; and, when
// defaultCC is set (a country calling code such as "1"), completes a national number with it:
// for "1", ten digits, or eleven starting with 1. An E.164 number has 8 to 15 digits in all
// (ITU-T E.164 §6). Anything else (an extension, a name) comes back unchanged with false.
func NormalizeE164(user, defaultCC string) (string, bool) {
	s, _, _ := strings.Cut(user, ";")
	s = strings.TrimSpace(s)
	var b strings.Builder
	plus := false
	for i, r := range s {
		switch {
		case r == '+' && i == 0:
			plus = true
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '(' || r == ')' || r == ' ':
		default:
			return user, false
		}
	}
	d := b.String()
	switch {
	case plus:
	case strings.HasPrefix(d, "00"):
		d = d[2:]
	case defaultCC == "1" && len(d) == 11 && d[0] == '1':
	case defaultCC == "1" && len(d) == 10:
		d = "1" + d
	case defaultCC != "" && defaultCC != "1" && strings.HasPrefix(d, "0") && len(d) > 1:
		d = defaultCC + d[1:] // national trunk prefix 0 (most of Europe)
	default:
		return user, false
	}
	if len(d) < 8 || len(d) > 15 || d[0] == '0' {
		return user, false
	}
	return "+" + d, true
}
