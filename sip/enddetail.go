package sip

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
	"github.com/parley-voice/parley/session"
)

// EndDetail says how a call's leg ended, for the conversation's end_detail (issue 22 item 4,
// inbound calls as well as outbound failures): the SIP status and the Q.850 cause the peer
// gave in the Reason header of its BYE or CANCEL (RFC 3326), and a short text written for a
// person. Zero fields are unknown.
type EndDetail struct {
	SIPStatus int
	Q850      int
	Text      string
}

// IsZero reports whether d says nothing.
func (d EndDetail) IsZero() bool { return d == EndDetail{} }

// EventHangup reports how the call's leg ended (Event.End), before the conversation is
// ended: the caller's BYE or CANCEL (with its Reason), a media timeout, a transport error or
// no ACK, the node shutting down, or Parley's own hang-up.
const EventHangup EventKind = "hangup"

// peerEndDetail is the detail of a BYE or CANCEL from the peer: who ended the call and how,
// with the SIP status and Q.850 cause of its Reason headers (`Reason: SIP;cause=200;text="…"`,
// `Reason: Q.850;cause=16`).
func peerEndDetail(req *sip.Request, who string) EndDetail {
	d := EndDetail{Q850: reasonQ850(req)}
	var text string
	d.SIPStatus, text = reasonSIP(req)
	how := "BYE"
	if req.Method == sip.CANCEL {
		how = "CANCEL before the answer"
	}
	d.Text = who + " hung up (" + how
	switch {
	case d.SIPStatus != 0 && text != "":
		d.Text += fmt.Sprintf(", SIP %d %s", d.SIPStatus, text)
	case d.SIPStatus != 0:
		d.Text += fmt.Sprintf(", SIP %d", d.SIPStatus)
	}
	if d.Q850 != 0 {
		d.Text += fmt.Sprintf(", Q.850 cause %d", d.Q850)
		if name := q850Name(d.Q850); name != "" {
			d.Text += " " + name
		}
	}
	d.Text += ")"
	return d
}

// reasonSIP returns the SIP status (and its text) of a message's `Reason: SIP;cause=N`
// header (RFC 3326), or 0.
func reasonSIP(m sip.Message) (int, string) {
	for _, h := range m.GetHeaders("Reason") {
		for _, v := range strings.Split(h.Value(), ",") {
			proto, params, _ := strings.Cut(strings.TrimSpace(v), ";")
			if !strings.EqualFold(strings.TrimSpace(proto), "SIP") {
				continue
			}
			status, text := 0, ""
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				switch strings.ToLower(strings.TrimSpace(k)) {
				case "cause":
					if n, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && n >= 100 && n <= 699 {
						status = n
					}
				case "text":
					text = strings.Trim(strings.TrimSpace(val), `"`)
				}
			}
			if status != 0 {
				return status, clip(text, 80)
			}
		}
	}
	return 0, ""
}

// q850Name names the common Q.850 causes (ITU-T Q.850 table 1).
func q850Name(c int) string {
	switch c {
	case 16:
		return "normal call clearing"
	case 17:
		return "user busy"
	case 18:
		return "no user responding"
	case 19:
		return "no answer"
	case 21:
		return "call rejected"
	case 31:
		return "normal, unspecified"
	case 41:
		return "temporary failure"
	case 102:
		return "recovery on timer expiry"
	}
	return ""
}

// ownEndDetail is the detail of an end that came from no request of the peer's: the end
// reason and the leg's own words for it ("RTP timeout", "no ACK", "node shutting down").
func ownEndDetail(reason session.EndReason, text string) EndDetail {
	switch reason {
	case session.EndMediaTimeout:
		return EndDetail{Text: "no audio from the caller (media timeout)"}
	case session.EndShutdown:
		return EndDetail{Text: "the node shut down"}
	case session.EndNetworkLost:
		switch text {
		case "no ACK":
			return EndDetail{Text: "the caller never acknowledged the answer (no ACK)"}
		case "":
			return EndDetail{Text: "the connection to the caller was lost"}
		}
		return EndDetail{Text: "the connection to the caller was lost (" + text + ")"}
	}
	if text == "" {
		return EndDetail{}
	}
	return EndDetail{Text: text}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// setEndDetail records how the leg is ending, when nothing did before (the first one wins:
// the peer's BYE is set before the leg ends).
func (l *leg) setEndDetail(d EndDetail) {
	l.mu.Lock()
	if l.endDetail.IsZero() {
		l.endDetail = d
	}
	l.mu.Unlock()
}

func (l *leg) getEndDetail() EndDetail {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.endDetail
}

// peerName names the other party of the leg in an end detail: the caller of an inbound call,
// the callee of one Parley placed.
func (l *leg) peerName() string {
	if l.outbound {
		return "the callee"
	}
	return "the caller"
}
