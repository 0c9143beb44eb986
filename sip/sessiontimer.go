package sip

import (
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// sessionTimer is a negotiated RFC 4028 session interval.
type sessionTimer struct {
	interval time.Duration // 0: no session timer
	// weRefresh says Parley sends the refreshes; otherwise the peer must, and Parley ends the
	// session when none arrives in time (RFC 4028 §10).
	weRefresh bool
}

// parseSessionExpires reads "delta-seconds[;refresher=uac|uas]" (RFC 4028 §4); compact x.
func parseSessionExpires(m sip.Message) (time.Duration, string, bool) {
	v := headerValue(m, "Session-Expires")
	if v == "" {
		v = headerValue(m, "x")
	}
	if v == "" {
		return 0, "", false
	}
	parts := strings.Split(v, ";")
	n, err := strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil || n <= 0 {
		return 0, "", false
	}
	ref := ""
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(k, "refresher") {
			ref = strings.ToLower(strings.TrimSpace(val))
		}
	}
	return time.Duration(n) * time.Second, ref, true
}

// parseMinSE reads the Min-SE header (RFC 4028 §5).
func parseMinSE(m sip.Message) time.Duration {
	v := headerValue(m, "Min-SE")
	v, _, _ = strings.Cut(v, ";")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// uasSessionTimer negotiates the session interval of a request Parley answers (RFC 4028 §9).
// It returns the timer, the headers for the 2xx, and a non-zero Min-SE when the request must be
// refused 422 (its interval is below our minimum and the peer supports the extension).
func (s *Server) uasSessionTimer(req *sip.Request) (sessionTimer, []sip.Header, time.Duration) {
	supported := hasOption(req, "Supported", "timer") || hasOption(req, "Require", "timer")
	se, refresher, has := parseSessionExpires(req)
	ours := s.o.SessionExpires
	var iv time.Duration
	switch {
	case has && se < s.o.MinSE:
		if supported {
			return sessionTimer{}, nil, s.o.MinSE
		}
		iv = s.o.MinSE
	case has:
		iv = min(se, ours)
		if min := parseMinSE(req); iv < min {
			iv = min
		}
	default:
		iv = ours
	}
	if refresher != "uac" && refresher != "uas" {
		refresher = "uas"
		if supported {
			refresher = "uac"
		}
	}
	if !supported {
		refresher = "uas" // the peer cannot refresh what it does not know about
	}
	hdrs := []sip.Header{sip.NewHeader("Session-Expires", seconds(iv)+";refresher="+refresher)}
	if supported && refresher == "uac" {
		hdrs = append(hdrs, sip.NewHeader("Require", "timer"))
	}
	return sessionTimer{interval: iv, weRefresh: refresher == "uas"}, hdrs, 0
}

// uacSessionTimer reads the session interval from the 2xx to a request Parley sent (RFC 4028
// §7.2): no Session-Expires means no timer; refresher=uac means Parley refreshes.
func uacSessionTimer(res *sip.Response) sessionTimer {
	se, refresher, ok := parseSessionExpires(res)
	if !ok {
		return sessionTimer{}
	}
	return sessionTimer{interval: se, weRefresh: refresher != "uas"}
}

// next returns when the timer should act after a refresh at now: Parley refreshes at half the
// interval (§10); a peer refresher gets until the interval minus min(32 s, interval/3).
func (t sessionTimer) next(now time.Time) time.Time {
	if t.weRefresh {
		return now.Add(t.interval / 2)
	}
	return now.Add(t.interval - min(32*time.Second, t.interval/3))
}
